"""Which model architectures an engine trains: the features of a model spec beyond a plain GPT/Llama transformer
(pre-norm attention and MLP blocks, MHA/GQA, RoPE or learned positions, GELU or SwiGLU with a SiLU gate), and the
ones each engine implements (`rules.model_features`; null: any, an engine that trains the PyTorch or Hugging Face
module it is handed). A model with a feature the engine lacks is refused by name: the engine would train another
model, or none, and its plans are not ranked.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal, get_args

from pydantic import Field

from planner.engine.zero import Dimension
from planner.plan import Plan, Rejected
from planner.specs import Frozen, ModelSpec

ModelFeature = Literal[
    "moe", "mla", "mamba", "sliding_window", "chunked_attention", "attention_sinks", "qk_norm", "sandwich_norm", "mtp",
    "no_position_embedding", "quick_geglu", "partial_rotary", "alibi",
]  # fmt: skip
MODEL_FEATURES: tuple[ModelFeature, ...] = get_args(ModelFeature)
FEATURE_NAMES: dict[ModelFeature, str] = {
    "moe": "mixture-of-experts layers",
    "mla": "multi-head latent attention",
    "mamba": "Mamba-2 / hybrid layer patterns",
    "sliding_window": "sliding-window attention",
    "chunked_attention": "chunked attention",
    "attention_sinks": "attention sinks",
    "qk_norm": "q/k norms",
    "sandwich_norm": "sandwich norms",
    "mtp": "multi-token prediction",
    "no_position_embedding": "position_embedding none",
    "quick_geglu": "clamped quick-GELU gate (GPT-OSS's MLP)",
    "partial_rotary": "RoPE on part of each head (rotary_percent)",
    "alibi": "ALiBi attention biases (position_embedding alibi)",
}


def model_features(model: ModelSpec) -> list[ModelFeature]:
    """The features of MODEL_FEATURES the model has, in that order."""
    kinds = {k.mixer for k in model.layer_kinds} | {k.attention for k in model.layer_kinds if k.attention}
    a = model.attention
    has: dict[ModelFeature, bool] = {
        "moe": model.moe is not None,
        "mla": "mla" in kinds,
        "mamba": model.layer_pattern is not None,
        "sliding_window": "sliding" in kinds,
        "chunked_attention": "chunked" in kinds,
        "attention_sinks": a is not None and a.sinks,
        "qk_norm": a is not None and a.qk_norm != "none",
        "sandwich_norm": model.sandwich_norm,
        "mtp": model.mtp_layers > 0,
        "no_position_embedding": model.position_embedding == "none",
        "quick_geglu": model.gate is not None,
        "partial_rotary": model.rotary_percent < 1,
        "alibi": model.position_embedding == "alibi",
    }
    return [f for f in MODEL_FEATURES if has[f]]


class ModelFile(Frozen):
    """One of the engine's own model implementations (rules.model_files): the features it has, and the parallel
    dimensions it does not run."""

    name: str = Field(description="what the engine calls it (torchtitan: its torchtitan/models/NAME)")
    features: tuple[ModelFeature, ...] = Field((), description="the features it implements (together)")
    excludes: tuple[Dimension, ...] = Field((), description="the dimensions it does not run: each must be 1")
    why: str = Field("", description="the engine's source for the exclusions")


@lru_cache(maxsize=64)  # read for every structure a search checks (model_file_problems): one answer per model
def model_file(files: tuple[ModelFile, ...], model: ModelSpec) -> ModelFile | None:
    """The first of the engine's model files that implements all of the model's features (None: none does)."""
    has = set(model_features(model))
    return next((f for f in files if has <= set(f.features)), None)


def architecture_problems(
    engine_name: str, offered: tuple[ModelFeature, ...] | None, model: ModelSpec, files: tuple[ModelFile, ...] = ()
) -> list[Rejected]:
    """The model's features the engine does not implement (`offered`: rules.model_features; None: any), or, where
    the engine builds its own model files (`files`), does not implement in one of them."""
    if offered is None:
        return []
    missing = [f for f in model_features(model) if f not in offered]
    if not missing:
        return _combination_problems(engine_name, model, files)
    what = ", ".join(FEATURE_NAMES[f] for f in missing)
    # multi-token prediction is an extra objective beside the model: the model trains without it
    without = (
        f", or plan {model.name} without it: `planner models show {model.name} > mine.yaml`, mtp_layers: 0, --model "
        "mine.yaml"
        if missing == ["mtp"]
        else ""
    )
    return [
        Rejected(
            f"{engine_name} has no {FEATURE_NAMES[missing[0]]}",
            f"{model.name} has {what}, which {engine_name} does not implement; use an engine that does (its "
            f"model_features: `planner engines show NAME`){without}",
        )
    ]


def _combination_problems(engine_name: str, model: ModelSpec, files: tuple[ModelFile, ...]) -> list[Rejected]:
    """Features the engine has only in different model files: it trains none of them together."""
    if not files or model_file(files, model) is not None:
        return []
    has = model_features(model)
    where = "; ".join(f"{f.name}: {', '.join(FEATURE_NAMES[x] for x in f.features) or 'none'}" for f in files)
    return [
        Rejected(
            f"{engine_name} has no model with {' + '.join(has)}",
            f"{model.name} has {', '.join(FEATURE_NAMES[x] for x in has)}, which no one {engine_name} model "
            f"implements together (its models and their features: {where}); use an engine that does",
        )
    ]


def model_file_problems(engine_name: str, files: tuple[ModelFile, ...], model: ModelSpec, plan: Plan) -> list[Rejected]:
    """A parallel dimension above 1 that the engine's model file for this model does not run."""
    found = model_file(files, model) if files else None  # most engines list no files
    if found is None:
        return []
    return [
        Rejected(
            f"{engine_name}'s {found.name} has no {dim}",
            f"{dim}={getattr(plan, dim)}: {engine_name} trains {model.name} with its {found.name} model, which does "
            f"not run {dim} ({found.why}); use {dim}=1",
        )
        for dim in found.excludes
        if getattr(plan, dim) > 1
    ]
