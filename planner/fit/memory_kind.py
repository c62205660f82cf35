"""What a measured figure of a run counts, so that a prediction is compared with it like for like."""

from __future__ import annotations

import math

from planner.cost.memory import MemoryReport
from planner.hardware import HardwareProfile

# What a measured peak counts, where the run says (`measured.peak_memory_kind`, as ingest reads logs): torch's
# caching-allocator peaks. Without a kind, the whole device (nvidia-smi, a paper's figure).
MEMORY_KINDS = ("max_reserved", "max_allocated")


def comparable_peak_bytes(mem: MemoryReport, hw: HardwareProfile, kind: str | None) -> float:
    """The predicted peak as the measurement counts memory. torch's allocator peaks (torch.cuda.max_memory_reserved
    and max_memory_allocated, what Megatron's report_memory and torchtitan's metrics print) hold neither the CUDA
    context nor NCCL's buffers, which are allocated outside the caching allocator; max_memory_allocated holds no
    fragmentation either (the profile's `reserved` block prices each). Without a kind, the whole device."""
    if kind == "max_allocated":
        return mem.total_bytes - mem.peak.breakdown.reserved_bytes
    if kind == "max_reserved":
        return mem.total_bytes - hw.reserved.cuda_context_bytes - hw.reserved.comm_workspace_bytes
    return mem.total_bytes


def memory_log_error(predicted_bytes: float, measured_bytes: float) -> float:
    """log(predicted / measured) of a run's peak, both counted as the run counts it (comparable_peak_bytes): what
    the memory interval spreads (fit/intervals.py memory_base) and is checked against."""
    return math.log(predicted_bytes / measured_bytes)
