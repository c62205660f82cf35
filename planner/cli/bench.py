"""`planner bench-hardware`: measure this machine and write a hardware profile (torch is imported only
inside the measurements, which run in bench/)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from planner.cli.callbacks import nonempty_path
from planner.errors import PlannerError
from planner.render.console import emit_json

if TYPE_CHECKING:
    from planner.hardware import HardwareProfile

Opt = typer.Option


def bench_hardware(
    out: Annotated[Path, Opt(parser=nonempty_path, help="profile YAML to write (atomically)")] = Path(
        "bench-hardware.yaml"
    ),
    name: Annotated[Optional[str], Opt(help="profile name (default: the file's stem)")] = None,
    nproc: Annotated[int, Opt(help="processes for the collective benchmarks (torchrun, gloo on CPU / NCCL)")] = 2,
    quick: Annotated[bool, Opt("--quick", help="fewer sizes and repetitions (~40 s on a 2-core CPU box)")] = False,
    like: Annotated[
        Optional[str],
        Opt(help="with --nproc 1 (one device: no collective to time), copy the link tiers from this profile"),
    ] = None,
    json_: Annotated[bool, Opt("--json", help="print raw measurements and fitted numbers as JSON")] = False,
) -> None:
    """Measure this machine (GEMM sweep, memory copy, collectives) and write a hardware profile YAML."""
    from rich.console import Console

    from planner.bench.curves import profile_yaml, write_atomic
    from planner.bench.run import run_bench
    from planner.io.catalog import load_hardware

    _check_nproc(nproc, like)
    _check_out(out)  # before minutes of measuring, not after
    links = load_hardware(like) if like is not None else None
    console = Console(stderr=True)
    res = run_bench(nproc, quick, console)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = profile_yaml(res, name or out.stem, stamp, links=links)
    _valid_profile(text, out)  # checked before it is written: a profile that does not load is never left behind
    write_atomic(out, text)
    res["profile"] = str(out)
    if json_:
        emit_json(res)
        return
    _print_summary(res, links)
    typer.echo(f"wrote {out}")


def _check_out(out: Path) -> None:
    """--out: a YAML name (the profile's sources are its comments), writable, and not a file of something else (a
    hardware profile there is replaced; notes or another tool's file were, without a word)."""
    from planner.io.files import check_ours, check_writable

    if out.suffix.lower() not in (".yaml", ".yml"):
        raise PlannerError(f"--out {out}: a hardware profile is YAML, its sources in comments; give a .yaml name")
    check_writable(out, what="profile")
    check_ours(out, option="--out", what="hardware profile", ours=lambda d: isinstance(d, dict) and "gpu" in d)


def _check_nproc(nproc: int, like: str | None) -> None:
    """--nproc from 1 to what a run here may start (one per GPU, or two per CPU core: launch/machine.py); --like
    only where no collective is timed (with more processes its link tiers replaced the ones measured)."""
    from planner.launch.preflight import probe_environment

    if nproc < 1:
        raise PlannerError(f"--nproc {nproc}: give at least 1 (1: the device alone, no collectives)")
    if nproc > 1 and like is not None:
        raise PlannerError(
            f"--like {like}: the link tiers of a profile stand in where no collective is timed (--nproc 1); with "
            f"--nproc {nproc} the collectives are measured: drop --like, or give --nproc 1"
        )
    if nproc == 1 and like is None:
        raise PlannerError(
            "--nproc 1 times no collective: give --like PROFILE for the link tiers (e.g. --like h100-sxm)"
        )
    env = probe_environment()
    limit = env.max_processes()
    if limit is not None and nproc > limit:
        where = f"{env.device_count} GPUs" if env.device_type == "cuda" else "two per CPU core"
        raise PlannerError(f"--nproc {nproc}: at most {limit} here ({where})")


def _valid_profile(text: str, out: Path) -> None:
    import yaml

    from planner.hardware import HardwareProfile
    from planner.io.readers import validated

    validated(HardwareProfile, yaml.safe_load(text), str(out))


def _print_summary(res: dict, links: HardwareProfile | None) -> None:
    """The measured peaks, copy bandwidth and collective fits, and where the link tiers came from."""
    p = res["peak_flops"]
    if res["device"] == "cpu":
        typer.echo("NOTE: these are CPU figures (one process per rank, 1 thread, gloo), not GPU figures.")
    typer.echo(
        f"matmul peak (best measured): fp32 {p['fp32'] / 1e9:.1f} GFLOP/s, bf16 {p['bf16'] / 1e9:.1f} GFLOP/s, "
        f"fp16 {p['fp16'] / 1e9:.1f} GFLOP/s"
    )
    typer.echo(f"memory bandwidth (copy): {res['memory']['bytes_per_s'] / 1e9:.2f} GB/s")
    if (dt := res.get("dtensor")) and dt["why"]:
        typer.echo(f"DTensor dispatch: not timed, the profile prices none: {dt['why']}")
    elif dt:
        typer.echo(f"DTensor dispatch: {dt['op_s'] * 1e6:.1f} us an op ({dt['ops']} ops a step)")
    if (sac := res.get("sac")) and sac["why"]:
        typer.echo(f"selective-checkpoint dispatch: not timed, the profile prices none: {sac['why']}")
    elif sac:
        typer.echo(f"selective-checkpoint dispatch: {sac['op_s'] * 1e6:.1f} us an op ({sac['ops']} ops a forward)")
    for k, f in res["fits"].items():
        typer.echo(
            f"{k:<15} latency {f['latency_s'] * 1e6:8.1f} us/hop   "
            f"bandwidth {f['bandwidth_bytes_per_s'] / 1e9:6.2f} GB/s"
        )
    if links is not None:
        typer.echo(f"links: copied from {links.name} (one device here: no collective was timed)")
    else:
        ar = res["fits"]["all_reduce"]
        typer.echo(
            f"intra_node = inter_node = all-reduce fit ({ar['bandwidth_bytes_per_s'] / 1e9:.2f} GB/s, "
            f"{ar['latency_s'] * 1e6:.1f} us): one host, no inter-node link measured"
        )
