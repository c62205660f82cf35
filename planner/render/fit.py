"""`planner validate` and `planner calibrate`: predicted against measured, and the fitted parameters."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from planner.fit.calibrate import FitResult
from planner.fit.validate import RunResult, Validation

METRIC_NAMES = {"tokens_per_s_per_gpu": "tokens/s per GPU", "peak_memory_bytes": "peak memory", "step_s": "step time"}


def _pct(r: RunResult, key: str) -> str:
    e = r.error_pct.get(key)
    return "" if e is None else f"{e:+.1f}%"


def validation_json(v: Validation) -> dict[str, Any]:
    return {
        "runs": [
            {
                "id": r.id,
                "predicted": r.predicted,
                "measured": r.measured,
                "error": r.error_pct,
                "fits": r.fits,
                **({"skipped": r.skipped} if r.skipped else {}),
            }
            for r in v.runs
        ],
        "summary": v.summary(),
    }


def print_validation(console: Console, result: Validation) -> None:
    table = Table(show_edge=False, box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("run", "tokens/s/GPU pred", "meas", "err", "peak GiB pred", "meas", "err"):
        table.add_column(col, justify="left" if col == "run" else "right")
    for r in result.runs:
        if r.skipped:
            continue
        pm, mm = r.predicted["peak_memory_bytes"], r.measured.get("peak_memory_bytes")
        table.add_row(
            r.id,
            f"{r.predicted['tokens_per_s_per_gpu']:,.1f}",
            f"{r.measured.get('tokens_per_s_per_gpu', float('nan')):,.1f}",
            _pct(r, "tokens_per_s_per_gpu"),
            f"{pm / 2**30:.1f}" + ("" if r.fits else " !"),
            f"{mm / 2**30:.1f}" if mm else "",
            _pct(r, "peak_memory_bytes"),
        )
    console.print(table)
    for r in result.runs:
        if r.skipped:
            console.print(f"[yellow]not evaluated[/] {r.id}: {r.skipped}")
    for metric, s in result.summary().items():
        if metric in METRIC_NAMES:
            console.print(
                f"{METRIC_NAMES[metric]}: median |error| {s['median_abs_pct']:.1f}%, max "
                f"{s['max_abs_pct']:.1f}% over {s['n']} runs"
            )
    if any(r.fits is False for r in result.runs):
        console.print("[dim]! = predicted not to fit the profile's memory (the run used a larger-memory variant)[/]")


def calibration_json(result: FitResult, output: str) -> dict[str, Any]:
    return {
        "hardware": result.base.name,
        "output": output,
        "params": result.values,
        "stderr": result.stderr,
        "before_pct": result.before_pct,
        "after_pct": result.after_pct,
        "median_abs_pct": {"before": result.median_before_pct, "after": result.median_after_pct},
    }


def print_calibration(console: Console, result: FitResult, output: str) -> None:
    table = Table(title="fitted parameters", title_justify="left", show_edge=False)
    for col in ("parameter", "value", "± 1 s.e."):
        table.add_column(col, justify="left" if col == "parameter" else "right")
    for n in result.names:
        table.add_row(n, f"{result.values[n]:.4g}", f"{result.stderr[n]:.2g}")
    console.print(table)
    runs_table = Table(title="step time error per run", title_justify="left", show_edge=False)
    for col in ("run", "before", "after"):
        runs_table.add_column(col, justify="left" if col == "run" else "right")
    for o in result.observations:
        runs_table.add_row(o.id, f"{result.before_pct[o.id]:+.1f}%", f"{result.after_pct[o.id]:+.1f}%")
    console.print(runs_table)
    console.print(
        f"median |error| {result.median_before_pct:.1f}% -> {result.median_after_pct:.1f}% over "
        f"{len(result.observations)} runs; wrote {output} (use it with --hardware {output})"
    )
