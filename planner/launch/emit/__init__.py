"""The plan written for a cluster launcher or another training engine (pure: no torch), one module per
target, each registering itself (targets.py) when imported here. Cluster targets run this project's worker under
torchrun on many nodes (torchrun, slurm, k8s); engine targets write the configuration that engine reads (megatron,
megatron-bridge, torchtitan for 0.3.0, torchtitan-v0.2, deepspeed)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, NamedTuple

from planner.cluster.domains import ranks_per_domain
from planner.cost.coster import Coster
from planner.engine import Engine
from planner.engine.recipes import emit_unexpressed
from planner.engine.settings import changed_settings, given_settings, said
from planner.errors import PlannerError
from planner.hardware import HardwareProfile
from planner.io.files import make_dir, write_text_atomic
from planner.launch.command import RunConfig
from planner.launch.emit import (  # noqa: F401  each target registers itself on import
    deepspeed,
    k8s,
    megatron,
    megatron_bridge,
    slurm,
    torchrun,
    torchtitan,
    torchtitan_v02,
)
from planner.launch.emit.checks import (
    cluster_problems,
    device_kind,
    engine_problems_for,
    memory_problems,
    unrun_settings,
    unwritten_settings,
)
from planner.launch.emit.nodes import cluster_nodes, split_groups
from planner.launch.emit.targets import Layout, Target, target, target_names
from planner.launch.emit.writing import OutFile, check_replaceable, portable_files, script_mode, write_files
from planner.launch.preflight import wall_limit_s
from planner.precision import RECIPES
from planner.specs import ModelSpec

CLUSTER_TARGETS = target_names(engine=False)
ENGINE_TARGETS = target_names(engine=True)
# The least a batch job asks for: a cluster's start-up (image pulls, rendezvous over many nodes) and checkpoint writes
# are not in a run's predicted steps, and the hour Slurm jobs were asked for before let short runs finish.
SLURM_MIN_S = 3600.0

__all__ = ["CLUSTER_TARGETS", "ENGINE_TARGETS", "cluster_nodes", "emit", "target_text", "write_target"]


class Emitted(NamedTuple):
    path: Path  # the target's file
    changed: bool  # False: every file was there with this text already (nothing written, or none would be)
    warnings: tuple[str, ...] = ()  # said with the file (a plan predicted not to fit, what the format changes)
    unfit: str | None = None  # the failing check among them: the plan predicted not to fit (a dry run exits 1)


def emit(kind: str, cfg: RunConfig, model: ModelSpec, out: Path, **kwargs: Any) -> Path:
    """The target's file that emit_run writes (or would write, under dry_run)."""
    return emit_run(kind, cfg, model, out, **kwargs).path


def emit_run(
    kind: str,
    cfg: RunConfig,
    model: ModelSpec,
    out: Path,
    *,
    engine: Engine,
    hardware: HardwareProfile,
    hardware_ref: str,
    nnodes: int | None = None,
    nproc: int | None = None,
    max_restarts: int = 0,
    image: str | None = None,
    force: bool = False,
    dry_run: bool = False,
    wall_s: float | None = None,
) -> Emitted:
    """Check the plan as the target would, then write the target's file (`dry_run`: render it, write nothing, and
    return the path it would have). Engine targets are checked against that engine's profile (the engine `engine`
    is ignored for them, but for the per-run settings the plan was priced with); cluster targets get the
    pre-flight."""
    chosen = _target(kind)
    try:
        settings, unfit = _checked(chosen, cfg, model, engine, hardware, force=force)
    except PlannerError as e:  # an engine's file refused: the other engines' files that take the plan, by name
        raise PlannerError(f"{e}{_instead(chosen, cfg, model, engine, hardware)}") from None
    _require_image(kind, image)
    nodes, per_node = cluster_nodes(cfg.plan.gpus, hardware, nnodes, nproc)  # engine targets: their run lines
    where: dict[str, Any] = {"nnodes": nodes, "per_node": per_node, "max_restarts": max_restarts, "image": image}
    where |= {"settings": settings, **placement(hardware, cfg.plan.gpus)}
    if chosen.timed:  # the job's wall-clock limit: --wall-s, else as a run here is limited (preflight.py)
        step_s = Coster(model, hardware, engine).step(cfg.plan).step_s
        where["time_limit_s"] = wall_s or max(SLURM_MIN_S, wall_limit_s(step_s, steps=cfg.steps, restarts=max_restarts))
    copies: list[OutFile] = []
    if not chosen.is_engine:  # the worker's model, hardware and engine, as a node resolves them
        cfg, copies = portable_files(cfg, hardware_ref, out, kind=kind, file_name=chosen.file_name)
    name, text = target_text(kind, cfg, model, **where)
    files = [OutFile(out / name, text, "file", script_mode(name)), *copies]
    check_replaceable(kind, files, force=force)  # a dry run meets the same refusals
    notes = chosen.format_notes(model, cfg.plan) if chosen.format_notes else []
    notes += split_groups(cfg.plan, per_node, hardware)
    said = tuple([unfit] if unfit else []) + tuple(f"--emit {kind}: {note}" for note in notes)
    if dry_run:
        changed = not all(f.unchanged() for f in files)
    else:
        make_dir(out, what="--out folder")
        changed = write_files(kind, files)
    for line in said:  # written (the engine's own run may know better than the model), but said; a dry run alike
        warnings.warn(line, stacklevel=2)
    return Emitted(files[0].path, changed, said, unfit)


