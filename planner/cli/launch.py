"""`planner launch`: check a plan against this machine and run it with torchrun, or emit it for a cluster
or another engine. Thin: parse, resolve, call launch/ (runner, emit), render."""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from planner.api.resolve import PLAN_FLAGS, engine_overrides, resolve
from planner.cli.callbacks import file_path, finite, nonempty, nonempty_path, words
from planner.cli.launch_here import run_here
from planner.cli.launch_idle import RUN_OPTIONS, refuse_idle_options, refuse_unwritten
from planner.cli.options import (
    ENGINE_SETTINGS,
    CatalogOpt,
    CpOpt,
    DpOpt,
    EpOpt,
    EtpOpt,
    FirstStageLayersOpt,
    GlobalBatchOpt,
    LastStageLayersOpt,
    MaybeModelOpt,
    MicroBatchOpt,
    PlanFileOpt,
    PpOpt,
    PrecisionOpt,
    RecomputeOpt,
    ScheduleOpt,
    SeqLenOpt,
    SpOpt,
    TpOpt,
    VppOpt,
    ZeroOpt,
    with_options,
)
from planner.engine.pipeline_rules import split_problems
from planner.engine.rules import hardware_problems
from planner.errors import PlannerError
from planner.io.catalog import load_engine, load_hardware, load_model, looks_like_path
from planner.io.planfile import PlanFile, read_plan_file
from planner.launch.command import WORKER_ENGINE, RunConfig
from planner.launch.emit import CLUSTER_TARGETS, ENGINE_TARGETS, Emitted, emit_run
from planner.launch.emit.checks import unrun_settings
from planner.launch.emit.targets import target
from planner.launch.preflight import probe_environment
from planner.launch.pricing_here import priced_on
from planner.launch.rehearse import rehearsal_model_path, rehearse
from planner.launch.spec import shrink
from planner.plan import MAX_DEGREE
from planner.render.console import emit_json
from planner.specs import MAX_LAYERS, MAX_WIDTH

Opt = typer.Option
# The collective timeout also bounds the process group's start-up (init_process_group: gloo's connect, NCCL's
# communicator init) and the ranks' skew in building their model before the first collective: seconds on a loaded
# host, so a shorter limit fails healthy runs inside the workers. test_faults' hung-collective test runs at 5 s.
MIN_TIMEOUT_S = 5.0


