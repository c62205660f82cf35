"""Parameters per rank: what one GPU of a pipeline rank holds after tensor, pipeline and expert parallelism,
before ZeRO sharding. The one place that counts them; memory, gradient traffic, the optimizer step and the
launch worker all read it.

Megatron's splits (Shoeybi et al. 2019, section 3): attention by heads, the MLP by columns then rows, the
embedding and output projection by vocabulary; norms and MoE routers are replicated on every tp rank.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.cost.cache import spec_cache
from planner.cost.stages import Layout, plan_layout
from planner.engine import Engine
from planner.layers import LayerKind, attention_params_per_rank
from planner.plan import Plan
from planner.specs import ModelSpec


def expert_dp(plan: Plan) -> int:
    """The expert data-parallel degree EDP: the expert layers fold ep·etp·EDP onto the tp·cp·dp ranks of a stage
    (Megatron-Core MoE parallel folding, parallel_state.py: ETP·EP·EDP = TP·CP·DP); expert gradients are reduced
    and their optimizer state sharded over EDP (distributed_data_parallel.py, optimizer/__init__.py). With etp =
    tp it is dp·cp/ep."""
    etp = plan.expert_tp
    if etp == plan.tp:
        return max(plan.dp * plan.cp // plan.ep, 1)
    return max(plan.tp * plan.cp * plan.dp // (plan.ep * etp), 1)


@dataclass(frozen=True)
class RankParams:
    """Parameters one GPU of a pipeline rank holds, split by how ZeRO shards them."""

    dense: float  # sharded over the dp·cp group
    expert: float  # sharded over the expert-data-parallel group dp·cp/ep
    largest_unit: float  # largest FSDP unit (a layer, or the embedding and output in the root unit), per rank
    num_gemms: int
    largest_unit_apart: float = 0.0  # the same with the embedding and the output layer units of their own

    def unit(self, edge_groups: str) -> float:
        """The largest unit one gather holds, the embedding and output together (root) or apart (own): the engine's
        memory.fsdp_edge_groups."""
        return self.largest_unit_apart if edge_groups == "own" else self.largest_unit

    @property
    def total(self) -> float:
        return self.dense + self.expert


def kind_params_per_rank(model: ModelSpec, kind: LayerKind, tp: int, ep: int, etp: int) -> tuple[float, float]:
    """(dense, expert) parameters of one layer of this kind on one rank (layers.py says how each piece is split):
    the mixer over tp (MHA with kv heads replicated past num_kv_heads), MLA's down-projections replicated, the
    dense MLP and shared experts over tp, norms and the router replicated, the routed experts over ep, each over
    the expert tensor-parallel degree etp (Megatron's MoE parallel folding; etp defaults to tp)."""
    lp = model.kind_params[kind]
    mixer = attention_params_per_rank(model, tp) if kind.mixer == "attention" else lp.mixer / tp
    dense = mixer + lp.mixer_replicated + lp.norms
    if kind.ffn == "moe":
        dense += lp.router + lp.shared_experts / tp
        return dense, lp.routed_experts / ep / etp
    return dense + lp.dense_mlp / tp, 0.0


def mtp_params_per_rank(model: ModelSpec, tp: int, ep: int, etp: int) -> tuple[float, float]:
    """(dense, expert) parameters of the multi-token-prediction modules on the last pipeline stage (DeepSeek-V3
    report, section 2.2; Megatron places them with the loss, multi_token_prediction.py): per module three norms,
    the 2h -> h projection (column-parallel over tp) and one layer of the main stack's last kind."""
    if not model.mtp_layers:
        return 0.0, 0.0
    last = model.layer_kinds[-1]
    d, e = kind_params_per_rank(model, last, tp, ep, etp)
    h = model.hidden_size
    return model.mtp_layers * (d + 3 * model.norm_params + 2 * h * h / tp), model.mtp_layers * e


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


@spec_cache(maxsize=4096)
def rank_params(
    model: ModelSpec, layout: Layout, *, tp: int, ep: int, rank: int, vocab: int | None = None, etp: int | None = None
) -> RankParams:
    """Parameters held by one GPU of pipeline rank `rank` of the layout, with the embedding and output of
    `vocab` rows (the engine's padded vocabulary, padded_vocab; default the model's) and the MTP modules with
    the loss; experts split over ep and etp (default tp). Ranks that hold the same kinds of layers in the same
    order, and the same ends, hold the same parameters: computed once (_held_params)."""
    kinds = model.layer_kinds
    held = tuple(kinds[layer] for layer in layout.rank_layers(rank))
    ends = (layout.holds_embedding(rank), layout.holds_loss(rank))
    return _held_params(model, held, ends, layout.pp, tp, ep, vocab, tp if etp is None else etp)


def chunk_shares(
    model: ModelSpec, layout: Layout, *, tp: int, ep: int, rank: int, vocab: int | None = None, etp: int | None = None
) -> tuple[float, ...]:
    """Each of pipeline rank `rank`'s chunks' share of its parameters (rank_params), in model order: what a chunk's
    unsharded gradients and gathered weights are of the rank's (cost.moments). The embedding's and the loss's
    chunks hold more than their layers' share."""
    kinds, e = model.layer_kinds, tp if etp is None else etp
    totals = [
        _held_params(model, tuple(kinds[i] for i in c.layers), (c.embedding, c.loss), layout.pp, tp, ep, vocab, e).total
        for c in layout.rank_chunks(rank)
    ]
    whole = sum(totals)
    return tuple(t / whole for t in totals) if whole else tuple(1.0 / len(totals) for _ in totals)


@spec_cache()
def _held_params(
    model: ModelSpec, held: tuple[LayerKind, ...], ends: tuple[bool, bool], pp: int, tp: int, ep: int,
    vocab: int | None, etp: int,
) -> RankParams:  # fmt: skip
    dense = expert = largest = 0.0
    gemms = 0
    per_kind: dict[LayerKind, tuple[float, float]] = {}  # each distinct kind counted once
    for kind in held:
        d, e = per_kind.get(kind) or per_kind.setdefault(kind, kind_params_per_rank(model, kind, tp, ep, etp))
        dense, expert, largest = dense + d, expert + e, max(largest, d + e)
        gemms += kind_gemm_count(model, kind)
    embedding = output = 0.0
    first, last = ends
    if first:
        embedding = embedding_params_per_rank(model, tp, vocab)
    if last:
        output = output_params_per_rank(model, tp, pp, vocab)
        gemms += 1
        md, me = mtp_params_per_rank(model, tp, ep, etp)
        dense, expert = dense + md, expert + me
    edge = embedding + output
    apart = max(largest, embedding, output)
    return RankParams(dense + edge, expert, max(largest, edge), gemms, largest_unit_apart=apart)


def kind_gemm_count(model: ModelSpec, kind: LayerKind) -> int:
    """Weight matrices of one layer that an fp8 recipe keeps scaling state for: q, k, v, o (MLA: q down/up, kv
    down/up, o; Mamba: in and out projections) and the MLP's 2 or 3."""
    mixer = {"attention": 4, "mla": 5, "mamba": 2, "none": 0}[kind.mixer]
    return mixer + (model.mlp_matrices if kind.ffn != "none" else 0)


def plan_params(model: ModelSpec, plan: Plan, engine: Engine, rank: int) -> RankParams:
    """Parameters one GPU of pipeline rank `rank` holds when the engine runs the plan: its layer split and its
    vocabulary padding."""
    vocab = padded_vocab(model.vocab_size, plan.tp, engine.rules.vocab_padding)
    layout = plan_layout(model, plan, engine)
    return rank_params(model, layout, tp=plan.tp, ep=plan.ep, rank=rank, vocab=vocab, etp=plan.expert_tp)
