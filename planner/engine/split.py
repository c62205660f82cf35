"""How an engine splits the transformer layers over pipeline chunks (layers per chunk in model order).

The policy is the engine's (Rules.pipeline_split); cost/stages.py builds the Layout from it, and the
engine's rules reject a plan whose layers the engine cannot split.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Split = Literal["even", "megatron", "torchtitan"]


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
    first: int = 0  # first_last: transformer layers on the first and the last pipeline rank
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


def _first_last(num_layers: int, pp: int, vpp: int) -> MegatronSplit | None:
    """Option 3 of megatron_split: --decoder-first/last-pipeline-num-layers, the smallest middle count m."""
    chunks = pp * vpp
    m = -(-num_layers // pp)
    m += -m % vpp
    while m <= num_layers:
        rest = num_layers - (pp - 2) * m
        if rest < 2 * vpp:
            return None
        first = vpp * (rest // (2 * vpp))
        last = rest - first
        if rest % vpp == 0 and last <= m:
            per_rank = [first] + [m] * (pp - 2) + [last]
            return MegatronSplit(tuple(per_rank[c % pp] // vpp for c in range(chunks)), "first_last", first, last)
        m += vpp
    return None


def megatron_chunk_sizes(num_layers: int, pp: int, vpp: int) -> list[int] | None:
    split = megatron_split(num_layers, pp, vpp)
    return None if split is None else list(split.sizes)


def torchtitan_layers_per_stage(num_layers: int, stages: int) -> int | None:
    """pipeline_parallel_layers_per_stage that makes torchtitan cut exactly `stages` stages: it builds
    ceil((L + 2) / per) of them (pipeline_parallel.py _get_pipeline_metadata); None when no value does."""
    effective = num_layers + 2
    per = -(-effective // stages)
    return per if -(-effective // per) == stages else None


def balanced_sizes(num_layers: int, stages: int) -> list[int]:
    """Transformer layers per stage when the embedding and the loss (norm + output) each weigh one layer: the L + 2
    spread over the stages, the first (L + 2) mod stages one more, then one fewer on the first stage and the last
    (torchtitan's generate_llm_fqn_per_model_part; a Megatron layout balanced the same way). Needs stages <= L + 2."""
    base, extra = divmod(num_layers + 2, stages)
    sizes = [base + 1] * extra + [base] * (stages - extra)
    sizes[0] -= 1
    sizes[-1] -= 1
    return sizes


def torchtitan_chunk_sizes(num_layers: int, pp: int, vpp: int) -> list[int] | None:
    """torchtitan's split: the embedding and the norm + output each weigh one layer; L + 2 effective layers
    go over the pp·vpp stages, the first (L + 2) mod stages of them one more; the first stage then builds
    one transformer layer fewer, the last one fewer (torchtitan v0.2.2 distributed/pipeline_parallel.py,
    generate_llm_fqn_per_model_part). None when there are more stages than effective layers, or when a count of
    stages other than its default (one per rank, two for interleaved schedules) is one that no
    pipeline_parallel_layers_per_stage gives (torchtitan_layers_per_stage)."""
    stages = pp * vpp
    if stages > num_layers + 2 or (vpp > 2 and torchtitan_layers_per_stage(num_layers, stages) is None):
        return None
    return balanced_sizes(num_layers, stages)


def chunk_sizes(num_layers: int, pp: int, vpp: int, split: Split = "even") -> list[int] | None:
    """Layers per chunk in model order under an engine's split policy (None: the engine cannot split it)."""
    if split == "megatron":
        return megatron_chunk_sizes(num_layers, pp, vpp)
    if split == "torchtitan":
        return torchtitan_chunk_sizes(num_layers, pp, vpp)
    if pp * vpp > num_layers:  # every chunk holds a transformer layer
        return None
    return even_chunk_sizes(num_layers, pp * vpp)
