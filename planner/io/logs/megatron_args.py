"""Megatron's printed arguments (or Megatron-Bridge's printed configuration) as a plan, a model shape and the
software knobs of a runs file. Argument names are Megatron's `args` fields (megatron/training/arguments.py);
Megatron-Bridge's are the same fields under model., train., dataset., ddp., mixed_precision.
(src/megatron/bridge/training/config.py)."""

from __future__ import annotations

from typing import Any

from planner.engine.settings import OFFLOAD_MODULES
from planner.io.logs.megatron_arch import architecture, literal

MODEL_REQUIRED = ("num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size", "vocab_size", "max_seq_len")
SECTIONS = ("", "model.", "train.", "dataset.", "ddp.", "mixed_precision.", "optimizer.")


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

    def __init__(self, raw: dict[str, str]) -> None:
        self.values = {k: _value(v) for k, v in raw.items()}
        # a dump or a printed configuration, not just the batch and vocabulary other lines gave
        self.present = any(not k.startswith("logged_") for k in raw)

    def get(self, name: str, *aliases: str) -> Any:
        for n in (name, *aliases):
            for section in SECTIONS:
                v = self.values.get(section + n)
                if v is not None:
                    return v
        return None

    def has(self, name: str) -> bool:
        return any(section + name in self.values for section in SECTIONS)


def _zero(a: _Args, deepspeed: dict[str, Any]) -> int | None:
    if deepspeed.get("zero") is not None:
        return int(deepspeed["zero"])
    if a.get("use_torch_fsdp2") or a.get("use_megatron_fsdp"):
        return 3  # Megatron FSDP shards weights, gradients and optimizer (optim_grads_params)
    if a.get("use_distributed_optimizer"):
        return 1
    return 0 if a.present else None


def _recompute(a: _Args) -> str | None:
    granularity = a.get("recompute_granularity")
    if granularity in ("full", "selective"):
        return str(granularity)
    if a.get("checkpoint_activations"):  # Megatron-LM before 2022
        return "full"
    return "none" if a.present else None


# Megatron's --fp8-recipe (arguments.py: delayed, the default, tensorwise, mxfp8, blockwise) as the planner's
# precisions; delayed is plain fp8, the recipe the planner's fp8 terms were calibrated on (precision.py).
FP8_RECIPES = {"delayed": "fp8", "tensorwise": "fp8-current", "mxfp8": "mxfp8", "blockwise": "fp8-blockwise"}


def _precision(a: _Args, deepspeed: dict[str, Any]) -> str | None:
    if a.get("fp4") and a.get("fp4_recipe", "fp4-recipe") in ("nvfp4", None):
        return "nvfp4"
    if a.get("fp8"):
        recipe = a.get("fp8_recipe")
        return FP8_RECIPES.get(str(recipe), "fp8") if recipe is not None else "fp8"
    if a.get("bf16") or deepspeed.get("bf16"):
        return "bf16"
    if a.get("fp16") or deepspeed.get("fp16"):
        return "fp16"
    return "fp32" if a.present else None


def _plan(a: _Args, deepspeed: dict[str, Any]) -> dict[str, Any]:
    default = 1 if a.present else None  # a dump without the field: the Megatron version predates it
    vpp = a.get("virtual_pipeline_model_parallel_size") or default
    plan = {
        "tp": a.get("tensor_model_parallel_size"),
        "pp": a.get("pipeline_model_parallel_size"),
        "cp": a.get("context_parallel_size") or default,
        "ep": a.get("expert_model_parallel_size") or default,
        "vpp": vpp,
        "dp": a.get("data_parallel_size"),
        "sp": a.get("sequence_parallel") if a.has("sequence_parallel") else (False if a.present else None),
        "zero": _zero(a, deepspeed),
        "recompute": _recompute(a),
        "micro_batch": a.get("micro_batch_size") or deepspeed.get("micro_batch"),
        "global_batch": a.get("global_batch_size") or a.get("logged_global_batch") or deepspeed.get("global_batch"),
        "seq_len": a.get("sequence_length", "seq_length"),
        "precision": _precision(a, deepspeed),
        "schedule": None if vpp is None else ("interleaved" if vpp > 1 else "1f1b"),
    }
    return plan


