"""Hugging Face config keys the importer reads past: settings that change the numbers a run computes but not its
memory or step time, which no model spec field holds. Each one a config sets away from its no-op is said in one
warning, so that an import is never approximate in silence (an engine file emitted from the spec does not set them
either: the user sets them in the engine's own configuration)."""

from __future__ import annotations

import warnings
from typing import Any

from planner.io.hf_layout import HfConfig

# key -> (what it does, the values that change nothing). Sources: transformers' modeling files of the families
# that read them: rope_scaling (modeling_rope_utils.py ROPE_INIT_FUNCTIONS: llama3, yarn, ...), DeepSeek-V3's router
# (modeling_deepseek_v3.py DeepseekV3TopkRouter: scoring_func sigmoid, topk_method noaux_tc, routed_scaling_factor),
# GPT-OSS's clamped SwiGLU (modeling_gpt_oss.py GptOssExperts: swiglu_limit), Gemma 2's soft-capped logits
# (modeling_gemma2.py: attn_logit_softcapping, final_logit_softcapping).
UNPRICED: dict[str, tuple[str, tuple[Any, ...]]] = {
    "rope_scaling": ("RoPE frequency scaling", ()),
    "rope_parameters": ("RoPE frequency scaling", ({"rope_type": "default"},)),  # transformers 5's name for it
    "scoring_func": ("the router's score function", ("softmax",)),
    "topk_method": ("the router's top-k selection", ("greedy",)),
    "routed_scaling_factor": ("the routed experts' output scale", (1, 1.0)),
    "swiglu_limit": ("the clamp of the experts' SwiGLU", ()),
    "attn_logit_softcapping": ("attention logit soft-capping", ()),
    "final_logit_softcapping": ("output logit soft-capping", ()),
    # OPTConfig: false puts each norm after its block (post-LN, OPT-350m): the same parameters and FLOPs
    "do_layer_norm_before": ("where the norms sit (post-LN when false)", (True,)),
    # modeling_llama4.py Llama4TextAttention: the NoPE layers' queries scaled by log(floor((pos + 1) / floor_scale))
    "attn_temperature_tuning": ("attention temperature tuning of the NoPE layers", (False, 0)),
    # modeling_gemma3.py: the sliding-window layers' own RoPE base, and queries scaled by 1/sqrt of this, not head_dim
    "rope_local_base_freq": ("the sliding-window layers' RoPE base", ()),
    "query_pre_attn_scalar": ("the query scaling, 1/sqrt of this in place of head_dim", ()),
}
# What a family's config class sets where the file is silent, for the keys above (the importer's FAMILY_DEFAULTS hold
# only what the spec reads): Llama4TextConfig attn_temperature_tuning=True, Gemma3TextConfig rope_local_base_freq
# 10,000 and query_pre_attn_scalar 256. An import had read past them without a word (audit).
FAMILY_UNPRICED: dict[str, dict[str, Any]] = {
    "llama4_text": {"attn_temperature_tuning": True},
    "gemma3_text": {"rope_local_base_freq": 10_000.0, "query_pre_attn_scalar": 256},
}
PLAIN_GELU = ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_python")  # the spec's two-matrix `gelu`


GATED_SILU = ("silu", "swish", "swiglu")  # the gated MLP the spec's `swiglu` names; another activation costs the same

# Families whose gated MLP's gate is not SiLU, as their modeling file fixes it (the spec's `gate`): the activation,
# the offset added to the linear half and the config key of the clamp. transformers modeling_gpt_oss.py
# GptOssExperts: gate * sigmoid(1.702 gate) * (up + 1), gate clamped above and up to +-swiglu_limit.
GATES: dict[str, tuple[str, float, str]] = {"gpt_oss": ("quick_gelu", 1.0, "swiglu_limit")}


def gate_fields(c: HfConfig) -> dict[str, Any] | None:
    """The spec's `gate` for a family whose gated MLP's gate its modeling file fixes (GATES); None for SiLU's."""
    if c.family not in GATES:
        return None
    activation, offset, clamp = GATES[c.family]
    return {"activation": activation, "linear_offset": offset, "clamp": c.get(clamp)}


def warn_unpriced(c: HfConfig, *, gated: bool = False, act: str | None = None) -> None:
    """One warning naming each UNPRICED key the config sets to something other than a no-op, and a gated MLP's
    activation other than SiLU (Gemma's GeGLU: priced as SwiGLU, whose shape and cost it has)."""
    read = GATES[c.family][2] if c.family in GATES else None  # the spec's gate holds it
    given = FAMILY_UNPRICED.get(c.family or "", {}) | {k: v for k, v in c.raw.items() if v is not None}
    said = [
        f"{key} {_value(given[key])} ({what})"
        for key, (what, noop) in UNPRICED.items()
        if given.get(key) is not None and given[key] not in noop and key != read
        and not (key == "query_pre_attn_scalar" and given[key] == c.get("head_dim"))  # the usual scaling
    ]  # fmt: skip
    if gated and act is not None and act not in GATED_SILU:
        said.append(f"activation {act!r} of a gated MLP (the spec's swiglu: the same shape and cost)")
    if not gated and act is not None and act not in PLAIN_GELU:  # Nemotron-H's relu², OPT's relu
        said.append(f"activation {act!r} of a plain MLP (the spec's gelu: the same shape and cost)")
    if said:
        warnings.warn(
            f"{c.source}: read past, as they change what a run computes but not its memory or step time (and an "
            f"emitted engine file does not set them): {'; '.join(said)}",
            stacklevel=4,
        )
    if stored := _stored(c):
        warnings.warn(f"{c.source}: {stored}: how the checkpoint is stored; a plan trains at --precision", stacklevel=4)


# The checkpoint dtypes a plan's default precision (bf16 weights, fp32 master copy) holds without saying more.
PLAIN_DTYPES = ("bfloat16", "float16", "float32", "auto")


def _stored(c: HfConfig) -> str:
    """A quantized checkpoint (quantization_config: DeepSeek-V3's fp8 blocks, GPT-OSS's mxfp4, Kimi-K2's int4) or a
    low-precision dtype, said ('' where neither): the import dropped them without a word (audit)."""
    quant = c.raw.get("quantization_config")
    dtypes = [f"{k} {c.raw[k]}" for k in ("torch_dtype", "dtype") if c.raw.get(k) not in (None, *PLAIN_DTYPES)]
    said = [f"quantization_config {quant.get('quant_method', '?')}" if isinstance(quant, dict) else ""]
    return ", ".join(x for x in [*said, *dtypes] if x)


def _value(value: Any) -> str:
    """A value as said: a rope_scaling mapping by its type and factor."""
    if isinstance(value, dict):
        kind = value.get("rope_type") or value.get("type")
        factor = value.get("factor")
        return f"{kind}" + (f" x{factor:g}" if isinstance(factor, (int, float)) else "")
    return repr(value)
