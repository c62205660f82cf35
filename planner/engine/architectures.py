"""Which model architectures an engine trains: the features of a model spec beyond a plain GPT/Llama transformer
(pre-norm attention and MLP blocks, MHA/GQA, RoPE or learned positions, GELU or SwiGLU with a SiLU gate), and the
ones each engine implements (`rules.model_features`; null: any, an engine that trains the PyTorch or Hugging Face
module it is handed). A model with a feature the engine lacks is refused by name: the engine would train another
model, or none, and its plans are not ranked.
"""

from __future__ import annotations

from typing import Literal, get_args

from planner.plan import Rejected
from planner.specs import ModelSpec

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


def architecture_problems(
    engine_name: str, offered: tuple[ModelFeature, ...] | None, model: ModelSpec
) -> list[Rejected]:
    """The model's features the engine does not implement (`offered`: rules.model_features; None: any)."""
    if offered is None:
        return []
    missing = [f for f in model_features(model) if f not in offered]
    if not missing:
        return []
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
