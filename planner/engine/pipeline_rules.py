"""The engine's rules on the pipeline: how it splits the layers (engine/split.py), the split a plan states, and its
sends: Megatron's interleaved schedule without --overlap-p2p-communication needs
pp > 2 (megatron/training/arguments.py validate_args l.1000-1009 @d98e8a64: "pipeline-model-parallel size should be
greater than 2 to avoid having multiple p2p sends and recvs between same 2 ranks per communication batch")."""

from __future__ import annotations

from planner.engine.profile import Engine
from planner.engine.split import (
    FirstLast,
    Split,
    chunk_sizes,
    first_last_pps,
    first_last_problem,
    stated_split,
)
from planner.plan import Plan, Rejected
from planner.specs import ModelSpec

# Why an engine without Megatron's split takes no stated first/last-rank layer counts: by its name, else its policy.
_DEEPSPEED = (
    "DeepSpeed's PipelineModule partitions by partition_method (uniform | parameters | type:REGEX), never by per-rank "
    "counts (deepspeed/runtime/pipe/module.py _partition_layers)"
)
_NO_STATED_SPLIT = {
    "torchtitan": "torchtitan cuts stages by pipeline_parallel_layers_per_stage and first/last_stage_less_layers "
    "(torchtitan/distributed/pipeline_parallel.py); a split of your own"
    " needs module_fqns_per_model_part (config/configs.py), which the "
    "planner neither prices nor writes",
    "deepspeed": _DEEPSPEED,
    "megatron-deepspeed": _DEEPSPEED + ", which --pp-partition-method sets",
    "planner": "its worker builds the layers evenly over the stages (planner/launch/layout.py)",
    "even": "it spreads the layers evenly and has no option for the first and last rank's layer counts",
}
# Where the split runs instead: an engine that takes it; for the planner's worker, the files it emits for one.
_WAY_OUT = {"planner": "emit the plan for megatron or megatron-bridge (--emit)"}


def split_problems(engine: Engine, model: ModelSpec, plan: Plan) -> list[Rejected]:
    """Layers the engine cannot split over the plan's pp·vpp chunks, by its own policy or as the plan states."""
    split, name, p = engine.rules.pipeline_split, engine.name, plan
    if (stated := stated_split(p)) is not None:
        return _stated_problems(engine, model, p, stated)
    if p.pp > 1 and chunk_sizes(model.num_layers, p.pp, p.vpp, split) is None:
        detail = (
            f"{name} cannot split num_layers={model.num_layers} over pp={p.pp} x vpp={p.vpp} chunks "
            f"({_split_rule(split)})"
        )
        return [Rejected(f"{name} cannot split the layers", detail)]
    return []


def _stated_problems(engine: Engine, model: ModelSpec, plan: Plan, stated: FirstLast) -> list[Rejected]:
    """A stated first/last split: Megatron's rules (split.py first_last_problem), or the engine refuses it."""
    given = ", ".join(
        f"{k}={v}" for k, v in (("first_stage_layers", stated.first), ("last_stage_layers", stated.last)) if v
    )
    if engine.rules.pipeline_split != "megatron":
        why = _NO_STATED_SPLIT.get(engine.name) or _NO_STATED_SPLIT.get(engine.rules.pipeline_split)
        why = why or _NO_STATED_SPLIT["even"]
        way = _WAY_OUT.get(engine.name, "use --engine megatron")
        detail = f"{engine.name} takes no stated pipeline split ({given}): {why}; {way} or drop it"
        return [Rejected(f"{engine.name} takes no stated pipeline split", detail)]
    problem = first_last_problem(model.num_layers, plan.pp, plan.vpp, stated)
    if problem is None:
        return []
    fits = first_last_pps(model.num_layers, plan.vpp, stated)
    valid = f"pp in {fits}" if fits else "no pp"
    detail = (
        f"{given} with num_layers={model.num_layers}, pp={plan.pp}, vpp={plan.vpp}: {problem[1]}; Megatron runs "
        f"this split at {valid} with vpp={plan.vpp} (transformer_config.py __post_init__ uneven PP)"
    )
    return [Rejected(problem[0], detail)]


def _split_rule(split: Split) -> str:
    if split == "megatron":
        return (
            "Megatron needs num_layers, or num_layers + 1 or + 2 with the loss and embedding counted, "
            "divisible by pp·vpp, or uneven first/last stages of whole vpp multiples"
        )
    if split == "torchtitan":
        return (
            "torchtitan needs at most num_layers + 2 stages, and beyond two per rank a count that "
            "pipeline_parallel_layers_per_stage gives, with first/last_stage_less_layers of 0 or 1"
        )
    return "every chunk needs a transformer layer: pp·vpp at most num_layers"


def p2p_problems(engine: Engine, plan: Plan) -> list[Rejected]:
    """The interleaved schedule on too few stages for sends the engine does not overlap."""
    least = engine.rules.interleaved_pp_without_p2p_overlap
    if plan.schedule != "interleaved" or engine.comm.p2p_overlap or not 1 < plan.pp < least:
        return []
    detail = (
        f"schedule=interleaved with pp={plan.pp} and pipeline sends not overlapped (p2p_overlap off): {engine.name} "
        f"needs pp >= {least} for it; use --p2p-overlap or pp >= {least}"
    )
    return [Rejected(f"{engine.name}: interleaved without p2p overlap needs more stages", detail)]
