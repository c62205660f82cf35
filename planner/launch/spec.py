"""Model specs for a launch: loading by catalog name or path, and shrinking for a rehearsal (pure)."""

from __future__ import annotations

from pathlib import Path

import yaml

from planner.errors import PlannerError
from planner.specs import ModelSpec


def load_model_spec(ref: str) -> ModelSpec:
    """A catalog name or a YAML path. Uses planner.catalog when present, else reads YAML itself."""
    try:
        from planner.io.catalog import load_model  # type: ignore[attr-defined]
    except ImportError:
        load_model = None
    if load_model is not None:
        return load_model(ref)
    path = Path(ref)
    if not path.exists():
        path = Path(__file__).resolve().parents[2] / "model_specs" / f"{ref}.yaml"
    if not path.exists():
        raise PlannerError(f"model {ref!r}: no such file and no model_specs/{ref}.yaml")
    try:
        return ModelSpec(**yaml.safe_load(path.read_text()))
    except ValueError as exc:
        raise PlannerError(f"model {ref}: {exc}") from exc


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
    except ValueError as exc:
        raise PlannerError(f"cannot shrink {model.name}: {exc}") from exc
