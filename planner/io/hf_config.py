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

What the spec cannot represent is refused by name in one line (encoder-decoder models, linear-attention layers,
other SSM layouts, DeepSeek sparse attention's indexer, ...), never imported approximately. Python's json reads
`Infinity` and `NaN`: every number used here must be a finite integer, or it is refused naming the key.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from planner.errors import PlannerError
from planner.io import hf_families as fam
from planner.io.hf_layout import HfConfig, attention_fields, hybrid_layers, rope_fields
from planner.io.hf_moe import moe_fields
from planner.io.hf_unpriced import GATED_SILU, gate_fields, warn_unpriced
from planner.specs import MAX_LAYERS

# The MLP's activation, the first found: Gemma's hidden_activation before its legacy hidden_act (GemmaMLP builds
# ACT2FN[config.hidden_activation] where given, modeling_gemma.py; Gemma 2 and 3 give it alone).
ACTIVATION_KEYS = ("mlp_hidden_act", "hidden_activation", "hidden_act", "activation_function")


def hf_fields(cfg: dict[str, Any], path: Path, source: str) -> dict[str, Any]:
    c = HfConfig(_language_model(cfg, source), source)
    if not any(c.raw.get(k) is not None for k in ("model_type", "hidden_size", "n_embd", "num_hidden_layers")):
        raise PlannerError(f"{source} is no model config: it gives none of model_type, hidden_size, num_hidden_layers")
    _refuse(c)
    family = c.family
    hidden = c.need("hidden_size", "n_embd")
    pattern, mamba = hybrid_layers(c)
    num_layers = len(pattern) if pattern else c.need("num_hidden_layers", "n_layer")
    if not 0 < num_layers <= MAX_LAYERS:  # before anything loops over the layers
        raise PlannerError(f"{source}: {num_layers} layers; the planner takes 1 to {MAX_LAYERS}")
    stated = _activation(c)  # as stated or its family's default
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


def _activation(c: HfConfig) -> str | None:
    """The MLP's activation, lower case: the first of ACTIVATION_KEYS the config (or its family's defaults) gives."""
    found = next((c.get(k) for k in ACTIVATION_KEYS if c.get(k)), None)
    return None if found is None else str(found).lower()


def _refuse(c: HfConfig) -> None:
    """One line naming what the spec cannot represent, and why."""
    family, src = c.family, c.source
    if c.get("is_encoder_decoder") or family in fam.ENCODER_DECODER_FAMILIES:
        raise PlannerError(
            f"{src}: model_type {family!r} is an encoder-decoder model; the planner models decoder-only stacks"
        )
    _refuse_linear_attention(c)
    if family in fam.OTHER_SSM_FAMILIES:
        raise PlannerError(
            f"{src}: model_type {family!r} has SSM layers in a layout other than nemotron_h's hybrid_override_pattern"
        )
    if c.get("use_qk_norm") and family not in fam.QK_NORM_FLAG_FAMILIES and family not in fam.QK_RMSNORM_FAMILIES:
        raise PlannerError(
            f"{src}: use_qk_norm in model_type {family!r}: which q/k norm it means (RMSNorm as GLM-4.5's, L2 as "
            "Llama 4's) is the family's, and the planner does not know this family's"
        )
    _refuse_unrepresented_keys(c)  # before the activation: Gemma 4 names its hidden_activation otherwise
    act = _activation(c)
    if act is None and family not in fam.KNOWN_ACTIVATION_FAMILIES:
        raise PlannerError(
            f"{src}: no hidden_act, and the planner does not know the default of model_type {family!r}: add "
            "hidden_act (silu or swiglu: a gated MLP of three matrices; gelu or relu: two)"
        )
    if act is not None and act not in fam.ACTIVATION_NAMES:
        raise PlannerError(
            f"{src}: {c.key_of(*ACTIVATION_KEYS)}={act!r} is no activation transformers builds by name; known: "
            f"{', '.join(sorted(fam.ACTIVATION_NAMES))}"
        )
    for key, owner in fam.FAMILY_ONLY_KEYS.items():
        if c.raw.get(key) is not None and family != owner:
            raise PlannerError(
                f"{src}: {key} in model_type {family!r}: the importer reads it only as {owner}'s rule defines it"
            )
    _refuse_unread_experts(c)
    if family not in fam.KNOWN_FAMILIES:
        warnings.warn(
            f"{src}: model_type {family!r} is not a family the importer has rules for: read from its keys as a "
            "decoder of attention and MLP layers; check its params against the published total",
            stacklevel=3,
        )


def _refuse_linear_attention(c: HfConfig) -> None:
    """Linear-attention layers (Gated DeltaNet, KDA, MiniMax's Lightning), which the spec has no mixer for."""
    family, src, types = c.family, c.source, c.get("layer_types") or []
    if family != "nemotron_h" and (
        "linear_attention" in types or any(c.raw.get(k) is not None for k in fam.LINEAR_ATTENTION_KEYS)
    ):
        key = "layer_types" if "linear_attention" in types else next(k for k in fam.LINEAR_ATTENTION_KEYS if k in c.raw)
        raise PlannerError(
            f"{src}: {key} declares linear-attention (Gated DeltaNet) layers (model_type {family!r}); "
            "linear-attention mixers are not representable"
        )
    kinds = c.get("attn_type_list")  # MiniMax-M1 / Text-01: 0 a Lightning (linear) attention layer, 1 softmax
    if isinstance(kinds, list) and 0 in kinds:
        raise PlannerError(
            f"{src}: attn_type_list declares {kinds.count(0)} linear-attention (Lightning) layers of {len(kinds)} "
            f"(model_type {family!r}); linear-attention mixers are not representable"
        )


def _refuse_unrepresented_keys(c: HfConfig) -> None:
    """A key of a part the spec has no field for (hf_families.py UNREPRESENTED_KEYS), refused where its value says
    the part is there (0, false or an empty list say there is none); a long value is shown by its size."""
    for key, why in fam.UNREPRESENTED_KEYS.items():
        value = c.raw.get(key)
        if value is None or value is False or value == 0 or value == [] or value == {}:
            continue
        shown = (
            repr(value) if len(repr(value)) <= 60 else f"[{len(value)} entries]" if hasattr(value, "__len__") else "..."
        )
        raise PlannerError(f"{c.source}: {key}={shown}: {why} is not representable")


def _refuse_unread_experts(c: HfConfig) -> None:
    """An expert count under a name the import does not read (ERNIE 4.5's moe_num_experts) would import a MoE
    model as dense, its experts left out: refused naming the key; so is a shared-expert count or width under a name
    it does not read (ERNIE 4.5's moe_num_shared_experts), which would leave the shared experts out."""
    for key, value in c.raw.items():
        # a count or width, not a switch; "share": StepFun's share_expert_dim
        shared = "share" in key and ("expert" in key or "intermediate" in key)
        count = isinstance(value, int) and not isinstance(value, bool) and value > 0
        if shared and count and key not in fam.SHARED_EXPERT_KEYS:
            raise PlannerError(
                f"{c.source}: {key}={value}: shared experts under a name the import does not read (it reads "
                f"{', '.join(fam.SHARED_EXPERT_KEYS)}); imported it would leave them out"
            )
    if c.key_of(*fam.EXPERT_COUNT_KEYS):  # a count of 0 is read, and refused with a top-k (hf_moe.py)
        return
    top_k = c.key_of(*fam.TOP_K_KEYS)
    if top_k:
        raise PlannerError(
            f"{c.source}: {top_k}={c.get(top_k)!r} but no expert count (the import reads "
            f"{', '.join(fam.EXPERT_COUNT_KEYS)}); imported as dense it would leave the experts out"
        )
    for key, value in c.raw.items():
        if "expert" in key and isinstance(value, int) and not isinstance(value, bool) and value > 1:
            raise PlannerError(
                f"{c.source}: {key}={value}: an expert count under a name the import does not read (it reads "
                f"{', '.join(fam.EXPERT_COUNT_KEYS)}); imported as dense it would leave the experts out"
            )


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
