"""`planner validate` and `planner calibrate`: predicted against measured, and the fitted parameters."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from planner.fit.calibrate import FitResult
from planner.fit.validate import RunResult, Validation
from planner.render.console import natural_width, rich_console, wrap_words

METRIC_NAMES = {"tokens_per_s_per_gpu": "tokens/s per GPU", "peak_memory_bytes": "peak memory", "step_s": "step time"}


def _pct(r: RunResult, key: str) -> str:
    e = r.error_pct.get(key)
    return "" if e is None else f"{e:+.1f}%"


def validation_json(v: Validation) -> dict[str, Any]:
    return {
        "runs": [
            {
                "id": r.id,
                "group": r.group,
                "family": r.family,
                "predicted": r.predicted,
                "measured": r.measured,
                "error": r.error_pct,
                "fits": r.fits,
                **({"uncertainty": r.uncertainty.as_dict()} if r.uncertainty else {}),
                **({"plausible": r.plausible} if r.plausible is not None else {}),
                **({"skipped": r.skipped} if r.skipped else {}),
            }
            for r in v.runs
        ],
        "summary": {**v.summary(), "groups": v.groups()},
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


def _validation_table(result: Validation, id_width: int | None = None) -> Table:
    """Predicted against measured, a row per run under a row naming its engine/hardware (whenever it changes):
    the numbers are never cut; run ids wrap at their hyphens to `id_width`."""
    table = Table(show_edge=False, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
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
        band = f" ±{r.uncertainty.tokens_per_s_rel:.0%}" if r.uncertainty else ""
        table.add_row(
            escape(wrap_words(r.id, id_width, indent="  ", breaks="-_")),
            f"{r.predicted['tokens_per_s_per_gpu']:,.1f}{band}" + ("" if r.plausible is not False else " ?"),
            f"{r.measured.get('tokens_per_s_per_gpu', float('nan')):,.1f}",
            _pct(r, "tokens_per_s_per_gpu"),
            f"{pm / 2**30:.1f}" + ("" if r.fits else " !"),
            f"{mm / 2**30:.1f}" if mm else "",
            _pct(r, "peak_memory_bytes"),
        )
    return table


def print_validation(console: Console, result: Validation) -> None:
    table = _validation_table(result)
    over = natural_width(console, table) - rich_console(console).width
    if over > 0:
        longest = max((len(r.id) for r in result.runs if not r.skipped), default=0)
        table = _validation_table(result, id_width=max(16, longest - over))
    console.print(table)
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
    if any(r.fits is False for r in result.runs):
        console.print(
            "[dim]! = predicted not to fit the profile's memory: the run used a larger-memory variant, or its stack "
            "held less than the engine profile's defaults (e.g. NeMo recipes reduce gradients in bf16: "
            "software.grad_dtype: param)[/]"
        )
    if any(r.plausible is False for r in result.runs):
        console.print("[dim]? = predicted MFU above the best published for the hardware (implausible)[/]")


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
    if any(result.hardware_values.values()):
        table = Table(
            title="hardware parameters (physics, within the profile's bounds)", title_justify="left", show_edge=False
        )
        for col in ("hardware", "parameter", "value", "± 1 s.e."):
            table.add_column(col, justify="left" if col in ("hardware", "parameter") else "right")
        for h, values in result.hardware_values.items():
            for n, v in values.items():
                table.add_row(h, n, f"{v:.4g}", f"{result.hardware_stderr[h].get(n, float('nan')):.2g}")
        console.print(table)
    for line in result.at_bound:
        console.print(f"[yellow]bound:[/] {escape(line)}")
    if result.groups:
        eng = Table(
            title="engine factors (what the physics leaves out, per engine and hardware)",
            title_justify="left",
            show_edge=False,
        )
        for col in ("engine/hardware", "compute x", "overhead s", "runs", "±tokens/s", "±memory"):
            eng.add_column(col, justify="left" if col == "engine/hardware" else "right")
        for g, gf in result.groups.items():
            f = gf.fitted
            eng.add_row(
                g,
                f"{f.compute:.3f}",
                f"{f.overhead_s:.3g}",
                str(f.runs),
                "" if f.tokens_per_s_rel is None else f"{f.tokens_per_s_rel:.1%}",
                "" if f.peak_memory_rel is None else f"{f.peak_memory_rel:.1%}",
            )
        console.print(eng)
    runs_table = Table(title="step time error per run", title_justify="left", show_edge=False)
    for col in ("run", "engine/hardware", "before", "after"):
        left = col in ("run", "engine/hardware")
        runs_table.add_column(col, justify="left" if left else "right", no_wrap=not left, overflow="fold")
    for o, b, a in zip(result.observations, result.before_pct, result.after_pct):
        runs_table.add_row(escape(o.id), escape(o.group), f"{b:+.1f}%", f"{a:+.1f}%")
    console.print(runs_table)
    wrote = ", ".join(outputs.values())
    console.print(
        f"median |error| {result.median_before_pct:.1f}% -> {result.median_after_pct:.1f}% over "
        f"{len(result.observations)} runs; wrote {wrote} (use with --hardware)"
        + (f" and {len(engines_written)} engine profiles (use with --engine PATH)" if engines_written else "")
    )
