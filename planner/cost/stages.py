"""The one layer layout: which transformer layers, and the embedding and the loss, sit on which pipeline
rank and model chunk (virtual stage).

Every other piece of the planner asks this module: memory (parameters and activations per rank), compute
(layers per slot), communication (gradient volumes), the launch worker (which modules a rank builds) and the
emitters (how many layers each engine's chunk gets).

A plan with pipeline degree p and v virtual stages per rank cuts the model into p·v chunks of consecutive
layers; chunk c runs on pipeline rank c mod p, so rank r holds chunks r, r + p, r + 2p, ... (Narayanan et
al. 2021, section 2.2.2). Chunk 0 also holds the embedding, the last chunk the final norm, the output
projection and the loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from planner.cost.cache import spec_cache
from planner.engine.split import SplitPolicy, chunk_sizes, stated_split
from planner.errors import PlannerError
from planner.plan import microbatch_group

if TYPE_CHECKING:
    from planner.engine import Engine
    from planner.layers import LayerKind
    from planner.plan import Plan
    from planner.specs import ModelSpec


@dataclass(frozen=True)
class Chunk:
    """One model chunk (virtual pipeline stage)."""

    index: int  # global virtual stage 0 .. pp·vpp − 1, in model order
    rank: int  # the pipeline rank that runs it
    first_layer: int
    num_layers: int
    embedding: bool  # holds the token (and position) embedding
    loss: bool  # holds the final norm, the output projection and the loss

    @property
    def layers(self) -> range:
        return range(self.first_layer, self.first_layer + self.num_layers)


@dataclass(frozen=True, eq=False)
class Layout:
    """The chunks of one plan, in model order. Hashed by a flat key (cost functions cache on layouts)."""

    num_layers: int
    pp: int
    vpp: int
    chunks: tuple[Chunk, ...]

    def __post_init__(self) -> None:
        key = (self.pp, tuple((c.num_layers, c.rank, c.embedding, c.loss) for c in self.chunks))
        object.__setattr__(self, "_key", key)
        object.__setattr__(self, "_hash", hash(key))
        by_rank: list[list[Chunk]] = [[] for _ in range(self.pp)]
        for c in self.chunks:
            by_rank[c.rank].append(c)
        object.__setattr__(self, "_by_rank", tuple(tuple(cs) for cs in by_rank))

    def __hash__(self) -> int:
        return self._hash  # type: ignore[attr-defined]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layout) and self._key == other._key  # type: ignore[attr-defined]

    def rank_chunks(self, rank: int) -> tuple[Chunk, ...]:
        """The chunks pipeline rank `rank` runs, in model order."""
        return self._by_rank[rank]  # type: ignore[attr-defined]

    def rank_layers(self, rank: int) -> tuple[int, ...]:
        """Global indices of every transformer layer pipeline rank `rank` holds."""
        return tuple(i for c in self.rank_chunks(rank) for i in c.layers)

    def chunk_sizes(self, rank: int) -> tuple[int, ...]:
        """The layers of each chunk pipeline rank `rank` runs, in model order."""
        return tuple(c.num_layers for c in self.rank_chunks(rank))

    def num_rank_layers(self, rank: int) -> int:
        return sum(c.num_layers for c in self.rank_chunks(rank))

    def holds_embedding(self, rank: int) -> bool:
        return any(c.embedding for c in self.rank_chunks(rank))

    def holds_loss(self, rank: int) -> bool:
        return any(c.loss for c in self.rank_chunks(rank))

    @property
    def last_rank(self) -> int:
        """The pipeline rank of the last chunk (the one with the loss)."""
        return self.chunks[-1].rank


def layout_from_sizes(sizes: list[int], *, pp: int, v_shape: bool = False) -> Layout:
    """A layout from the layer count of each chunk in model order (len(sizes) = pp·vpp): chunk c on rank c mod pp
    (interleaved), or in a V (DualPipeV: chunk c on rank c for the first pp, then back, 2pp − 1 − c, so rank 0
    holds the first and the last chunk: the embedding and the loss, DeepSeek-V3 §3.2.3)."""
    chunks, start = [], 0
    last = len(sizes) - 1
    for c, n in enumerate(sizes):
        rank = (c if c < pp else 2 * pp - 1 - c) if v_shape else c % pp
        chunks.append(Chunk(index=c, rank=rank, first_layer=start, num_layers=n, embedding=c == 0, loss=c == last))
        start += n
    return Layout(num_layers=start, pp=pp, vpp=len(sizes) // pp, chunks=tuple(chunks))


@lru_cache(maxsize=4096)
def layer_layout(num_layers: int, pp: int, vpp: int = 1, split: SplitPolicy = "even", v_shape: bool = False) -> Layout:
    """The layout of `num_layers` layers over pp ranks with vpp chunks each, as the engine's `split` policy
    places them (chunk_sizes), interleaved or (v_shape, DualPipeV) in a V. Plans reach here after the engine's
    rules; an impossible split is an error."""
    sizes = chunk_sizes(num_layers, pp, vpp, split)
    if sizes is None:
        raise PlannerError(f"{split} cannot split {num_layers} layers over pp={pp} x vpp={vpp} chunks")
    return layout_from_sizes(sizes, pp=pp, v_shape=v_shape)


Mix = tuple[tuple["LayerKind", int], ...]  # (layer kind, how many) in the order the kinds first appear


@spec_cache(maxsize=8192)
def rank_mix(model: ModelSpec, layout: Layout, rank: int) -> Mix:
    """The kinds of layer pipeline rank `rank` holds, counted (layers.LayerKind): what its parameters, time and
    activations add up over. The multi-token-prediction modules (DeepSeek-V3) sit with the loss, on the last
    stage, each one layer of the stack's last kind (Megatron's multi_token_prediction.py)."""
    kinds = model.layer_kinds
    counts: dict[LayerKind, int] = {}
    for i in layout.rank_layers(rank):
        counts[kinds[i]] = counts.get(kinds[i], 0) + 1
    if model.mtp_layers and layout.holds_loss(rank):
        counts[kinds[-1]] = counts.get(kinds[-1], 0) + model.mtp_layers
    return tuple(counts.items())


def plan_layout(model: ModelSpec, plan: Plan, engine: Engine) -> Layout:
    """The layout the engine builds for the plan (plan_split)."""
    return layer_layout(model.num_layers, plan.pp, plan.vpp, plan_split(plan, engine), v_shape(plan))


def plan_split(plan: Plan, engine: Engine) -> SplitPolicy:
    """How the plan's layers split: as the plan states (its first and last rank's layers, which the engine's rules
    check), else by the engine's own policy."""
    return stated_split(plan) or engine.rules.pipeline_split


def warmup_chunks(pp: int, vpp: int, num_microbatches: int, rank: int = 0) -> int:
    """Forward chunks pipeline rank `rank` runs before its first backward in an interleaved 1F1B whose virtual
    stages take the micro-batches N at a time (plan.microbatch_group): 2(p − rank − 1) + (v − 1)·N
    (megatron/core/pipeline_parallel/schedules.py get_pp_rank_microbatches; torch's ScheduleInterleaved1F1B
    warmup_ops; Narayanan et al. 2021 §2.2), at most the step's m·v chunks."""
    group = microbatch_group(num_microbatches, pp)
    return min(2 * (pp - rank - 1) + (vpp - 1) * group, num_microbatches * vpp)


def v_shape(plan: Plan) -> bool:
    """Whether the plan's chunks sit in a V (DualPipeV) rather than interleaved."""
    return plan.schedule == "dualpipev"
