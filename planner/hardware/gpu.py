"""One GPU of a hardware profile: its memory, its dense peaks per precision (with fp4) and its power limit, and
the sustained clock under a power cap (`clock_fraction`)."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, field_validator, model_validator

from planner.precision import Architecture
from planner.specs import Frozen

# The precisions a GPU states a dense peak for: the plan precisions (specs.PRECISIONS) and fp4 (NVFP4 / MXFP4
# on Blackwell and CDNA 4), which no plan runs in yet.
PeakPrecision = Literal["fp32", "bf16", "fp16", "fp8", "fp4"]
PEAK_PRECISIONS: tuple[PeakPrecision, ...] = ("fp32", "bf16", "fp16", "fp8", "fp4")
# (wider, narrower): the same tensor cores never run a narrower format slower (every vendor datasheet: fp16 and
# bf16 above fp32, fp8 twice bf16, fp4 at least fp8); a profile that breaks it has a typo or a sparse figure.
PEAK_ORDER: tuple[tuple[PeakPrecision, PeakPrecision], ...] = (
    ("fp32", "bf16"),
    ("fp32", "fp16"),
    ("bf16", "fp8"),
    ("fp16", "fp8"),
    ("fp8", "fp4"),
)


# The modelled clock under a cap never falls below half the full one: the law below is extrapolated without any
# measurement there (the lowest limits nvidia-smi accepts, 200 W on H100 and on B200 per the DGX user guides, give
# 0.59 and 0.41 by it).
MIN_CLOCK_FRACTION = 0.5


def clock_fraction(power_w: float, *, limit_w: float, idle_w: float) -> float:
    """The sustained clock under a board power cap, as a fraction of the clock at the full limit.

    Dynamic CMOS power is C·V²·f, and DVFS lowers the voltage with the clock (V ∝ f), so a board draws
    P ≈ P_idle + c·f³ (the idle floor is the power with the clocks up and no work); the clock a cap allows is
    f / f_full = ((P_cap − P_idle) / (P_limit − P_idle))^(1/3), bounded to [MIN_CLOCK_FRACTION, 1]. Tensor-core
    peaks are units × clock, so they scale by the same fraction; HBM and links have their own clocks. No public
    power-capping measurement gives a GEMM curve for these GPUs; this is the physics with the cited idle floor
    and limit. Vendor parts built below the full limit fall lower than the law (B100 at 700 W: 1.75 PFLOP/s
    dense BF16, 0.78 of the 1,000 W B200; the law gives 0.88), so a capped profile is the optimistic end.
    """
    if power_w >= limit_w:
        return 1.0
    dynamic = max(0.0, (power_w - idle_w) / (limit_w - idle_w))
    return max(MIN_CLOCK_FRACTION, dynamic ** (1.0 / 3.0))


# Dense peaks a profile may state, FLOP/s: below a megaFLOP/s no device trains anything, and 1e17 is twenty times
# the fastest dense peak shipping (B200 fp8, 4.5e15, hardware_profiles/b200.yaml and its datasheet).
MIN_PEAK_FLOPS, MAX_PEAK_FLOPS = 1e6, 1e17
# fp8 tensor cores run twice the 16-bit rate on every generation that has them (dense, datasheets as cited in
# hardware_profiles/: H100 SXM 1979 vs 989 TFLOP/s, MI300X 2615 vs 1307, B200 4.5 vs 2.25 PFLOP/s); 4x leaves
# room for what comes next. A device without fp8 units leaves fp8 out, or (bench-hardware) states its fp16 figure.
FP8_MAX_SPEEDUP = 4.0


class GPUSpec(Frozen):
    name: str
    hbm_bytes: float = Field(
        gt=0, allow_inf_nan=False, description="usable device memory (what the framework can allocate)"
    )
    hbm_bandwidth_bytes_per_s: float = Field(gt=0, allow_inf_nan=False)
    peak_flops: dict[PeakPrecision, float] = Field(
        description="dense peak FLOP/s per precision (no sparsity); a precision the GPU has no tensor cores for "
        "is left out (fp8 before Hopper, bf16 before Ampere, fp4 before Blackwell / CDNA 4)"
    )
    peak_flops_source: Literal["datasheet", "measured"] = Field(
        "datasheet",
        description="datasheet: vendor peaks, which must not fall with a narrower precision; measured: the best "
        "GEMM rate bench-hardware timed per precision (a CPU may run bf16 slower than fp32), not checked for order",
    )
    power_limit_w: float | None = Field(
        None, gt=0, allow_inf_nan=False, description="the board power limit (TDP) the peak_flops hold at"
    )
    architecture: Architecture | None = Field(
        None,
        description="the GPU generation the quantization libraries check before running a recipe (NVIDIA compute "
        "capability: ampere sm80, ada sm89, hopper sm90, blackwell sm100/103; AMD: cdna3 gfx942, cdna4 gfx950); "
        "null: unknown, and no named precision recipe runs on it",
    )
    host_bandwidth_bytes_per_s: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description="per-GPU bandwidth to host memory, each way (PCIe, or NVLink-C2C on Grace boards): what "
        "activation and optimizer offload move over; null: unknown, and nothing is offloaded",
    )
    idle_power_w: float | None = Field(
        None,
        ge=0,
        allow_inf_nan=False,
        description="the board's power with its clocks up and no work (the floor of `clock_fraction`'s law)",
    )
    min_power_limit_w: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description="the lowest power cap the board accepts (nvidia-smi's AllowableMin); null: not known, and a cap is "
        "only bounded by the idle power",
    )
    sm_count: int | None = Field(
        None,
        gt=0,
        description="streaming multiprocessors (compute units) the GEMMs spread over; what communication kernels "
        "that hold SMs (DeepEP) take from compute (cost/moe.py `comm_sm_slowdown_s`); null: unknown, nothing taken",
    )

    @field_validator("peak_flops", mode="before")
    @classmethod
    def _no_bools(cls, value: object) -> object:
        # YAML's true/false would pass as 1.0/0.0 FLOP/s; numbers written as strings ("989.4e12", which YAML 1.1
        # reads as a string) stay accepted, as the catalog writes them.
        if isinstance(value, dict) and (bad := {p: v for p, v in value.items() if isinstance(v, bool)}):
            raise ValueError(f"peak_flops must be numbers in FLOP/s, got {bad}")
        return value

    @model_validator(mode="after")
    def _check(self) -> GPUSpec:
        peaks = self.peak_flops
        bad = {p: v for p, v in peaks.items() if not (math.isfinite(v) and MIN_PEAK_FLOPS <= v <= MAX_PEAK_FLOPS)}
        if bad:
            raise ValueError(
                f"peak_flops must be finite numbers from {MIN_PEAK_FLOPS:g} to {MAX_PEAK_FLOPS:g} FLOP/s, got {bad}"
            )
        if "fp32" not in peaks:
            raise ValueError(
                f"peak_flops must give fp32 (and the precisions the GPU supports, of {list(PEAK_PRECISIONS)})"
            )
        if self.peak_flops_source == "datasheet":
            for wide_p, narrow_p in PEAK_ORDER:
                lo, hi = peaks.get(wide_p), peaks.get(narrow_p)
                if lo is not None and hi is not None and hi < lo:
                    raise ValueError(
                        f"peak_flops.{narrow_p} = {hi:.6g} is below peak_flops.{wide_p} = {lo:.6g}; a narrower "
                        f"precision is never slower on a datasheet (give peak_flops_source: measured for measured "
                        f"rates)"
                    )
        if "fp8" in peaks:
            wide = [peaks[p] for p in ("bf16", "fp16") if p in peaks] or [peaks["fp32"]]
            low, high = min(wide), FP8_MAX_SPEEDUP * max(wide)
            if not low <= peaks["fp8"] <= high:
                raise ValueError(
                    f"peak_flops.fp8={peaks['fp8']:g} must be from {low:g} (the slower 16-bit peak: fp8 can always "
                    f"be run widened to it) to {high:g} ({FP8_MAX_SPEEDUP:g}x the faster one) FLOP/s"
                )
        floor = self.min_power_limit_w
        if floor is not None and (self.power_limit_w is None or floor > self.power_limit_w):
            raise ValueError(
                f"min_power_limit_w = {floor:g} needs a power_limit_w at or above it, got {self.power_limit_w}"
            )
        if self.idle_power_w is not None and (self.power_limit_w is None or self.idle_power_w >= self.power_limit_w):
            raise ValueError(
                f"idle_power_w = {self.idle_power_w:g} needs a power_limit_w above it, got {self.power_limit_w}"
            )
        return self
