"""A Hugging Face `config.json`'s experts (part of hf_config.py): how many, how tokens reach them, and where the MoE
layers are (DeepSeek's first_k_dense_replace / moe_layer_freq, Qwen's decoder_sparse_step / mlp_only_layers,
Llama 4's interleave_moe_layer_step / moe_layers, Laguna's mlp_layer_types). A value transformers would not build
(a step of 0, groups that do not divide the experts, a layer index past the last layer) is refused naming the key.
Pure: a parsed mapping in, spec fields out."""

from __future__ import annotations

from typing import Any

from planner.errors import PlannerError
from planner.io import hf_families as fam
from planner.io.hf_layout import HfConfig


def moe_fields(c: HfConfig, num_layers: int, pattern: str | None) -> dict[str, Any] | None:
    _one_expert_count(c)
    experts, top_k = c.integer(*fam.EXPERT_COUNT_KEYS), c.integer(*fam.TOP_K_KEYS)
    if experts == 0 and top_k:  # an MoE gate over no experts (transformers' topk fails), not a dense model
        raise PlannerError(
            f"{c.source}: {c.key_of(*fam.EXPERT_COUNT_KEYS)}=0 with {c.key_of(*fam.TOP_K_KEYS)}={top_k}: an MoE "
            f"layer needs at least top_k={top_k} routed experts"
        )
    if not experts or (pattern is not None and "E" not in pattern):
        return None
    if top_k is None:
        raise PlannerError(f"{c.source} has {experts} experts but lacks num_experts_per_tok (the experts per token)")
    moe: dict[str, Any] = {
        "num_experts": experts,
        "top_k": top_k,
        "expert_ffn_hidden_size": _expert_width(c),
    }
    if c.has("shared_expert_intermediate_size"):  # Qwen2-MoE, Qwen3-Next: one shared expert of its own width
        width = c.integer("shared_expert_intermediate_size")  # 0: none (Qwen3-Coder-480B-A35B's config)
        moe.update(num_shared_experts=1 if width else 0, shared_expert_ffn_hidden_size=width or None)
    elif c.has("n_shared_experts") or c.has("num_shared_experts"):  # DeepSeek / Kimi / GLM; Ling's bailing_moe
        moe["num_shared_experts"] = c.integer(c.key_of("n_shared_experts", "num_shared_experts") or "")
        moe["shared_expert_ffn_hidden_size"] = c.integer("moe_shared_expert_intermediate_size")  # Nemotron-H
    elif c.family in fam.SHARED_EXPERT_FAMILIES:
        moe["num_shared_experts"] = fam.SHARED_EXPERT_FAMILIES[c.family]
    moe.update(_routing_groups(c, experts))
    if pattern is None:
        moe.update(_moe_layers(c, num_layers))
    return {k: v for k, v in moe.items() if v is not None}


def _one_expert_count(c: HfConfig) -> None:
    """Two expert-count keys that disagree are refused: which one the model's class reads is the family's to say
    (Qwen3-MoE's num_experts), and the first found won whatever the family (audit)."""
    given = {k: c.raw[k] for k in fam.EXPERT_COUNT_KEYS if c.raw.get(k) is not None}
    if len(set(map(str, given.values()))) > 1:
        said = ", ".join(f"{k}={v}" for k, v in given.items())
        raise PlannerError(f"{c.source}: {said} disagree: give the expert count once")


def _expert_width(c: HfConfig) -> int:
    """Each routed expert's FFN width: moe_intermediate_size where the config has the key, else the dense width
    (Mixtral's experts are its intermediate_size). A null or 0 there fell through to the dense width: DeepSeek-V3
    imported at 5.9T parameters (audit)."""
    if "moe_intermediate_size" not in c.raw:
        return c.integer("moe_intermediate_size") or c.need("intermediate_size")
    width = c.integer("moe_intermediate_size", at_least=1)
    if width is None:
        raise PlannerError(f"{c.source}: moe_intermediate_size is null; the experts' FFN width must be an integer >= 1")
    return width


def _routing_groups(c: HfConfig, experts: int) -> dict[str, Any]:
    """DeepSeek-V3's node-limited routing (modeling_deepseek_v3.py DeepseekV3MoE: the experts viewed as n_group
    equal groups, topk_group of them kept per token); all groups kept is no limit."""
    groups, group_top_k = c.integer("n_group", at_least=1), c.integer("topk_group", at_least=1)
    if not groups or not group_top_k:
        return {}
    if experts % groups:
        raise PlannerError(
            f"{c.source}: n_group={groups} must divide the {experts} routed experts into equal groups "
            f"({c.key_of(*fam.EXPERT_COUNT_KEYS)}={experts})"
        )
    if group_top_k > groups:
        raise PlannerError(
            f"{c.source}: topk_group={group_top_k} must be <= n_group={groups} (the groups a token may reach)"
        )
    return {"routing_groups": groups, "group_top_k": group_top_k} if group_top_k < groups else {}


