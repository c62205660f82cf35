"""`planner validate`: predicted against measured, run by run and by engine/hardware group."""

from __future__ import annotations

import math
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from planner.fit.memory_kind import memory_log_error
from planner.fit.validate import RunResult, Validation
from planner.render.console import natural_width, rich_console, wrap_words
from planner.units import fmt_range

METRIC_NAMES = {"tokens_per_s_per_gpu": "tokens/s per GPU", "peak_memory_bytes": "peak memory", "step_s": "step time"}


def _pct(r: RunResult, key: str) -> str:
    e = r.error_pct.get(key)
    return "" if e is None else f"{e:+.1f}%"


def validation_json(v: Validation, calibrated: Validation | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "runs": [
            {
                "id": r.id,
                "group": r.group,
                "family": r.family,
                "predicted": _predicted(r),
                "measured": _measured(r),
                "error": r.error_pct,
                "fits": r.fits,
                **({"skipped": r.skipped} if r.skipped else {}),
                **({"calibrated": _calibrated_run(c)} if c is not None else {}),
            }
            for r, c in zip(v.runs, calibrated.runs if calibrated else [None] * len(v.runs))
        ],
        # {metric: {median_abs_pct, max_abs_pct, n}} (DESIGN.md); the groups beside it, and kept inside it, where
        # earlier versions put them (a public field is never removed)
        "summary": {**v.summary(), "groups": v.groups()},
        "groups": v.groups(),
        "interval_coverage": interval_coverage(v),  # tokens/s per GPU inside its 80% interval, as the text says
    }
    if calibrated is not None:
        doc["calibrated_summary"] = {**calibrated.summary(), "groups": calibrated.groups()}
        doc["calibrated_groups"] = calibrated.groups()
        doc["calibrated_interval_coverage"] = interval_coverage(calibrated)
    return doc


def _predicted(r: RunResult) -> dict[str, Any]:
    """The predicted figures with their trust, as estimate and each search plan carry it (DESIGN.md: validate's
    `predicted` holds `uncertainty` and `plausibility`)."""
    return {
        **r.predicted,
        **({"uncertainty": r.uncertainty.as_dict()} if r.uncertainty else {}),
        **({"plausibility": r.plausibility.as_dict()} if r.plausibility else {}),
    }


def _measured(r: RunResult) -> dict[str, Any]:
    """The measured figures, and what the peak counts where one is stated (as ingest and the runs file say it)."""
    kind = {"peak_memory_kind": r.memory_kind} if "peak_memory_bytes" in r.measured else {}
    return {**r.measured, **kind}


def _calibrated_run(r: RunResult) -> dict[str, Any]:
    return {
        "predicted": _predicted(r),
        "error": r.error_pct,
        "group": r.group,
        **({"skipped": r.skipped} if r.skipped else {}),
    }


VALIDATION_COLUMNS = (
    "engine/hardware\n  run",
    "tokens/s/GPU\npred",
    "\nmeas",
    "\nerr",
    "peak GiB\npred",
    "\nmeas",
    "\nerr",
)
VALIDATION_CAPTION = "tokens/s/GPU pred: the prediction and its 80% interval"


