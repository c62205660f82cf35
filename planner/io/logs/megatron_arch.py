"""The architecture a Megatron argument dump (or Megatron-Bridge configuration) states beyond a GPT layer's sizes:
the gated MLP's gate, MLA, q/k norms, sliding windows and attention sinks, multi-token prediction, the MoE layer
list and group-limited routing. Field names and meanings are TransformerConfig's
(megatron/core/transformer/transformer_config.py @d98e8a64; MLATransformerConfig for MLA, utils.py
is_layer_window_attention for the windows). What a model spec cannot hold is named, so the run is not read as
another model."""

from __future__ import annotations

import ast
from typing import Any, Protocol

# TransformerConfig fields that build layers a model spec has no word for, when set (truthy)
UNREPRESENTED = {
    "hybrid_override_pattern": "a hybrid layer pattern (Mamba layers)",
    "hybrid_layer_pattern": "a hybrid layer pattern (Mamba layers)",
    "no_rope_freq": "layers without RoPE (no_rope_freq)",
    "attention_output_gate": "a gated attention output (attention_output_gate)",
    "linear_attention_freq": "linear-attention layers (linear_attention_freq)",
    "experimental_attention_variant": "an experimental attention variant",
    "moe_latent_size": "latent MoE projections (moe_latent_size)",
}


class Args(Protocol):
    def get(self, name: str, *aliases: str) -> Any: ...


# Megatron's --position-embedding-type as the spec's (YaRN and M-RoPE rotate as RoPE does; learned_absolute and
# an unstated type are learned); alibi from BigScience's Megatron-DeepSpeed, BLOOM's trainer (megatron/enums.py)
POSITIONS = {"rope": "rope", "yarn": "rope", "mrope": "rope", "none": "none", "alibi": "alibi"}


def position_kind(a: Args) -> str | None:
    """--position-embedding-type as a dump prints it: a choice, or BigScience's enum ('PositionEmbeddingType.alibi',
    whose 'absolute' is learned)."""
    kind = a.get("position_embedding_type")
    return None if kind is None else str(kind).rpartition(".")[2]


def literal(value: Any) -> Any:
    """A printed list or tuple ("[1, 0]", "(127, 0)") as Python's; anything else as it is."""
    if isinstance(value, str) and value[:1] in "[(":
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return value
    return value


def architecture(a: Args, *, layers: int | None, rmsnorm: bool) -> tuple[dict[str, Any], list[str]]:
    """(ModelSpec fields the arguments state beyond the sizes, what they state that a spec cannot represent)."""
    problems = [why for key, why in UNREPRESENTED.items() if a.get(key)]
    attention, more = _attention(a, layers=layers, rmsnorm=rmsnorm)
    fields: dict[str, Any] = {"attention": attention} if attention else {}
    if a.get("mtp_num_layers"):
        fields["mtp_layers"] = a.get("mtp_num_layers")
    return fields, problems + more


def _attention(a: Args, *, layers: int | None, rmsnorm: bool) -> tuple[dict[str, Any], list[str]]:
    spec: dict[str, Any] = {}
    problems: list[str] = []
    if a.get("multi_latent_attention"):
        widths = {
            "q_lora_rank": a.get("q_lora_rank"),  # None: a full-rank query projection
            "kv_lora_rank": a.get("kv_lora_rank"),
            "qk_nope_head_dim": a.get("qk_head_dim"),
            "qk_rope_head_dim": a.get("qk_pos_emb_head_dim"),
            "v_head_dim": a.get("v_head_dim"),
        }
        lacking = [k for k, v in widths.items() if v is None and k != "q_lora_rank"]
        if lacking:
            problems.append(f"multi-latent attention without its {', '.join(lacking)}")
        spec |= {"kind": "mla", **widths}
    if a.get("qk_layernorm"):  # the layers' normalization, applied to q and k
        if rmsnorm:
            spec["qk_norm"] = "rmsnorm"
        else:
            problems.append("q/k LayerNorm (the spec's q/k norms are RMSNorm or L2)")
    if a.get("qk_l2_norm"):
        spec["qk_norm"] = "l2"
    softmax = a.get("softmax_type")
    if softmax == "learnable":
        spec["sinks"] = True
    elif softmax not in (None, "vanilla"):
        problems.append(f"softmax_type {softmax} (a fixed softmax offset)")
    window = literal(a.get("window_size"))
    if window is not None:
        pattern, why = _windows(window, literal(a.get("window_attn_skip_freq")), layers)
        if why:
            problems.append(why)
        elif pattern:
            spec |= {"pattern": pattern, "window": window[0] + 1}  # (left, 0): the token and `left` before it
    return spec, problems


def _windows(window: Any, skip: Any, layers: int | None) -> tuple[str | None, str | None]:
    """(the spec's per-layer pattern, S sliding and G global, or why not) of window_size and window_attn_skip_freq
    (utils.py is_layer_window_attention: none: every layer; an int N: every N-th layer, 1-based, is global; a
    list: 1 for a windowed layer)."""
    if not (isinstance(window, tuple) and len(window) == 2 and all(isinstance(w, int) for w in window)):
        return None, f"window_size {window!r}"
    left, right = window
    if left < 0:  # -1: an infinite window, full causal attention
        return None, None
    if right != 0:
        return None, f"window_size {window}: a window that sees later tokens"
    if layers is None:
        return None, "a sliding window without the layer count"
    if skip is None:
        return "S" * layers, None
    if isinstance(skip, int) and skip > 0:
        return "".join("G" if (i + 1) % skip == 0 else "S" for i in range(layers)), None
    if isinstance(skip, list) and len(skip) == layers:
        return "".join("S" if w else "G" for w in skip), None
    return None, f"window_attn_skip_freq {skip!r} for {layers} layers"


def mlp_fields(a: Args, activation: str) -> tuple[str, dict[str, Any] | None, list[str]]:
    """(the spec's mlp, its gate, what it cannot hold). --swiglu, or a gated unit on SiLU, is the spec's swiglu;
    --quick-geglu (GPT-OSS: argument_utils.py l.323 @d98e8a64, gated quick_gelu) the same with a gate, its offset and
    clamp read from glu_linear_offset and activation_func_clamp_value (TransformerConfig, flags since 639c08ab8);
    a gated unit on another activation is no spec's MLP."""
    quick = a.get("quick_geglu") or (a.get("gated_linear_unit") and activation.endswith("quick_gelu"))
    if quick:
        offset, clamp = a.get("glu_linear_offset") or 0.0, a.get("activation_func_clamp_value")
        return "swiglu", {"activation": "quick_gelu", "linear_offset": float(offset), "clamp": clamp}, []
    if a.get("swiglu") or (a.get("gated_linear_unit") and activation.endswith("silu")):
        return "swiglu", None, []
    if a.get("gated_linear_unit"):
        act = activation.rsplit(".", 1)[-1]
        return "gelu", None, [f"a gated MLP on {act} (a spec's gated MLP is SiLU or quick-GELU)"]
    return "gelu", None, []
