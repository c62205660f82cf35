"""How often GPUs interrupt a synchronous training job, with the measurement each rate comes from.

Llama 3 405B's pre-training saw 419 unexpected interruptions in a 54-day snapshot on 16,384 H100s (Dubey et al.
2024, "The Llama 3 Herd of Models", §3.3.4 and Table 5; 78% attributed to hardware), one per
54 · 24 · 16384 / 419 = 50,677 GPU-hours: the per-GPU MTBF failures are priced at when nothing else is given (the
goodput objective, a cluster file without its own). A cluster file may state its own rate and restart time
(`failures:` in cluster_profiles/); `priced_options` is the one place that fills them in, for estimate, search and
scale alike. The checkpoint interval and goodput that follow are Young's / Daly's (cost/timing.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from planner.cluster.fabric import RESTART_S, cluster_of
from planner.hardware import HardwareProfile

LLAMA3_INTERRUPTIONS, LLAMA3_DAYS, LLAMA3_GPUS = 419, 54, 16384
LLAMA3_GPU_MTBF_HOURS = LLAMA3_DAYS * 24 * LLAMA3_GPUS / LLAMA3_INTERRUPTIONS
LLAMA3_SOURCE = "Llama 3 405B: 419 unexpected interruptions in 54 days on 16,384 H100s (Dubey et al. 2024, 3.3.4)"
# The fastest storage a published training job checkpoints to: Meta's Tectonic, 7 TB/s at its peak (2 TB/s sustained)
# for Llama 3's 16,384 H100s (Dubey et al. 2024, 3.3.1). A job on no stated cluster writes at the GPU profile's
# per-node share times its nodes, at most this: the share alone grew without bound (98,304 B200s wrote 14 TB in
# 0.11 s, audit). A bound, not an estimate: a sourced share below it (the DGX SuperPOD's) is left as it is.
PUBLISHED_STORAGE_BYTES_PER_S = 7.0e12


def per_gpu_mtbf_hours(hours: float, per: str | None, gpus_per_node: int) -> float:
    """A failure rate as GPU-hours between interruptions: one given per node (--mtbf-per node) of n GPUs failing
    every h hours is each GPU failing every n·h GPU-hours."""
    return hours * (gpus_per_node if per == "node" else 1)


def restart_seconds(minutes: float | None) -> float:
    """What one failure costs besides the lost work: the minutes given, else RESTART_S (cluster/fabric.py)."""
    return RESTART_S if minutes is None else minutes * 60.0


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


def defaulted_rate(hw: HardwareProfile, options: dict[str, Any]) -> FailureRate | None:
    """The failure rate to price with where --mtbf-hours gives none: on a cluster, or for the goodput objective."""
    if options.get("mtbf_hours") is None and (cluster_of(hw) is not None or options.get("objective") == "goodput"):
        return failure_rate(hw)  # the cluster's (or Llama 3's) rate, with its source
    return None


def priced_options(hw: HardwareProfile, options: dict[str, Any], gpus: int | None = None) -> dict[str, Any]:
    """The run options (mtbf_hours, mtbf_per, checkpoint_bandwidth, restart_minutes) with what the defaults and a
    cluster file state where the options do not: the failure rate (defaulted_rate), the restart time, and for a
    job of `gpus` the cluster storage's checkpoint bandwidth."""
    out = dict(options)
    rate = defaulted_rate(hw, out)
    if rate is not None:
        out.update(mtbf_hours=rate.gpu_mtbf_hours, mtbf_per="gpu")
    if gpus and out.get("checkpoint_bandwidth") is None:
        out["checkpoint_bandwidth"] = checkpoint_bandwidth(hw, gpus)
    cluster = cluster_of(hw)
    stated = cluster.failures.restart_minutes if cluster is not None and cluster.failures is not None else None
    if stated is not None and out.get("restart_minutes") is None:
        out["restart_minutes"] = stated
    return out


def unstated_storage_bytes_per_s(hw: HardwareProfile, nodes: int) -> float:
    """What a job of `nodes` nodes on no stated cluster storage checkpoints at: the GPU profile's per-node share
    times the nodes, at most the fastest published training storage."""
    return min(hw.checkpoint_write_bytes_per_s * nodes, PUBLISHED_STORAGE_BYTES_PER_S)


def checkpoint_bandwidth(hw: HardwareProfile, gpus: int) -> float | None:
    """What a job of `gpus` GPUs writes checkpoints at on a cluster that states its storage: the GPU profile's
    per-node share times the job's nodes, capped by the cluster's storage (None: no cluster storage stated, the
    per-node share alone, as cost/estimate.py has it)."""
    cluster = cluster_of(hw)
    if cluster is None or cluster.checkpoint_write_bytes_per_s is None:
        return None
    nodes = max(1, -(-gpus // hw.gpus_per_node))
    return min(hw.checkpoint_write_bytes_per_s * nodes, cluster.checkpoint_write_bytes_per_s)


def per_node_note(hw: HardwareProfile, nodes: int, bandwidth: float, *, given: bool) -> str:
    """Where a job's checkpoint bandwidth comes from when it is the GPU profile's per-node share times the nodes
    (no --checkpoint-bandwidth, and a cluster's storage, where stated, not binding) or that share capped at the
    fastest published storage (`given` False: the job's rate is unstated_storage_bytes_per_s), said beside the
    write time; "" where the bandwidth is given or the cluster's cap."""
    share = f"{hw.checkpoint_write_bytes_per_s / 1e9:.3g} GB/s per node ({hw.name}) x {nodes:,} nodes"
    if not given and bandwidth < hw.checkpoint_write_bytes_per_s * nodes:
        return (
            f"{share} capped at {PUBLISHED_STORAGE_BYTES_PER_S / 1e12:.3g} TB/s, the fastest published training "
            "storage (Llama 3's, at its peak): --checkpoint-bandwidth or a cluster's storage sets the job's"
        )
    if not math.isclose(bandwidth, hw.checkpoint_write_bytes_per_s * nodes):
        return ""
    cluster = cluster_of(hw)
    cap = cluster.checkpoint_write_bytes_per_s if cluster is not None else None
    said = f", below the cluster storage's {cap / 1e12:.3g} TB/s" if cap else ", no cluster storage stated"
    return f"{share}{said}: --checkpoint-bandwidth sets the job's"
