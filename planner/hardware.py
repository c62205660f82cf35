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

from pydantic import Field, field_validator, model_validator

from planner.specs import PRECISIONS, Frozen, Precision

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
    peak_flops: dict[Precision, float] = Field(
        description="dense peak FLOP/s per precision (no sparsity); a precision the GPU has no tensor cores for "
        "is left out (fp8 before Hopper, bf16 before Ampere)"
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
            raise ValueError(f"peak_flops must give fp32 (and the precisions the GPU supports, of {list(PRECISIONS)})")
        if "fp8" in peaks:
            wide = [peaks[p] for p in ("bf16", "fp16") if p in peaks] or [peaks["fp32"]]
            low, high = min(wide), FP8_MAX_SPEEDUP * max(wide)
            if not low <= peaks["fp8"] <= high:
                raise ValueError(
                    f"peak_flops.fp8={peaks['fp8']:g} must be from {low:g} (the slower 16-bit peak: fp8 can always "
                    f"be run widened to it) to {high:g} ({FP8_MAX_SPEEDUP:g}x the faster one) FLOP/s"
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


class Efficiency(Frozen):
    """What the hardware achieves. `planner calibrate` rewrites only this block, within `bounds`."""

    matmul: tuple[MatmulPoint, ...] = Field(min_length=1, description="GEMM efficiency by size, log-interpolated")
    matmul_fp8: tuple[MatmulPoint, ...] | None = Field(None, description="FP8 GEMMs (default: the matmul table)")
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
        pts = self.matmul_fp8 if (precision == "fp8" and self.matmul_fp8) else self.matmul
        if flops <= pts[0].flops:
            return pts[0].efficiency
        for lo, hi in itertools.pairwise(pts):
            if flops <= hi.flops:
                t = (math.log(flops) - math.log(lo.flops)) / (math.log(hi.flops) - math.log(lo.flops))
                return lo.efficiency + t * (hi.efficiency - lo.efficiency)
        return pts[-1].efficiency

    def bandwidth_fraction(self, nbytes: float) -> float:
        """The share of the large-message bandwidth a collective of `nbytes` reaches (nccl-tests and torch
        all_reduce_bench sweeps ramp as size / (size + half))."""
        h = self.half_bandwidth_bytes
        return 1.0 if h <= 0 else nbytes / (nbytes + h)

    @model_validator(mode="after")
    def _check(self) -> Efficiency:
        for table in (self.matmul, self.matmul_fp8 or ()):
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
    """hardware_profiles/NAME.yaml: one GPU model in one node design."""

    name: str
    description: str = ""
    gpu: GPUSpec
    gpus_per_node: int = Field(gt=0)
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

    def supports(self, precision: str) -> bool:
        """Whether the GPU has tensor cores (or, for fp32, units) for this precision."""
        return precision in self.gpu.peak_flops

    def peak(self, precision: str) -> float:
        return self.gpu.peak_flops[precision]  # type: ignore[index]
