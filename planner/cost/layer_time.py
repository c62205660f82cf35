"""Time of one layer for one micro-batch on one GPU: its GEMMs, its attention core or state-space scan, and its
memory-bound work (kernels.py), with the shapes the plan gives each GPU, for each kind of layer (layers.py: an
attention, MLA or Mamba-2 mixer; a dense, MoE or no FFN).

Shapes: tp splits heads and FFN columns, a micro-batch is micro_batch·seq_len/cp tokens per GPU. GEMMs run at
the plan's precision (fp8: the FP8 curve), attention and memory-bound work as bf16.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from planner.cost import dtensor_host, sac_host
from planner.cost.cache import spec_cache
from planner.cost.flops import OP_SAC_GEMM_FRACTION, causal_share
from planner.cost.host_calls import host_calls_s
from planner.cost.kernels import (
    ACT_BYTES,
    MEMORY_BACKWARD_FACTOR,
    attention_core_s,
    elementwise_bytes_per_token,
    gemm_s,
    grouped_gemm_s,
    grouped_utilisation,
    ssd_scan_s,
)
from planner.cost.moe import routed_load
from planner.cost.quantization import layer_casts, wgrad_delta_s
from planner.cost.recipe_options import modules_recompute_s, selected_modules
from planner.engine import Engine, Kernels
from planner.hardware import Efficiency, HardwareProfile
from planner.layers import LayerKind
from planner.plan import Plan
from planner.precision import is_low_precision
from planner.specs import ModelSpec

# Backward kernels per forward kernel, for efficiency.kernel_overhead_s: each GEMM has two backward GEMMs
# and each elementwise op about two backward ops (the 3× FLOPs convention). An estimate, not counted.
BACKWARD_KERNELS_PER_FORWARD = 2.0


@dataclass(frozen=True)
class LayerTime:
    """One layer, one micro-batch, one GPU (seconds)."""

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
class Gemms:
    """One layer's forward GEMMs on one GPU: FLOPs of each, input elements per token of each (what fp8 casts),
    the local FFN activation width, and the MoE permute elements per token."""

    flops: list[float]
    inputs: list[float]
    ffn_width: float
    permute: float
    # (FLOPs, row-tile utilisation, weight elements) of each grouped GEMM
    grouped: list[tuple[float, float, float]] = field(default_factory=list)


def _mixer_gemms(model: ModelSpec, kind: LayerKind, t: float, tp: int, sp: bool) -> tuple[list[float], list[float]]:
    """Column-parallel input projections and the row-parallel output projection of the mixer. MHA: QKV (kv heads
    replicated past num_kv_heads, Megatron GQA) and out. MLA (Megatron multi_latent_attention.py): the replicated
    down-projections on the rank's sequence shard with SP (all of it without), the up-projections and out.
    Mamba-2: in_proj and out_proj split by heads."""
    h, hd = model.hidden_size, model.head_size
    if kind.mixer == "attention":
        q_loc = model.num_attention_heads * hd / tp
        kv_loc = max(model.kv_heads / tp, 1.0) * hd
        return [2 * t * h * (q_loc + 2 * kv_loc), 2 * t * q_loc * h], [h, q_loc]
    if kind.mixer == "mla":
        a = model.attention
        assert a is not None and a.kv_lora_rank is not None and a.qk_rope_head_dim is not None
        assert a.qk_nope_head_dim is not None and a.v_head_dim is not None
        heads_loc, t_down = model.num_attention_heads / tp, t / (tp if sp else 1)
        flops, inputs = [2 * t_down * h * (a.kv_lora_rank + a.qk_rope_head_dim)], [h]
        q_in = a.q_lora_rank or h
        if a.q_lora_rank is not None:
            flops.append(2 * t_down * h * a.q_lora_rank)
            inputs.append(h)
        kv_up = 2 * t * a.kv_lora_rank * heads_loc * (a.qk_nope_head_dim + a.v_head_dim)
        flops += [2 * t * q_in * heads_loc * hd, kv_up]
        flops.append(2 * t * heads_loc * a.v_head_dim * h)
        return flops, [*inputs, q_in, a.kv_lora_rank, heads_loc * a.v_head_dim]
    if kind.mixer == "mamba":
        m = model.mamba
        assert m is not None
        width = (2 * m.d_inner + 2 * m.num_groups * m.state_size + m.num_heads) / tp
        return [2 * t * h * width, 2 * t * m.d_inner / tp * h], [h, m.d_inner / tp]
    return [], []


def layer_gemms(
    model: ModelSpec, kind: LayerKind, *, t: float, tp: int, ep: int, etp: int, sp: bool, load: float = 1.0,
    grouped: bool = False,
) -> Gemms:  # fmt: skip
    """The layer's forward GEMMs: the mixer's, then the FFN's. MoE: the router (replicated) and the local experts'
    share of the routed tokens (Fedus et al. 2021): E/ep local experts, each over etp, each receiving the tokens of
    its ep·etp group, t/tp·etp·ep·top_k/E of them (Megatron's MoE parallel folding; etp = tp by default gives
    t·ep·top_k/E), times `load` on the busiest rank (moe.routed_load); with `grouped` the local experts run as
    one grouped GEMM per matrix (Megatron --moe-grouped-gemm), at the efficiency of its total size times the
    share of tile rows the experts fill; the shared experts over tp at their own width."""
    flops, inputs = _mixer_gemms(model, kind, t, tp, sp)
    h = model.hidden_size
    groups: list[tuple[float, float, float]] = []
    if kind.ffn == "moe" and model.moe is not None:
        m = model.moe
        ffn_loc = m.expert_ffn_hidden_size / etp
        folded = t / tp * etp * ep * m.top_k / m.num_experts
        per_expert_tokens = (t * m.top_k * ep / m.num_experts if etp == tp else folded) * load
        flops += [2 * t * h * m.num_experts]  # router (replicated)
        local = m.num_experts / ep
        if grouped:
            one = 2 * per_expert_tokens * h * ffn_loc
            groups = [(one * local, grouped_utilisation(per_expert_tokens), local * h * ffn_loc)] * model.mlp_matrices
        else:
            flops += [2 * per_expert_tokens * h * ffn_loc] * round(local * model.mlp_matrices)
        shared_loc = (m.shared_expert_ffn_hidden_size or m.expert_ffn_hidden_size) / tp
        if m.num_shared_experts:
            flops += [2 * t * h * shared_loc * m.num_shared_experts] * model.mlp_matrices
        act_ffn = ffn_loc * m.top_k + shared_loc * m.num_shared_experts
        permute = 4 * m.top_k * h / (tp if sp else 1)  # token permute/unpermute copies (read + write, twice)
    elif kind.ffn == "dense":
        ffn_loc = model.ffn_hidden_size / tp
        flops += [2 * t * h * ffn_loc] * model.mlp_matrices
        act_ffn, permute = ffn_loc, 0.0
    else:
        return Gemms(flops, inputs, 0.0, 0.0)
    inputs += [h] * (model.mlp_matrices - 1) + [act_ffn]
    return Gemms(flops, inputs, act_ffn, permute, groups)


def _core_s(
    model: ModelSpec, kind: LayerKind, eff: Efficiency, kernels: Kernels, peak: float, *, t: float, s: int, tp: int,
    cp: int,
) -> tuple[float, float]:  # fmt: skip
    """(forward, backward) of the attention core or the SSD scan."""
    if kind.mixer == "mamba":
        m = model.mamba
        assert m is not None
        return ssd_scan_s(tokens=t, seq_len=s, heads_loc=m.num_heads / tp, groups_loc=max(m.num_groups / tp, 1.0),
                          head_dim=m.head_dim, state=m.state_size, chunk=m.chunk_size, peak=peak, eff=eff,
                          kernels=kernels)  # fmt: skip
    if kind.mixer == "none":
        return 0.0, 0.0
    hd, heads_loc = model.head_size, model.num_attention_heads / tp
    keys = float(s if kind.window is None else min(kind.window, s))
    causal = causal_share(kind, s)
    a = model.attention
    v_loc = heads_loc * a.v_head_dim if kind.mixer == "mla" and a is not None and a.v_head_dim else None
    window = None if kind.window is None else keys
    return attention_core_s(tokens=t, seq_len=s, cp=cp, q_loc=heads_loc * hd, head_dim=hd, peak=peak, eff=eff,
                            kernels=kernels, keys=window, v_loc=v_loc, causal=causal)  # fmt: skip


def _mem_ops(model: ModelSpec, kind: LayerKind, kernels: Kernels, permute: float) -> int:
    """Memory-bound kernels of the forward, for efficiency.kernel_overhead_s: per block a norm and a residual add,
    the activation (+ gate), rotary on q and k, an unfused softmax, 2 dropouts, MoE permute/unpermute; a
    Mamba-2 mixer's conv1d, SiLU and gated norm."""
    attn = kind.mixer in ("attention", "mla")
    ffn = model.mlp_matrices - 1 if kind.ffn != "none" else 0
    rope = 2 if (attn and model.position_embedding == "rope") else 0
    return (2 * kind.blocks + ffn + rope + (0 if (kernels.flash or not attn) else 1) + (2 if kernels.dropout else 0)
            + (2 if permute else 0) + (3 if kind.mixer == "mamba" else 0))  # fmt: skip


