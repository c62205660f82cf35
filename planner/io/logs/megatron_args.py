"""Megatron's printed arguments (or Megatron-Bridge's printed configuration) as a plan, a model shape and the
software knobs of a runs file. Argument names are Megatron's `args` fields (megatron/training/arguments.py);
Megatron-Bridge's are the same fields under model., train., dataset., ddp., mixed_precision.
(src/megatron/bridge/training/config.py)."""

from __future__ import annotations

from typing import Any

from planner.io.logs.megatron_arch import POSITIONS, architecture, literal, mlp_fields, position_kind
from planner.io.logs.megatron_layers import chunk_layers, group_notes, split_notes, stated_split
from planner.io.logs.megatron_software import FSDP_STRATEGIES, fsdp_strategy, software

MODEL_REQUIRED = ("num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size", "vocab_size", "max_seq_len")
SECTIONS = ("", "model.", "train.", "dataset.", "ddp.", "mixed_precision.", "optimizer.")
# An argument a set-up or step line states outside the dump ("logged_world_size" from Primus's "[rank-7/8]"): read
# where the dump does not state it; it makes no dump present.
LOGGED = "logged_"


def _value(text: str) -> Any:
    """A printed value: None/null, True/False, an int, a float, or the text."""
    t = text.strip()
    if t in ("None", "null", "~", ""):
        return None
    if t in ("True", "true", "False", "false"):
        return t in ("True", "true")
    for kind in (int, float):
        try:
            return kind(t)
        except ValueError:
            pass
    return t


class _Args:
    """Lookup of a field under any of the sections Megatron-Bridge prints it in."""

    def __init__(self, raw: dict[str, str], cut_after: str | None = None) -> None:
        self.values = {k: _value(v) for k, v in raw.items()}
        # a dump or a printed configuration, not just the batch and vocabulary other lines gave
        self.present = any(not k.startswith(LOGGED) for k in raw)
        self.cut_after = cut_after  # the last argument a dump cut off before its end shows

    def shown(self, *names: str) -> bool:
        """Whether the dump would show these arguments had the run set them, so that their absence says the
        default: it is there, and not cut off before them (Megatron prints the arguments sorted, lower-cased,
        arguments.py _print_args)."""
        cut = self.cut_after
        return self.present and (cut is None or all(n.lower() <= cut.lower() for n in names))

    def get(self, name: str, *aliases: str) -> Any:
        for n in (name, *aliases):
            for section in (*SECTIONS, LOGGED):
                v = self.values.get(section + n)
                if v is not None:
                    return v
        return None

    def has(self, name: str) -> bool:
        return any(section + name in self.values for section in SECTIONS)


def _zero(a: _Args, deepspeed: dict[str, Any], notes: list[str]) -> int | None:
    if deepspeed.get("zero") is not None:
        return int(deepspeed["zero"])
    strategy = fsdp_strategy(a)
    if strategy is not None:
        if strategy not in FSDP_STRATEGIES:
            notes.append(f"zero: Megatron FSDP's data_parallel_sharding_strategy {strategy} is not a ZeRO stage")
        return FSDP_STRATEGIES.get(strategy)
    if a.get("use_torch_fsdp2"):
        return 3  # FSDP2's fully_shard: weights, gradients and optimizer (arguments.py --use-torch-fsdp2)
    if a.get("use_distributed_optimizer"):
        return 1
    return (
        0 if a.shown("use_distributed_optimizer", "use_megatron_fsdp", "use_custom_fsdp", "use_torch_fsdp2") else None
    )


def _recompute(a: _Args, chunk_layers: int | None, notes: list[str]) -> str | None:
    """Full, selective or none. --recompute-method block recomputes only the first recompute_num_layers layers of
    each pipeline chunk (megatron/core/recompute.py l.167 @d98e8a64): full where that is all of them, else a
    partial recompute no plan represents, left unstated (and said) rather than priced as full or none."""
    granularity = a.get("recompute_granularity")
    if granularity == "full" and a.get("recompute_method") == "block":
        k = a.get("recompute_num_layers")
        if not isinstance(k, int) or chunk_layers is None or k < chunk_layers:
            notes.append(
                f"recompute: the run recomputes {k} of each pipeline chunk's {chunk_layers or '?'} layers "
                f"(recompute_method block, recompute_num_layers {k}), a partial recompute a plan cannot represent: "
                "left unstated"
            )
            return None
    if granularity in ("full", "selective"):
        return str(granularity)
    if a.get("checkpoint_activations"):  # Megatron-LM before 2022
        return "full"
    return "none" if a.shown("recompute_granularity", "checkpoint_activations") else None


