"""Compute time of one micro-batch: each layer's kernels (kernels.py) with the shapes one GPU of the plan runs,
and each pipeline rank's layers, embedding and output head (from the one layer layout, stages.py).

Shapes: tp splits heads and FFN columns, a micro-batch is micro_batch·seq_len/cp tokens per GPU. GEMMs run
at the plan's precision (fp8: the FP8 curve), attention and memory-bound work as bf16. The engine's fitted
`compute` factor (engine.Fitted, per hardware) multiplies the result: what the stack's kernels lose or gain
beyond the hardware's measured curves.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.cost.behaviour import compute_factor
from planner.cost.cache import spec_cache
from planner.cost.flops import OP_SAC_GEMM_FRACTION
from planner.cost.kernels import (
    ACT_BYTES,
    MEMORY_BACKWARD_FACTOR,
    attention_core_s,
    elementwise_bytes_per_token,
    gemm_s,
)
from planner.cost.params import padded_vocab
from planner.cost.stages import layer_layout
from planner.engine import Engine, Kernels
from planner.engine.split import Split
from planner.hardware import Efficiency, HardwareProfile
from planner.plan import Plan
from planner.specs import ModelSpec

# Backward kernels per forward kernel, for efficiency.kernel_overhead_s: each GEMM has two backward GEMMs
# and each elementwise op about two backward ops (the 3× FLOPs convention). An estimate, not counted.
BACKWARD_KERNELS_PER_FORWARD = 2.0


@dataclass(frozen=True)
class LayerTime:
    """One transformer layer, one micro-batch, one GPU (seconds)."""

    gemm_forward_s: float
    attention_core_forward_s: float
    memory_forward_s: float
    gemm_backward_s: float
    attention_core_backward_s: float
    memory_backward_s: float
    recompute_s: float

    @property
    def forward_s(self) -> float:
        return self.gemm_forward_s + self.attention_core_forward_s + self.memory_forward_s

    @property
    def backward_s(self) -> float:
        return self.gemm_backward_s + self.attention_core_backward_s + self.memory_backward_s

    @property
    def total(self) -> float:
        return self.forward_s + self.backward_s + self.recompute_s


@dataclass(frozen=True)
class StageCompute:
    """One micro-batch on one GPU of a pipeline stage (all its model chunks), seconds."""

    num_dense_layers: int
    num_moe_layers: int
    layers_forward_s: float
    layers_backward_s: float
    head_forward_s: float  # embedding on the first stage; final norm, logits and loss on the last
    head_backward_s: float
    recompute_s: float
    attention_core_forward_s: float  # summed over the stage's layers: what CP's KV ring can hide behind

    @property
    def forward_s(self) -> float:
        return self.layers_forward_s + self.head_forward_s

    @property
    def backward_s(self) -> float:
        return self.layers_backward_s + self.head_backward_s

    @property
    def total(self) -> float:
        return self.forward_s + self.backward_s + self.recompute_s


def _layer_gemms(
    model: ModelSpec, *, moe: bool, t: float, tp: int, ep: int, sp: bool
) -> tuple[list[float], list[float], float, float]:
    """(GEMM FLOPs, GEMM input elements per token, local activation width, MoE permute elements per token)
    of one layer's forward on one GPU: column-parallel QKV/up, row-parallel out/down; MoE: the router and the
    local experts' share of the routed tokens (Fedus et al. 2021)."""
    h, hd = model.hidden_size, model.head_size
    q_loc = model.num_attention_heads * hd / tp
    kv_loc = max(model.kv_heads / tp, 1.0) * hd  # tp > kv_heads: kv heads replicated (Megatron GQA)
    gemms = [2 * t * h * (q_loc + 2 * kv_loc), 2 * t * q_loc * h]
    act_in = [h, q_loc]  # input elements per token of each GEMM (fp8 casts them)
    if moe and model.moe is not None:
        m = model.moe
        ffn_loc = m.expert_ffn_hidden_size / tp
        per_expert_tokens = t * m.top_k * ep / m.num_experts
        gemms += [2 * t * h * m.num_experts]  # router (replicated)
        gemms += [2 * per_expert_tokens * h * ffn_loc] * round(m.num_experts / ep * model.mlp_matrices)
        if m.num_shared_experts:
            gemms += [2 * t * h * ffn_loc * m.num_shared_experts] * model.mlp_matrices
        act_ffn = ffn_loc * (m.top_k + m.num_shared_experts)
        permute = 4 * m.top_k * h / (tp if sp else 1)  # token permute/unpermute copies (read + write, twice)
    else:
        ffn_loc = model.ffn_hidden_size / tp
        gemms += [2 * t * h * ffn_loc] * model.mlp_matrices
        act_ffn, permute = ffn_loc, 0.0
    act_in += [h] * (model.mlp_matrices - 1) + [act_ffn]
    return gemms, act_in, act_ffn, permute