def _moe_layers(c: HfConfig, n: int) -> dict[str, Any]:
    """Where the MoE layers are, as layer_freq / first_k_dense when that says it, else as an explicit list."""
    if c.has("first_k_dense_replace") or c.has("moe_layer_freq"):
        # DeepSeek (modeling_deepseek.py): MoE where layer >= first_k_dense_replace and layer % moe_layer_freq == 0
        k = c.integer("first_k_dense_replace", at_least=0) or 0
        freq = c.integer("moe_layer_freq", at_least=1) or 1
        if k >= n:
            raise PlannerError(
                f"{c.source}: first_k_dense_replace={k} leaves no MoE layer; it must be below num_hidden_layers={n}"
            )
        layers = [i for i in range(n) if i >= k and i % freq == 0]
        said = f"first_k_dense_replace={k} with moe_layer_freq={freq}"
    elif c.has("moe_layers") or c.has("interleave_moe_layer_step"):
        # Llama 4 (Llama4TextConfig): moe_layers, else range(step - 1, layers, step)
        step = c.integer("interleave_moe_layer_step", at_least=1) or 1
        if c.has("moe_layers") and c.get("moe_layers") is not None and not c.ints("moe_layers"):
            raise PlannerError(  # transformers builds every layer dense then; it had imported all-MoE (audit)
                f"{c.source}: moe_layers is empty, so no layer has experts (Llama4TextConfig keeps [] as given); "
                "give the MoE layers' indices"
            )
        layers = _layer_indices(c, "moe_layers", n) or list(range(step - 1, n, step))
        said = f"moe_layers={layers}" if c.has("moe_layers") else f"interleave_moe_layer_step={step}"
    elif c.has("mlp_layer_types"):  # Laguna: "dense" or "sparse" for each layer
        layers = _sparse_layers(c, n)
        said = "mlp_layer_types"
    elif c.has("decoder_sparse_step") or c.get("mlp_only_layers"):
        # Qwen MoE (modeling_qwen3_moe.py): MoE where layer not in mlp_only_layers and (layer + 1) % step == 0
        step = c.integer("decoder_sparse_step", at_least=1) or 1
        dense = set(_layer_indices(c, "mlp_only_layers", n))
        layers = [i for i in range(n) if i not in dense and (i + 1) % step == 0]
        said = f"decoder_sparse_step={step} with mlp_only_layers={sorted(dense)}"
    else:
        return {}
    if not layers:
        raise PlannerError(f"{c.source}: {said} leaves none of the {n} layers MoE; an MoE model needs one")
    return _placement(layers, n)


def _sparse_layers(c: HfConfig, n: int) -> list[int]:
    """The layers mlp_layer_types marks "sparse", refused unless it says "dense" or "sparse" for each of the n."""
    kinds = c.get("mlp_layer_types")
    if not isinstance(kinds, list) or len(kinds) != n or not set(kinds) <= {"dense", "sparse"}:
        shown = repr(kinds) if len(repr(kinds)) <= 60 else f"{str(kinds)[:60]}..."
        raise PlannerError(f'{c.source}: mlp_layer_types={shown}: give "dense" or "sparse" for each of the {n} layers')
    return [i for i, kind in enumerate(kinds) if kind == "sparse"]


def _layer_indices(c: HfConfig, key: str, n: int) -> list[int]:
    """A list of 0-based layer indices, each refused naming the key unless in 0..n-1."""
    indices = c.ints(key) or []
    outside = [i for i in indices if not 0 <= i < n]
    if outside:
        raise PlannerError(f"{c.source}: {key} has {outside}; layer indices are 0 to {n - 1} ({n} layers)")
    return indices


def _placement(layers: list[int], n: int) -> dict[str, Any]:
    """MoE layers as the spec says them most simply: all from first_k_dense on; every layer_freq-th; or a list."""
    if layers == list(range(layers[0], n)):
        return {"first_k_dense": layers[0]}
    for freq in range(2, n + 1):
        if layers == [i for i in range(n) if (i + 1) % freq == 0]:
            return {"layer_freq": freq}
    return {"layers": tuple(layers)}
