"""FLOPs of a training step, from the layer's matrix products: what MFU and HFU count.

Counting convention (model FLOPs, what MFU divides): every GEMM is 2·m·n·k; the attention core counts the
full s×s score matrix (QKᵀ and attention×V, 4·s·q per token), not the causal half, which is the convention
of Narayanan et al. 2021 (Sec. 5.1): for GPT-3 this gives exactly ``72·B·s·l·h²·(1 + s/6h) + 6·B·s·h·V`` per
iteration without recompute and ``96·B·s·l·h²·(1 + s/6h + V/16lh)`` with full recompute. Backward = 2 ×
forward (one GEMM for the input gradient and one for the weight gradient per forward GEMM).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, fields

from planner.cost.cache import spec_cache
from planner.engine import Engine
from planner.layers import LayerKind, Mixer
from planner.plan import Plan
from planner.specs import ModelSpec

# torchtitan's per-op selective checkpointing recomputes every second matmul (by count): ~half the
# projection and MLP GEMMs (torchtitan activation_checkpoint.py, _op_sac_save_list). An estimate.
OP_SAC_GEMM_FRACTION = 0.5


def _sum_fields(obj: object) -> float:
    return sum(getattr(obj, f.name) for f in fields(obj))  # type: ignore[arg-type]


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


def keys_per_query(kind: LayerKind, seq_len: int) -> float:
    """Keys each query attends to in the model-FLOPs convention (the whole s×s matrix, causal mask not halved;
    Narayanan et al. 2021): the sequence for global attention, the window for sliding attention, the chunk for
    chunked attention, never more than the sequence."""
    return float(seq_len if kind.window is None else min(kind.window, seq_len))


def mixer_flops_per_token(model: ModelSpec, kind: LayerKind, seq_len: int) -> tuple[float, float, float]:
    """(input projections, attention core or SSM scan, output projection) forward FLOPs per token.

    MHA: QKV 2·h·(q + 2·kv) with GQA; scores + attention×V 4·keys·q; output 2·q·h. MLA (DeepSeek-V2 §2.1): the
    down- and up-projections 2·(their weights); scores 2·keys·heads·(nope + rope), attention×V 2·keys·heads·v;
    output 2·heads·v·h. Mamba-2 as Megatron-LM counts it (megatron/training/training.py
    num_floating_point_operations, mamba_layer_flops): in_proj 2·h·(2·d_in + 2·groups·state + heads), scan
    7·d_in·state, out_proj 2·d_in·h."""
    h = model.hidden_size
    if kind.mixer == "attention":
        q, kv = model.num_attention_heads * model.head_size, model.kv_heads * model.head_size
        return 2.0 * h * (q + 2 * kv), 4.0 * keys_per_query(kind, seq_len) * q, 2.0 * q * h
    if kind.mixer == "mla":
        a = model.attention
        assert a is not None and a.v_head_dim is not None
        heads, v = model.num_attention_heads, a.v_head_dim
        out = 2.0 * heads * v * h
        lp = model.kind_params[kind]
        projections = 2.0 * (lp.mixer + lp.mixer_replicated) - out  # every linear weight is 2 FLOPs a token
        core = 2.0 * keys_per_query(kind, seq_len) * heads * (model.head_size + v)
        return projections, core, out
    if kind.mixer == "mamba":
        m = model.mamba
        assert m is not None
        d_in = m.d_inner
        in_proj = 2.0 * h * (2 * d_in + 2 * m.num_groups * m.state_size + m.num_heads)
        return in_proj, 7.0 * d_in * m.state_size, 2.0 * d_in * h
    return 0.0, 0.0, 0.0


def kind_flops_per_token(model: ModelSpec, kind: LayerKind, seq_len: int) -> ForwardFlops:
    """Forward FLOPs per token of one layer of this kind (biases and elementwise work left out, as Megatron does).

    MLP 2·h·ffn per matrix, 2 or 3 matrices (Shazeer 2020); MoE: router 2·h·E, top_k routed experts and the
    shared experts at their own width (Fedus et al. 2021, Switch; DeepSeek-MoE)."""
    h = model.hidden_size
    qkv, core, out = mixer_flops_per_token(model, kind, seq_len)
    mlp = router = 0.0
    if kind.ffn == "moe" and model.moe is not None:
        m = model.moe
        shared_ffn = m.shared_expert_ffn_hidden_size or m.expert_ffn_hidden_size
        mlp = 2.0 * model.mlp_matrices * h * (m.expert_ffn_hidden_size * m.top_k + shared_ffn * m.num_shared_experts)
        router = 2.0 * h * m.num_experts
    elif kind.ffn == "dense":
        mlp = 2.0 * model.mlp_matrices * h * model.ffn_hidden_size
    return ForwardFlops(qkv_flops=qkv, attention_core_flops=core, attention_out_flops=out, mlp_flops=mlp,
                        router_flops=router)  # fmt: skip


def layer_flops_per_token(model: ModelSpec, seq_len: int, *, moe: bool) -> ForwardFlops:
    """A plain transformer layer (attention or MLA mixer, global attention) with a dense or MoE MLP."""
    mixer: Mixer = "mla" if model.is_mla else "attention"
    return kind_flops_per_token(model, LayerKind(mixer, "moe" if moe else "dense", "global"), seq_len)


@spec_cache()
def flops_per_token_forward(model: ModelSpec, seq_len: int) -> ForwardFlops:
    """Whole-model forward FLOPs per token: every layer by its kind, the MTP modules (each a projection 2·2h·h,
    one layer of the last kind and its own logits), plus the logits 2·h·V."""
    totals = dict.fromkeys((f.name for f in fields(ForwardFlops) if f.name != "logits_flops"), 0.0)
    counts = Counter(model.layer_kinds)
    last = model.layer_kinds[-1]
    counts[last] += model.mtp_layers
    for kind, n in counts.items():
        per = kind_flops_per_token(model, kind, seq_len)
        for name in totals:
            totals[name] += n * getattr(per, name)
    h, d = model.hidden_size, model.mtp_layers
    totals["qkv_flops"] += d * 2.0 * 2 * h * h
    return ForwardFlops(**totals, logits_flops=(1 + d) * 2.0 * h * model.vocab_size)


def causal_share(kind: LayerKind, seq_len: int) -> float:
    """The share of an attention core's score matrix a causal mask leaves to compute: half for global and chunked
    attention, 1 − window/2s for a sliding window (its first window of queries sees fewer keys)."""
    if kind.attention == "sliding":
        return 1.0 - keys_per_query(kind, seq_len) / (2 * seq_len)
    return 0.5


def executed_share(model: ModelSpec, seq_len: int) -> float:
    """Model FLOPs with each attention core at its causal share, over model FLOPs: what the kernels run of what MFU
    counts (Llama 3 70B: 0.93 at 8,192 tokens, 0.64 at 131,072)."""
    total = flops_per_token_forward(model, seq_len).total
    masked = sum(
        n * (1.0 - causal_share(kind, seq_len)) * kind_flops_per_token(model, kind, seq_len).attention_core_flops
        for kind, n in Counter(model.layer_kinds).items()
    )
    return (total - masked) / total if total else 1.0


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
            modules = engine.kernels.recompute_modules
            if modules is not None:  # Megatron's --recompute-modules (cost.recipe_options)
                from planner.cost.recipe_options import modules_recompute_flops_per_token

                return modules_recompute_flops_per_token(model, plan.seq_len, tuple(modules))
            return f.attention_core_flops
        return OP_SAC_GEMM_FRACTION * (f.layers_flops - f.attention_core_flops)
    return 0.0


def hardware_flops_per_step(model: ModelSpec, plan: Plan, engine: Engine) -> float:
    """Model FLOPs plus recompute FLOPs: what HFU counts (Chowdhery et al. 2022, PaLM, App. B)."""
    return model_flops_per_step(model, plan) + recompute_flops_per_token(model, plan, engine) * plan.tokens_per_step