def _instead(chosen: Target, cfg: RunConfig, model: ModelSpec, engine: Engine, hardware: HardwareProfile) -> str:
    """Where an engine target refused the plan: the other engine targets that would write it, as their own checks
    say (a fixed 'emit megatron or deepspeed instead' named targets that refused it too)."""
    if not chosen.is_engine:
        return ""
    takes = []
    for name in ENGINE_TARGETS:
        other = target(name)
        if other is None or name == chosen.name:
            continue
        try:
            _settings, unfit = _checked(other, cfg, model, engine, hardware, force=False)
        except PlannerError:
            continue
        takes.append(f"{name} (predicted not to fit as it runs it)" if unfit else name)
    return f"; emit {' or '.join(takes)} instead" if takes else "; no other engine's file takes it as priced"


def _require_image(kind: str, image: str | None) -> None:
    if kind == "k8s" and not image:
        raise PlannerError(
            "--emit k8s needs --image IMAGE: an image with torch and planner installed (the repository's "
            "Dockerfile builds one: docker build -t REGISTRY/planner:TAG . && docker push REGISTRY/planner:TAG)"
        )
    if image and (image != image.strip() or any(c.isspace() for c in image)):  # no image reference holds a space
        raise PlannerError(f"--image {image!r}: an image reference has no spaces (REGISTRY/NAME:TAG)")


def _target(kind: str) -> Target:
    found = target(kind)
    if found is None:
        raise PlannerError(f"--emit {kind!r}: expected one of {', '.join(CLUSTER_TARGETS + ENGINE_TARGETS)}")
    return found


def _file_settings(engine: Engine, target: str | None) -> dict[str, object]:
    """The settings of an engine read from a file under a name no catalog engine has, where they differ from the
    target engine's profile: a renamed copy's own values, priced, which the target's file would not write (a
    catalog engine's own values are another engine's, as --emit for another engine means)."""
    from planner.io.catalog import load_engine

    if target is None or target == engine.name:
        return {}
    try:
        load_engine(engine.variant_of or engine.name)
        return {}
    except PlannerError:
        runs_on = load_engine(target)
    return {name: value for name, value in engine.settings().items() if value != runs_on.setting(name)}


def _unwritten(chosen: Target, precision: str, unexpressed: str) -> str:
    """Why the target's file cannot say the plan: its engine has no such recipe at all (deepspeed and mxfp8 were told
    'not yet'), or another target of the engine writes it, or none does yet."""
    from planner.io.catalog import load_engine

    if (
        chosen.engine is not None
        and precision in RECIPES
        and precision not in load_engine(chosen.engine).rules.precision_recipes
    ):
        return f"{chosen.engine} has no {precision} training recipe; emit a target whose engine runs it"
    others = [t for n in ENGINE_TARGETS if (t := target(n)) and t.engine == chosen.engine and precision in t.precisions]
    written = others and f"precision={precision}" in unexpressed  # the recipe is what is missing, not an option
    instead = "" if written else "; estimate it, or emit without it"  # another target's file: emit_run names it
    return f"the {chosen.name} file does not write {unexpressed} yet{instead}"


