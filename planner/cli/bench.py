"""`planner bench-hardware`: measure this machine and write a hardware profile (torch is imported only
inside the measurements, which run in bench/)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Optional

import typer

from planner.errors import PlannerError

Opt = typer.Option


def bench_hardware(
    out: Annotated[Path, Opt(help="profile YAML to write (atomically)")] = Path("bench-hardware.yaml"),
    name: Annotated[Optional[str], Opt(help="profile name (default: the file's stem)")] = None,
    nproc: Annotated[int, Opt(help="processes for the collective benchmarks (torchrun, gloo on CPU / NCCL)")] = 2,
    quick: Annotated[bool, Opt("--quick", help="fewer sizes and repetitions (~40 s on a 2-core CPU box)")] = False,
    json_: Annotated[bool, Opt("--json", help="print raw measurements and fitted numbers as JSON")] = False,
) -> None:
    """Measure this machine (GEMM sweep, memory copy, collectives) and write a hardware profile YAML."""
    from rich.console import Console

    from planner.bench.curves import profile_yaml, write_atomic
    from planner.bench.run import run_bench
    from planner.io.catalog import load_hardware

    if nproc < 2:
        raise PlannerError("--nproc must be at least 2 (the collectives need two ranks)")
    console = Console(stderr=True)
    res = run_bench(nproc, quick, console)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    write_atomic(out, profile_yaml(res, name or out.stem, stamp))
    load_hardware(out)  # validate what was written
    res["profile"] = str(out)
    if json_:
        typer.echo(json.dumps(res, indent=2))
        return
    p, ar = res["peak_flops"], res["fits"]["all_reduce"]
    if res["device"] == "cpu":
        typer.echo("NOTE: these are CPU figures (one process per rank, 1 thread, gloo), not GPU figures.")
    typer.echo(
        f"matmul peak (best measured): fp32 {p['fp32'] / 1e9:.1f} GFLOP/s, bf16 {p['bf16'] / 1e9:.1f} GFLOP/s, "
        f"fp16 {p['fp16'] / 1e9:.1f} GFLOP/s"
    )
    typer.echo(f"memory bandwidth (copy): {res['memory']['bytes_per_s'] / 1e9:.2f} GB/s")
    for k, f in res["fits"].items():
        typer.echo(
            f"{k:<15} latency {f['latency_s'] * 1e6:8.1f} us/hop   "
            f"bandwidth {f['bandwidth_bytes_per_s'] / 1e9:6.2f} GB/s"
        )
    typer.echo(
        f"intra_node = inter_node = all-reduce fit ({ar['bandwidth_bytes_per_s'] / 1e9:.2f} GB/s, "
        f"{ar['latency_s'] * 1e6:.1f} us): one host, no inter-node link measured"
    )
    typer.echo(f"wrote {out}")