@spec_cache()
def _layer_time(
    model: ModelSpec,
    eff: Efficiency,
    kernels: Kernels,
    gemm_peak: float,
    core_peak: float,
    hbm_bw: float,
    *,
    moe: bool,
    tp: int,
    cp: int,
    ep: int,
    sp: bool,
    b: int,
    s: int,
    precision: str,
    recompute: str,
) -> LayerTime:
    h, hd = model.hidden_size, model.head_size
    q_loc = model.num_attention_heads * hd / tp
    kv_loc = max(model.kv_heads / tp, 1.0) * hd
    t = b * s / cp  # tokens each GPU runs through its GEMMs
    gemms, act_in, act_ffn, permute = _layer_gemms(model, moe=moe, t=t, tp=tp, ep=ep, sp=sp)
    each = {f: gemm_s(f, gemm_peak, eff, precision) for f in set(gemms)}  # an MoE layer repeats its experts' GEMMs
    gemm_fwd = sum(each[f] for f in gemms)
    core_fwd, core_bwd = attention_core_s(
        tokens=t, seq_len=s, cp=cp, q_loc=q_loc, head_dim=hd, peak=core_peak, eff=eff, kernels=kernels
    )
    act_b = ACT_BYTES[precision]
    per_token, softmax = elementwise_bytes_per_token(
        h=h,
        q_loc=q_loc,
        kv_loc=kv_loc,
        ffn_loc=act_ffn,
        gated=model.mlp == "swiglu",
        rms=model.norm == "rmsnorm",
        rope=model.position_embedding == "rope",
        seq_split=tp if sp else 1,
        heads_loc=model.num_attention_heads / tp,
        seq_len=s,
        dropout=kernels.dropout,
        flash=kernels.flash,
        kernels=kernels,
        act_b=act_b,
        permute=permute / act_b,
    )
    mem_bytes = t * per_token
    if precision == "fp8":  # casts: read bf16, write fp8, per GEMM input and per weight (torchao / TE)
        weights = (model.moe_layer_params if moe and model.moe else model.dense_layer_params) / tp
        mem_bytes += 3 * (t * sum(act_in) + weights)
    mem_fwd = mem_bytes / hbm_bw
    # Fixed cost per kernel (efficiency.kernel_overhead_s, 0 on GPUs): a layer's forward kernels are its GEMMs,
    # the attention core and its memory-bound ops (2 norms, 2 residual adds, the activation (+ gate), rotary on
    # q and k, unfused softmax, 2 dropouts, MoE permute/unpermute), charged to the memory-bound share.
    ko = eff.kernel_overhead_s
    rope = model.position_embedding == "rope"
    n_mem_ops = (
        4
        + model.mlp_matrices
        - 1
        + (2 if rope else 0)
        + (0 if kernels.flash else 1)
        + (2 if kernels.dropout else 0)
        + (2 if permute else 0)
    )
    k_fwd = ko * (len(gemms) + 1 + n_mem_ops)
    mem_bwd = MEMORY_BACKWARD_FACTOR * mem_fwd + BACKWARD_KERNELS_PER_FORWARD * k_fwd
    if recompute == "full":
        rc = gemm_fwd + core_fwd + mem_fwd + k_fwd
    elif recompute == "selective" and kernels.selective_recompute == "attention":
        rc = core_fwd + t * softmax / hbm_bw + ko * (1 + (0 if kernels.flash else 1))
    elif recompute == "selective":
        rc = OP_SAC_GEMM_FRACTION * gemm_fwd + mem_fwd + ko * (OP_SAC_GEMM_FRACTION * len(gemms) + n_mem_ops)
    else:
        rc = 0.0
    return LayerTime(gemm_fwd, core_fwd, mem_fwd + k_fwd, 2 * gemm_fwd, core_bwd, mem_bwd, rc)


def _hw_rates(hw: HardwareProfile, precision: str) -> tuple[float, float]:
    return hw.peak(precision), hw.gpu.hbm_bandwidth_bytes_per_s * hw.efficiency.hbm


def layer_time(model: ModelSpec, hw: HardwareProfile, plan: Plan, engine: Engine, *, moe: bool = False) -> LayerTime:
    """Forward, backward and recompute time of one (dense or MoE) layer for one micro-batch on one GPU."""
    peak, bw = _hw_rates(hw, plan.precision)
    core_peak = hw.peak("bf16") if plan.precision == "fp8" else peak
    return _layer_time(
        model,
        hw.efficiency,
        engine.kernels,
        peak,
        core_peak,
        bw,
        moe=moe,
        tp=plan.tp,
        cp=plan.cp,
        ep=plan.ep,
        sp=plan.sp,
        b=plan.micro_batch,
        s=plan.seq_len,
        precision=plan.precision,
        recompute=plan.recompute,
    )


