"""What each piece of the cost depends on: projections of a plan, declared once. The front door (coster.py)
caches every piece by its projection, so a piece is computed once for all the plans that share it (the search
asks about tens of thousands of plans that differ only in the data-parallel degree, the ZeRO stage or the
micro-batch count).

Each projection is an ``operator.attrgetter`` (a tuple of the plan's fields, built in C): the fields a
piece reads, no more (a missing field would make two different plans share a cached answer) and no fewer
than needed to be fast.
"""

from __future__ import annotations

from operator import attrgetter

from planner.plan import STATED_SPLIT

# One layer's kernels and communication for one micro-batch on one GPU (cost.compute.layer_time,
# cost.overlap.layer_comm): its shapes and dtype; recompute is asked separately where a piece takes it.
LAYER = attrgetter("tp", "cp", "ep", "etp", "sp", "micro_batch", "seq_len", "precision")
# The pipeline's layout: which layers, the embedding and the loss sit on each rank (cost.stages).
PIPELINE = attrgetter("pp", "vpp", "schedule", *STATED_SPLIT)
# The parameters each pipeline rank holds (cost.params): the splits that divide them (the layout's split asked apart).
RANK_PARAMS = attrgetter("tp", "pp", "vpp", "ep")
# Model states per rank (cost.states), before the ZeRO stage and the micro-batch count are chosen.
STATES = attrgetter("tp", "pp", "vpp", "ep", "etp", "dp", "cp", "precision", *STATED_SPLIT)
# What one layer keeps for backward and its working set (cost.activations), recompute asked separately, and with it
# the routed rows the busiest expert-parallel rank keeps (cost.moe.routed_load), which ep caps.
ACTIVATIONS = attrgetter("micro_batch", "seq_len", "tp", "sp", "cp", "etp", "precision")
# A step-time lower bound per slot: the layer shapes, the pipeline and its schedule.
SLOT = attrgetter(
    "tp",
    "pp",
    "vpp",
    "cp",
    "ep",
    "etp",
    "sp",
    "micro_batch",
    "seq_len",
    "recompute",
    "schedule",
    "precision",
    *STATED_SPLIT,
)