def _moe(a: _Args, ffn: int | None) -> dict[str, Any] | None:
    experts = a.get("num_experts", "num_moe_experts")
    if not experts:
        return None
    expert_ffn = a.get("moe_ffn_hidden_size") or ffn
    shared = a.get("moe_shared_expert_intermediate_size")
    freq = literal(a.get("moe_layer_freq"))
    moe = {
        "num_experts": experts,
        "top_k": a.get("moe_router_topk") or 2,
        "expert_ffn_hidden_size": expert_ffn,
        "num_shared_experts": shared // expert_ffn if shared and expert_ffn else 0,
        "routing_groups": a.get("moe_router_num_groups"),
        "group_top_k": a.get("moe_router_group_topk"),
    }
    if shared and expert_ffn and shared % expert_ffn:  # one shared expert of its own width
        moe |= {"num_shared_experts": 1, "shared_expert_ffn_hidden_size": shared}
    if isinstance(freq, list):  # arguments.py moe_freq_type: 1 for an expert layer
        moe["layers"] = tuple(i for i, f in enumerate(freq) if f)
    else:  # an int N: every N-th layer from the first (transformer_config.py moe_layer_freq)
        moe["layer_freq"] = freq if isinstance(freq, int) and freq > 0 else 1
    return {k: v for k, v in moe.items() if v is not None}


# Megatron's --position-embedding-type as the spec's (YaRN and M-RoPE rotate as RoPE does; learned_absolute and
# an unstated type are learned)
POSITIONS = {"rope": "rope", "yarn": "rope", "mrope": "rope", "none": "none"}


def _model(a: _Args, seq_len: int | None) -> tuple[dict[str, Any], list[str]]:
    """(ModelSpec fields, what the arguments state that a spec cannot represent)."""
    heads = a.get("num_attention_heads")
    hidden = a.get("hidden_size")
    groups = a.get("num_query_groups") if a.get("group_query_attention") or a.has("model.num_query_groups") else None
    kv_channels = a.get("kv_channels")
    ffn = a.get("ffn_hidden_size")
    activation = str(a.values.get("model.activation_func._target_"))
    gated = a.get("swiglu") or (a.get("gated_linear_unit") and activation.endswith("silu"))
    untie = a.get("untie_embeddings_and_output_weights")
    share = a.get("share_embeddings_and_output_weights")
    norm = str(a.get("normalization") or "LayerNorm")
    model = {
        "num_layers": a.get("num_layers"),
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_kv_heads": groups or heads,
        "ffn_hidden_size": ffn,
        "mlp": "swiglu" if gated else "gelu",
        "vocab_size": a.get("logged_padded_vocab", "padded_vocab_size", "vocab_size"),
        "max_seq_len": seq_len,
        "tied_embeddings": bool(share) if share is not None else not untie,
        "position_embedding": POSITIONS.get(a.get("position_embedding_type"), "learned"),
        "norm": "rmsnorm" if norm.lower() == "rmsnorm" else "layernorm",
        "moe": _moe(a, ffn),
    }
    if kv_channels and hidden and heads and kv_channels * heads != hidden and not a.get("multi_latent_attention"):
        model["head_dim"] = kv_channels
    if a.has("add_bias_linear"):
        model["linear_bias"] = bool(a.get("add_bias_linear"))
    more, problems = architecture(a, layers=model["num_layers"], rmsnorm=model["norm"] == "rmsnorm")
    kind = a.get("position_embedding_type")
    if kind is not None and kind not in POSITIONS and kind != "learned_absolute":
        problems.append(f"position_embedding_type {kind}")
    return model | more, problems


def _software(a: _Args) -> dict[str, Any]:
    attention = None
    if a.get("use_flash_attn") or a.has("attention_backend"):
        attention = "flash"
    elif a.present and not a.has("use_flash_attn"):
        attention = "softmax"  # the dump predates flash attention in Megatron: its fused softmax keeps s^2 scores
    modules = a.get("recompute_modules")
    return {
        "attention": attention,
        "tp_overlap": a.get("tp_comm_overlap"),
        "p2p_overlap": a.get("overlap_p2p_comm"),
        "grad_dtype": _grad_dtype(a),
        "fp8_param_gather": a.get("fp8_param_gather") or None,
        "precision_aware_optimizer": a.get("use_precision_aware_optimizer") or None,
        "optimizer_moment_dtype": "bf16" if "bfloat16" in str(a.get("exp_avg_dtype") or "") else None,
        "recompute_modules": _listed(modules) if a.get("recompute_granularity") == "selective" and modules else None,
        **_moe_software(a),
        **_offload_software(a),
        "cuda_graphs": _cuda_graphs(a),
    }


