"""How far to trust a prediction, in words: wide error bars where the engine has no runs on the GPU, what a
precision recipe's runs spend that its terms do not price, and a plan that fits but may not (its 80% interval of
memory passes the GPU): the lines estimate, memory and search's best plan print alike."""

from __future__ import annotations

from planner.cost.memory import MemoryReport
from planner.cost.uncertainty import Uncertainty
from planner.precision import recipe
from planner.render.console import escape
from planner.units import fmt_bytes


def trust_lines(engine: str, hardware: str, *, calibrated: bool, precision: str) -> list[str]:
    """What to hold an estimate's throughput to: wide error bars where the engine has no runs on this GPU, and
    what a precision recipe's runs spend that its terms do not price (precision.Recipe.unpriced)."""
    out = (
        []
        if calibrated
        else [f"[yellow]wide error bars:[/] no calibration runs of {escape(engine)} on {escape(hardware)}"]
    )
    r = recipe(precision)
    return out + ([f"[yellow]{precision}:[/] {r.unpriced}"] if r is not None and r.unpriced else [])


def may_not_fit_lines(u: Uncertainty | None, mem: MemoryReport, hint: str = "") -> list[str]:
    """Where a plan fits but the 80% interval of its memory passes the GPU: it may not fit."""
    if u is None or not u.may_not_fit(mem):
        return []
    return [
        f"[yellow]may not fit:[/] the 80% interval of its memory, {u.memory_text()}, passes the "
        f"{fmt_bytes(mem.capacity_bytes)} per GPU{hint}"
    ]
