"""How often GPUs interrupt a synchronous training job, with the measurement each rate comes from.

Llama 3 405B's pre-training saw 419 unexpected interruptions in a 54-day snapshot on 16,384 H100s (Dubey et al.
2024, "The Llama 3 Herd of Models", §3.3.4 and Table 5; 78% attributed to hardware), one per
54 · 24 · 16384 / 419 = 50,677 GPU-hours: the per-GPU MTBF the goodput objective uses when nothing else is given.
A cluster file may state its own (`failures:` in cluster_profiles/). The checkpoint interval that follows is
Young's / Daly's (cost/timing.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from planner.cluster.fabric import cluster_of
from planner.hardware import HardwareProfile

LLAMA3_INTERRUPTIONS, LLAMA3_DAYS, LLAMA3_GPUS = 419, 54, 16384
LLAMA3_GPU_MTBF_HOURS = LLAMA3_DAYS * 24 * LLAMA3_GPUS / LLAMA3_INTERRUPTIONS
LLAMA3_SOURCE = "Llama 3 405B: 419 unexpected interruptions in 54 days on 16,384 H100s (Dubey et al. 2024, 3.3.4)"


@dataclass(frozen=True)
class FailureRate:
    gpu_mtbf_hours: float
    source: str


def failure_rate(hw: HardwareProfile) -> FailureRate:
    """The cluster's own rate when it states one, else Llama 3's."""
    cluster = cluster_of(hw)
    if cluster is not None and cluster.failures is not None:
        return FailureRate(cluster.failures.gpu_mtbf_hours, cluster.failures.source)
    return FailureRate(LLAMA3_GPU_MTBF_HOURS, LLAMA3_SOURCE)


def with_cluster_restart(hw: HardwareProfile, options: dict[str, Any]) -> dict[str, Any]:
    """The run options with the restart time the cluster file states, where --restart-minutes does not say one
    (failures are the cluster's whatever rate prices them)."""
    cluster = cluster_of(hw)
    stated = cluster.failures.restart_minutes if cluster is not None and cluster.failures is not None else None
    if stated is None or options.get("restart_minutes") is not None:
        return options
    return {**options, "restart_minutes": stated}


def checkpoint_bandwidth(hw: HardwareProfile, gpus: int) -> float | None:
    """What a job of `gpus` GPUs writes checkpoints at on a cluster that states its storage: the GPU profile's
    per-node share times the job's nodes, capped by the cluster's storage (None: no cluster storage stated, the
    per-node share alone, as cost/estimate.py has it)."""
    cluster = cluster_of(hw)
    if cluster is None or cluster.checkpoint_write_bytes_per_s is None:
        return None
    nodes = max(1, -(-gpus // hw.gpus_per_node))
    return min(hw.checkpoint_write_bytes_per_s * nodes, cluster.checkpoint_write_bytes_per_s)
