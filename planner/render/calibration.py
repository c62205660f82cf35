"""`planner calibrate`: the fitted parameters, what moved, and each run's step error before and after."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from planner.fit.calibrate import FitResult
from planner.fit.write import using_written


def _num(v: float) -> str:
    """4 significant digits; 0 for what is zero but for rounding."""
    return "0" if abs(v) < 1e-9 else f"{v:.4g}"


def calibration_json(result: FitResult, outputs: dict[str, str], engines_written: list[str]) -> dict[str, Any]:
    return {
        "hardware": {
            h: {
                "output": outputs.get(h),
                "params": result.hardware_values.get(h, {}),
                "stderr": result.hardware_stderr.get(h, {}),
            }
            for h in result.fitted
        },
        "moves": [
            {
                "name": m.name,
                "before": m.before,
                "after": m.after,
                "stderr": m.stderr,
                "bound": m.bound,
                "moved": m.moved,
            }
            for m in result.moves
        ],
        "unidentified": list(result.unidentified),
        "nothing_moved": result.nothing_moved,
        "at_bound": result.at_bound,
        "engines": {g: gf.fitted.model_dump() for g, gf in result.groups.items()},
        "engine_profiles_written": engines_written,
        "runs": [
            {"id": o.id, "group": o.group, "before_pct": b, "after_pct": a}
            for o, b, a in zip(result.observations, result.before_pct, result.after_pct)
        ],
        "median_abs_pct": {"before": result.median_before_pct, "after": result.median_after_pct},
    }


def print_calibration(console: Console, result: FitResult, outputs: dict[str, str], engines_written: list[str]) -> None:
    moves = Table(title="what moved (1 s.e.; a bound it ended on is a finding)", title_justify="left", show_edge=False)
    for col in ("parameter", "before", "after", "± 1 s.e.", "moved", "bound"):
        moves.add_column(col, justify="left" if col in ("parameter", "bound") else "right")
    for m in result.moves:
        moves.add_row(
            escape(m.name),
            _num(m.before),
            _num(m.after),
            f"{m.stderr:.2g}",
            ("yes" if m.significant else "within 1 s.e.") if m.moved else "no",
            m.bound or "",
        )
    console.print(moves)
    for line in result.unidentified:
        console.print(f"[yellow]not fitted:[/] {escape(line)}")
    runs_table = Table(title="step time error per run", title_justify="left", show_edge=False)
    for col in ("run", "engine/hardware", "before", "after"):
        left = col in ("run", "engine/hardware")
        runs_table.add_column(col, justify="left" if left else "right", no_wrap=not left, overflow="fold")
    for o, b, a in zip(result.observations, result.before_pct, result.after_pct):
        runs_table.add_row(escape(o.id), escape(o.group), f"{b:+.1f}%", f"{a:+.1f}%")
    console.print(runs_table)
    if result.nothing_moved:
        console.print("[yellow]nothing moved:[/] no fitted parameter changed (by 0.1% or more): the profiles "
                      "already agree with these runs")  # fmt: skip
    wrote = escape(", ".join([*outputs.values(), *engines_written])) or "nothing (give -o and/or --engine-out to write)"
    use = using_written(list(outputs.values()), engines_written)
    console.print(
        f"median |step error| {result.median_before_pct:.1f}% -> {result.median_after_pct:.1f}% over "
        f"{len(result.observations)} runs; wrote {wrote}" + (f"\n{escape(use)}" if use else "")
    )