@with_options(ENGINE_SETTINGS, after="last_stage_layers")
def launch(
    opts: dict[str, Any],
    model: MaybeModelOpt = None,
    hardware: Annotated[
        Optional[str],
        Opt(
            callback=nonempty,
            help="hardware profile that prices the run (default: the --plan file's, else cpu without CUDA)",
        ),
    ] = None,
    engine: Annotated[
        Optional[str],
        Opt(
            callback=nonempty,
            help="engine profile the worker runs and is priced with (default: the --plan file's, else the engine "
            "whose own file --emit writes, else planner, this project's worker)",
        ),
    ] = None,
    plan: PlanFileOpt = None,
    tp: TpOpt = None,
    pp: PpOpt = None,
    dp: DpOpt = None,
    cp: CpOpt = None,
    ep: EpOpt = None,
    etp: EtpOpt = None,
    vpp: VppOpt = None,
    sp: SpOpt = None,
    zero: ZeroOpt = None,
    recompute: RecomputeOpt = None,
    micro_batch: MicroBatchOpt = None,
    global_batch: GlobalBatchOpt = None,
    seq_len: SeqLenOpt = None,
    precision: PrecisionOpt = None,
    schedule: ScheduleOpt = None,
    first_stage_layers: FirstStageLayersOpt = None,
    last_stage_layers: LastStageLayersOpt = None,
    nproc: Annotated[
        Optional[int], Opt(min=1, max=MAX_DEGREE, help="processes per node (default: plan gpus / nnodes)")
    ] = None,
    nnodes: Annotated[
        Optional[int],
        Opt(
            min=1,
            max=MAX_DEGREE,
            help="nodes (default: 1 to run here; --emit torchrun|slurm|k8s: whole nodes of the hardware profile)",
        ),
    ] = None,
    steps: Annotated[int, Opt(min=1, max=1_000_000, help="optimizer steps")] = 8,
    warmup: Annotated[int, Opt(min=0, max=1_000_000, help="warm-up steps left out of the median (< --steps)")] = 2,
    layers: Annotated[Optional[int], Opt(min=1, max=MAX_LAYERS, help="rehearsal: this many layers")] = None,
    hidden: Annotated[
        Optional[int], Opt(min=1, max=MAX_WIDTH, help="rehearsal: this hidden size (FFN scaled alike)")
    ] = None,
    seed: Annotated[int, Opt(min=0, max=2**32 - 1, help="seed of weights and data")] = 0,
    dry_run_: Annotated[bool, Opt("--dry-run", help="print checks, mesh, command, layout; run nothing")] = False,
    rehearse_: Annotated[
        bool,
        Opt(
            "--rehearse",
            help="run the plan's parallel shape here: degrees and model shrunk to fit this machine, "
            "priced on its hardware profile; prints what it changed",
        ),
    ] = False,
    force: Annotated[
        bool,
        Opt(
            help="run although the GPU free-memory check fails (never past the limits that protect this machine); "
            "replace an existing --profile-out, the checkpoints in --checkpoint-dir (without --resume), and --emit's "
            "files in --out"
        ),
    ] = False,
    checkpoint_dir: Annotated[Optional[Path], Opt(parser=nonempty_path, help="save checkpoints here")] = None,
    checkpoint_every: Annotated[int, Opt(min=0, max=1_000_000, help="save every K steps (0: never)")] = 0,
    keep_checkpoints: Annotated[
        Optional[int],
        Opt(
            min=1,
            max=1_000_000,
            help="keep the newest K checkpoints in --checkpoint-dir, remove older ones [default: 2]",
        ),
    ] = None,
    resume: Annotated[bool, Opt(help="continue from the latest checkpoint (written for the same model)")] = False,
    max_restarts: Annotated[int, Opt(min=0, max=1000, help="torchrun restarts of failed workers")] = 0,
    emit: Annotated[
        Optional[str],
        Opt(help=" | ".join(CLUSTER_TARGETS + ENGINE_TARGETS), autocompletion=words(CLUSTER_TARGETS + ENGINE_TARGETS)),
    ] = None,
    out: Annotated[Optional[Path], Opt(parser=nonempty_path, help="directory for --emit files")] = None,
    image: Annotated[Optional[str], Opt(help="--emit k8s: container image with torch and planner installed")] = None,
    profile_out: Annotated[Path, Opt(parser=file_path, help="profile JSON path")] = Path("planner-launch-profile.json"),
    timeout_s: Annotated[
        float,
        Opt(
            callback=finite(MIN_TIMEOUT_S, 86400),
            help=f"collective timeout in seconds, at least {MIN_TIMEOUT_S:g} (a hung rank fails, not hangs)",
        ),
    ] = 120.0,
    wall_s: Annotated[
        Optional[float],
        Opt(
            callback=finite(0, 30 * 86400, open_low=True),
            help="stop the run after this many seconds (default: start-up plus 3x the predicted steps; a run "
            "predicted over an hour needs it given)",
        ),
    ] = None,
    json_: Annotated[bool, Opt("--json", help="machine-readable output")] = False,
    catalog: CatalogOpt = None,
) -> None:
    """Run a plan for real with torchrun (gloo on CPU, NCCL on GPUs), or emit it for a cluster or engine."""
    if warmup >= steps:
        raise PlannerError(f"--warmup {warmup} must be below --steps {steps}: the median needs timed steps")
    refuse_idle_options(emit, out=out, image=image, checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every,
                         resume=resume, keep=keep_checkpoints, placed=(nnodes, nproc))  # fmt: skip
    refuse_unwritten(emit, {n: v for n, v in locals().items() if n in RUN_OPTIONS})
    if rehearse_ and (emit is not None or layers or hidden):
        given = "--emit" if emit is not None else "--layers/--hidden"
        raise PlannerError(f"--rehearse shrinks the plan to run here by itself; drop {given}")
    saved = read_plan_file(plan) if plan is not None else None  # what `planner search --save` wrote
    _found(model, engine, hardware)  # before the probe, which imports torch (seconds): a misspelt name is said at once
    env = probe_environment() if emit is None else None
    hw_name, notes = priced_on(hardware, saved, env, rehearse_=rehearse_)
    flags = {k: v for k, v in locals().items() if k in PLAN_FLAGS}
    emitted = emitted_engine(emit)
    r = resolve(
        model=model,
        hardware=hw_name,
        engine=engine or (WORKER_ENGINE if rehearse_ else None),
        gpus=world_from_flags(saved, flags),
        plan_file=plan,
        flags=flags,
        overrides=engine_overrides(opts),  # the engine settings the plan is priced with (and --emit writes)
        check=False,
        default_engine=emitted or WORKER_ENGINE,  # an engine's own file: priced as that engine runs it
        user_defaults=emit is not None,  # an emitted job trains for real: the ~4M-token batch, not a rehearsal's
    )
    # the worker runs its profile's own settings
    if emit is None and (unrun := unrun_settings(r.engine, r.plan)):
        raise PlannerError(unrun)
    reh = None
    if rehearse_:
        assert env is not None
        reh = rehearse(r.model, r.plan, r.engine, device_type=env.device_type, max_processes=env.max_processes())
        r = replace(r, model=reh.model, plan=reh.plan, model_ref=str(rehearsal_model_path(profile_out)))
    unsupported = hardware_problems(r.hardware, r.plan)  # launch prices the run on the profile: it must have it
    if unsupported and not (dry_run_ and emit is None):  # a dry run here says it as a failing check (exit 1)
        raise PlannerError(unsupported[0].detail)
    rehearsal = shrink(r.model, layers=layers, hidden=hidden, tp=r.plan.tp) if (layers or hidden) else r.model
    if layers and (split := split_problems(r.engine, rehearsal, r.plan)):  # said as the option's (audit)
        raise PlannerError(f"--layers {layers}: {split[0].detail}")
    run = RunConfig(
        model=r.model_ref, plan=r.plan, steps=steps, warmup=warmup, seed=seed, layers=layers, hidden=hidden,
        hardware=hw_name if looks_like_path(hw_name) else r.hardware.name,  # a user's file: calibrate reads it back
        engine=_engine_ref(engine, saved, rehearse_, emitted or WORKER_ENGINE),
        checkpoint_dir=str(checkpoint_dir) if checkpoint_dir else None, checkpoint_every=checkpoint_every,
        keep_checkpoints=keep_checkpoints or RunConfig.keep_checkpoints, resume=resume, profile_out=str(profile_out),
        timeout_s=timeout_s,
    )  # fmt: skip
    if emit is not None:
        if out is None:
            raise PlannerError("--emit needs --out DIR")
        emitted_ = emit_run(
            emit, run, rehearsal, out, engine=r.engine, hardware=r.hardware, hardware_ref=hw_name, nnodes=nnodes,
            nproc=nproc, max_restarts=max_restarts, image=image, force=force, dry_run=dry_run_, wall_s=wall_s,
        )  # fmt: skip
        _said_emitted(emit, emitted_, dry_run=dry_run_, as_json=json_)
        if dry_run_ and emitted_.unfit:  # a dry run that found a failing check exits 1 (DESIGN.md); a write is done
            raise typer.Exit(1)
        if json_:
            return
        if "global_batch" in r.defaulted:
            typer.echo(
                f"global batch {r.plan.global_batch} x {r.plan.seq_len} tokens: the default, about 4M tokens a step "
                "(--global-batch to change)"
            )
        return
    assert env is not None
    run_here(r, run, rehearsal, env, reh=reh, nnodes=nnodes or 1, nproc=nproc, max_restarts=max_restarts,
          dry=dry_run_, force=force, as_json=json_, wall_s=wall_s, notes=notes)  # fmt: skip