def _memory_bytes(model: ModelSpec, kind: LayerKind, kernels: Kernels, g: Gemms, *, t: float, s: int, tp: int,
                  sp: bool, act_b: int) -> tuple[float, float]:  # fmt: skip
    """(forward HBM bytes of the memory-bound ops, the unfused softmax's share) for the layer's t tokens."""
    attn = kind.mixer in ("attention", "mla")
    hd = model.head_size
    m = model.mamba
    conv = (m.d_inner + 2 * m.num_groups * m.state_size) if m else 0
    mixer = (4 * conv + 3 * m.d_inner) / tp if m and kind.mixer == "mamba" else 0.0
    per_token, softmax = elementwise_bytes_per_token(
        h=model.hidden_size, q_loc=model.num_attention_heads * hd / tp if attn else 0.0,
        kv_loc=max(model.kv_heads / tp, 1.0) * hd if attn else 0.0, ffn_loc=g.ffn_width,
        gated=model.mlp == "swiglu", rms=model.norm == "rmsnorm",
        rope=attn and model.position_embedding == "rope", seq_split=tp if sp else 1,
        heads_loc=model.num_attention_heads / tp if attn else 0.0, seq_len=s, dropout=kernels.dropout,
        flash=kernels.flash or not attn, kernels=kernels, act_b=act_b, permute=g.permute / act_b,
        blocks=kind.blocks,
        keys=None if kind.window is None else min(kind.window, s), mixer_elements=mixer,
    )  # fmt: skip
    return t * per_token, t * softmax