def _grad_dtype(a: _Args) -> str | None:
    """16-bit gradients where the run reduces them so: --grad-reduce-in-bf16, or a dump whose final
    accumulate_allreduce_grads_in_fp32 is False (fp16 and fp32 runs keep gradients in the parameters' dtype; bf16
    turns it on unless --grad-reduce-in-bf16, arguments.py l.1195-1217 @d98e8a64). A dump that does not print it
    leaves the engine's default."""
    if a.get("grad_reduce_in_bf16") or a.get("accumulate_allreduce_grads_in_fp32") is False:
        return "param"
    return None


# Megatron's --moe-token-dispatcher-type (and the flex dispatcher's backend) as the planner's dispatchers
# (TransformerConfig moe_token_dispatcher_type, moe_flex_dispatcher_backend, moe_enable_deepep).
DISPATCHERS = {"alltoall": "alltoall", "allgather": "allgather"}


def _moe_software(a: _Args) -> dict[str, Any]:
    """The MoE dispatcher and the all-to-all overlap (--overlap-moe-expert-parallel-comm) the run used; a flex
    dispatcher on a backend other than DeepEP (hybridep, ncclep) is not one the planner prices, and is left
    unstated rather than read as another."""
    kind = str(a.get("moe_token_dispatcher_type") or "")
    dispatcher = DISPATCHERS.get(kind)
    if kind == "flex" and (a.get("moe_enable_deepep") or str(a.get("moe_flex_dispatcher_backend")) == "deepep"):
        dispatcher = "deepep"
    return {
        "moe_dispatcher": dispatcher if a.get("num_moe_experts", "num_experts") else None,
        "ep_overlap": True if a.get("overlap_moe_expert_parallel_comm") else None,
    }


def _offload_software(a: _Args) -> dict[str, Any]:
    """The shares of optimizer state and activations held in host memory (--optimizer-cpu-offload with
    --optimizer-offload-fraction, OptimizerConfig; --fine-grained-activation-offloading with --offload-modules and
    --activation-offload-fraction, default 1.0, TransformerConfig). Modules the planner does not model
    (fused_group_mlp, gdp_qkv) leave the module list unstated, rather than read as others."""
    optimizer = a.get("optimizer_offload_fraction") if a.get("optimizer_cpu_offload") else None
    fine_grained = a.get("fine_grained_activation_offloading")
    activations = a.get("activation_offload_fraction") if fine_grained else None
    if fine_grained and activations is None:
        activations = 1.0
    modules = _listed(a.get("offload_modules")) if fine_grained and a.get("offload_modules") else None
    return {
        "optimizer_offload": float(optimizer) if optimizer else None,
        "activation_offload": float(activations) if activations else None,
        "offload_modules": modules if modules and set(modules) <= set(OFFLOAD_MODULES) else None,
    }


def _cuda_graphs(a: _Args) -> bool | None:
    """Per-layer CUDA graphs (--cuda-graph-impl local or transformer_engine; the older --enable-cuda-graph and
    --external-cuda-graph). A whole-iteration graph (full_iteration) is not the per-layer capture the planner
    prices, so it is left unstated."""
    impl = str(a.get("cuda_graph_impl") or "none")
    if impl in ("local", "transformer_engine") or a.get("enable_cuda_graph") or a.get("external_cuda_graph"):
        return True
    return None


def _listed(value: Any) -> list[str]:
    """A printed Python list of names (['core_attn', 'mlp']) as the names."""
    return [v.strip(" '\"") for v in str(value).strip("[]").split(",") if v.strip(" '\"")]


def config_from_args(raw: dict[str, str], *, deepspeed: dict[str, Any]) -> dict[str, Any]:
    """The normalised configuration: plan (PLAN fields, None where the log does not say), gpus, model
    (ModelSpec fields) and the fields it lacks, software, and where it was read from."""
    a = _Args(raw)
    plan = _plan(a, deepspeed)
    model, unrepresented = _model(a, plan["seq_len"])
    missing = [k for k in MODEL_REQUIRED if model.get(k) is None]
    source = "Megatron-Bridge configuration" if any(k.startswith("model.") for k in raw) else "argument dump"
    gpus = a.get("world_size")
    if gpus is None and a.present and plan["dp"] and plan["tp"] and plan["pp"] and plan["cp"]:
        gpus = plan["dp"] * plan["tp"] * plan["pp"] * plan["cp"]
    return {
        "plan": plan,
        "gpus": gpus,
        "assumed": [],
        "model": model if not (missing or unrepresented) else None,
        "model_missing": missing if a.present else [],
        "model_unrepresented": unrepresented if a.present else [],
        "software": _software(a),
        "read_from": source if a.present else None,
    }
