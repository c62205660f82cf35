"""`planner launch` on this machine: the pre-flight checks, then the dry run printed, or the workers started with
torchrun and what they measured printed against what was predicted."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import typer
import yaml

from planner.api.resolve import Resolved
from planner.engine.rules import hardware_problems
from planner.errors import PlannerError
from planner.io.catalog import looks_like_path
from planner.io.files import check_writable, distinct_outputs, probe_writable, write_text_atomic
from planner.launch.claims import check_unclaimed, claimed
from planner.launch.command import RunConfig
from planner.launch.host_memory import host_need
from planner.launch.preflight import Environment, host_refusal, run_time_check
from planner.launch.pricing_here import hardware_check
from planner.launch.rehearse import Rehearsal
from planner.launch.run_files import check_checkpoints, prepare_checkpoints
from planner.launch.runner import (
    UNPRICED,
    DryRun,
    Interrupted,
    comparison,
    dry_run,
    measured_vs_predicted,
    predicted,
    read_profile,
    run_torchrun,
    shared_cores,
)
from planner.launch.spec import as_built
from planner.plan_checks import check_batch
from planner.render.console import emit_json, release_warnings
from planner.specs import ModelSpec


def writable_or_raise(folder: Path, option: str, *, make: bool = True) -> None:
    """The folder exists (or can be made) and takes a file: checked before any worker starts (`make` false: the
    dry run's check, which makes nothing and probes the nearest folder that exists)."""
    try:
        if make:
            folder.mkdir(parents=True, exist_ok=True)
        there = folder if make else next((p for p in (folder, *folder.parents) if p.exists()), Path("."))
        if not there.is_dir():
            raise NotADirectoryError(20, f"{there} is a file")
        probe_writable(there)
    except OSError as e:
        raise PlannerError(f"{option}: cannot write into {str(folder)!r} ({e.strerror or e})") from None


def run_here(
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
    wall_s: float | None = None,
    notes: list[str] | None = None,
) -> None:
    """Check the plan on this machine, then print the dry run, or run it and compare measured with predicted
    (`notes`: what the command line decided for it, said with the pre-flight's)."""
    if run.plan.gpus % nnodes:
        raise PlannerError(f"plan gpus={run.plan.gpus} must be divisible by --nnodes {nnodes}")
    per_node = nproc or run.plan.gpus // nnodes
    model_ref = str(Path(run.model).resolve()) if (reh or Path(run.model).exists()) else run.model
    cfg = replace(
        run,
        model=model_ref,
        hardware=str(Path(run.hardware).resolve()) if looks_like_path(run.hardware) else run.hardware,
        checkpoint_dir=str(Path(run.checkpoint_dir).resolve()) if run.checkpoint_dir else None,
        profile_out=str(Path(run.profile_out).resolve()),
    )
    # a batch its micro-batches do not divide has none to price: the pre-flight's rule check says why (exit 1)
    built = as_built(rehearsal, cfg.plan)  # priced and checked as the worker builds it
    share = shared_cores(env, per_node)
    unsupported = hardware_problems(r.hardware, cfg.plan)  # only a dry run gets here with one: a failing check
    priced = not check_batch(cfg.plan) and not unsupported
    pred = predicted(built, r.hardware, cfg.plan, r.engine, share=share) if priced else UNPRICED
    need = host_need(built, cfg.plan, r.engine, env, nproc_per_node=per_node)
    report = dry_run(
        cfg, rehearsal, r.engine, env, nproc_per_node=per_node, nnodes=nnodes, max_restarts=max_restarts,
        peak_bytes=pred["peak_bytes"], need=need,
    )  # fmt: skip
    report.plan, report.predicted = cfg.plan.document(r.engine.name), pred
    hardware_check(report.preflight, env, r.hardware)
    for problem in unsupported:
        report.preflight.add("precision", False, problem.detail)
    report.preflight.notes += notes or []
    shared = (
        f"{per_node} processes share {env.host.cores if env.host else '?'} cores: the step is priced {share:g}x the "
        f"{r.hardware.name} profile's, which gives each rank a core of its own"
        if share > 1
        else ""
    )
    if shared:
        report.preflight.notes.append(shared)
    if reh is not None:
        report.rehearsal = reh.to_dict()
        report.preflight.notes.append(f"the rehearsal's model is written to {cfg.model} when the run starts")
    report.preflight.add(
        "nodes", nnodes == 1, "one node" if nnodes == 1 else
        f"--nnodes {nnodes}: a multi-node run starts on every node: use --emit torchrun|slurm|k8s --out DIR",
    )  # fmt: skip
    wall = run_time_check(report.preflight, pred["step_time_s"], steps=cfg.steps, restarts=max_restarts, given=wall_s)
    if dry:
        _check_outputs_in(report, cfg, rehearsal, force=force)  # the refusals the run would meet, as a check
        _print_dry_run(report, reh, as_json=as_json)
        if report.preflight.failures(force=force):  # the documented exit code of a dry run that found a failing check
            raise typer.Exit(1)
        return
    failures = report.preflight.failures(force=force)
    refusal = host_refusal(report.preflight, env, need)  # what protects this machine: --force does not lift it
    if refusal:
        raise PlannerError(refusal)
    if failures:
        raise PlannerError("pre-flight check failed: " + "; ".join(f"{c.name}: {c.detail}" for c in failures))
    for said in [*(notes or []), *([shared] if shared else [])]:
        typer.echo(f"[launch] {said}", err=True)
    _run(cfg, pred, reh, rehearsal, per_node=per_node, max_restarts=max_restarts, as_json=as_json, wall_s=wall,
         force=force, cpu=env.device_type == "cpu")  # fmt: skip


def _print_dry_run(report: DryRun, reh: Rehearsal | None, *, as_json: bool) -> None:
    from planner.render.run_report import render_dry_run

    if as_json:
        emit_json(report.to_dict())
        return
    if reh is not None:
        typer.echo("\n".join(reh.lines()))
    typer.echo(render_dry_run(report))


def _run(
    cfg: RunConfig,
    pred: dict[str, Any],
    reh: Rehearsal | None,
    model: ModelSpec,
    *,
    per_node: int,
    max_restarts: int,
    as_json: bool,
    wall_s: float,
    force: bool,
    cpu: bool,
) -> None:
    """Claim the outputs, start the workers, wait, and print measured against predicted; exit 1 when the run
    fails."""
    outputs = _outputs(cfg)
    check_unclaimed(outputs)  # a running launch's files are its own, not leftovers for the outputs check to judge
    ckpt = _check_outputs(cfg, model, force=force)  # its refusals come before anything is written
    made = _claim_folders(outputs)
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(claimed(outputs))
        except PlannerError:
            for folder in made:  # a launch refused here leaves nothing behind
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise
        _check_outputs(cfg, model, force=force)  # again, now that no other launch writes them until this one ends
        _run_claimed(cfg, pred, reh, model, ckpt, per_node=per_node, max_restarts=max_restarts, as_json=as_json,
                     wall_s=wall_s, cpu=cpu)  # fmt: skip


def _claim_folders(outputs: dict[str, Path]) -> list[Path]:
    """Make the folders the claims' files go in (inside the checkpoint folder, beside the profile), checked
    writable, and return those it made, innermost first."""
    made: list[Path] = []
    for flag, output in outputs.items():
        folder = output if flag == "--checkpoint-dir" else output.parent
        missing = [p for p in (folder, *folder.parents) if not p.exists()]
        writable_or_raise(folder, flag)
        made += missing
    return made


def _outputs(cfg: RunConfig) -> dict[str, Path]:
    """The outputs a run writes, by the flag that names them (what claims.claimed holds)."""
    out = {"--profile-out": Path(cfg.profile_out)}
    return out | ({"--checkpoint-dir": Path(cfg.checkpoint_dir)} if cfg.checkpoint_dir else {})


def _run_claimed(
    cfg: RunConfig,
    pred: dict[str, Any],
    reh: Rehearsal | None,
    model: ModelSpec,
    ckpt: Path | None,
    *,
    per_node: int,
    max_restarts: int,
    as_json: bool,
    wall_s: float,
    cpu: bool,
) -> None:
    from planner.render.run_report import print_comparison

    if ckpt is not None:
        writable_or_raise(ckpt, "--checkpoint-dir")
        prepare_checkpoints(ckpt, model, resume=cfg.resume)
    if reh is not None:
        write_text_atomic(
            cfg.model, yaml.safe_dump(reh.model.model_dump(mode="json")), what="rehearsal model", kept=True
        )
        typer.echo("\n".join(reh.lines()), err=True)
    release_warnings()  # said now, not after a run of minutes
    typer.echo(
        f"[launch] starting {per_node} worker process(es) with torchrun; start-up (imports, rendezvous, model "
        f"build) takes a few seconds before the first step line; stopped if still running after {wall_s:g} s "
        "(--wall-s)",
        err=True,
    )
    try:
        rc = run_torchrun(cfg, nproc_per_node=per_node, max_restarts=max_restarts, cpu=cpu, wall_timeout_s=wall_s,
                          progress_to_stderr=as_json)  # fmt: skip
    except Interrupted as stop:  # exit 1, as for any run that did not finish (README: exit codes)
        typer.echo(f"planner launch: {stop}", err=True)
        raise typer.Exit(1) from None
    if rc != 0:
        typer.echo(f"planner launch: the run failed (torchrun exit code {rc})", err=True)
        raise typer.Exit(1)
    if not Path(cfg.profile_out).is_file():
        typer.echo(f"planner launch: the run wrote no profile to {cfg.profile_out}", err=True)
        raise typer.Exit(1)
    profile = read_profile(cfg.profile_out)
    rows = comparison(profile, pred)
    if as_json:  # the table's rows as printed, and each quantity as numbers (seconds, bytes, tokens/s)
        emit_json({"profile": cfg.profile_out, "comparison": rows, "quantities": measured_vs_predicted(profile, pred)})
    else:
        print_comparison(rows, cfg.profile_out)


def _check_outputs_in(report: DryRun, cfg: RunConfig, model: ModelSpec, *, force: bool) -> None:
    """The dry run's `outputs` check: what _check_outputs would refuse (with --force as given)."""
    try:
        check_unclaimed(_outputs(cfg))
        _check_outputs(cfg, model, force=force)
        if cfg.checkpoint_dir:  # what _run_claimed finds: the dry run passed a folder the run could not write
            writable_or_raise(Path(cfg.checkpoint_dir), "--checkpoint-dir", make=False)
    except PlannerError as e:
        report.preflight.add("outputs", False, str(e))
        return
    written = "--profile-out and --checkpoint-dir" if cfg.checkpoint_dir else "--profile-out"
    report.preflight.add("outputs", True, f"{written}: nothing there the run would replace unasked")


def _check_outputs(cfg: RunConfig, model: ModelSpec, *, force: bool) -> Path | None:
    """Refuse, before anything is written, the files the run would wrongly replace or cannot write; returns the
    checkpoint folder, if any."""
    distinct_outputs(("--profile-out", cfg.profile_out), ("--checkpoint-dir", cfg.checkpoint_dir))
    ckpt = Path(cfg.checkpoint_dir) if cfg.checkpoint_dir else None
    if ckpt is not None:
        check_checkpoints(ckpt, model, resume=cfg.resume, force=force, steps=cfg.steps, warmup=cfg.warmup)
    profile = Path(cfg.profile_out)  # the file itself, and its steps log: not only their folder
    continued = (
        cfg.resume and ckpt is not None
    )  # a resume appends to its steps log (worker.py) and rewrites its profile
    for path in (profile, profile.with_name(profile.name + ".steps.jsonl")):
        check_writable(path, what="--profile-out")
        if path.exists() and not (force or continued):  # an earlier run's, or a concurrent one's in the same folder
            raise PlannerError(f"--profile-out: {str(path)!r} exists: give --force to replace it, or another path")
    return ckpt
