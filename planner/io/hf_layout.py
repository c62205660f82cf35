"""Where a Hugging Face `config.json` puts its layers (part of hf_config.py): the config read with its family's
defaults as checked integers (`HfConfig`), Nemotron-H's hybrid Mamba-2 pattern, and the attention of each layer
(MLA, layer_types, sliding windows, chunked attention, sinks); the experts and where the MoE layers are, hf_moe.py.
Pure: a parsed mapping in, spec fields out."""

from __future__ import annotations

import json
import math
import re
import warnings
from typing import Any

from planner.errors import PlannerError
from planner.io import hf_families as fam


class HfConfig:
    """A config mapping with its family's defaults for absent keys, read as checked integers."""

    def __init__(self, cfg: dict[str, Any], source: str) -> None:
        family = cfg.get("model_type", "")
        if not isinstance(family, str):  # transformers' configs name their family: a mapping or number is no family
            raise PlannerError(f'{source}: model_type {family!r} is not a name; it must be a string like "llama"')
        self.family = family.lower()
        self.raw, self.source = cfg, source
        self.cfg = {**fam.FAMILY_DEFAULTS.get(self.family, {}), **cfg}

    def get(self, key: str, default: Any = None) -> Any:
        return self.cfg.get(key, default)

    def has(self, key: str) -> bool:
        return self.cfg.get(key) is not None

    def key_of(self, *keys: str) -> str | None:
        """The first of `keys` the file itself gives (not null), else the first its family's defaults give: a file
        that names the expert count `num_experts` is not overridden by its family's default `num_local_experts`."""
        for source in (self.raw, self.cfg):
            for key in keys:
                if source.get(key) is not None:
                    return key
        return None

    def integer(self, *keys: str, at_least: int | None = None) -> int | None:
        """The value of `key_of(*keys)` as an int, None if none is given. Below `at_least` it is refused naming the
        key (a period or step of 0 is no layout transformers builds: its `%` divides by zero)."""
        key = self.key_of(*keys)
        if key is None:
            return None
        value = self._as_int(key, self.cfg[key])
        if at_least is not None and value < at_least:
            raise PlannerError(f"{self.source}: {key}={value}; it must be an integer >= {at_least}")
        return value

    def need(self, *keys: str, at_least: int | None = None) -> int:
        value = self.integer(*keys, at_least=at_least)
        if value is None:
            alternatives = f" (or {', '.join(keys[1:])})" if len(keys) > 1 else ""
            raise PlannerError(f"{self.source} lacks {keys[0]}{alternatives}")
        return value

    def ints(self, key: str) -> list[int] | None:
        value = self.cfg.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            raise PlannerError(f"{self.source}: {key}={value!r} is not a list of integers")
        return [self._as_int(key, v) for v in value]

    def boolean(self, key: str, default: bool) -> bool:
        """A true/false key: absent, `default`; null, false (transformers keeps the None, which reads as false: a
        tie_word_embeddings of null imported as tied, audit); anything else refused naming the key."""
        if key not in self.cfg:
            return default
        value = self.cfg[key]
        if value is None or isinstance(value, bool):
            return bool(value)
        raise PlannerError(f"{self.source}: {key}={value!r} is not true or false")

    def _as_int(self, key: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise PlannerError(f"{self.source}: {key}={value!r} is not an integer")
        if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
            # json.dumps writes Infinity and NaN as the file did
            raise PlannerError(f"{self.source}: {key}={json.dumps(value)} is not a finite integer")
        return int(value)


def hybrid_layers(c: HfConfig) -> tuple[str | None, dict[str, Any] | None]:
    """Nemotron-H's layer letters (hybrid_override_pattern, or layers_block_type names) and its Mamba-2 mixer.
    d_inner is mamba_num_heads · mamba_head_dim as NemotronHMamba2Mixer and Megatron's MambaMixer build it
    (`expand` is not read)."""
    if c.family != "nemotron_h":
        return None, None
    pattern = c.get("hybrid_override_pattern")
    blocks = c.get("layers_block_type") or c.get("layer_types")
    if pattern is None and isinstance(blocks, list):
        unknown = sorted({b for b in blocks if b not in fam.BLOCK_TYPE_LETTERS}, key=str)
        if unknown:
            raise PlannerError(f"{c.source}: layers_block_type has {unknown}; known: {sorted(fam.BLOCK_TYPE_LETTERS)}")
        pattern = "".join(fam.BLOCK_TYPE_LETTERS[b] for b in blocks)
    if not isinstance(pattern, str) or not pattern:
        raise PlannerError(f"{c.source}: nemotron_h config lacks hybrid_override_pattern (or layers_block_type)")
    declared = c.integer("num_hidden_layers")
    if declared is not None and declared != len(pattern):
        raise PlannerError(
            f"{c.source}: hybrid_override_pattern has {len(pattern)} layers but num_hidden_layers={declared}"
        )
    mamba = {
        "num_heads": c.need("mamba_num_heads"),
        "head_dim": c.need("mamba_head_dim"),
        "state_size": c.need("ssm_state_size"),
        "num_groups": c.need("n_groups", "mamba_n_groups"),
        "conv_kernel": c.need("conv_kernel", "mamba_d_conv"),
        "chunk_size": c.need("chunk_size", "mamba_chunk_size"),
        "conv_bias": bool(c.get("use_conv_bias")),
        "proj_bias": bool(c.get("mamba_proj_bias")),
    }
    return pattern, (mamba if "M" in pattern else None)


def attention_fields(c: HfConfig, num_layers: int) -> dict[str, Any] | None:
    out = _mla(c)
    letters, window = _attention_kinds(c, num_layers)
    if set(letters) != {"G"}:
        out.update(pattern=_shortest_tiling(letters), window=window)
    if c.family in fam.SINK_FAMILIES:
        out["sinks"] = True
    if c.family in fam.QK_RMSNORM_FAMILIES:
        out["qk_norm"] = "rmsnorm"
    elif c.family in fam.QK_FULL_WIDTH_RMSNORM_FAMILIES:
        out["qk_norm"] = "rmsnorm"
        warnings.warn(
            f"{c.source}: model_type {c.family!r} normalises q and k over the whole projection (heads x head_dim "
            "weights); imported as per-head RMSNorms: the same saved activations, head_dim weights each",
            stacklevel=4,
        )
    elif c.get("use_qk_norm"):  # the family's kind (hf_config.py refuses a family without one)
        out["qk_norm"] = fam.QK_NORM_FLAG_FAMILIES[c.family]
    return {k: v for k, v in out.items() if v is not None} or None


def _mla(c: HfConfig) -> dict[str, Any]:
    """Multi-head latent attention's widths (DeepSeek-V2/V3, Kimi-K2), or {} for another mixer. MLA's other keys
    without kv_lora_rank are refused: imported as plain attention they would be dropped, its head_dim guessed."""
    if not c.has("kv_lora_rank"):
        given = [k for k in fam.MLA_KEYS if c.raw.get(k) is not None]
        if c.family in fam.MLA_FAMILIES or given:
            what = "kv_lora_rank=null" if "kv_lora_rank" in c.raw else "no kv_lora_rank"
            raise PlannerError(
                f"{c.source}: {what} in model_type {c.family!r} (with {', '.join(given) or 'no other MLA key'}): "
                "multi-head latent attention needs kv_lora_rank, a positive integer (the compressed key-value width)"
            )
        return {}
    out = {"kind": "mla", "q_lora_rank": c.integer("q_lora_rank"), "kv_lora_rank": c.integer("kv_lora_rank")}
    out.update({k: c.need(k) for k in ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")})
    return out


def _attention_kinds(c: HfConfig, n: int) -> tuple[list[str], int | None]:
    """One letter per layer (G global, S sliding, C chunked) and the window, from layer_types where the config
    lists them, else by the family's rule (each the default of its transformers config class)."""
    family, types, sliding = c.family, c.get("layer_types"), c.integer("sliding_window")
    chunk = c.integer("attention_chunk_size")
    if family == "nemotron_h":  # its layer_types are block types (_hybrid); attention layers are global
        return ["G"] * n, None
    if types is not None and not isinstance(types, list):  # a string would be read as no layer_types at all
        raise PlannerError(
            f"{c.source}: layer_types={types!r} is not a list; give one per layer of {sorted(fam.LAYER_TYPE_LETTERS)}"
        )
    if isinstance(types, list):
        unknown = sorted({t for t in types if t not in fam.LAYER_TYPE_LETTERS}, key=str)
        if unknown:
            raise PlannerError(f"{c.source}: layer_types has {unknown}; known: {sorted(fam.LAYER_TYPE_LETTERS)}")
        if len(types) != n:
            raise PlannerError(f"{c.source}: layer_types has {len(types)} entries but the model has {n} layers")
        letters = [fam.LAYER_TYPE_LETTERS[t] for t in types]
    elif family == "gemma3_text":  # Gemma3TextConfig: global where (layer + 1) % sliding_window_pattern == 0
        period = c.need("sliding_window_pattern", at_least=1)
        letters = ["G" if (i + 1) % period == 0 else "S" for i in range(n)]
    elif family in fam.ALTERNATING_FAMILIES:
        letters = ["S" if (i + 1) % 2 else "G" for i in range(n)]
    elif family == "llama4_text":  # chunked on RoPE layers, global on NoPE layers (Llama4TextConfig.layer_types)
        interval = c.need("no_rope_layer_interval", at_least=1)
        rope = c.ints("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(n)]
        if len(rope) < n:
            raise PlannerError(f"{c.source}: no_rope_layers has {len(rope)} entries but the model has {n} layers")
        letters = ["C" if (r and chunk) else "G" for r in rope[:n]]
    elif family in fam.QWEN_FAMILIES:  # sliding only with use_sliding_window, from max_window_layers on
        start = c.integer("max_window_layers") if family in ("qwen2", "qwen3") else 0
        on = bool(c.get("use_sliding_window")) and sliding
        letters = ["S" if on and i >= (start or 0) else "G" for i in range(n)]
    elif c.has("use_sliding_window") and not c.get("use_sliding_window"):  # Qwen-derived (MiMo): off means none
        letters = ["G"] * n
    elif sliding and family in fam.ALL_SLIDING_FAMILIES:
        letters = ["S"] * n
    elif sliding:
        raise PlannerError(
            f"{c.source}: sliding_window={sliding} without layer_types: which layers slide is family-specific and "
            f"model_type {family!r} is not one the importer knows ({', '.join(sorted(fam.ALL_SLIDING_FAMILIES))})"
        )
    else:
        letters = ["G"] * n
    if {"S", "C"} <= set(letters):
        raise PlannerError(f"{c.source}: both sliding and chunked layers; the spec has one window per model")
    return letters, (sliding if "S" in letters else chunk if "C" in letters else None)


def _shortest_tiling(letters: list[str]) -> str:
    """The shortest unit that repeats to give the per-layer letters (Gemma 3: SSSSSG), else all of them."""
    for period in range(1, min(len(letters), 64) + 1):
        if all(x == letters[i % period] for i, x in enumerate(letters)):
            return "".join(letters[:period])
    return "".join(letters)


def rope_fields(cfg: dict[str, Any], *, rope: bool) -> dict[str, Any]:
    """The spec's rope_theta and, for a RoPE model, its rotary_percent."""
    return {"rope_theta": rope_theta(cfg), "rotary_percent": rotary_percent(cfg) if rope else None}


def rope_theta(cfg: dict[str, Any]) -> Any:
    """`rope_theta`, or transformers 5's `rope_parameters: {rope_theta: ...}`."""
    nested = cfg.get("rope_parameters")
    return cfg.get("rope_theta") or (nested.get("rope_theta") if isinstance(nested, dict) else None)


def rotary_percent(cfg: dict[str, Any]) -> Any:
    """`partial_rotary_factor` (GLM-4.5 0.5, Qwen3-Next 0.25), top-level or in transformers 5's `rope_parameters`:
    the spec's rotary_percent (default 1, the whole head)."""
    nested = cfg.get("rope_parameters")
    partial = cfg.get("partial_rotary_factor")
    if partial is None and isinstance(nested, dict):
        partial = nested.get("partial_rotary_factor")
    return 1.0 if partial is None else partial


# The model spec's fields an import error may name, as the config.json keys they were read from (hf_config.py
# hf_fields; a family's alternatives in order): a refusal said "attention.window: Input should be greater than 0" of a
# sliding_window of 0, which the user must find in the spec's schema (audit).
SPEC_KEYS: dict[str, tuple[str, ...]] = {
    "attention.window": ("sliding_window", "attention_chunk_size"),
    "num_kv_heads": ("num_key_value_heads", "num_kv_heads", "n_head_kv"),
    "num_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "ffn_hidden_size": ("intermediate_size", "ffn_hidden_size", "n_inner"),
    "max_seq_len": ("max_position_embeddings", "n_positions", "n_ctx"),
    "moe.expert_ffn_hidden_size": ("moe_intermediate_size", "intermediate_size"),
    "moe.top_k": fam.TOP_K_KEYS,
    "moe.num_experts": fam.EXPERT_COUNT_KEYS,
    "norm_eps": ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon"),
}


def keys_said(message: str, cfg: dict[str, Any]) -> str:
    """The config keys behind the spec fields `message` names, as a clause to append ('' where it names none)."""
    said = []
    for field, keys in SPEC_KEYS.items():
        key = next((k for k in keys if k in cfg), None)
        if key is not None and key != field and re.search(rf"(?<![\w.]){re.escape(field)}\b", message):
            said.append(f"{field} is the config's {key}")
    return f" ({'; '.join(said)})" if said else ""
