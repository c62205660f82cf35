"""Parameters per rank: what one GPU of a pipeline rank holds after tensor, pipeline and expert parallelism,
before ZeRO sharding. The one place that counts them; memory, gradient traffic, the optimizer step and the
launch worker all read it.

Megatron's splits (Shoeybi et al. 2019, section 3): attention by heads, the MLP by columns then rows, the
embedding and output projection by vocabulary; norms and MoE routers are replicated on every tp rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from planner.cost.stages import Layout, plan_layout
from planner.engine import Engine
from planner.plan import Plan
from planner.specs import ModelSpec


@dataclass(frozen=True)
class RankParams:
    """Parameters one GPU of a pipeline rank holds, split by how ZeRO shards them."""

    dense: float  # sharded over the dp·cp group
    expert: float  # sharded over the expert-data-parallel group dp·cp/ep
    largest_unit: float  # largest FSDP unit (a layer, or the embedding/output block), per rank
    num_gemms: int

    @property
    def total(self) -> float:
        return self.dense + self.expert


def attention_params_per_rank(model: ModelSpec, tp: int) -> float:
    """Megatron splits Q and the output projection by heads; K and V heads are split too, or
    replicated when tp exceeds num_kv_heads (each rank keeps one kv head)."""
    h, hd = model.hidden_size, model.head_size
    q = model.num_attention_heads * hd
    kv_per_rank = max(model.kv_heads / tp, 1) * hd
    weights = h * q / tp + 2 * h * kv_per_rank + q * h / tp
    bias = (q / tp + 2 * kv_per_rank + h) if model.has_bias else 0
    return weights + bias


def layer_params_per_rank(model: ModelSpec, layer: int, tp: int, ep: int) -> tuple[float, float]:
    """(dense, expert) parameters of one layer on one rank. Norms are replicated across tp."""
    dense = attention_params_per_rank(model, tp) + 2 * model.norm_params
    if model.is_moe_layer(layer):
        m = model.moe
        assert m is not None
        dense += model.hidden_size * m.num_experts  # router, replicated
        dense += m.num_shared_experts * model.expert_params / tp
        expert = (m.num_experts / ep) * model.expert_params / tp
        return dense, expert
    return dense + model.mlp_params(model.ffn_hidden_size) / tp, 0.0


def padded_vocab(vocab_size: int, tp: int, multiple: int) -> int:
    """The vocabulary as the engine stores it: padded up to a multiple of `multiple`·tp so each tp rank gets
    an equal slice of a GEMM-friendly size (Megatron's --make-vocab-size-divisible-by, default 128,
    megatron/training/tokenizer/tokenizer.py _vocab_size_with_padding); multiple 0: not padded."""
    if multiple <= 0:
        return vocab_size
    step = multiple * tp
    return -(-vocab_size // step) * step


def embedding_params_per_rank(model: ModelSpec, tp: int, vocab: int | None = None) -> float:
    """The vocab-parallel token embedding (of the engine's padded `vocab`) plus the (replicated) learned
    position table."""
    pos = model.max_seq_len * model.hidden_size if model.position_embedding == "learned" else 0
    return (vocab or model.vocab_size) * model.hidden_size / tp + pos


def output_params_per_rank(model: ModelSpec, tp: int, pp: int, vocab: int | None = None) -> float:
    """The final norm and the vocab-parallel output projection; a tied projection is a second copy of the
    embedding when it sits on another pipeline rank (Megatron keeps both in sync with an all-reduce)."""
    v = vocab or model.vocab_size
    out = v * model.hidden_size / tp if (not model.tied_embeddings or pp > 1) else 0.0
    return out + model.norm_params


@lru_cache(maxsize=4096)
def rank_params(
    model: ModelSpec, layout: Layout, *, tp: int, ep: int, rank: int, vocab: int | None = None
) -> RankParams:
    """Parameters held by one GPU of pipeline rank `rank` of the layout, with the embedding and output of
    `vocab` rows (the engine's padded vocabulary, padded_vocab; default the model's)."""
    dense = expert = largest = 0.0
    gemms = 0
    kinds: dict[bool, tuple[float, float]] = {}  # a dense and an MoE layer: each counted once
    for layer in layout.rank_layers(rank):
        moe = model.is_moe_layer(layer)
        d, e = kinds.get(moe) or kinds.setdefault(moe, layer_params_per_rank(model, layer, tp, ep))
        dense, expert, largest = dense + d, expert + e, max(largest, d + e)
        gemms += 4 + model.mlp_matrices
    edge = 0.0
    if layout.holds_embedding(rank):
        edge += embedding_params_per_rank(model, tp, vocab)
    if layout.holds_loss(rank):
        edge += output_params_per_rank(model, tp, layout.pp, vocab)
        gemms += 1
    return RankParams(dense=dense + edge, expert=expert, largest_unit=max(largest, edge), num_gemms=gemms)


def plan_params(model: ModelSpec, plan: Plan, engine: Engine, rank: int) -> RankParams:
    """Parameters one GPU of pipeline rank `rank` holds when the engine runs the plan: its layer split and its
    vocabulary padding."""
    vocab = padded_vocab(model.vocab_size, plan.tp, engine.rules.vocab_padding)
    return rank_params(model, plan_layout(model, plan, engine), tp=plan.tp, ep=plan.ep, rank=rank, vocab=vocab)
