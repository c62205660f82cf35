"""Hugging Face `config.json` fields mapped onto a `ModelSpec` (pure: a parsed mapping in, spec fields out).

The file itself is read by `catalog.load_model`, which validates what this returns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from planner.errors import PlannerError

# Families whose MLP is gated (three matrices) whatever `hidden_act` says (Gemma uses a GELU gate).
GATED_FAMILIES = {
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
    "gemma",
    "gemma2",
    "phi3",
    "olmo",
    "olmo2",
    "deepseek_v2",
    "deepseek_v3",
    "granite",
    "cohere",
    "internlm2",
}
# Families with a learned absolute position table; everything else is taken as RoPE (or another table-free scheme).
LEARNED_POSITION_FAMILIES = {"gpt2", "opt", "gpt_bigcode", "gpt_neo", "biogpt"}
UNTIED_BY_DEFAULT = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "phi3", "olmo2"}


def hf_fields(cfg: dict[str, Any], path: Path, source: str) -> dict[str, Any]:
    def need(*keys: str) -> Any:
        for key in keys:
            if cfg.get(key) is not None:
                return cfg[key]
        alternatives = f" (or {', '.join(keys[1:])})" if len(keys) > 1 else ""
        raise PlannerError(f"{source} lacks {keys[0]}{alternatives}")

    family = str(cfg.get("model_type", "")).lower()
    act = str(cfg.get("hidden_act") or cfg.get("activation_function") or "gelu").lower()
    hidden = need("hidden_size", "n_embd")
    gated = family in GATED_FAMILIES or act in ("silu", "swish", "swiglu")
    # GPT2Config: n_inner None means 4 * n_embd
    ffn = (cfg.get("n_inner") or 4 * hidden) if family == "gpt2" else need("intermediate_size", "ffn_dim", "n_inner")
    fields: dict[str, Any] = {
        "name": _hf_name(cfg, path),
        "num_layers": need("num_hidden_layers", "n_layer"),
        "hidden_size": hidden,
        "num_attention_heads": need("num_attention_heads", "n_head"),
        "num_kv_heads": cfg.get("num_key_value_heads"),
        "head_dim": cfg.get("head_dim"),
        "ffn_hidden_size": ffn,
        # relu (OPT) and gelu variants are plain two-matrix MLPs, which is what `mlp: gelu` counts
        "mlp": "swiglu" if gated else "gelu",
        "vocab_size": need("vocab_size"),
        "max_seq_len": need("max_position_embeddings", "n_positions", "n_ctx"),
        "tied_embeddings": cfg.get("tie_word_embeddings", family not in UNTIED_BY_DEFAULT),
        "position_embedding": "learned" if family in LEARNED_POSITION_FAMILIES else "rope",
        "norm": "rmsnorm" if "rms_norm_eps" in cfg else "layernorm",
        "rope_theta": _rope_theta(cfg),
        "norm_eps": next((cfg[k] for k in ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon") if k in cfg), None),
    }
    if family == "gpt2":
        fields["linear_bias"] = True
    elif "attention_bias" in cfg or "mlp_bias" in cfg:
        fields["linear_bias"] = bool(cfg.get("attention_bias") or cfg.get("mlp_bias"))
    elif "enable_bias" in cfg:  # OPT
        fields["linear_bias"] = bool(cfg["enable_bias"])
    fields["moe"] = _hf_moe(cfg, ffn)
    return {k: v for k, v in fields.items() if v is not None}


def _hf_moe(cfg: dict[str, Any], ffn: int) -> dict[str, Any] | None:
    """Mixtral (`num_local_experts`) and Qwen-MoE style (`num_experts` + `moe_intermediate_size`) routing."""
    experts = cfg.get("num_local_experts") or cfg.get("num_experts") or cfg.get("n_routed_experts")
    if not experts:
        return None
    moe: dict[str, Any] = {
        "num_experts": experts,
        "top_k": cfg.get("num_experts_per_tok", 2),
        "expert_ffn_hidden_size": cfg.get("moe_intermediate_size") or ffn,
    }
    if cfg.get("decoder_sparse_step"):
        moe["layer_freq"] = cfg["decoder_sparse_step"]
    return moe


def _hf_name(cfg: dict[str, Any], path: Path) -> str:
    """`_name_or_path` when the config has one, else the folder of a `config.json`, else the file stem."""
    named = str(cfg.get("_name_or_path") or "").rstrip("/")
    if named:
        return named.split("/")[-1]
    if path.name == "config.json" and path.resolve().parent.name:
        return path.resolve().parent.name
    return path.stem


def _rope_theta(cfg: dict[str, Any]) -> Any:
    """`rope_theta`, or transformers 5's `rope_parameters: {rope_theta: ...}`."""
    nested = cfg.get("rope_parameters")
    return cfg.get("rope_theta") or (nested.get("rope_theta") if isinstance(nested, dict) else None)