def _found(model: str | None, engine: str | None, hardware: str | None) -> None:
    """The catalog entries or files the command line names, each found (or refused in one line) by its loader; what
    loading says is said once, when resolve loads them again."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if model:
            load_model(model)
        if engine:
            load_engine(engine)
        if hardware:
            load_hardware(hardware)


def _said_emitted(kind: str, emitted_: Emitted, *, dry_run: bool, as_json: bool) -> None:
    """What --emit did: wrote its files, found them there already with this text, or (dry run) would write."""
    path, changed, said, unfit = emitted_
    if as_json:  # written: by this call; changed: the files differ (or would) from what --out held
        emit_json({"target": kind, "path": str(path), "written": changed and not dry_run, "changed": changed,
                   "warnings": list(said), "failed": [unfit] if unfit else []})  # fmt: skip
    elif not changed:
        typer.echo(f"{path} is already this plan's file: left as it is")
    else:
        typer.echo(f"would write {path} (--dry-run: nothing written)" if dry_run else f"wrote {path}")


def emitted_engine(emit: str | None) -> str | None:
    """The engine whose own file --emit writes (megatron-bridge: megatron), None for a cluster target or none."""
    chosen = target(emit) if emit is not None else None
    return chosen.engine if chosen is not None else None


def _engine_ref(engine: str | None, saved: PlanFile | None, rehearse_: bool, default: str) -> str:
    """The engine the worker is told to run as: the one the plan is checked and priced with (resolve's order: the
    flag, the worker's for a rehearsal, the plan file's, `default`: the engine whose file --emit writes, else the
    worker's)."""
    if engine:
        return engine
    if rehearse_:
        return WORKER_ENGINE
    return (saved.engine if saved else None) or default


def world_from_flags(saved: PlanFile | None, flags: dict[str, Any]) -> int | None:
    """launch has no --gpus: degrees given on the command line win over the plan file's, and the world is their
    product with the file's other degrees. None (the file's gpus) while no degree is given, or while the file
    gives no dp to multiply by (then dp is derived from the file's gpus, as memory and estimate do)."""
    if saved is None or all(flags.get(d) is None for d in ("dp", "tp", "pp", "cp")):
        return None
    world = 1
    for d in ("dp", "tp", "pp", "cp"):
        value = flags.get(d) if flags.get(d) is not None else saved.plan.get(d, None if d == "dp" else 1)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= MAX_DEGREE:
            return None  # missing or invalid: the plan's own validation names it
        world *= value
    return world
