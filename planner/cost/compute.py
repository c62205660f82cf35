"""FLOPs and compute time of a training step, from the layer's matrix products.

Counting convention (model FLOPs, what MFU divides): every GEMM is 2·m·n·k; the attention core counts
the full s×s score matrix (QKᵀ and attention×V, 4·s·q per token), not the causal half, which is the
convention of Narayanan et al. 2021 (Sec. 5.1): for GPT-3 this gives exactly
``72·B·s·l·h²·(1 + s/6h) + 6·B·s·h·V`` per iteration without recompute and
``96·B·s·l·h²·(1 + s/6h + V/16lh)`` with full recompute. Backward = 2 × forward (one GEMM for the
input gradient and one for the weight gradient per forward GEMM; Narayanan 2021 Sec. 5.1).

Time: each GEMM's FLOPs / (peak for the plan's precision × efficiency(GEMM FLOPs)) with the shapes a
GPU of the plan actually runs (tp splits heads and FFN columns, micro_batch·seq_len/cp tokens), plus
memory-bound work (norms, activations, residual adds, rope, dropout, softmax, cross-entropy) as bytes /
(HBM bandwidth × efficiency.hbm). fp8 runs GEMMs at the fp8 peak and everything else as bf16.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import wraps
from typing import Any, TypeVar

from pydantic import BaseModel

from planner.cost.stages import layer_layout
from planner.engine import Engine
from planner.plan import Plan
from planner.specs import Efficiency, HardwareProfile, ModelSpec

# Bytes per activation element for memory-bound work and communication (fp8 keeps bf16 activations).
ACT_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 2}
# FlashAttention's backward recomputes QKᵀ and P: 5 GEMM-shaped products against 2 in the forward
# (Dao et al. 2022, Sec. 3.1 / Algorithm 4; Dao 2023), so 2.5 × the forward core time.
FLASH_BACKWARD_FACTOR = 2.5
# Elementwise backward ≈ 2 × the forward's bytes (read the upstream gradient and the saved input,
# write the input gradient, for ops that read one tensor and write one). An estimate, not measured.
MEMORY_BACKWARD_FACTOR = 2.0
# torchtitan's per-op selective checkpointing recomputes every second matmul (by count): ~half the
# projection and MLP GEMMs (torchtitan activation_checkpoint.py, _op_sac_save_list). An estimate.
OP_SAC_GEMM_FRACTION = 0.5
# Backward kernels per forward kernel, for efficiency.kernel_overhead_s: each GEMM has two backward GEMMs
# and each elementwise op about two backward ops (the 3× FLOPs convention). An estimate, not counted.
BACKWARD_KERNELS_PER_FORWARD = 2.0


F = TypeVar("F", bound=Callable[..., Any])


def spec_cache(maxsize: int = 65536) -> Callable[[F], F]:
    """Memoise a pure function of frozen specs by the specs' identity (hashing a pydantic model on
    every call costs more than the function). The cache holds a reference to each spec it keys, so
    an id cannot be reused while its entry lives; the cache is cleared when it reaches maxsize."""

    def deco(fn: F) -> F:
        cache: dict[tuple, tuple[tuple, Any]] = {}

        @wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            key = tuple(id(a) if isinstance(a, BaseModel) else a for a in args) + tuple(kwargs.items())
            hit = cache.get(key)
            if hit is not None:
                return hit[1]
            if len(cache) >= maxsize:
                cache.clear()
            value = fn(*args, **kwargs)
            cache[key] = (args, value)  # keep the specs alive: their ids stay unique
            return value

        wrapper.cache_clear = cache.clear  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return deco


def _sum_fields(obj: object) -> float:
    return sum(getattr(obj, f.name) for f in fields(obj))  # type: ignore[arg-type]


# ---- FLOPs -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ForwardFlops:
    """Forward FLOPs per token (one layer, or the whole model with logits)."""

    qkv_flops: float
    attention_core_flops: float
    attention_out_flops: float
    mlp_flops: float
    router_flops: float
    logits_flops: float = 0.0

    @property
    def layers_flops(self) -> float:
        return self.total - self.logits_flops

    @property
    def total(self) -> float:
        return _sum_fields(self)


def layer_flops_per_token(model: ModelSpec, seq_len: int, *, moe: bool) -> ForwardFlops:
    """Forward FLOPs per token of one layer (biases and elementwise work left out, as Megatron does).

    QKV 2·h·(q + 2·kv) with GQA (kv = kv_heads·head_dim); scores + attention×V 4·s·q (full, not causal;
    Narayanan 2021 Sec. 5.1); output 2·q·h; MLP 2·h·ffn per matrix, 2 or 3 matrices (Shazeer 2020);
    MoE layer: router 2·h·E, top_k routed + shared experts (Fedus et al. 2021, Switch; DeepSeek-MoE).
    """
    h = model.hidden_size
    q = model.num_attention_heads * model.head_size
    kv = model.kv_heads * model.head_size
    router = 0.0
    if moe and model.moe is not None:
        m = model.moe
        mlp = 2.0 * model.mlp_matrices * h * m.expert_ffn_hidden_size * (m.top_k + m.num_shared_experts)
        router = 2.0 * h * m.num_experts
    else:
        mlp = 2.0 * model.mlp_matrices * h * model.ffn_hidden_size
    return ForwardFlops(
        qkv_flops=2.0 * h * (q + 2 * kv),
        attention_core_flops=4.0 * seq_len * q,
        attention_out_flops=2.0 * q * h,
        mlp_flops=mlp,
        router_flops=router,
    )


@spec_cache()
def flops_per_token_forward(model: ModelSpec, seq_len: int) -> ForwardFlops:
    """Whole-model forward FLOPs per token: all layers (dense and MoE) plus the logits 2·h·V."""
    dense = layer_flops_per_token(model, seq_len, moe=False)
    n_moe = model.num_moe_layers
    n_dense = model.num_layers - n_moe
    moe = layer_flops_per_token(model, seq_len, moe=True)
    return ForwardFlops(
        **{
            f.name: n_dense * getattr(dense, f.name) + n_moe * getattr(moe, f.name)
            for f in fields(dense)
            if f.name != "logits_flops"
        },
        logits_flops=2.0 * model.hidden_size * model.vocab_size,
    )


def model_flops_per_step(model: ModelSpec, plan: Plan) -> float:
    """Forward + backward (3 × forward) FLOPs of one optimizer step, no recompute: what MFU counts."""
    return 3.0 * flops_per_token_forward(model, plan.seq_len).total * plan.tokens_per_step


def recompute_flops_per_token(model: ModelSpec, plan: Plan, engine: Engine) -> float:
    """Extra forward FLOPs per token from activation recompute (Korthikanti et al. 2022, Sec. 5).

    full: one more forward of every layer (not the logits); selective 'attention': the attention core
    again (Megatron); selective 'op': torchtitan's per-op policy saves the attention output and every
    other matmul output, so about half the projection/MLP GEMM FLOPs run again (an estimate: by count,
    not by size, in torchtitan's ``_op_sac_save_list`` rule) plus elementwise work (~0 FLOPs).
    """
    f = flops_per_token_forward(model, plan.seq_len)
    if plan.recompute == "full":
        return f.layers_flops
    if plan.recompute == "selective":
        if engine.kernels.selective_recompute == "attention":
            return f.attention_core_flops
        return OP_SAC_GEMM_FRACTION * (f.layers_flops - f.attention_core_flops)
    return 0.0


def hardware_flops_per_step(model: ModelSpec, plan: Plan, engine: Engine) -> float:
    """Model FLOPs plus recompute FLOPs: what HFU counts (Chowdhery et al. 2022, PaLM, App. B)."""
    return model_flops_per_step(model, plan) + recompute_flops_per_token(model, plan, engine) * plan.tokens_per_step


# ---- time ----------------------------------------------------------------------------------------
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


def _gemm_s(flops: float, peak: float, eff: Efficiency) -> float:
    return flops / (peak * eff.matmul_efficiency(flops)) if flops > 0 else 0.0


@spec_cache()
def _layer_time(
    model: ModelSpec,
    eff: Efficiency,
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
    policy: str,
    flash: bool,
    dropout: bool,
) -> LayerTime:
    h, hd = model.hidden_size, model.head_size
    q_loc = model.num_attention_heads * hd / tp
    kv_loc = max(model.kv_heads / tp, 1.0) * hd  # tp > kv_heads: kv heads replicated (Megatron GQA)
    heads_loc = model.num_attention_heads / tp
    t = b * s / cp  # tokens each GPU runs through its GEMMs
    # GEMMs of the forward, each with the shape one GPU runs (column-parallel QKV/up, row-parallel out/down).
    gemms = [2 * t * h * (q_loc + 2 * kv_loc), 2 * t * q_loc * h]
    act_in = [h, q_loc]  # input elements per token of each GEMM (fp8 casts them)
    if moe and model.moe is not None:
        m = model.moe
        ffn_loc = m.expert_ffn_hidden_size / tp
        per_expert_tokens = t * m.top_k * ep / m.num_experts
        n_local = m.num_experts / ep
        gemms += [2 * t * h * m.num_experts]  # router (replicated)
        gemms += [2 * per_expert_tokens * h * ffn_loc] * round(n_local * model.mlp_matrices)
        if m.num_shared_experts:
            gemms += [2 * t * h * ffn_loc * m.num_shared_experts] * model.mlp_matrices
        act_ffn = ffn_loc * (m.top_k + m.num_shared_experts)
        permute = 4 * m.top_k * h / (tp if sp else 1)  # token permute/unpermute copies (read + write, twice)
    else:
        ffn_loc = model.ffn_hidden_size / tp
        gemms += [2 * t * h * ffn_loc] * model.mlp_matrices
        act_ffn, permute = ffn_loc, 0.0
    act_in += [h] * (model.mlp_matrices - 1) + [act_ffn]
    gemm_fwd = sum(_gemm_s(f, gemm_peak, eff) for f in gemms)
    # Attention core: 4·t·s·q FLOPs; flash kernels skip the masked half of a causal mask (Dao 2023).
    # It runs in bf16 even in fp8 recipes (torchao float8 and TE convert the Linear layers only).
    core_flops = 4 * t * s * q_loc * (0.5 if flash else 1.0)
    core_eff = getattr(eff, "attention", None)  # a profile's own attention efficiency, where it has one
    core_fwd = core_flops / (core_peak * core_eff) if core_eff else _gemm_s(core_flops, core_peak, eff)
    core_bwd = core_fwd * (FLASH_BACKWARD_FACTOR if flash else 2.0)
    # Memory-bound forward bytes per token (an estimate, counted from Megatron's layer): 2 norms (read h,
    # write h) + 2 residual adds (read 2h, write h) = 10h; dropout 2 × (read h, write h, 1-byte mask) ≈ 5h;
    # these run on s/tp tokens with SP (Korthikanti 2022 Sec. 4.2.2). The activation function reads 1
    # (gelu) or 2 (swiglu gate) ffn-wide tensors and writes one; rope reads and writes q and k; without
    # flash the fused scale-mask-softmax reads and writes heads·s scores (+ dropout 3 more passes).
    act_b = ACT_BYTES[precision]
    hidden = (10 + (5 if dropout else 0)) * h / (tp if sp else 1) + permute
    sharded = (model.mlp_matrices) * act_ffn
    rope = 2 * (q_loc + kv_loc) if model.position_embedding == "rope" else 0.0
    softmax = 0.0 if flash else heads_loc * s * (2 + (3 if dropout else 0))
    mem_bytes = t * act_b * (hidden + sharded + rope + softmax)
    if precision == "fp8":  # casts: read bf16, write fp8, per GEMM input and per weight (torchao / TE)
        weights = (model.moe_layer_params if moe and model.moe else model.dense_layer_params) / tp
        mem_bytes += 3 * (t * sum(act_in) + weights)
    mem_fwd = mem_bytes / hbm_bw
    mem_softmax = t * act_b * softmax / hbm_bw
    # Fixed cost per kernel (efficiency.kernel_overhead_s, 0 on GPUs): forward kernels of one layer are its
    # GEMMs, the attention core and the memory-bound ops counted above (2 norms, 2 residual adds, the
    # activation (+ gate), rope on q and k, unfused softmax, 2 dropouts, MoE permute/unpermute). Charged to
    # the memory-bound (non-GEMM) share of the layer so GEMM overlap rules (TP) are unchanged.
    ko = eff.kernel_overhead_s
    n_mem_ops = (
        4
        + model.mlp_matrices
        - 1
        + (2 if rope else 0)
        + (0 if flash else 1)
        + (2 if dropout else 0)
        + (2 if permute else 0)
    )
    n_fwd = len(gemms) + 1 + n_mem_ops
    k_fwd = ko * n_fwd
    mem_bwd = MEMORY_BACKWARD_FACTOR * mem_fwd + BACKWARD_KERNELS_PER_FORWARD * k_fwd
    if recompute == "full":
        rc = gemm_fwd + core_fwd + mem_fwd + k_fwd
    elif recompute == "selective":
        if policy == "attention":
            rc = core_fwd + mem_softmax + ko * (1 + (0 if flash else 1))
        else:
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
        policy=engine.kernels.selective_recompute,
        flash=engine.kernels.flash,
        dropout=engine.kernels.dropout,
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
) -> tuple[float, float]:
    """(forward_s, backward_s) of the embedding (first stage) and norm + logits + loss (last stage).

    Embedding: lookup and position add ≈ 4 reads/writes of h per token, the same in backward. Logits:
    one GEMM 2·t·h·V/tp (vocab-parallel, Megatron) and its 2 backward GEMMs; cross-entropy over fp32
    logits ≈ 3 passes forward, 2 backward, 4 bytes each (an estimate of the fused softmax-CE kernels).
    """
    h, t = model.hidden_size, b * s / cp
    act_b = ACT_BYTES[precision]
    ko = eff.kernel_overhead_s  # fixed cost per kernel: embedding 1; norm, logits GEMM, loss 3 (0 on GPUs)
    fwd = bwd = 0.0
    if first:
        fwd += 4 * t * h * act_b / (tp if sp else 1) / hbm_bw + ko
        bwd += 4 * t * h * act_b / (tp if sp else 1) / hbm_bw + BACKWARD_KERNELS_PER_FORWARD * ko
    if last:
        g = _gemm_s(2 * t * h * model.vocab_size / tp, gemm_peak, eff)
        norm = 2 * t * h * act_b / (tp if sp else 1) / hbm_bw
        ce = t * model.vocab_size / tp * 4
        fwd += g + norm + 3 * ce / hbm_bw + 3 * ko
        bwd += 2 * g + 2 * norm + 2 * ce / hbm_bw + 3 * BACKWARD_KERNELS_PER_FORWARD * ko
    return fwd, bwd


@spec_cache()
def stage_shapes(model: ModelSpec, pp: int, vpp: int) -> tuple[tuple[int, int, bool, bool], ...]:
    """Per pipeline rank: (dense layers, MoE layers, holds the embedding, holds the logits), from the one
    layer layout (cost.stages)."""
    layout = layer_layout(model.num_layers, pp, vpp)
    out = []
    for r in range(pp):
        layers = layout.rank_layers(r)
        n_moe = sum(model.is_moe_layer(i) for i in layers)
        out.append((len(layers) - n_moe, n_moe, layout.holds_embedding(r), layout.holds_loss(r)))
    return tuple(out)


def stage_compute(model: ModelSpec, hw: HardwareProfile, plan: Plan, engine: Engine, stage: int) -> StageCompute:
    """Compute time of one micro-batch on one GPU of pipeline rank `stage`."""
    n_dense, n_moe, first, last = stage_shapes(model, plan.pp, plan.vpp)[stage]
    peak, bw = _hw_rates(hw, plan.precision)
    dense = layer_time(model, hw, plan, engine, moe=False)
    moe = layer_time(model, hw, plan, engine, moe=True) if n_moe else dense
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
    )
    return StageCompute(
        num_dense_layers=n_dense,
        num_moe_layers=n_moe,
        layers_forward_s=n_dense * dense.forward_s + n_moe * moe.forward_s,
        layers_backward_s=n_dense * dense.backward_s + n_moe * moe.backward_s,
        head_forward_s=hf,
        head_backward_s=hb,
        recompute_s=n_dense * dense.recompute_s + n_moe * moe.recompute_s,
        attention_core_forward_s=(n_dense + n_moe) * dense.attention_core_forward_s,
    )
