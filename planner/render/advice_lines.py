"""Advice on GPU count and global batch (explore/advice.py), as lines under the search table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.cluster.fabric import cluster_of
from planner.explore.advice import Advice
from planner.hardware import HardwareProfile
from planner.render.console import escape

if TYPE_CHECKING:
    from rich.console import Console


def print_advice(console: Console, advice: list[Advice], *, probes: int = 0, probe_s: float = 0.0) -> None:
    """The advice, then what its probe searches cost: they run after the ranking, outside its header's time."""
    for a in advice:
        label = "chosen" if a.kind.startswith("chosen") else "advice"
        console.print(f"[yellow]{label}:[/] {escape(a.message)}")
    if probes:
        plural = "es" if probes > 1 else ""
        console.print(
            f"[dim]the advice ran {probes} search{plural} at other GPU counts and batches in {probe_s:.2f} s "
            "(--no-advice skips them)[/]"
        )


def cluster_line(hw: HardwareProfile) -> str | None:
    """The cluster a search or estimate was costed on, tier by tier (None: no cluster)."""
    cluster = cluster_of(hw)
    if cluster is None:
        return None
    tiers = ", ".join(
        f"{t.name} {t.gpus} GPUs {t.bandwidth_bytes_per_s / 1e9:g} GB/s" for t in cluster.tiers
    )  # per GPU, each way
    return f"cluster {cluster.name}: nvlink {hw.nvlink_domain} GPUs, {tiers} per GPU"


def print_cluster(console: Console, hw: HardwareProfile) -> None:
    line = cluster_line(hw)
    if line is not None:
        console.print(f"[dim]{escape(line)}[/]")
