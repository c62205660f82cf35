"""`planner launch`: check a plan against this machine and run it with torchrun, or emit it for a cluster
or another engine. Thin: parse, resolve, call launch/ (runner, emit), render."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
import yaml

from planner.api.resolve import PLAN_FLAGS, Resolved, resolve
from planner.cli.callbacks import finite, nonempty
from planner.cli.options import (
    CpOpt,
    DpOpt,
    EpOpt,
    GlobalBatchOpt,
    MicroBatchOpt,
    PpOpt,
    PrecisionOpt,
    RecomputeOpt,
    ScheduleOpt,
    SeqLenOpt,
    SpOpt,
    TpOpt,
    VppOpt,
    ZeroOpt,
)
from planner.engine.recipes import emit_unexpressed
from planner.engine.rules import hardware_problems
from planner.errors import PlannerError
from planner.io.catalog import DEFAULT_HARDWARE
from planner.io.files import write_text_atomic
from planner.io.planfile import PlanFile, read_plan_file
from planner.launch.command import WORKER_ENGINE, RunConfig
from planner.launch.emit import emit as emit_target
from planner.launch.preflight import Environment, default_hardware, host_refusal, probe_environment
from planner.launch.rehearse import Rehearsal, rehearsal_model_path, rehearse
from planner.launch.runner import DryRun, comparison, dry_run, host_need, predicted, read_profile, run_torchrun
from planner.launch.spec import shrink
from planner.plan import MAX_DEGREE
from planner.specs import MAX_LAYERS, MAX_WIDTH, ModelSpec

Opt = typer.Option


def writable_or_raise(folder: Path, option: str) -> None:
    """The folder exists (or can be made) and takes a file: checked before any worker starts."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".planner-write-test-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise PlannerError(f"{option}: cannot write into {str(folder)!r} ({e.strerror or e})") from None


def launch(
    model: Annotated[
        Optional[str], Opt(callback=nonempty, help="catalog name or model YAML path (default: the --plan file's)")
    ] = None,
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
            help="engine profile the worker runs and is priced with (default: planner, this project's worker)",
        ),
    ] = None,
    plan: Annotated[
        Optional[str], Opt("--plan", callback=nonempty, help="YAML mapping of Plan fields; flags override it")
    ] = None,
    tp: TpOpt = None,
    pp: PpOpt = None,
    dp: DpOpt = None,
    cp: CpOpt = None,
    ep: EpOpt = None,
    vpp: VppOpt = None,
    sp: SpOpt = None,
    zero: ZeroOpt = None,
    recompute: RecomputeOpt = None,
    micro_batch: MicroBatchOpt = None,
    global_batch: GlobalBatchOpt = None,
    seq_len: SeqLenOpt = None,
    precision: PrecisionOpt = None,
    schedule: ScheduleOpt = None,
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
        Opt(help="run although the GPU free-memory check fails (never past the limits that protect this machine)"),
    ] = False,
    checkpoint_dir: Annotated[Optional[Path], Opt(help="save checkpoints here")] = None,
    checkpoint_every: Annotated[int, Opt(min=0, max=1_000_000, help="save every K steps (0: never)")] = 0,
    resume: Annotated[bool, Opt(help="continue from the latest checkpoint")] = False,
    max_restarts: Annotated[int, Opt(min=0, max=1000, help="torchrun restarts of failed workers")] = 0,
    emit: Annotated[Optional[str], Opt(help="torchrun | slurm | k8s | megatron | torchtitan | deepspeed")] = None,
    out: Annotated[Optional[Path], Opt(help="directory for --emit files")] = None,
    image: Annotated[Optional[str], Opt(help="--emit k8s: container image with torch and planner installed")] = None,
    profile_out: Annotated[Path, Opt(help="profile JSON path")] = Path("planner-launch-profile.json"),
    timeout_s: Annotated[
        float,
        Opt(
            callback=finite(0, 86400, open_low=True),
            help="collective timeout in seconds (a hung rank fails, not hangs)",
        ),
    ] = 120.0,
    json_: Annotated[bool, Opt("--json", help="machine-readable output")] = False,
) -> None:
    """Run a plan for real with torchrun (gloo on CPU, NCCL on GPUs), or emit it for a cluster or engine."""
    if warmup >= steps:
        raise PlannerError(f"--warmup {warmup} must be below --steps {steps}: the median needs timed steps")
    if rehearse_ and (emit is not None or layers or hidden):
        given = "--emit" if emit is not None else "--layers/--hidden"
        raise PlannerError(f"--rehearse shrinks the plan to run here by itself; drop {given}")
    saved = read_plan_file(plan) if plan is not None else None  # what `planner search --save` wrote
    env = probe_environment() if emit is None else None
    # A rehearsal runs here: priced on this machine's profile and run by the worker's engine, not the file's.
    hw_name = (
        hardware
        or (saved.hardware if saved and not rehearse_ else None)
        or (default_hardware(env) if env is not None else DEFAULT_HARDWARE)
    )
    flags = {k: v for k, v in locals().items() if k in PLAN_FLAGS}
    r = resolve(
        model=model,
        hardware=hw_name,
        engine=engine or (WORKER_ENGINE if rehearse_ else None),
        gpus=world_from_flags(saved, flags),
        plan_file=plan,
        flags=flags,
        overrides={},
        check=False,
        default_engine=WORKER_ENGINE,
    )
    reh = None
    if rehearse_:
        assert env is not None
        reh = rehearse(r.model, r.plan, r.engine, device_type=env.device_type, max_processes=env.max_processes())
        r = replace(r, model=reh.model, plan=reh.plan, model_ref=str(rehearsal_model_path(profile_out)))
    unsupported = hardware_problems(r.hardware, r.plan)  # launch prices the run on the profile: it must have it
    if unsupported:
        raise PlannerError(unsupported[0].detail)
    rehearsal = shrink(r.model, layers=layers, hidden=hidden, tp=r.plan.tp) if (layers or hidden) else r.model
    run = RunConfig(
        model=r.model_ref, plan=r.plan, steps=steps, warmup=warmup, seed=seed, layers=layers, hidden=hidden,
        hardware=r.hardware.name, engine=engine or WORKER_ENGINE,
        checkpoint_dir=str(checkpoint_dir) if checkpoint_dir else None, checkpoint_every=checkpoint_every,
        resume=resume, profile_out=str(profile_out), timeout_s=timeout_s,
    )  # fmt: skip
    if emit is not None:
        if out is None:
            raise PlannerError("--emit needs --out DIR")
        unexpressed = emit_unexpressed(r.plan, r.engine)  # named recipes and recipe options: not written yet
        if unexpressed:
            raise PlannerError(
                f"--emit {emit}: the emitters do not write {unexpressed} yet; estimate it, or emit without it"
            )
        path = emit_target(
            emit, run, rehearsal, out, engine=r.engine, hardware=r.hardware, hardware_ref=hw_name, nnodes=nnodes,
            nproc=nproc, max_restarts=max_restarts, image=image, force=force,
        )  # fmt: skip
        typer.echo(f"wrote {path}")
        return
    assert env is not None
    _here(r, run, rehearsal, env, reh=reh, nnodes=nnodes or 1, nproc=nproc, max_restarts=max_restarts,
          dry=dry_run_, force=force, as_json=json_)  # fmt: skip


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