def _checked(
    chosen: Target, cfg: RunConfig, model: ModelSpec, engine: Engine, hardware: HardwareProfile, *, force: bool
) -> tuple[dict[str, object], str | None]:
    """(The per-run settings an engine target writes, what to say of a plan that does not fit the GPU as the target
    runs it), once the target would accept the plan; else one line."""
    from planner.io.catalog import load_engine

    settings: dict[str, object] = {}
    warning = None
    kind = chosen.name
    unexpressed = emit_unexpressed(cfg.plan, engine, chosen.precisions, chosen.writes)  # recipes, options
    if unexpressed:  # with what else the file cannot say of this model and plan: every blocker at once (audit)
        also = chosen.format_problems(model, cfg.plan) if chosen.format_problems else []
        raise PlannerError(f"--emit {kind}: " + "; ".join([_unwritten(chosen, cfg.plan.precision, unexpressed), *also]))
    unrun = unrun_settings(engine, cfg.plan.precision) if chosen.engine is None else ""
    if unrun:  # a cluster file launches the worker
        raise PlannerError(f"--emit {kind}: {unrun}")
    given = given_settings(engine, cfg.plan.precision) or _file_settings(engine, chosen.engine)
    if given and chosen.engine not in (None, engine.name):
        raise PlannerError(
            f"--emit {kind}: the plan is priced on {engine.name} with {said(given)}; the {kind} file writes "
            f"{chosen.engine}'s settings: price it with --engine {chosen.engine}"
        )
    if chosen.engine is not None:
        runs_on = load_engine(chosen.engine)
        settings = changed_settings(engine, runs_on, cfg.plan.precision)
        problems = chosen.settings_problems(cfg.plan, settings) if chosen.settings_problems else []
        unwritten = unwritten_settings(chosen, settings) or (problems[0] if problems else "")
        if unwritten:
            raise PlannerError(f"--emit {kind}: {unwritten}")
        # the target's rules with the settings its file carries (Megatron's all-to-all overlap has its own)
        configured = runs_on.configured(**settings) if settings else runs_on
        problems = engine_problems_for(chosen, model, cfg.plan, configured, hardware)
        unfit = [] if problems or force else memory_problems(Coster(model, hardware, configured), cfg.plan)
        if unfit:
            warning = f"--emit {kind}: the plan does not fit as {chosen.engine} runs it: {unfit[0].split(' (--')[0]}"
    else:
        problems = cluster_problems(model, cfg.plan, engine, hardware, force=force)
    if problems:
        who = kind if chosen.is_engine else f"the planner worker it launches ({engine.name} engine)"
        raise PlannerError(f"--emit {kind}: {who} would refuse this plan: " + "; ".join(problems))
    return settings, warning


def target_text(
    kind: str,
    cfg: RunConfig,
    model: ModelSpec,
    *,
    nnodes: int,
    per_node: int,
    max_restarts: int = 0,
    image: str | None = None,
    settings: dict[str, object] | None = None,
    device: str = "nvidia",
    segment: int | None = None,
    architecture: str | None = None,
    time_limit_s: float | None = None,
) -> tuple[str, str]:
    """(file name, text) of one target; `settings`: the per-run engine settings an engine target writes (its
    Target.writes); `device`: the cluster nodes' accelerators (checks.device_kind)."""
    chosen = _target(kind)
    layout = Layout(
        cfg, model, nnodes, per_node, max_restarts, image, settings or {}, device, segment, architecture, time_limit_s
    )
    return chosen.file_name, chosen.render(layout)


def write_target(
    kind: str,
    cfg: RunConfig,
    model: ModelSpec,
    out: Path,
    *,
    nnodes: int,
    per_node: int,
    max_restarts: int = 0,
    image: str | None = None,
    settings: dict[str, object] | None = None,
    device: str = "nvidia",
    segment: int | None = None,
    architecture: str | None = None,
) -> Path:
    """Write one target's file into `out` (created if needed), atomically; the path written."""
    name, text = target_text(
        kind, cfg, model, nnodes=nnodes, per_node=per_node, max_restarts=max_restarts, image=image,
        settings=settings, device=device, segment=segment, architecture=architecture,
    )  # fmt: skip
    return write_text_atomic(out / name, text, what=f"--emit {kind} file", mode=script_mode(name))


def placement(hw: HardwareProfile, gpus: int) -> dict[str, Any]:
    """What a target's file says of the machine: its accelerators' kind, the nodes a job places in each NVLink
    domain wider than a node, and the GPUs' architecture."""
    return {"device": device_kind(hw), "segment": domain_segment(hw, gpus), "architecture": hw.gpu.architecture}


def domain_segment(hw: HardwareProfile, gpus: int) -> int | None:
    """Nodes of the job in each NVLink domain wider than a node (an NVL72 rack's 18 trays), as the cost model
    places it (cluster/domains.py ranks_per_domain: the job fills each rack it uses alike); None on 8-GPU boards."""
    if hw.nvlink_domain <= hw.gpus_per_node:
        return None
    return ranks_per_domain(hw, gpus) // hw.gpus_per_node
