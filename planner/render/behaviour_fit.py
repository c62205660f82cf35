"""`planner calibrate --behaviour`: each engine's behaviour across GPUs, each GPU's deviation, the cross-validation
split by split with the 80% interval's coverage, and the interval model (a table and its JSON)."""

from __future__ import annotations

import math
import statistics
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from planner.fit.partial_pooling import NAMES
from planner.fit.pooled import BehaviourCalibration

UNITS = {"compute": "x", "host_step_s": "s", "host_microbatch_s": "s", "host_layer_s": "s"}


def _value(name: str, v: float) -> float:
    return math.exp(v) if name == "compute" else v


def _engines(cal: BehaviourCalibration) -> dict[str, Any]:
    fit = cal.fit
    out = {}
    for e in sorted(fit.engine_params):
        vals, errs = fit.engine_params[e], fit.engine_stderr[e]
        out[e] = {
            "runs": fit.runs[e],
            "gpus": sorted({h for (x, h) in fit.group_runs if x == e}),
            "params": {
                n: {"value": _value(n, vals[i]), "stderr": errs[i] * (_value(n, vals[i]) if n == "compute" else 1)}
                for i, n in enumerate(NAMES)
            },
        }
    out["(mean of the engines)"] = {
        "runs": 0,
        "gpus": [],
        "params": {n: {"value": _value(n, v), "stderr": None} for n, v in zip(NAMES, fit.mean_params)},
    }
    return out


def _folds(cal: BehaviourCalibration) -> dict[str, Any]:
    share = {(c.split, c.fold): c.share for c in cal.coverage}
    out = {}
    for split, folds in cal.folds.items():
        out[split] = {
            "median_abs_pct": statistics.median(f.median_abs_pct for f in folds) if folds else None,
            "coverage": share.get((split, "")),
            "folds": [
                {
                    "fold": f.fold,
                    "runs": f.runs,
                    "median_abs_pct": f.median_abs_pct,
                    "median_signed_pct": f.median_signed_pct,
                    "coverage": share.get((split, f.fold)),
                }
                for f in folds
            ],
        }
    return out


def behaviour_json(cal: BehaviourCalibration, written: list[str]) -> dict[str, Any]:
    fit = cal.fit
    return {
        "engines": _engines(cal),
        "deviations": {
            f"{e}/{h}": {
                "deviation": math.exp(d),
                "stderr": fit.deviation_stderr[(e, h)],
                "runs": fit.group_runs[(e, h)],
            }
            for (e, h), d in sorted(fit.deviations.items())
        },
        "at_bound": list(fit.at_bound),
        "cross_validation": _folds(cal),
        "interval": cal.interval.model_dump(),
        "runs": [
            {"id": o.id, "group": o.group, "year": o.year, "before_pct": b, "after_pct": a}
            for o, b, a in zip(cal.observations, cal.before_pct, cal.after_pct)
        ],
        "median_abs_pct": {
            "before": statistics.median(abs(x) for x in cal.before_pct),
            "after": statistics.median(abs(x) for x in cal.after_pct),
        },
        "engine_profiles_written": written,
    }


def print_behaviour(console: Console, cal: BehaviourCalibration, written: list[str]) -> None:
    engines = Table(title="engine behaviour, pooled over every GPU (± 1 s.e.)", title_justify="left", show_edge=False)
    for col in ("engine", "runs", *NAMES):
        engines.add_column(col, justify="left" if col == "engine" else "right")
    for e, doc in _engines(cal).items():
        cells = []
        for n in NAMES:
            p = doc["params"][n]
            err = "" if p["stderr"] is None else f" ±{p['stderr']:.2g}"
            cells.append(("0" if abs(p["value"]) < 1e-9 else f"{p['value']:.3g}") + err)
        engines.add_row(escape(e), str(doc["runs"]), *cells)
    console.print(engines)
    dev = Table(title="each GPU's own compute deviation (shrunk toward none)", title_justify="left", show_edge=False)
    for col in ("engine/GPU", "runs", "x pooled", "± 1 s.e."):
        dev.add_column(col, justify="left" if col == "engine/GPU" else "right")
    for (e, h), d in sorted(cal.fit.deviations.items()):
        dev.add_row(
            escape(f"{e}/{h}"),
            str(cal.fit.group_runs[(e, h)]),
            f"{math.exp(d):.3f}",
            f"{cal.fit.deviation_stderr[(e, h)]:.2g}",
        )
    console.print(dev)
    for line in cal.fit.at_bound:
        console.print(f"[yellow]bound:[/] {escape(line)}")
    _print_cross_validation(console, cal)
    iv = cal.interval
    parts = ", ".join(f"{k} {v:.3f}" for k, v in iv.widen.items())
    console.print(f"80% interval: exp(±{iv.z:.3f}·σ), σ² = {iv.base:.3f}² + widening² ({parts}); {escape(iv.source)}")
    console.print(
        f"in-sample tokens/s error: median |error| {statistics.median(abs(x) for x in cal.before_pct):.1f}% with the "
        f"profiles as they were -> {statistics.median(abs(x) for x in cal.after_pct):.1f}% over "
        f"{len(cal.observations)} runs; wrote {', '.join(written) or 'nothing (give --engine-out DIR)'}"
    )


def _print_cross_validation(console: Console, cal: BehaviourCalibration) -> None:
    table = Table(
        title="cross-validation: tokens/s per GPU of the runs left out", title_justify="left", show_edge=False
    )
    for col in ("split", "left out", "runs", "median |err|", "signed", "in 80%"):
        table.add_column(col, justify="left" if col in ("split", "left out") else "right")
    folds = _folds(cal)
    unsplit = [split for split, doc in folds.items() if not doc["folds"]]
    for split, doc in folds.items():
        if not doc["folds"]:
            continue
        shown = doc["folds"] if split != "run" else []
        for f in shown:
            table.add_row(
                split,
                escape(f["fold"]),
                str(f["runs"]),
                f"{f['median_abs_pct']:.1f}%",
                f"{f['median_signed_pct']:+.1f}%",
                _share(f["coverage"]),
            )
        total = sum(f["runs"] for f in doc["folds"])
        table.add_row(
            f"[bold]{split}[/]",
            "(median of folds)",
            str(total),
            f"{doc['median_abs_pct']:.1f}%",
            "",
            _share(doc["coverage"]),
        )
        table.add_section()
    console.print(table)
    if unsplit:
        console.print(f"not cross-validated by {', '.join(unsplit)}: the runs have one of each, nothing to leave out")


def _share(share: float | None) -> str:
    return "–" if share is None else f"{share:.0%}"