@spec_cache()
def _head_time(
    model: ModelSpec,
    eff: Efficiency,
    gemm_peak: float,
    hbm_bw: float,
    *,
    first: bool,
    last: bool,
    tp: int,
    cp: int,
    sp: bool,
    b: int,
    s: int,
    precision: str,
    vocab: int,
) -> tuple[float, float]:
    """(forward_s, backward_s) of the embedding (first stage) and norm + logits + loss (last stage).

    Embedding: lookup and position add ≈ 4 reads/writes of h per token, the same in backward. Logits: one
    GEMM 2·t·h·V/tp (vocab-parallel, Megatron; V padded as the engine pads it) and its 2 backward GEMMs;
    cross-entropy over fp32 logits ≈ 3 passes forward, 2 backward, 4 bytes each (an estimate of the fused
    softmax-CE kernels).
    """
    h, t = model.hidden_size, b * s / cp
    act_b = ACT_BYTES[precision]
    ko = eff.kernel_overhead_s  # fixed cost per kernel: embedding 1; norm, logits GEMM, loss 3 (0 on GPUs)
    fwd = bwd = 0.0
    if first:
        fwd += 4 * t * h * act_b / (tp if sp else 1) / hbm_bw + ko
        bwd += 4 * t * h * act_b / (tp if sp else 1) / hbm_bw + BACKWARD_KERNELS_PER_FORWARD * ko
    if last:
        g = gemm_s(2 * t * h * vocab / tp, gemm_peak, eff, precision)
        norm = 2 * t * h * act_b / (tp if sp else 1) / hbm_bw
        ce = t * vocab / tp * 4
        fwd += g + norm + 3 * ce / hbm_bw + 3 * ko
        bwd += 2 * g + 2 * norm + 2 * ce / hbm_bw + 3 * BACKWARD_KERNELS_PER_FORWARD * ko
    return fwd, bwd


@spec_cache()
def stage_shapes(model: ModelSpec, pp: int, vpp: int, split: Split = "even") -> tuple[tuple[int, int, bool, bool], ...]:
    """Per pipeline rank: (dense layers, MoE layers, holds the embedding, holds the logits), from the one
    layer layout (cost.stages)."""
    layout = layer_layout(model.num_layers, pp, vpp, split)
    out = []
    for r in range(pp):
        layers = layout.rank_layers(r)
        n_moe = sum(model.is_moe_layer(i) for i in layers)
        out.append((len(layers) - n_moe, n_moe, layout.holds_embedding(r), layout.holds_loss(r)))
    return tuple(out)


def fitted_compute(hw: HardwareProfile, engine: Engine) -> float:
    """The engine's compute factor on this hardware: what the stack's kernels lose or gain beyond the hardware's
    measured curves; the GPU's own fitted factor, else the engine's pooled behaviour (cost.behaviour)."""
    return compute_factor(hw, engine)


def stage_compute(model: ModelSpec, hw: HardwareProfile, plan: Plan, engine: Engine, stage: int) -> StageCompute:
    """Compute time of one micro-batch on one GPU of pipeline rank `stage`, times the engine's fitted factor."""
    n_dense, n_moe, first, last = stage_shapes(model, plan.pp, plan.vpp, engine.rules.pipeline_split)[stage]
    peak, bw = _hw_rates(hw, plan.precision)
    dense = layer_time(model, hw, plan, engine, moe=False)
    moe = layer_time(model, hw, plan, engine, moe=True) if n_moe else dense
    vocab = padded_vocab(model.vocab_size, plan.tp, engine.rules.vocab_padding)
    hf, hb = _head_time(
        model,
        hw.efficiency,
        peak,
        bw,
        first=first,
        last=last,
        tp=plan.tp,
        cp=plan.cp,
        sp=plan.sp,
        b=plan.micro_batch,
        s=plan.seq_len,
        precision=plan.precision,
        vocab=vocab,
    )
    f = fitted_compute(hw, engine)
    return StageCompute(
        num_dense_layers=n_dense,
        num_moe_layers=n_moe,
        layers_forward_s=f * (n_dense * dense.forward_s + n_moe * moe.forward_s),
        layers_backward_s=f * (n_dense * dense.backward_s + n_moe * moe.backward_s),
        head_forward_s=f * hf,
        head_backward_s=f * hb,
        recompute_s=f * (n_dense * dense.recompute_s + n_moe * moe.recompute_s),
        attention_core_forward_s=f * (n_dense + n_moe) * dense.attention_core_forward_s,
    )
