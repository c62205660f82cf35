"""How a Megatron argument dump lays the transformer layers on pipeline chunks, as far as the planner can price it:
the most layers a chunk builds (for a block recompute's share), and what the planner does not model of an uneven
split or of the micro-batch group of an interleaved schedule. Field names are Megatron's `args`
(megatron/training/arguments.py @d98e8a64)."""

from __future__ import annotations

from typing import Any, Protocol

from planner.engine.split import megatron_split
from planner.plan import microbatch_group

# The arguments that set an uneven split (arguments.py l.3095-3105 @d98e8a64; transformer_config.py
# __post_init__, transformer/pipeline_parallel_layer_layout.py): the first and last pipeline ranks' layer counts,
# or every stage's layers named one by one.
UNEVEN = ("decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers", "pipeline_model_parallel_layout")


class Args(Protocol):
    def get(self, name: str, *aliases: str) -> Any: ...


def chunk_layers(a: Args, *, pp: int, vpp: int) -> int | None:
    """The transformer layers each pipeline chunk builds when they split evenly (the largest share where they do
    not divide); None when the dump sets an uneven split or states no layer count."""
    layers = a.get("num_layers")
    if not isinstance(layers, int) or any(a.get(k) is not None for k in UNEVEN):
        return None
    return -(-layers // (pp * vpp))


def stated_split(a: Args) -> dict[str, int]:
    """The first and last pipeline ranks' layer counts a dump sets (--decoder-first/last-pipeline-num-layers), as
    the plan states them (plan.py first_stage_layers, last_stage_layers); none where a layout names every stage."""
    if a.get(UNEVEN[2]) is not None:
        return {}
    fields = {"first_stage_layers": a.get(UNEVEN[0]), "last_stage_layers": a.get(UNEVEN[1])}
    return {k: v for k, v in fields.items() if isinstance(v, int)}


def split_notes(a: Args, *, pp: int, vpp: int) -> list[str]:
    """What the run's uneven pipeline split is, where the plan cannot state it (a layout naming every stage) and it
    is not the one the planner prices for its layer count (engine/split.py megatron_split: even where the layers
    divide, else first/last ranks or a balanced layout)."""
    stated = {k: a.get(k) for k in UNEVEN if a.get(k) is not None}
    if not stated or stated_split(a):
        return []
    layers = a.get("num_layers")
    split = megatron_split(layers, pp, vpp) if isinstance(layers, int) else None
    planned = f"{list(split.sizes)} layers per chunk" if split else "no split it can price"
    said = ", ".join(f"{k} {v}" for k, v in stated.items())
    return [f"pipeline split: the run sets {said}, which is not modelled; the planner prices {planned} instead"]


GROUP_FIELDS = ("pp", "vpp", "dp", "global_batch", "micro_batch")  # the plan's, that fix its micro-batch group


def group_notes(a: Args, plan: dict[str, Any]) -> list[str]:
    """A micro-batch group the run sets (--microbatch-group-size-per-virtual-pipeline-stage, Megatron-Core 0.10+)
    other than the one the planner prices for the run's micro-batches (plan.microbatch_group: pp where pp divides
    them): a larger group warms up more chunks and keeps more activations in flight."""
    values = (a.get("microbatch_group_size_per_vp_stage"), *(plan.get(k) for k in GROUP_FIELDS))
    if not all(isinstance(v, int) and v > 0 for v in values):
        return []
    stated, pp, vpp, dp, batch, micro = (int(v) for v in values)
    if vpp == 1 or batch % (micro * dp):
        return []
    priced = microbatch_group(batch // (micro * dp), pp)
    if stated == priced:
        return []
    return [
        f"micro-batch group: the run sets microbatch_group_size_per_vp_stage {stated}, which is not modelled; the "
        f"planner prices {priced} (its warm-up and the activations in flight grow with the group)"
    ]
