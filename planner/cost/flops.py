"""FLOPs of a training step, from the layer's matrix products: what MFU and HFU count.

Counting convention (model FLOPs, what MFU divides): every GEMM is 2·m·n·k; the attention core counts the
full s×s score matrix (QKᵀ and attention×V, 4·s·q per token), not the causal half, which is the convention
of Narayanan et al. 2021 (Sec. 5.1): for GPT-3 this gives exactly ``72·B·s·l·h²·(1 + s/6h) + 6·B·s·h·V`` per
iteration without recompute and ``96·B·s·l·h²·(1 + s/6h + V/16lh)`` with full recompute. Backward = 2 ×
forward (one GEMM for the input gradient and one for the weight gradient per forward GEMM).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from planner.cost.cache import spec_cache
from planner.engine import Engine
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
