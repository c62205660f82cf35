"""`planner ingest`: one row per run read from a log, then what each run had to assume."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from planner.io.logs import IngestedRun
from planner.units import fmt_bytes, fmt_seconds

PLAN_LABELS = (("dp", "dp"), ("tp", "tp"), ("pp", "pp"), ("cp", "cp"), ("ep", "ep"), ("zero", "zero"),
               ("micro_batch", "mb"), ("global_batch", "gb"), ("seq_len", "s"))  # fmt: skip


def ingest_json(runs: list[IngestedRun]) -> dict[str, Any]:
    """The document of `planner ingest --json` (DESIGN.md)."""
    return {"runs": [r.as_json() for r in runs]}


def plan_text(plan: dict[str, Any]) -> str:
    """ "dp8 tp1 pp1 cp1 ep1 zero1 mb1 gb512 s1024 bf16 rc=none", with ? for what the log does not say."""
    parts = [f"{label}{'?' if plan.get(key) is None else plan[key]}" for key, label in PLAN_LABELS]
    if plan.get("vpp") and plan["vpp"] > 1:
        parts.insert(3, f"vpp{plan['vpp']}")
    if plan.get("sp"):
        parts.append("sp")
    parts.append(plan.get("precision") or "precision?")
    parts.append(f"rc={plan.get('recompute') or '?'}")
    return " ".join(parts)


def _steps(r: IngestedRun) -> str:
    left = sum(r.steps_left_out.values())
    return f"{r.steps_used} / {left}"


def _steps_note(r: IngestedRun) -> str:
    span = f" (iterations {r.iterations[0]}-{r.iterations[1]})" if r.iterations else ""
    left = ", ".join(f"{n} {why}" for why, n in r.steps_left_out.items())
    return f"{r.steps_used} steps used{span}" + (f"; left out: {left}" if left else "")


def _memory(m: dict[str, Any]) -> str:
    if not m.get("peak_memory_bytes"):
        return ""
    kinds = {"max_reserved": "reserved", "max_allocated": "allocated", None: "device"}  # None: the whole device's
    kind = kinds.get(m.get("peak_memory_kind"), "")
    return f"{fmt_bytes(m['peak_memory_bytes'])} {kind}".strip()


def _where(r: IngestedRun) -> str:
    """The GPUs the run is priced on, by the profile's catalog name (`--hardware h100` is h100-sxm: said)."""
    return f"{r.gpus if r.gpus else '?'} x {r.hardware or 'GPU?'}"


def print_runs(console: Console, runs: list[IngestedRun], written: str | None) -> None:
    """One line per run (what was measured), then per run its plan, the steps used and what it assumed."""
    table = Table(show_edge=False, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in ("run", "engine", "steps\nused / out", "\nstep", "tokens/s\nper GPU", "peak\nmemory"):
        words = col in ("run", "engine", "peak\nmemory")  # numbers are never wrapped or cut
        table.add_column(col, justify="left" if words else "right", no_wrap=not words, overflow="fold")
    for r in runs:
        m = r.measured
        table.add_row(
            escape(r.id),
            r.engine,
            escape(_steps(r)),
            fmt_seconds(m["step_s"]) if m.get("step_s") else "",
            f"{m['tokens_per_s_per_gpu']:,.1f}" if m.get("tokens_per_s_per_gpu") else "",
            escape(_memory(m)),
        )
    console.print(table)
    for r in runs:
        console.print(f"{escape(r.id)}: {escape(_where(r))}, plan {escape(plan_text(r.plan))}")
        console.print(f"[dim]{escape(r.id)}: {escape(_steps_note(r))}[/]")
        for line in r.derived:
            console.print(f"[dim]{escape(r.id)}: {escape(line)}[/]")
        for line in r.assumed:
            console.print(f"{escape(r.id)}: [yellow]assumed[/] {escape(line)}")
    if written:
        console.print(f"wrote {len(runs)} run{'s' if len(runs) != 1 else ''} to {escape(written)}", soft_wrap=True)
