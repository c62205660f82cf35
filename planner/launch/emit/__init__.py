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
from planner.launch.emit.checks import device_kind
from planner.launch.emit.nodes import cluster_nodes, split_groups
from planner.launch.emit.refusal import checked, instead
from planner.launch.emit.targets import Layout, Target, target, target_names
from planner.launch.emit.writing import OutFile, check_replaceable, portable_files, script_mode, write_files
from planner.launch.preflight import wall_limit_s
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
        settings, unfit = checked(chosen, cfg, model, engine, hardware, force=force)
    except PlannerError as e:  # an engine's file refused: the other engines' files that take the plan, by name
        raise PlannerError(f"{e}{instead(chosen, cfg, model, engine, hardware)}") from None
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
