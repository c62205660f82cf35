"""Hardware profiles (hardware_profiles/NAME.yaml): what one GPU in one node design does, in SI units.

Physics first: every number in a profile is either a vendor peak or a measurement, with its source in a
YAML comment. The efficiency block holds what the hardware achieves (GEMM efficiency by size, attention
kernels by sequence length, HBM and NCCL bandwidth fractions, per-call latency); `planner calibrate` may
move those numbers only within the bounds the profile states (``Efficiency.bounds``), and reports when the
data push against a bound. What a training stack adds or loses on top of the hardware lives in its engine
profile (engine.py), not here.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from planner.errors import PlannerError
from planner.precision import Architecture, gemm_format
from planner.specs import Frozen, Precision

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
# No public NVFP4 GEMM size sweep exists: an fp4 GEMM of f FLOPs is read off the fp8 curve at f·FP4_TABLE_FLOPS,
# the FLOPs of an fp8 GEMM as long at the fp8 peak (the profiles derive their fp8 curves from the bf16 one the same
# way, "the same curve at twice the FLOPs"). 0.5 = the fp8/fp4 dense peak ratio of B200, GB200, MI350X and MI355X
# (hardware_profiles/); on B300 and GB300 (1/2.9 and 1/3) the exact reading sits lower on the curve, so 0.5 is
# optimistic there.
FP4_TABLE_FLOPS = 0.5


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
        if self.idle_power_w is not None and (self.power_limit_w is None or self.idle_power_w >= self.power_limit_w):
            raise ValueError(
                f"idle_power_w = {self.idle_power_w:g} needs a power_limit_w above it, got {self.power_limit_w}"
            )
        return self


class LinkTier(Frozen):
    """One tier of the network, seen from one GPU."""

    bandwidth_bytes_per_s: float = Field(gt=0, allow_inf_nan=False, description="per-GPU unidirectional bandwidth")
    latency_s: float = Field(ge=0, allow_inf_nan=False, description="per-hop latency of one ring step")


class MatmulPoint(Frozen):
    flops: float = Field(gt=0, allow_inf_nan=False, description="FLOPs of one GEMM (2mnk)")
    efficiency: float = Field(gt=0, le=1, description="achieved fraction of dense peak")


class AttentionKernel(Frozen):
    """A fused attention kernel's achieved fraction of dense peak, counting the causal half of the FLOPs:
    e(s) = e_max · s / (s + half_seq) for a query block of s tokens (the FlashAttention-2/3 benchmark curves
    follow this form within a few percent from 512 to 16k tokens)."""

    forward: float = Field(gt=0, le=1, description="e_max of the forward pass")
    backward: float = Field(gt=0, le=1, description="e_max of the backward pass")
    half_seq: float = Field(512.0, ge=0, allow_inf_nan=False, description="tokens at which half of e_max is reached")

    def efficiency(self, seq: float, *, backward: bool) -> float:
        top = self.backward if backward else self.forward
        return top * seq / (seq + self.half_seq)


def log_interpolate(pts: tuple[MatmulPoint, ...], flops: float) -> float:
    """A table by GEMM size read at `flops`: piecewise-linear in log(flops), clamped at both ends."""
    if flops <= pts[0].flops:
        return pts[0].efficiency
    for lo, hi in itertools.pairwise(pts):
        if flops <= hi.flops:
            t = (math.log(flops) - math.log(lo.flops)) / (math.log(hi.flops) - math.log(lo.flops))
            return lo.efficiency + t * (hi.efficiency - lo.efficiency)
    return pts[-1].efficiency


class Efficiency(Frozen):
    """What the hardware achieves. `planner calibrate` rewrites only this block, within `bounds`."""

    matmul: tuple[MatmulPoint, ...] = Field(min_length=1, description="GEMM efficiency by size, log-interpolated")
    matmul_fp8: tuple[MatmulPoint, ...] | None = Field(None, description="FP8 GEMMs (default: the matmul table)")
    fp8_blockwise: tuple[MatmulPoint, ...] | None = Field(
        None,
        description="fp8-blockwise GEMMs (1x128 / 128x128 fp32 block scales) as a fraction of the per-tensor fp8 "
        "rate at the same FLOPs, log-interpolated: a measured ratio, not a fraction of peak (null: the fp8 rate)",
    )
    attention: dict[str, AttentionKernel] = Field(
        default_factory=dict,
        description="fused attention kernels by class: flash2 (FlashAttention-2, PyTorch "
        "SDPA), fused (cuDNN / FlashAttention-3, what Transformer Engine runs)",
    )
    hbm: float = Field(0.8, gt=0, le=1, description="achieved fraction of HBM bandwidth, memory-bound ops")
    intra_node: float = Field(
        0.8,
        gt=0,
        le=1,
        description="NCCL bus bandwidth over the intra-node link, large messages, as a fraction of the link",
    )
    inter_node: float = Field(0.8, gt=0, le=1, description="the same over the inter-node NIC")
    half_bandwidth_bytes: float = Field(
        0.0,
        ge=0,
        allow_inf_nan=False,
        description="message size at which a collective reaches half its "
        "large-message bandwidth (NCCL protocol ramp); 0 = none",
    )
    collective_base_s: float = Field(
        0.0, ge=0, allow_inf_nan=False, description="fixed cost per collective (NCCL base latency)"
    )
    step_overhead_s: float = Field(0.0, ge=0, allow_inf_nan=False, description="fixed per-step cost")
    kernel_overhead_s: float = Field(
        0.0,
        ge=0,
        allow_inf_nan=False,
        description="fixed host cost per compute kernel (eager op dispatch; CPU/Python-bound runs), paid by every "
        "GEMM and memory-bound op of forward, backward and recompute; 0 = launches are hidden (GPUs)",
    )
    collective_overhead_s: float = Field(
        0.0,
        ge=0,
        allow_inf_nan=False,
        description="fixed host cost per collective call on top of the link "
        "latency (gloo/Python dispatch), always exposed; 0 = none (GPUs)",
    )
    bounds: dict[str, tuple[float, float]] = Field(
        default_factory=dict,
        description="what calibrate may move, within what range (a prior with a width): "
        "matmul_scale (×table), attention_scale, hbm, intra_node, inter_node, ...",
    )
    fitted: str | None = Field(None, description="what the parameters were fitted to, and when")

    def matmul_efficiency(self, flops: float, precision: str = "bf16") -> float:
        """Piecewise-linear in log(flops), clamped at both ends (Calculon-style table by op size)."""
        fmt = gemm_format(precision)
        pts = self.matmul_fp8 if (fmt in ("fp8", "fp4") and self.matmul_fp8) else self.matmul
        if fmt == "fp4":
            flops *= FP4_TABLE_FLOPS  # the fp8 curve at the FLOPs of a GEMM as long at the fp8 rate
        e = log_interpolate(pts, flops)
        if precision == "fp8-blockwise" and self.fp8_blockwise:
            e *= log_interpolate(self.fp8_blockwise, flops)  # the block scales' measured cost
        return e

    def bandwidth_fraction(self, nbytes: float) -> float:
        """The share of the large-message bandwidth a collective of `nbytes` reaches (nccl-tests and torch
        all_reduce_bench sweeps ramp as size / (size + half))."""
        h = self.half_bandwidth_bytes
        return 1.0 if h <= 0 else nbytes / (nbytes + h)

    @model_validator(mode="after")
    def _check(self) -> Efficiency:
        for table in (self.matmul, self.matmul_fp8 or (), self.fp8_blockwise or ()):
            sizes = [p.flops for p in table]
            if sizes != sorted(sizes) or len(set(sizes)) != len(sizes):
                raise ValueError(f"efficiency.matmul must be in strictly increasing flops, got {sizes}")
        bad = {k: v for k, v in self.bounds.items() if not (len(v) == 2 and v[0] <= v[1])}
        if bad:
            raise ValueError(f"efficiency.bounds must be [low, high] pairs with low <= high, got {bad}")
        return self


class ReservedMemory(Frozen):
    """Memory a training process holds beyond tensors (from the profile, per GPU)."""

    cuda_context_bytes: float = Field(ge=0, allow_inf_nan=False, description="CUDA context, cuBLAS/cuDNN workspaces")
    comm_workspace_bytes: float = Field(ge=0, allow_inf_nan=False, description="NCCL buffers and channels")
    allocator_fraction: float = Field(ge=0, lt=1, description="caching-allocator fragmentation, share of tensors")


class Plausibility(Frozen):
    """The best published MFU of this class of hardware (a ceiling for plausibility flags), with its source."""

    mfu_ceiling: dict[Precision, float] = Field(
        default_factory=dict, description="best published MFU, by the precision's own peak"
    )
    source: str = ""


class HardwareProfile(Frozen):
    """hardware_profiles/NAME.yaml: one GPU model in one node design.

    Two sizes: the node (`gpus_per_node`: GPUs per host or tray, what a launcher places and a node failure
    takes down) and the NVLink domain (`nvlink_domain`: GPUs that reach each other over the `intra_node` tier,
    NVLink / NVSwitch / Infinity Fabric). On HGX and OAM boards the two are the same 8 GPUs; a GB200 / GB300
    NVL72 rack is 18 trays of 4 GPUs on one NVLink switch fabric of 72 (cost/comm.py `group_link`)."""

    name: str
    description: str = ""
    gpu: GPUSpec
    gpus_per_node: int = Field(gt=0)
    nvlink_domain: int = Field(
        1,
        gt=0,
        description="GPUs one GPU reaches over the intra_node tier; a multiple of gpus_per_node "
        "(default: gpus_per_node)",
    )
    intra_node: LinkTier
    inter_node: LinkTier
    efficiency: Efficiency
    reserved: ReservedMemory
    checkpoint_write_bytes_per_s: float = Field(
        2e9, gt=0, allow_inf_nan=False, description="per-node write bandwidth to checkpoint storage"
    )
    plausibility: Plausibility = Plausibility()
    calibration_proxy: str | None = Field(
        None,
        description="a calibrated profile of the same GPU architecture whose engine factors and error bars "
        "this one borrows, widened, while it has none of its own (h200 -> h100-sxm)",
    )
    aliases: tuple[str, ...] = Field((), description="other names the catalog finds this entry by (case-insensitive)")

    @model_validator(mode="before")
    @classmethod
    def _domain_default(cls, data: Any) -> Any:
        """An absent nvlink_domain is the node (every profile written before the field existed)."""
        if isinstance(data, dict) and data.get("nvlink_domain") is None:
            node = data.get("gpus_per_node")
            if isinstance(node, int) and not isinstance(node, bool):
                data = {**data, "nvlink_domain": node}
        return data

    @model_validator(mode="after")
    def _check_domain(self) -> HardwareProfile:
        if self.nvlink_domain % self.gpus_per_node:
            raise ValueError(
                f"nvlink_domain = {self.nvlink_domain} must be a multiple of gpus_per_node = {self.gpus_per_node} "
                "(whole nodes share one NVLink domain)"
            )
        return self

    def supports(self, precision: str) -> bool:
        """Whether the GPU has tensor cores (or, for fp32, units) for this precision's GEMMs (a named recipe: for
        its format, fp8 or fp4; engine/recipes.py checks the architecture)."""
        return gemm_format(precision) in self.gpu.peak_flops

    def peak(self, precision: str) -> float:
        """The dense peak of this precision's GEMMs (a named recipe: of its format)."""
        return self.gpu.peak_flops[gemm_format(precision)]  # type: ignore[index]

    def with_gpus_per_node(self, gpus_per_node: int) -> HardwareProfile:
        """The profile on nodes of another size (a runs file may state its own). A domain that was the node
        follows it; a larger one (NVL72) stays, and must still hold whole nodes."""
        if gpus_per_node == self.gpus_per_node:
            return self
        domain = gpus_per_node if self.nvlink_domain == self.gpus_per_node else self.nvlink_domain
        if domain % gpus_per_node:
            raise PlannerError(
                f"gpus_per_node = {gpus_per_node} does not divide {self.name}'s NVLink domain of {domain} GPUs; "
                f"use a divisor of {domain}"
            )
        return self.model_copy(update={"gpus_per_node": gpus_per_node, "nvlink_domain": domain})

    def with_power_limit(self, watts: float) -> HardwareProfile:
        """The same GPU run under a lower board power limit: the compute peaks scale with the clock the cap
        sustains (`clock_fraction`); HBM, links and the efficiency block do not change. A limit at or
        above the profile's own returns the profile unchanged: a cap never raises a peak. The capped profile is
        named NAME-<watts>w, borrows NAME's calibration as a proxy, and its MFU counts against the capped peaks."""
        g = self.gpu
        if g.power_limit_w is None or g.idle_power_w is None:
            raise PlannerError(
                f"{self.name}: a power cap needs gpu.power_limit_w and gpu.idle_power_w in the profile "
                f"(got {g.power_limit_w} and {g.idle_power_w})"
            )
        if not (math.isfinite(watts) and watts > g.idle_power_w):
            raise PlannerError(
                f"power limit {watts} W: must be above {self.name}'s idle power of {g.idle_power_w:g} W "
                f"(and at most its {g.power_limit_w:g} W limit to change anything)"
            )
        if watts >= g.power_limit_w:
            return self
        f = clock_fraction(watts, limit_w=g.power_limit_w, idle_w=g.idle_power_w)
        gpu = g.model_copy(
            update={"peak_flops": {p: v * f for p, v in g.peak_flops.items()}, "power_limit_w": float(watts)}
        )
        return self.model_copy(
            update={
                "name": f"{self.name}-{watts:g}w",
                "description": f"{self.description} (capped at {watts:g} W: compute peaks x{f:.4f})".strip(),
                "gpu": gpu,
                "calibration_proxy": self.calibration_proxy or self.name,
                "aliases": (),
            }
        )
