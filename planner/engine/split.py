"""How an engine splits the transformer layers over pipeline chunks (layers per chunk in model order).

The policy is the engine's (Rules.pipeline_split), or the first and last ranks' counts a plan states
(FirstLast, plan_split); cost/stages.py builds the Layout from it, and the engine's rules
(engine/pipeline_rules.py) reject a plan whose layers the engine cannot split.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from planner.plan import Plan

Split = Literal["even", "megatron", "torchtitan"]


@dataclass(frozen=True)
class FirstLast:
    """A split the user states (plan.first_stage_layers / last_stage_layers): the transformer layers of the first
    and the last pipeline rank, None for one not stated; the other ranks share the rest evenly, as Megatron-LM's
    --decoder-first/last-pipeline-num-layers place them (megatron/core/transformer/transformer_block.py
    get_num_layers_to_build)."""

    first: int | None
    last: int | None


SplitPolicy = Split | FirstLast  # an engine's policy, or the split the plan states


def stated_split(plan: Plan) -> FirstLast | None:
    """The split the plan states (its first_stage_layers / last_stage_layers), None where it states none."""
    if plan.first_stage_layers is None and plan.last_stage_layers is None:
        return None
    return FirstLast(plan.first_stage_layers, plan.last_stage_layers)


def even_chunk_sizes(num_layers: int, num_chunks: int) -> list[int]:
    """Layers per chunk, as even as possible; where they do not divide, the first and last chunks get
    fewer, because they also carry the embedding and the output layer (how Llama 3 405B put 126 layers on
    16 stages, Dubey et al. 2024, section 3.3.2). The extra layers go to the middle chunks first."""
    base, extra = divmod(num_layers, num_chunks)
    sizes = [base] * num_chunks
    order = sorted(range(num_chunks), key=lambda c: (c in (0, num_chunks - 1), abs(c - (num_chunks - 1) / 2)))
    for c in order[:extra]:
        sizes[c] += 1
    return sizes


@dataclass(frozen=True)
class MegatronSplit:
    """How Megatron-LM splits the layers, and with which options (what the megatron emitter writes)."""

    sizes: tuple[int, ...]  # transformer layers per chunk, model order
    method: Literal["even", "account_embedding_loss", "account_loss", "first_last", "layout"]
    first: int = 0  # first_last: transformer layers on the first and the last pipeline rank (0: not stated)
    last: int = 0


def megatron_split(num_layers: int, pp: int, vpp: int) -> MegatronSplit | None:
    """How Megatron-LM can split the layers, in the order a user reaches for the options (None: it cannot).

    1. Even: L divisible by pp·vpp (megatron/training/arguments.py, "Number of layers should be divisible by
       the pipeline-model-parallel size").
    2. --account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split: the embedding and
       the loss each count as a layer, L + 2 divisible by pp·vpp, so the first and the last chunk build one
       transformer layer fewer, possibly none (transformer_block.py get_num_layers_to_build; the Llama 3.1
       405B recipe in Megatron-Bridge: 126 layers, pp 8, vpp 2). Then the loss alone, L + 1.
    3. --decoder-first/last-pipeline-num-layers: the middle ranks m layers each (m divisible by vpp), the
       first and last ranks the rest, each > 0, divisible by vpp, and at most m (transformer_config.py
       __post_init__); the smallest such m.
    4. --pipeline-model-parallel-layout (Megatron-Core 0.13+, transformer/pipeline_parallel_layer_layout.py): the
       layers of each of the pp·vpp stages named one by one, any count per stage, so any split; the embedding
       and the loss weigh one layer each, the L + 2 spread as evenly as they go (balanced_sizes), as
       Megatron-Bridge's DeepSeek-V3 recipe lays out its 61 layers on pp 8 x vpp 4: "Et|(tt|)*30mL".
    """
    chunks = pp * vpp
    if num_layers % chunks == 0:
        return MegatronSplit(tuple([num_layers // chunks] * chunks), "even")
    if chunks > 1:
        for extra, first_less, method in ((2, 1, "account_embedding_loss"), (1, 0, "account_loss")):
            if (num_layers + extra) % chunks == 0:
                n = (num_layers + extra) // chunks
                sizes = [n] * chunks
                sizes[0] -= first_less
                sizes[-1] -= 1
                return MegatronSplit(tuple(sizes), method)  # type: ignore[arg-type]
    uneven = _first_last(num_layers, pp, vpp) if pp > 1 else None
    if uneven is not None:
        return uneven
    if pp > 1 and chunks <= num_layers + 2:
        return MegatronSplit(tuple(balanced_sizes(num_layers, chunks)), "layout")
    return None


def plan_megatron_split(num_layers: int, plan: Plan) -> MegatronSplit | None:
    """How Megatron-LM splits the plan's layers: as the plan states them (its first and last rank's layers, the
    engine's rules having checked them), else megatron_split."""
    stated = stated_split(plan)
    if stated is None:
        return megatron_split(num_layers, plan.pp, plan.vpp)
    sizes = tuple(first_last_sizes(num_layers, plan.pp, plan.vpp, stated))
    return MegatronSplit(sizes, "first_last", stated.first or 0, stated.last or 0)


def _first_last(num_layers: int, pp: int, vpp: int) -> MegatronSplit | None:
    """Option 3 of megatron_split: --decoder-first/last-pipeline-num-layers, the smallest middle count m."""
    m = -(-num_layers // pp)
    m += -m % vpp
    while m <= num_layers:
        rest = num_layers - (pp - 2) * m
        if rest < 2 * vpp:
            return None
        first = vpp * (rest // (2 * vpp))
        last = rest - first
        if rest % vpp == 0 and last <= m:  # the middle ranks then hold m each, as first_last_sizes spreads them
            sizes = first_last_sizes(num_layers, pp, vpp, FirstLast(first, last))
            return MegatronSplit(tuple(sizes), "first_last", first, last)
        m += vpp
    return None


def megatron_chunk_sizes(num_layers: int, pp: int, vpp: int) -> list[int] | None:
    split = megatron_split(num_layers, pp, vpp)
    return None if split is None else list(split.sizes)


@dataclass(frozen=True)
class TorchtitanSplit:
    """How torchtitan cuts the layers into pp·vpp stages, and with which options (what its emitters write)."""

    sizes: tuple[int, ...]  # transformer layers per stage, model order
    layers_per_stage: int | None  # pipeline_parallel_layers_per_stage; None: the default stage count
    first_less: int = 1  # pipeline_parallel_first_stage_less_layers: what the embedding weighs, in layers
    last_less: int = 1  # pipeline_parallel_last_stage_less_layers: what the norm + output weigh

    def config_fields(self) -> dict[str, int]:
        """The ParallelismConfig fields that cut these stages: pipeline_parallel_layers_per_stage beyond the
        default stage count (one per rank for 1F1B/GPipe, two for Interleaved1F1B), the first/last weights where
        not their default 1."""
        fields = {"pipeline_parallel_layers_per_stage": self.layers_per_stage} if self.layers_per_stage else {}
        less = {"first": self.first_less, "last": self.last_less}
        return fields | {f"pipeline_parallel_{k}_stage_less_layers": n for k, n in less.items() if n != 1}


# The first/last_stage_less_layers the planner tries, torchtitan's default (1, 1) first (v0.2.2
# config/job_config.py l.377-387; config/configs.py at 0.3.0): a user sets them to 0 where the default cannot
# cut the stages, as the 80 layers of Llama 3 70B on pp 4 x vpp 4 need (82 effective layers make 14 or 17
# stages, 80 make 16).
_LESS_LAYERS = ((1, 1), (0, 0), (1, 0), (0, 1))


def torchtitan_split(num_layers: int, pp: int, vpp: int) -> TorchtitanSplit | None:
    """torchtitan's split (v0.2.2 distributed/pipeline_parallel.py, pipeline_llm and
    generate_llm_fqn_per_model_part): the embedding and the norm + output weigh first_less and last_less layers;
    the L + first_less + last_less effective layers go over the stages, the first of them one more where they do
    not divide. Up to two stages per rank is the default count (one per rank, two for interleaved schedules);
    beyond, pipeline_parallel_layers_per_stage sets it, as ceil(effective / per) stages. torchtitan also needs each
    weight at most the layers per stage, which weights of 0 or 1 meet wherever the stages are at most the effective
    layers. None when no weights in _LESS_LAYERS give pp·vpp stages."""
    stages = pp * vpp
    for first, last in _LESS_LAYERS:
        effective = num_layers + first + last
        if stages > effective:
            continue
        per = None if vpp <= 2 else -(-effective // stages)
        if per is not None and -(-effective // per) != stages:
            continue
        return TorchtitanSplit(tuple(balanced_sizes(num_layers, stages, first, last)), per, first, last)
    return None


def balanced_sizes(num_layers: int, stages: int, first: int = 1, last: int = 1) -> list[int]:
    """Transformer layers per stage when the embedding weighs `first` layers and the loss (norm + output) `last`:
    the L + first + last spread over the stages, the first ones one more where they do not divide, then `first`
    fewer on the first stage and `last` fewer on the last (torchtitan's generate_llm_fqn_per_model_part; a
    Megatron layout balanced the same way, one layer each). Needs stages <= L + first + last."""
    base, extra = divmod(num_layers + first + last, stages)
    sizes = [base + 1] * extra + [base] * (stages - extra)
    sizes[0] -= first
    sizes[-1] -= last
    return sizes


def torchtitan_chunk_sizes(num_layers: int, pp: int, vpp: int) -> list[int] | None:
    """Transformer layers per chunk under torchtitan's split (torchtitan_split; None: it cannot cut them)."""
    split = torchtitan_split(num_layers, pp, vpp)
    return None if split is None else list(split.sizes)


def chunk_sizes(num_layers: int, pp: int, vpp: int, split: SplitPolicy = "even") -> list[int] | None:
    """Layers per chunk in model order under an engine's split policy or the stated one (None: it cannot split)."""
    if isinstance(split, FirstLast):
        return None if first_last_problem(num_layers, pp, vpp, split) else first_last_sizes(num_layers, pp, vpp, split)
    if split == "megatron":
        return megatron_chunk_sizes(num_layers, pp, vpp)
    if split == "torchtitan":
        return torchtitan_chunk_sizes(num_layers, pp, vpp)
    if pp * vpp > num_layers:  # every chunk holds a transformer layer
        return None
    return even_chunk_sizes(num_layers, pp * vpp)


def first_last_sizes(num_layers: int, pp: int, vpp: int, split: FirstLast) -> list[int]:
    """Layers per chunk of a stated split (first_last_problem: none): the first and the last rank as stated, the
    middle ranks the rest evenly, each rank's layers spread evenly over its vpp chunks (transformer_block.py
    get_num_layers_to_build: a rank's count divided by the virtual pipeline size)."""
    rest, ranks = num_layers, pp
    for n in (split.first, split.last):
        if n is not None:
            rest, ranks = rest - n, ranks - 1
    middle = rest // ranks if ranks else 0
    per_rank = [middle] * pp
    if split.first is not None:
        per_rank[0] = split.first
    if split.last is not None:
        per_rank[-1] = split.last
    return [per_rank[c % pp] // vpp for c in range(pp * vpp)]


def first_last_problem(num_layers: int, pp: int, vpp: int, split: FirstLast) -> tuple[str, str] | None:
    """(reason, what is wrong) where Megatron-LM refuses the stated split, else None. Its rules
    (megatron/core/transformer/transformer_config.py __post_init__, "Uneven PP", l.2294-2367 @d98e8a64): each count
    > 0 and, with virtual stages, divisible by vpp; the layers left over fill the middle ranks or there are none
    (and no middle rank); they divide by the middle ranks, and each middle rank's count by vpp. Besides: a split
    needs a pipeline (pp > 1), and first + last at most num_layers."""
    stated = [n for n in (split.first, split.last) if n is not None]
    if pp == 1:
        return "stated split needs pp > 1", "there is one pipeline rank (pp=1)"
    bad = [n for n in stated if n % vpp]
    if bad:
        return (
            "stated split not divisible by vpp",
            f"{bad[0]} layers on one rank do not split into its vpp={vpp} chunks",
        )
    rest, ranks = num_layers - sum(stated), pp - len(stated)
    if rest < 0:
        return "stated split does not fit pp", f"the stated ranks hold {sum(stated)} of the model's {num_layers} layers"
    if bool(rest) != bool(ranks):
        return "stated split does not fit pp", f"{rest} layers are left for {ranks} middle ranks"
    if ranks and rest % ranks:
        return "stated split does not fit pp", f"the {rest} layers left do not divide over the {ranks} middle ranks"
    if ranks and (rest // ranks) % vpp:
        return (
            "stated split not divisible by vpp",
            f"{rest // ranks} layers per middle rank do not split into vpp={vpp}",
        )
    return None


def first_last_pps(num_layers: int, vpp: int, split: FirstLast, limit: int = 8) -> list[int]:
    """The pipeline degrees a stated split fits (at vpp), the first `limit` of them: what a refusal suggests (the
    search asks it for every structure it refuses: computed once per layer count, vpp and split)."""
    return list(_pps_fitting(num_layers, vpp, split)[:limit])


@cache
def _pps_fitting(num_layers: int, vpp: int, split: FirstLast) -> tuple[int, ...]:
    return tuple(pp for pp in range(2, num_layers + 3) if first_last_problem(num_layers, pp, vpp, split) is None)
