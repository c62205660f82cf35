"""The model spec the worker builds (pure): shrunk for a rehearsal that keeps the plan's shape, untied where it
unties."""

from __future__ import annotations

from pydantic import ValidationError

from planner.errors import PlannerError
from planner.io.planfile import pydantic_message
from planner.plan import Plan
from planner.specs import ModelSpec


def shrink(model: ModelSpec, *, layers: int | None, hidden: int | None, tp: int = 1) -> ModelSpec:
    """Fewer layers and/or a narrower width, keeping heads, kv heads, vocab and the FFN ratio.

    The plan's shape (degrees, batch, schedule) is untouched, so the rehearsal runs the same collectives.
    """
    update: dict[str, object] = {"params": None}
    if layers is not None:
        update |= {"num_layers": layers, **_fewer_layers(model, layers)}
    if hidden is not None:
        heads = model.num_attention_heads
        if hidden % heads:
            raise PlannerError(f"--hidden {hidden} must be divisible by num_attention_heads={heads}")
        step = 8 * tp
        ffn = max(step, round(model.ffn_hidden_size * hidden / model.hidden_size / step) * step)
        update.update(hidden_size=hidden, ffn_hidden_size=ffn, head_dim=None)
        if model.moe is not None:
            moe_ffn = max(step, round(model.moe.expert_ffn_hidden_size * hidden / model.hidden_size / step) * step)
            update["moe"] = model.moe.model_copy(update={"expert_ffn_hidden_size": moe_ffn})
    try:
        return ModelSpec(**{**model.model_dump(), **update, "name": model.name})
    except ValidationError as exc:
        raise PlannerError(f"cannot shrink {model.name}: {pydantic_message(exc, 'model')}") from None
    except ValueError as exc:
        raise PlannerError(f"cannot shrink {model.name}: {exc}") from None


def _fewer_layers(model: ModelSpec, layers: int) -> dict[str, object]:
    """What else the first `layers` layers change: a hybrid or attention pattern's first letters, and the MoE
    layers among them; refused by name when none of the MoE layers would be left (the model would be dense)."""
    update: dict[str, object] = {}
    if model.layer_pattern is not None:
        update["layer_pattern"] = model.layer_pattern[:layers]
    a = model.attention
    if a is not None and len(a.pattern) > 1 and layers % len(a.pattern):  # the first layers' windows, one each
        update["attention"] = a.model_copy(
            update={"pattern": "".join(a.pattern[i % len(a.pattern)] for i in range(layers))}
        )
    moe = model.moe
    if moe is not None and model.layer_pattern is None:
        kept = [i for i in range(min(layers, model.num_layers)) if model.is_moe_layer(i)]
        if not kept:
            first = next(i for i in range(model.num_layers) if model.is_moe_layer(i))
            raise PlannerError(
                f"--layers {layers} keeps none of {model.name}'s MoE layers (the first is layer {first + 1}): give "
                f"--layers {first + 1} or more"
            )
        if moe.layers is not None:
            update["moe"] = moe.model_copy(update={"layers": tuple(kept)})
    return update


def as_built(model: ModelSpec, plan: Plan) -> ModelSpec:
    """The model the worker trains, and so the one its prediction, host check and profile name: a tied one untied
    where tp > 1 (the worker's vocab-parallel output projection keeps its own shard, trainer.py _part), which the
    cost model prices tied, as Megatron runs it; across pipeline stages the cost model already prices the second
    copy, so the spec stays tied there."""
    if not (model.tied_embeddings and plan.tp > 1):
        return model
    return type(model).model_validate({**model.model_dump(), "tied_embeddings": False})