def _validation_table(result: Validation, id_width: int | None = None) -> Table:
    """Predicted against measured, a row per run under a row naming its engine/hardware (whenever it changes):
    the numbers are never cut; run ids wrap at their hyphens to `id_width`."""
    table = Table(show_edge=False, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    table.caption = VALIDATION_CAPTION
    for col in VALIDATION_COLUMNS:
        left = col.endswith("run")
        table.add_column(col, justify="left" if left else "right", no_wrap=not left, overflow="fold")
    group = None
    for r in result.runs:
        if r.skipped:
            continue
        if r.group != group:
            group = r.group
            table.add_row(f"[bold]{escape(group)}[/]")
        pm, mm = r.predicted["peak_memory_bytes"], r.measured.get("peak_memory_bytes")
        pred, meas = r.predicted["tokens_per_s_per_gpu"], r.measured.get("tokens_per_s_per_gpu")
        table.add_row(
            escape(wrap_words(r.id, id_width, indent="  ", breaks="-_")),
            (f"{pred:,.0f}" if pred >= 1000 else f"{pred:,.1f}")
            + _per_gpu_range(r)
            + ("" if r.plausible is not False else " ?"),
            f"{meas:,.1f}" if meas is not None else "",  # not measured: blank, as the peak's
            _pct(r, "tokens_per_s_per_gpu"),
            f"{pm / 2**30:.1f}" + ("" if r.fits else " !"),
            f"{mm / 2**30:.1f}" if mm else "",
            _pct(r, "peak_memory_bytes"),
        )
    return table


def print_validation(
    console: Console, result: Validation, calibrated: Validation | None = None, folder: str | None = None
) -> None:
    if calibrated is not None:
        _print_side_by_side(console, result, calibrated, folder or "calibrated")
        return
    table = _validation_table(result)
    over = natural_width(console, table) - rich_console(console).width
    if over > 0:
        longest = max((len(r.id) for r in result.runs if not r.skipped), default=0)
        table = _validation_table(result, id_width=max(16, longest - over))
    console.print(table)
    _print_footer(console, result)


def _print_footer(console: Console, result: Validation) -> None:
    for r in result.runs:
        if r.skipped:
            console.print(f"[yellow]not evaluated[/] {escape(r.id)}: {escape(r.skipped)}")
    groups = result.groups()
    if groups:
        gt = Table(title="tokens/s per GPU by engine and hardware", title_justify="left", show_edge=False)
        for col in ("engine/hardware", "runs", "median signed", "median |error|"):
            gt.add_column(col, justify="left" if col == "engine/hardware" else "right")
        for g, s in groups.items():
            gt.add_row(escape(g), str(s["n"]), f"{s['median_signed_pct']:+.1f}%", f"{s['median_abs_pct']:.1f}%")
        console.print(gt)
    for metric, s in result.summary().items():
        if metric in METRIC_NAMES:
            console.print(
                f"{METRIC_NAMES[metric]}: median |error| {s['median_abs_pct']:.1f}%, max "
                f"{s['max_abs_pct']:.1f}% over {s['n']} runs"
            )
    if cover := interval_coverage(result):
        n, of = cover["inside"], cover["runs"]
        console.print(f"tokens/s per GPU inside its 80% interval: {n} of {of} runs ({n / of:.0%})")
    if any(r.fits is False for r in result.runs):
        console.print(
            "[dim]! = predicted not to fit the profile's memory: the run used a larger-memory variant, or its stack "
            "held less than the engine profile's defaults (e.g. NeMo recipes reduce gradients in bf16: "
            "software.grad_dtype: param)[/]"
        )
    if any(r.plausible is False for r in result.runs):
        console.print("[dim]? = predicted MFU above the best published for the hardware (implausible)[/]")


def _per_gpu_range(r: RunResult) -> str:
    """' 47.0–61.2k': the run's 80% interval per GPU (the interval is the whole job's: scaled alike)."""
    u = r.uncertainty
    if u is None or u.tokens_per_s_interval is None:
        return ""
    per_gpu = r.predicted["tokens_per_s_per_gpu"] / r.predicted["tokens_per_s"]
    lo, hi = u.tokens_per_s_interval
    return f" {fmt_range(lo * per_gpu, hi * per_gpu)}"


def _has(r: RunResult) -> bool:
    return "tokens_per_s_per_gpu" in r.measured


def interval_coverage(result: Validation) -> dict[str, float] | None:
    """How many of the runs with a measured rate and an interval hold the rate inside it (`inside` of `runs`,
    `share`): the text's footer and `--json`'s `interval_coverage` (None: no such run)."""
    with_one = [r for r in result.runs if r.uncertainty and r.uncertainty.tokens_per_s_interval and _has(r)]
    if not with_one:
        return None
    n = sum(inside_interval(r) for r in with_one)
    return {"inside": n, "runs": len(with_one), "share": n / len(with_one)}


def inside_interval(r: RunResult) -> bool:
    """Whether the measured tokens/s per GPU lies in the run's 80% interval (scaled from the whole job's)."""
    assert r.uncertainty is not None and r.uncertainty.tokens_per_s_interval is not None
    lo, hi = r.uncertainty.tokens_per_s_interval
    per_gpu = r.predicted["tokens_per_s_per_gpu"] / r.predicted["tokens_per_s"]
    return lo * per_gpu <= r.measured["tokens_per_s_per_gpu"] <= hi * per_gpu


def run_memory_log_error(r: RunResult) -> float:
    """fit/memory_kind.py memory_log_error of the run's peak memory, as validate counts it."""
    return memory_log_error(r.predicted["peak_memory_bytes"], r.measured["peak_memory_bytes"])


def inside_memory_interval(r: RunResult) -> bool:
    """Whether the measured peak memory lies in the run's 80% memory interval: within its log half-width
    (log(1 + peak_memory_rel), cost/uncertainty.py) of the prediction as the run counts its peak."""
    assert r.uncertainty is not None
    return abs(run_memory_log_error(r)) <= math.log1p(r.uncertainty.peak_memory_rel)


def _print_side_by_side(console: Console, shipped: Validation, calibrated: Validation, folder: str) -> None:
    table = Table(
        title=f"tokens/s per GPU: shipped profiles vs {escape(folder)}", title_justify="left", show_edge=False
    )
    for col in ("run", "measured", "shipped", "err", "calibrated", "err"):
        table.add_column(col, justify="left" if col == "run" else "right")
    for s, c in zip(shipped.runs, calibrated.runs):
        if s.skipped and c.skipped:
            continue
        meas = s.measured.get("tokens_per_s_per_gpu")
        table.add_row(
            escape(s.id),
            f"{meas:,.1f}" if meas else "",
            "" if s.skipped else f"{s.predicted['tokens_per_s_per_gpu']:,.1f}",
            _pct(s, "tokens_per_s_per_gpu"),
            "" if c.skipped else f"{c.predicted['tokens_per_s_per_gpu']:,.1f}",
            _pct(c, "tokens_per_s_per_gpu"),
        )
    console.print(table)
    for name, v in (("shipped", shipped), ("calibrated", calibrated)):
        summary = v.summary().get("tokens_per_s_per_gpu")
        if summary:
            console.print(
                f"{name}: tokens/s per GPU median |error| {summary['median_abs_pct']:.1f}%, max "
                f"{summary['max_abs_pct']:.1f}% over {summary['n']} runs"
            )
    for r in calibrated.runs:
        if r.skipped:
            console.print(f"[yellow]not evaluated[/] {escape(r.id)}: {escape(r.skipped)}")