# Megatron's --fp8-recipe (TransformerConfig fp8_recipe, transformer_config.py l.594 @d98e8a64: delayed, the default,
# tensorwise, mxfp8, blockwise, custom) as the planner's precisions; delayed is plain fp8, the recipe the planner's
# fp8 terms were calibrated on (precision.py). custom (a quantizer factory) is none of them.
FP8_RECIPES = {"delayed": "fp8", "tensorwise": "fp8-current", "mxfp8": "mxfp8", "blockwise": "fp8-blockwise"}
# --fp4-format with fp4_recipe (l.679: nvfp4, the default, or custom).
FP4_RECIPES = {"nvfp4": "nvfp4"}
# args.params_dtype as "using torch.X for parameters" prints it (arguments.py l.1252): torch.bfloat16, torch.half,
# torch.float
PARAMS_DTYPES = {"bfloat16": "bf16", "half": "fp16", "float16": "fp16", "float": "fp32", "float32": "fp32"}


def _precision(a: _Args, deepspeed: dict[str, Any], notes: list[str]) -> str | None:
    for flag, recipes, default in (("fp4", FP4_RECIPES, "nvfp4"), ("fp8", FP8_RECIPES, "delayed")):
        if a.get(flag):
            recipe = str(a.get(f"{flag}_recipe") or default)
            if recipe not in recipes:
                notes.append(f"precision: {flag}_recipe {recipe} is not a recipe the planner prices: left unstated")
            return recipes.get(recipe)
    if a.get("bf16") or deepspeed.get("bf16"):
        return "bf16"
    dtype = PARAMS_DTYPES.get(str(a.values.get(LOGGED + "params_dtype")))
    if dtype and not (a.shown("bf16", "fp16") or a.has("fp16") or deepspeed.get("fp16")):
        notes.append(
            f"precision: {dtype}, from 'using torch.{a.values.get(LOGGED + 'params_dtype')} for parameters' (no dump "
            "states it; an fp8 or fp4 recipe runs on 16-bit parameters and would not show there)"
        )
        return dtype
    if a.get("fp16") or deepspeed.get("fp16"):
        if not a.has("fp16") and not deepspeed.get("fp16"):  # only the iteration lines' loss scale says so
            scale = a.values.get(LOGGED + "fp16_loss_scale")
            notes.append(
                f"precision: fp16, from the iteration lines' loss scale ({scale}): Megatron scales the loss for fp16 "
                "only (bf16 and fp32 print 1.0); no line states the precision"
            )
        return "fp16"
    return "fp32" if a.shown("bf16", "fp16", "fp8", "fp4") else None


