"""What the hardware achieves of its peaks (the `efficiency` block of a hardware profile): GEMM efficiency by
size, attention kernels by sequence length, HBM and link bandwidth fractions, per-call latency, and the bounds
`planner calibrate` may move them within; the link tiers of the network."""

from __future__ import annotations

import itertools
import math

from pydantic import Field, model_validator

from planner.precision import gemm_format
from planner.specs import Frozen

# No public NVFP4 GEMM size sweep exists: an fp4 GEMM of f FLOPs is read off the fp8 curve at f·FP4_TABLE_FLOPS,
# the FLOPs of an fp8 GEMM as long at the fp8 peak (the profiles derive their fp8 curves from the bf16 one the same
# way, "the same curve at twice the FLOPs"). 0.5 = the fp8/fp4 dense peak ratio of B200, GB200, MI350X and MI355X
# (hardware_profiles/); on B300 and GB300 (1/2.9 and 1/3) the exact reading sits lower on the curve, so 0.5 is
# optimistic there.
FP4_TABLE_FLOPS = 0.5


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
    dtensor_op_overhead_s: float = Field(
        0.0,
        ge=0,
        allow_inf_nan=False,
        description="fixed host cost per op on a DTensor beyond kernel_overhead_s (sharding propagation and "
        "redistribution in Python), paid where the engine's parallel parameters are DTensors (engine "
        "kernels.dtensor; cost/dtensor_host.py counts the ops); 0 = hidden behind the kernels (GPUs)",
    )
    sac_op_overhead_s: float = Field(
        0.0,
        ge=0,
        allow_inf_nan=False,
        description="fixed host cost per op that op-level selective activation checkpointing (torch SAC) passes "
        "through its policy's dispatch modes, in the forward and again in the recompute (cost/sac_host.py counts "
        "the ops); 0 = hidden behind the kernels (GPUs)",
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
