"""`planner launch`: check a plan against this machine and run it with torchrun, or emit it for a cluster
or another engine. Thin: parse, resolve, call launch/ (runner, emit), render."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

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
from planner.cli.resolve import PLAN_FLAGS, resolve
from planner.errors import PlannerError
from planner.io.catalog import DEFAULT_HARDWARE
from planner.io.planfile import read_plan_file
from planner.launch.command import WORKER_ENGINE, RunConfig
from planner.launch.emit import emit as emit_target
from planner.launch.preflight import default_hardware, probe_environment
from planner.launch.runner import comparison, dry_run, predicted, read_profile, run_torchrun
from planner.launch.spec import shrink

Opt = typer.Option


def launch(
    model: Annotated[Optional[str], Opt(help="catalog name or model YAML path (default: the --plan file's)")] = None,
    hardware: Annotated[
        Optional[str],
        Opt(help="hardware profile that prices the run (default: the --plan file's, else cpu without CUDA)"),
    ] = None,
    engine: Annotated[
        Optional[str],
        Opt(help="engine profile the worker runs and is priced with (default: planner, this project's worker)"),
    ] = None,
    plan: Annotated[Optional[Path], Opt("--plan", help="YAML mapping of Plan fields; flags override it")] = None,
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
    nproc: Annotated[Optional[int], Opt(help="processes per node (default: plan gpus / nnodes)")] = None,
    nnodes: Annotated[
        Optional[int],
        Opt(help="nodes (default: 1 to run here; --emit torchrun|slurm|k8s: whole nodes of the hardware profile)"),
    ] = None,
    steps: Annotated[int, Opt(help="optimizer steps")] = 8,
    warmup: Annotated[int, Opt(help="warm-up steps left out of the median")] = 2,
    layers: Annotated[Optional[int], Opt(help="rehearsal: this many layers")] = None,
    hidden: Annotated[Optional[int], Opt(help="rehearsal: this hidden size (FFN scaled alike)")] = None,
    seed: Annotated[int, Opt(help="seed of weights and data")] = 0,
    dry_run_: Annotated[bool, Opt("--dry-run", help="print checks, mesh, command, layout; run nothing")] = False,
    force: Annotated[bool, Opt(help="run although the memory check fails")] = False,
    checkpoint_dir: Annotated[Optional[Path], Opt(help="save checkpoints here")] = None,
    checkpoint_every: Annotated[int, Opt(help="save every K steps (0: never)")] = 0,
    resume: Annotated[bool, Opt(help="continue from the latest checkpoint")] = False,
    max_restarts: Annotated[int, Opt(help="torchrun restarts of failed workers")] = 0,
    emit: Annotated[Optional[str], Opt(help="torchrun | slurm | k8s | megatron | torchtitan | deepspeed")] = None,
    out: Annotated[Optional[Path], Opt(help="directory for --emit files")] = None,
    image: Annotated[Optional[str], Opt(help="--emit k8s: container image with torch and planner installed")] = None,
    profile_out: Annotated[Path, Opt(help="profile JSON path")] = Path("planner-launch-profile.json"),
    timeout_s: Annotated[float, Opt(help="collective timeout in seconds (a hung rank fails, not hangs)")] = 120.0,
    json_: Annotated[bool, Opt("--json", help="machine-readable output")] = False,
) -> None:
    """Run a plan for real with torchrun (gloo on CPU, NCCL on GPUs), or emit it for a cluster or engine."""
    from planner.render.launch import print_comparison, render_dry_run

    saved = read_plan_file(str(plan)) if plan is not None else None  # what `planner search --save` wrote
    env = probe_environment() if emit is None else None
    hw_name = (
        hardware
        or (saved.hardware if saved else None)
        or (default_hardware(env) if env is not None else DEFAULT_HARDWARE)
    )
    flags = {k: v for k, v in locals().items() if k in PLAN_FLAGS}
    r = resolve(
        model=model,
        hardware=hw_name,
        engine=engine,
        gpus=None,
        plan_file=str(plan) if plan else None,
        flags=flags,
        overrides={},
        check=False,
        default_engine=WORKER_ENGINE,
    )
    the_plan = r.plan
    rehearsal = shrink(r.model, layers=layers, hidden=hidden, tp=the_plan.tp) if (layers or hidden) else r.model
    if emit is not None:
        if out is None:
            raise PlannerError("--emit needs --out DIR")
        cfg = RunConfig(
            model=r.model_ref, plan=the_plan, steps=steps, warmup=warmup, seed=seed, layers=layers, hidden=hidden,
            hardware=r.hardware.name, engine=engine or WORKER_ENGINE,
            checkpoint_dir=str(checkpoint_dir) if checkpoint_dir else None, checkpoint_every=checkpoint_every,
            resume=resume, profile_out=str(profile_out), timeout_s=timeout_s,
        )  # fmt: skip
        path = emit_target(
            emit, cfg, rehearsal, out, engine=r.engine, hardware=r.hardware, hardware_ref=hw_name, nnodes=nnodes,
            nproc=nproc, max_restarts=max_restarts, image=image, force=force,
        )  # fmt: skip
        typer.echo(f"wrote {path}")
        return
    nnodes = nnodes or 1
    if the_plan.gpus % nnodes:
        raise PlannerError(f"plan gpus={the_plan.gpus} must be divisible by --nnodes {nnodes}")
    per_node = nproc or the_plan.gpus // nnodes
    model_ref = str(Path(r.model_ref).resolve()) if Path(r.model_ref).exists() else r.model_ref
    cfg = RunConfig(
        model=model_ref,
        plan=the_plan,
        steps=steps,
        warmup=warmup,
        seed=seed,
        layers=layers,
        hidden=hidden,
        hardware=r.hardware.name,
        engine=engine or WORKER_ENGINE,
        checkpoint_dir=str(checkpoint_dir.resolve()) if checkpoint_dir else None,
        checkpoint_every=checkpoint_every,
        resume=resume,
        profile_out=str(profile_out.resolve()),
        timeout_s=timeout_s,
    )
    assert env is not None
    pred = predicted(rehearsal, r.hardware, the_plan, r.engine)
    report = dry_run(
        cfg,
        rehearsal,
        r.engine,
        env,
        nproc_per_node=per_node,
        nnodes=nnodes,
        max_restarts=max_restarts,
        peak_bytes=pred["peak_bytes"],
    )
    failures = report.preflight.failures(force=force)
    if dry_run_:
        typer.echo(json.dumps(report.to_dict(), indent=2) if json_ else render_dry_run(report))
        return
    if failures:
        raise PlannerError("pre-flight check failed: " + "; ".join(f"{c.name}: {c.detail}" for c in failures))
    if nnodes > 1:
        raise PlannerError("a multi-node run starts on every node: use --emit torchrun|slurm|k8s --out DIR")
    rc = run_torchrun(cfg, nproc_per_node=per_node, max_restarts=max_restarts)
    if rc != 0:
        typer.echo(f"planner launch: torchrun failed with exit code {rc}", err=True)
        raise typer.Exit(rc)
    profile = read_profile(cfg.profile_out)
    rows = comparison(profile, pred)
    if json_:
        typer.echo(json.dumps({"profile": cfg.profile_out, "comparison": rows}, indent=2))
    else:
        print_comparison(rows, cfg.profile_out)