@spec_cache()
def _layer_time(
    model: ModelSpec, eff: Efficiency, kernels: Kernels, gemm_peak: float, core_peak: float, hbm_bw: float, *,
    kind: LayerKind, tp: int, cp: int, ep: int, etp: int, sp: bool, b: int, s: int, precision: str, recompute: str,
    load: float = 1.0, grouped: bool = False, arch: str | None = None, weight_cache: bool = True,
    dtensor_op_s: float = 0.0, sac_op_s: float = 0.0,
) -> LayerTime:  # fmt: skip
    t = b * s / cp  # tokens each GPU runs through its GEMMs
    g = layer_gemms(model, kind, t=t, tp=tp, ep=ep, etp=etp, sp=sp, load=load, grouped=grouped)
    each = {f: gemm_s(f, gemm_peak, eff, precision) for f in set(g.flops)}  # an MoE layer repeats its experts'
    gemm_fwd = sum(each[f] for f in g.flops)
    for f, util, weights in g.grouped:
        gemm_fwd += grouped_gemm_s(f, util, weights, peak=gemm_peak, eff=eff, precision=precision, hbm_bw=hbm_bw)
    core_fwd, core_bwd = _core_s(model, kind, eff, kernels, core_peak, t=t, s=s, tp=tp, cp=cp)
    act_b = ACT_BYTES[precision]
    mem_bytes, softmax_bytes = _memory_bytes(model, kind, kernels, g, t=t, s=s, tp=tp, sp=sp, act_b=act_b)
    # Casts of fp8 and the named recipes, NVFP4's Hadamard transform, the router kept bf16 (cost.quantization)
    casts = layer_casts(model, kind, precision, input_elements=t * sum(g.inputs), tp=tp, ep=ep, etp=etp,
                        architecture=arch, weight_cache=weight_cache, eff=eff, gemm_peak=gemm_peak,
                        core_peak=core_peak, tokens=t)  # fmt: skip
    gemm_fwd += casts.router_delta_s
    # the backward's two GEMMs: dgrad as the forward, wgrad at the recipe's wgrad rate (bf16: rowwise_with_gw_hp)
    wgrad = gemm_fwd + wgrad_delta_s(precision, each, g.flops, core_peak, eff, forward_16bit_s=casts.router_delta_s)
    mem_fwd = (mem_bytes + casts.hbm_bytes) / hbm_bw + casts.flops / core_peak
    # Fixed cost per kernel (efficiency.kernel_overhead_s, 0 on GPUs), charged to the memory-bound share; CUDA graphs
    # replay a layer's kernels with one launch (dropless MoE layers are captured only in part: charged in full).
    ko = 0.0 if kernels.cuda_graphs and kind.ffn != "moe" else eff.kernel_overhead_s
    n_mem_ops = _mem_ops(model, kind, kernels, g.permute)
    k_fwd = ko * (len(g.flops) + (1 if kind.mixer != "none" else 0) + n_mem_ops)
    mem_bwd = (
        MEMORY_BACKWARD_FACTOR * mem_fwd + casts.backward_hbm_bytes / hbm_bw + BACKWARD_KERNELS_PER_FORWARD * k_fwd
    )
    host_fwd, host_bwd, host_rc = host_calls_s(model, kind, kernels, precision, dtensor_op_s, sp=sp,
                                               recompute=recompute, sac_op_s=sac_op_s)  # fmt: skip
    k_fwd, mem_bwd = k_fwd + host_fwd, mem_bwd + host_bwd
    if recompute == "full":
        rc = gemm_fwd + core_fwd + mem_fwd + k_fwd
    elif recompute == "selective" and kernels.selective_recompute == "attention":
        attn = kind.mixer in ("attention", "mla") and "core_attn" in selected_modules(kernels)
        rc = (core_fwd + softmax_bytes / hbm_bw + ko * (1 + (0 if kernels.flash else 1))) if attn else 0.0
        if kernels.recompute_modules is not None:  # Megatron's --recompute-modules beyond core_attn (recipe_options.py)
            mixer = len(_mixer_gemms(model, kind, t, tp, sp)[0])
            rc += modules_recompute_s(model, kind, selected_modules(kernels), flops=g.flops, mixer_gemms=mixer,
                                      gemm_time=each, t=t, tp=tp, etp=etp, sp=sp, act_b=act_b, ffn_width=g.ffn_width,
                                      hbm_bw=hbm_bw)  # fmt: skip
    elif recompute == "selective":
        rc = OP_SAC_GEMM_FRACTION * gemm_fwd + mem_fwd + ko * (OP_SAC_GEMM_FRACTION * len(g.flops) + n_mem_ops)
    else:
        rc = 0.0
    return LayerTime(gemm_fwd, core_fwd, mem_fwd + k_fwd, gemm_fwd + wgrad, core_bwd, mem_bwd, rc + host_rc)


