"""Hugging Face `config.json` fields mapped onto a `ModelSpec` (pure: a parsed mapping in, spec fields out).

The file itself is read by `catalog.load_model`, which validates what this returns. The family tables (defaults of
absent keys, which families gate their MLP, slide their windows, ...) are in hf_families.py; where the attention
and Mamba-2 layers are, in hf_layout.py; the experts and where the MoE layers are, in hf_moe.py.

- Multimodal configs (Llama 4, Gemma 3) keep the language model under `text_config`: it is imported, and what is
  left out (the vision tower, the projector) is said in a warning.
- MoE: the expert count under any of its three names (num_local_experts, num_experts, n_routed_experts), shared
  experts (n_shared_experts, shared_expert_intermediate_size, Llama 4's one shared expert), and where the MoE
  layers are: DeepSeek's first_k_dense_replace / moe_layer_freq, Qwen's decoder_sparse_step / mlp_only_layers,
  Llama 4's interleave_moe_layer_step / moe_layers.
- Attention: MLA (kv_lora_rank, ...), head_dim, the per-layer kinds from layer_types, Gemma 3's
  sliding_window_pattern, Llama 4's no_rope_layers and attention_chunk_size, GPT-OSS's sinks, q/k norms.
- Hybrid Mamba-2 stacks (Nemotron-H's hybrid_override_pattern) and DeepSeek's num_nextn_predict_layers.

What the spec cannot represent is refused by name in one line (hf_refusals.py: encoder-decoder models,
linear-attention layers, other SSM layouts, DeepSeek sparse attention's indexer, ...), never imported approximately.
Python's json reads `Infinity` and `NaN`: every number used here must be a finite integer, or it is refused naming
the key.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from planner.errors import PlannerError
from planner.io import hf_families as fam
from planner.io.hf_layout import HfConfig, attention_fields, hybrid_layers, rope_fields
from planner.io.hf_moe import moe_fields
from planner.io.hf_refusals import activation, refuse
from planner.io.hf_unpriced import GATED_SILU, gate_fields, warn_unpriced
from planner.specs import MAX_LAYERS


def hf_fields(cfg: dict[str, Any], path: Path, source: str) -> dict[str, Any]:
    c = HfConfig(_language_model(cfg, source), source)
    if not any(c.raw.get(k) is not None for k in ("model_type", "hidden_size", "n_embd", "num_hidden_layers")):
        raise PlannerError(f"{source} is no model config: it gives none of model_type, hidden_size, num_hidden_layers")
    refuse(c)
    family = c.family
    hidden = c.need("hidden_size", "n_embd")
    pattern, mamba = hybrid_layers(c)
    num_layers = len(pattern) if pattern else c.need("num_hidden_layers", "n_layer")
    if not 0 < num_layers <= MAX_LAYERS:  # before anything loops over the layers
        raise PlannerError(f"{source}: {num_layers} layers; the planner takes 1 to {MAX_LAYERS}")
    stated = activation(c)  # as stated or its family's default
    act = stated or "gelu"
    gated = family in fam.GATED_FAMILIES or act in GATED_SILU
    warn_unpriced(c, gated=gated, act=stated)  # no placeholder
    if family in ("gpt2", "gpt_bigcode"):  # GPT2MLP, GPTBigCodeMLP: n_inner None means 4 * n_embd
        ffn = c.integer("n_inner") or 4 * hidden
    else:
        ffn = c.integer("intermediate_size_mlp") or c.need("intermediate_size", "ffn_dim", "n_inner")  # Llama 4's first
    fields: dict[str, Any] = {
        "name": _hf_name(cfg, path),
        "num_layers": num_layers,
        "hidden_size": hidden,
        "num_attention_heads": c.need("num_attention_heads", "n_head"),
        "num_kv_heads": _kv_heads(c),
        "head_dim": c.integer("attention_head_dim", "head_dim"),
        "ffn_hidden_size": ffn,
        # relu, relu² (Nemotron-H) and gelu variants are plain two-matrix MLPs, which is what `mlp: gelu` counts
        "mlp": "swiglu" if gated else "gelu",
        "gate": gate_fields(c),
        "vocab_size": c.need("vocab_size"),
        "max_seq_len": c.need("max_position_embeddings", "n_positions", "n_ctx"),
        "tied_embeddings": c.boolean("tie_word_embeddings", family not in fam.UNTIED_BY_DEFAULT),
        "position_embedding": _position(family),
        "norm": "rmsnorm" if c.has("rms_norm_eps") or family in fam.RMSNORM_FAMILIES else "layernorm",
        "layer_pattern": pattern,
        "mamba": mamba,
        "moe": moe_fields(c, num_layers, pattern),
        "attention": attention_fields(c, num_layers),
        "mtp_layers": c.integer("num_nextn_predict_layers") or None,
        "sandwich_norm": family in fam.SANDWICH_NORM_FAMILIES or None,
        **rope_fields(c.cfg, rope=_position(family) == "rope"),
        "norm_eps": next(
            (c.cfg[k] for k in ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon") if k in c.cfg), None
        ),
    }
    if fields["attention"] and fields["attention"].get("kind") == "mla":
        fields.update(head_dim=None, num_kv_heads=None)  # MLA's widths are its own; DeepSeek repeats heads as kv
    fields.update(_bias_fields(c))
    return {k: v for k, v in fields.items() if v is not None}


def _bias_fields(c: HfConfig) -> dict[str, Any]:
    """linear_bias (every linear) or qkv_bias (q, k and v alone) as the family's modules build them
    (hf_families.py QKV_BIAS_FAMILIES, QKV_ONLY_ATTENTION_BIAS_FAMILIES); a mix the spec cannot hold is imported
    with the nearest and said in a warning."""
    if c.family == "gpt2":
        return {"linear_bias": True}
    if "enable_bias" in c.cfg:  # OPT
        return {"linear_bias": bool(c.get("enable_bias"))}
    if c.family in fam.ALL_LINEAR_BIAS_KEYS:
        key, default = fam.ALL_LINEAR_BIAS_KEYS[c.family]
        return {"linear_bias": bool(c.cfg.get(key, default))}
    if c.family in fam.QKV_BIAS_FAMILIES:
        return {"linear_bias": False, "qkv_bias": bool(c.get("qkv_bias", True))}
    if not any(k in c.cfg for k in ("attention_bias", "mlp_bias", "attention_out_bias")):
        return {}
    qkv, mlp = bool(c.get("attention_bias")), bool(c.get("mlp_bias"))
    out = bool(c.get("attention_out_bias", qkv and c.family not in fam.QKV_ONLY_ATTENTION_BIAS_FAMILIES))
    if qkv == out == mlp:
        return {"linear_bias": qkv}
    if qkv and not mlp:
        if out:
            warnings.warn(
                f"{c.source}: attention_bias biases the output projection too, not the MLP; imported with q/k/v "
                "biases alone (the output projection's, hidden_size per layer, left out)",
                stacklevel=4,
            )
        return {"linear_bias": False, "qkv_bias": True}
    warnings.warn(
        f"{c.source}: biases on some linears and not others (attention_bias={qkv}, attention_out_bias={out}, "
        f"mlp_bias={mlp}); imported with biases on every linear",
        stacklevel=4,
    )
    return {"linear_bias": True}


def _language_model(cfg: dict[str, Any], source: str) -> dict[str, Any]:
    """The language model's settings: `text_config` where a multimodal config keeps them (Llama 4, Gemma 3),
    with the top level's name and embedding tying, and a warning naming what is left out."""
    found = cfg.get("text_config")  # none, or beside a top-level text model (Qwen2.5-VL's): the config itself
    text = found if isinstance(found, dict) and cfg.get("hidden_size") is None else None
    left_out = []
    for key in ("vision_config", "audio_config"):
        tower = cfg.get(key)
        if isinstance(tower, dict):
            # Qwen-VL: depth; Kimi-K2.5's MoonViT: vt_num_hidden_layers, vt_hidden_size
            layers = next((tower[k] for k in ("num_hidden_layers", "depth", "vt_num_hidden_layers") if k in tower), "?")
            width = next((tower[k] for k in ("hidden_size", "vt_hidden_size") if k in tower), "?")
            left_out.append(f"{key} ({layers} layers, hidden {width})")
    if left_out and text is None and cfg.get("hidden_size") is None:  # "no hidden_act" named the wrong thing missing
        raise PlannerError(
            f"{source}: a multimodal config ({left_out[0].split(' ')[0]}) with neither a text_config nor a language "
            "model at its top level (hidden_size): give the model's whole config.json"
        )
    if left_out:
        warnings.warn(
            f"{source}: imported the language model{'' if text is None else ' (text_config)'} only; left out: "
            f"{', '.join(left_out)} and the multimodal projector",
            stacklevel=3,
        )
    if text is None:
        return cfg
    # a text_config without its own model_type (MiniMax-M3's) is named by the whole model's
    inherited = {
        k: cfg[k] for k in ("tie_word_embeddings", "_name_or_path", "model_type") if k in cfg and k not in text
    }
    return {**inherited, **text}


def _kv_heads(c: HfConfig) -> int | None:
    """num_key_value_heads; GPT-BigCode's multi_query (GPTBigCodeConfig default true) means one key/value head
    for all (modeling_gpt_bigcode.py: kv_heads = 1 if multi_query else num_heads)."""
    if c.family != "gpt_bigcode":
        return c.integer("num_key_value_heads")
    multi_query = c.get("multi_query")
    if not isinstance(multi_query, bool):
        raise PlannerError(f"{c.source}: multi_query={multi_query!r}; it must be true or false")
    return 1 if multi_query else None


def _position(family: str) -> str:
    if family in fam.LEARNED_POSITION_FAMILIES:
        return "learned"
    return "none" if family in fam.NO_POSITION_FAMILIES else "rope"


def _hf_name(cfg: dict[str, Any], path: Path) -> str:
    """`_name_or_path` when the config has one (a path or hub id: a string), else the folder of a `config.json`,
    else the file stem."""
    given = cfg.get("_name_or_path")
    named = given.rstrip("/") if isinstance(given, str) else ""  # other values name nothing: not their repr
    if named:
        return named.split("/")[-1]
    if path.name == "config.json" and path.resolve().parent.name:
        return path.resolve().parent.name
    return path.stem
