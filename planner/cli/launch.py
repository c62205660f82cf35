"""`planner launch`: the typer command (thin: parse, call runner/emit, render)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from planner.errors import PlannerError
from planner.cli.options import (
    CpOpt, DpOpt, EpOpt, GlobalBatchOpt, MicroBatchOpt, PpOpt, PrecisionOpt, RecomputeOpt, ScheduleOpt, SeqLenOpt,
    SpOpt, TpOpt, VppOpt, ZeroOpt,
)
from planner.launch.command import RunConfig
from planner.launch.emit.cluster import write_cluster_files
from planner.launch.emit.engines import write_engine_file
from planner.launch.preflight import probe_environment
from planner.launch.runner import comparison, dry_run, predicted, read_profile, resolve_plan, run_torchrun
from planner.launch.spec import load_model_spec, shrink

CLUSTER, ENGINES = ("torchrun", "slurm", "k8s"), ("megatron", "torchtitan", "deepspeed")
Opt = typer.Option


def launch(
    model: Annotated[Optional[str], Opt(help="catalog name or model YAML path (default: the --plan file's)")] = None,
    hardware: Annotated[Optional[str], Opt(help="hardware profile name (default: cpu when no CUDA)")] = None,
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
    nnodes: Annotated[int, Opt(help="nodes")] = 1,
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
    profile_out: Annotated[Path, Opt(help="profile JSON path")] = Path("planner-launch-profile.json"),
    timeout_s: Annotated[float, Opt(help="collective timeout in seconds (a hung rank fails, not hangs)")] = 120.0,
    json_: Annotated[bool, Opt("--json", help="machine-readable output")] = False,
) -> None:
    """Run a plan for real with torchrun (gloo on CPU, NCCL on GPUs), or emit it for a cluster or engine."""
    if plan is not None and (model is None or hardware is None):
        from planner.io.planfile import read_plan_file

        saved = read_plan_file(str(plan))  # what `planner search --save` wrote beside the plan
        model, hardware = model or saved.get("model"), hardware or saved.get("hardware")
    if model is None:
        raise PlannerError("no model given: pass --model NAME|PATH or a --plan file written by `planner search --save`")
    spec = load_model_spec(model)
    flags = dict(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, vpp=vpp, sp=sp, zero=zero, recompute=recompute,
                 micro_batch=micro_batch, global_batch=global_batch, seq_len=seq_len, precision=precision,
                 schedule=schedule)
    the_plan = resolve_plan(spec, str(plan) if plan else None, flags)
    rehearsal = shrink(spec, layers=layers, hidden=hidden, tp=the_plan.tp) if (layers or hidden) else spec
    if nnodes < 1 or the_plan.gpus % nnodes:
        raise PlannerError(f"plan gpus={the_plan.gpus} must be divisible by --nnodes {nnodes}")
    per_node = nproc or the_plan.gpus // nnodes
    model_ref = str(Path(model).resolve()) if Path(model).exists() else model
    env = probe_environment() if emit is None else None
    cfg = RunConfig(model=model_ref, plan=the_plan, steps=steps, warmup=warmup, seed=seed, layers=layers,
                    hidden=hidden, hardware=hardware or (env.device_type if env else "unspecified"),
                    checkpoint_dir=str(checkpoint_dir.resolve()) if checkpoint_dir else None,
                    checkpoint_every=checkpoint_every, resume=resume, profile_out=str(profile_out.resolve()),
                    timeout_s=timeout_s)
    if emit is not None:
        _emit(emit, out, cfg, rehearsal, nnodes=nnodes, per_node=per_node, max_restarts=max_restarts)
        return
    pred = predicted(rehearsal, the_plan, cfg.hardware)
    report = dry_run(cfg, rehearsal, env, nproc_per_node=per_node, nnodes=nnodes, max_restarts=max_restarts,
                     peak_bytes=pred["peak_bytes"])
    failures = report.preflight.failures(force=force)
    if dry_run_:
        typer.echo(json.dumps(report.to_dict(), indent=2) if json_ else _render_dry(report))
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
        _render_comparison(rows, cfg.profile_out)


def _emit(kind: str, out: Path | None, cfg: RunConfig, spec, *, nnodes: int, per_node: int, max_restarts: int) -> None:  # noqa: ANN001
    if out is None:
        raise PlannerError("--emit needs --out DIR")
    if kind in CLUSTER:
        path = write_cluster_files(kind, cfg, out, nnodes=nnodes, nproc_per_node=per_node, max_restarts=max_restarts)
    elif kind in ENGINES:
        path = write_engine_file(kind, spec, cfg.plan, out)
    else:
        raise PlannerError(f"--emit {kind}: expected one of {', '.join(CLUSTER + ENGINES)}")
    typer.echo(f"wrote {path}")


def _render_dry(report) -> str:  # noqa: ANN001
    lines = ["pre-flight:", *("  " + s for s in report.preflight.lines()),
             "mesh: " + " x ".join(f"{k}={v}" for k, v in report.mesh.items()),
             "command:", "  " + report.command, "ranks:", *("  " + r for r in report.ranks)]
    return "\n".join(lines)


def _render_comparison(rows, profile_path: str) -> None:  # noqa: ANN001
    from rich.console import Console
    from rich.table import Table

    table = Table(title="measured vs predicted")
    for col in ("quantity", "measured", "predicted", "error"):
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    Console().print(table)
    typer.echo(f"profile: {profile_path}")