def _plan(a: _Args, deepspeed: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    def default(name: str) -> Any:  # a dump without the field: the Megatron version predates it
        return a.get(name) or (1 if a.shown(name) else None)

    vpp = default("virtual_pipeline_model_parallel_size")
    pp = a.get("pipeline_model_parallel_size")
    notes = split_notes(a, pp=pp or 1, vpp=vpp or 1)
    plan = {
        "tp": a.get("tensor_model_parallel_size"),
        "pp": pp,
        "cp": default("context_parallel_size"),
        "ep": default("expert_model_parallel_size"),
        "vpp": vpp,
        "dp": a.get("data_parallel_size"),
        "sp": a.get("sequence_parallel")
        if a.has("sequence_parallel")
        else (False if a.shown("sequence_parallel") else None),
        "zero": _zero(a, deepspeed, notes),
        "recompute": _recompute(a, chunk_layers(a, pp=pp or 1, vpp=vpp or 1), notes),
        "micro_batch": a.get("micro_batch_size") or deepspeed.get("micro_batch"),
        "global_batch": a.get("global_batch_size") or a.get("logged_global_batch") or deepspeed.get("global_batch"),
        "seq_len": a.get("sequence_length", "seq_length"),
        "precision": _precision(a, deepspeed, notes),
        "schedule": None if vpp is None else ("interleaved" if vpp > 1 else "1f1b"),
    }
    plan |= stated_split(a)  # the first and last ranks' layers, where the run sets them
    notes += group_notes(a, plan)
    etp = a.get("expert_tensor_parallel_size")  # arguments.py l.587: tp where not given
    if etp is not None and a.get("num_experts", "num_moe_experts"):
        plan["etp"] = etp
    return plan, notes


def _moe(a: _Args, ffn: int | None) -> dict[str, Any] | None:
    experts = a.get("num_experts", "num_moe_experts")
    if not experts:
        return None
    expert_ffn = a.get("moe_ffn_hidden_size") or ffn
    shared = a.get("moe_shared_expert_intermediate_size")
    freq = literal(a.get("moe_layer_freq"))
    capacity = a.get("moe_expert_capacity_factor")
    moe = {
        "num_experts": experts,
        "top_k": a.get("moe_router_topk") or 2,
        "expert_ffn_hidden_size": expert_ffn,
        "num_shared_experts": shared // expert_ffn if shared and expert_ffn else 0,
        "routing_groups": a.get("moe_router_num_groups"),
        "group_top_k": a.get("moe_router_group_topk"),
        # None or < 0: dropless (transformer_config.py l.917, l.1837 @d98e8a64)
        "capacity_factor": capacity if isinstance(capacity, (int, float)) and capacity > 0 else None,
    }
    if shared and expert_ffn and shared % expert_ffn:  # one shared expert of its own width
        moe |= {"num_shared_experts": 1, "shared_expert_ffn_hidden_size": shared}
    if isinstance(freq, list):  # arguments.py moe_freq_type: 1 for an expert layer
        moe["layers"] = tuple(i for i, f in enumerate(freq) if f)
    else:  # an int N: every N-th layer from the first (transformer_config.py moe_layer_freq)
        moe["layer_freq"] = freq if isinstance(freq, int) and freq > 0 else 1
    return {k: v for k, v in moe.items() if v is not None}


def _padding(a: _Args) -> list[str]:
    """--moe-pad-expert-input-to-capacity pads every expert to its capacity (moe_utils.py): a runs file has no word
    for it, so the engine profile's moe.pad_to_capacity prices it, and the run says so."""
    if a.get("moe_pad_expert_input_to_capacity") and a.get("moe_expert_capacity_factor"):
        return ["moe: experts padded to capacity (moe_pad_expert_input_to_capacity): priced as the engine's "
                "moe.pad_to_capacity says (a runs file cannot state it)"]  # fmt: skip
    return []


def _model(a: _Args, seq_len: int | None) -> tuple[dict[str, Any], list[str]]:
    """(ModelSpec fields, what the arguments state that a spec cannot represent)."""
    heads = a.get("num_attention_heads")
    hidden = a.get("hidden_size")
    groups = a.get("num_query_groups") if a.get("group_query_attention") or a.has("model.num_query_groups") else None
    kv_channels = a.get("kv_channels")
    ffn = a.get("ffn_hidden_size")
    activation = str(a.values.get("model.activation_func._target_"))
    mlp, gate, unread = mlp_fields(a, activation)
    untie = a.get("untie_embeddings_and_output_weights")
    share = a.get("share_embeddings_and_output_weights")
    norm = str(a.get("normalization") or "LayerNorm")
    model = {
        "num_layers": a.get("num_layers"),
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_kv_heads": groups or heads,
        "ffn_hidden_size": ffn,
        "mlp": mlp,
        "gate": gate,
        "vocab_size": a.get("logged_padded_vocab", "padded_vocab_size", "vocab_size"),
        "max_seq_len": seq_len,
        "tied_embeddings": bool(share) if share is not None else not untie,
        "position_embedding": POSITIONS.get(position_kind(a) or "", "learned"),
        "norm": "rmsnorm" if norm.lower() == "rmsnorm" else "layernorm",
        "moe": _moe(a, ffn),
    }
    if kv_channels and hidden and heads and kv_channels * heads != hidden and not a.get("multi_latent_attention"):
        model["head_dim"] = kv_channels
    if a.has("add_bias_linear"):
        model["linear_bias"] = bool(a.get("add_bias_linear"))
    if a.get("add_qkv_bias") and not a.get("add_bias_linear"):
        model["qkv_bias"] = True
    if model["position_embedding"] == "rope" and (share := a.get("rotary_percent")) is not None:
        model["rotary_percent"] = float(share)  # --rotary-percent: RoPE on that share of a head (default 1.0)
    more, problems = architecture(a, layers=model["num_layers"], rmsnorm=model["norm"] == "rmsnorm")
    kind = position_kind(a)
    if kind is not None and kind not in POSITIONS and kind not in ("learned_absolute", "absolute"):
        problems.append(f"position_embedding_type {kind}")
    if a.get("squared_relu") or activation.endswith("squared_relu"):  # argument_utils.py l.320 @d98e8a64
        problems.append("a squared-ReLU MLP (squared_relu; a spec's MLP is gelu or swiglu)")
    return model | more, problems + unread


def config_from_args(raw: dict[str, str], *, deepspeed: dict[str, Any], cut_after: str | None = None) -> dict[str, Any]:
    """The normalised configuration: plan (PLAN fields, None where the log does not say), gpus, model
    (ModelSpec fields) and the fields it lacks, software, and where it was read from. `cut_after`: the last argument
    of a dump cut off before its end line, after which nothing is known (no default taken, no model read)."""
    a = _Args(raw, cut_after)
    plan, notes = _plan(a, deepspeed)
    model, unrepresented = _model(a, plan["seq_len"])
    missing = [k for k in MODEL_REQUIRED if model.get(k) is None]
    source = "Megatron-Bridge configuration" if any(k.startswith("model.") for k in raw) else "argument dump"
    gpus = a.get("world_size")
    if gpus is None and a.present and plan["dp"] and plan["tp"] and plan["pp"] and plan["cp"]:
        gpus = plan["dp"] * plan["tp"] * plan["pp"] * plan["cp"]
    return {
        "plan": plan,
        "gpus": gpus,
        "assumed": notes + _padding(a) + _cut_off(a),
        "model": model if not (missing or unrepresented or a.cut_after) else None,
        "model_missing": missing if a.present and not a.cut_after else [],
        "model_unrepresented": unrepresented if a.present else [],
        "software": software(a),
        "read_from": source if a.present else None,
    }


def _cut_off(a: _Args) -> list[str]:
    if not a.present or a.cut_after is None:
        return []
    return [
        f"argument dump: cut off after {a.cut_after} (no 'end of arguments' line): the arguments after it are not "
        "known, so none is taken at its default, and the model is not read from it"
    ]
