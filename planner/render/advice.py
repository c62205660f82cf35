"""Advice on GPU count and global batch (explore/advice.py), as lines under the search table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.explore.advice import Advice
from planner.render.console import escape

if TYPE_CHECKING:
    from rich.console import Console


def print_advice(console: Console, advice: list[Advice]) -> None:
    for a in advice:
        label = "chosen" if a.kind.startswith("chosen") else "advice"
        console.print(f"[yellow]{label}:[/] {escape(a.message)}")
