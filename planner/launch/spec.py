"""Shrinking a model spec for a rehearsal that keeps the plan's shape (pure)."""

from __future__ import annotations

from pydantic import ValidationError

from planner.errors import PlannerError
from planner.io.planfile import pydantic_message
from planner.specs import ModelSpec


def shrink(model: ModelSpec, *, layers: int | None, hidden: int | None, tp: int = 1) -> ModelSpec:
    """Fewer layers and/or a narrower width, keeping heads, kv heads, vocab and the FFN ratio.

    The plan's shape (degrees, batch, schedule) is untouched, so the rehearsal runs the same collectives.
    """
    update: dict[str, object] = {"params": None}
    if layers is not None:
        update["num_layers"] = layers
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