def _here(
    r: Resolved,
    run: RunConfig,
    rehearsal: ModelSpec,
    env: Environment,
    *,
    reh: Rehearsal | None,
    nnodes: int,
    nproc: int | None,
    max_restarts: int,
    dry: bool,
    force: bool,
    as_json: bool,
) -> None:
    """Check the plan on this machine, then print the dry run, or run it and compare measured with predicted."""
    if run.plan.gpus % nnodes:
        raise PlannerError(f"plan gpus={run.plan.gpus} must be divisible by --nnodes {nnodes}")
    per_node = nproc or run.plan.gpus // nnodes
    model_ref = str(Path(run.model).resolve()) if (reh or Path(run.model).exists()) else run.model
    cfg = replace(
        run,
        model=model_ref,
        checkpoint_dir=str(Path(run.checkpoint_dir).resolve()) if run.checkpoint_dir else None,
        profile_out=str(Path(run.profile_out).resolve()),
    )
    pred = predicted(rehearsal, r.hardware, cfg.plan, r.engine)
    need = host_need(rehearsal, cfg.plan, r.engine, env, nproc_per_node=per_node)
    report = dry_run(
        cfg, rehearsal, r.engine, env, nproc_per_node=per_node, nnodes=nnodes, max_restarts=max_restarts,
        peak_bytes=pred["peak_bytes"], need=need,
    )  # fmt: skip
    if reh is not None:
        report.rehearsal = reh.to_dict()
        report.preflight.notes.append(f"the rehearsal's model is written to {cfg.model} when the run starts")
    failures = report.preflight.failures(force=force)
    if dry:
        _print_dry_run(report, reh, as_json=as_json)
        if failures:  # the documented exit code of a dry run that found a failing check
            raise typer.Exit(1)
        return
    refusal = host_refusal(report.preflight, env, need)  # what protects this machine: --force does not lift it
    if refusal:
        raise PlannerError(refusal)
    if failures:
        raise PlannerError("pre-flight check failed: " + "; ".join(f"{c.name}: {c.detail}" for c in failures))
    if nnodes > 1:
        raise PlannerError("a multi-node run starts on every node: use --emit torchrun|slurm|k8s --out DIR")
    _run(cfg, pred, reh, per_node=per_node, max_restarts=max_restarts, as_json=as_json)


def _print_dry_run(report: DryRun, reh: Rehearsal | None, *, as_json: bool) -> None:
    from planner.render.run_report import render_dry_run

    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2))
        return
    if reh is not None:
        typer.echo("\n".join(reh.lines()))
    typer.echo(render_dry_run(report))


def _run(
    cfg: RunConfig, pred: dict[str, Any], reh: Rehearsal | None, *, per_node: int, max_restarts: int, as_json: bool
) -> None:
    """Start the workers, wait, and print measured against predicted; exit 1 when the run fails."""
    from planner.render.run_report import print_comparison

    writable_or_raise(Path(cfg.profile_out).parent, "--profile-out")
    if cfg.checkpoint_dir:
        writable_or_raise(Path(cfg.checkpoint_dir), "--checkpoint-dir")
    if reh is not None:
        write_text_atomic(cfg.model, yaml.safe_dump(reh.model.model_dump(mode="json")), what="rehearsal model")
        typer.echo("\n".join(reh.lines()), err=True)
    typer.echo(
        f"[launch] starting {per_node} worker process(es) with torchrun; start-up (imports, rendezvous, model "
        "build) takes a few seconds before the first step line",
        err=True,
    )
    rc = run_torchrun(cfg, nproc_per_node=per_node, max_restarts=max_restarts)
    if rc != 0:
        typer.echo(f"planner launch: the run failed (torchrun exit code {rc})", err=True)
        raise typer.Exit(1)
    if not Path(cfg.profile_out).is_file():
        typer.echo(f"planner launch: the run wrote no profile to {cfg.profile_out}", err=True)
        raise typer.Exit(1)
    rows = comparison(read_profile(cfg.profile_out), pred)
    if as_json:
        typer.echo(json.dumps({"profile": cfg.profile_out, "comparison": rows}, indent=2))
    else:
        print_comparison(rows, cfg.profile_out)
