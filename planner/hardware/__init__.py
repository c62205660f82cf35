"""Hardware profiles (hardware_profiles/NAME.yaml): what one GPU in one node design does, in SI units.

Physics first: every number in a profile is either a vendor peak or a measurement, with its source in a
YAML comment. The efficiency block holds what the hardware achieves (GEMM efficiency by size, attention
kernels by sequence length, HBM and NCCL bandwidth fractions, per-call latency); `planner calibrate` may
move those numbers only within the bounds the profile states (``Efficiency.bounds``), and reports when the
data push against a bound. What a training stack adds or loses on top of the hardware lives in its engine
profile (engine.py), not here.
"""

from planner.hardware.efficiency import AttentionKernel, Efficiency, LinkTier, MatmulPoint
from planner.hardware.gpu import (
    MIN_CLOCK_FRACTION,
    PEAK_ORDER,
    PEAK_PRECISIONS,
    GPUSpec,
    PeakPrecision,
    clock_fraction,
)
from planner.hardware.system import HardwareProfile, Plausibility, ReservedMemory

__all__ = [
    "MIN_CLOCK_FRACTION",
    "PEAK_ORDER",
    "PEAK_PRECISIONS",
    "AttentionKernel",
    "Efficiency",
    "GPUSpec",
    "HardwareProfile",
    "LinkTier",
    "MatmulPoint",
    "PeakPrecision",
    "Plausibility",
    "ReservedMemory",
    "clock_fraction",
]