def hw_rates(hw: HardwareProfile, precision: str) -> tuple[float, float]:
    """(the GEMM peak at the plan's precision, achieved HBM bandwidth)."""
    return hw.peak(precision), hw.gpu.hbm_bandwidth_bytes_per_s * hw.efficiency.hbm


def layer_time(
    model: ModelSpec, hw: HardwareProfile, plan: Plan, engine: Engine, *, moe: bool = False,
    kind: LayerKind | None = None,
) -> LayerTime:  # fmt: skip
    """Forward, backward and recompute time of one layer of `kind` (default: the model's plain transformer layer,
    MoE when `moe`) for one micro-batch on one GPU."""
    if kind is None:
        kind = LayerKind("mla" if model.is_mla else "attention", "moe" if moe else "dense", "global")
    peak, bw = hw_rates(hw, plan.precision)
    core_peak = hw.peak("bf16") if is_low_precision(plan.precision) else peak  # attention stays 16-bit
    return _layer_time(
        model, hw.efficiency, engine.kernels, peak, core_peak, bw, kind=kind, tp=plan.tp, cp=plan.cp, ep=plan.ep,
        etp=plan.expert_tp, sp=plan.sp, b=plan.micro_batch, s=plan.seq_len, precision=plan.precision,
        recompute=plan.recompute, load=routed_load(model, engine, plan.ep) if kind.ffn == "moe" else 1.0,
        grouped=engine.moe.grouped_on(hw.gpu.architecture) and kind.ffn == "moe", arch=hw.gpu.architecture,
        weight_cache=engine.memory.fp8_weight_cache, dtensor_op_s=dtensor_host.op_s(hw, plan, engine),
        sac_op_s=sac_host.op_s(hw, plan.recompute, engine.kernels),
    )  # fmt: skip
