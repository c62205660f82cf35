"""The settings a Megatron argument dump (or Megatron-Bridge configuration) states that change what a run holds and
does, as a runs file's software block: attention kernel, overlaps, gradient dtype, fp8 parameter gather, the
precision-aware optimizer, recompute modules, the MoE dispatcher, offloading and CUDA graphs. Field names are
Megatron's `args` (megatron/training/arguments.py) and TransformerConfig's (megatron/core/transformer/
transformer_config.py @d98e8a64). What the planner does not price is left unstated, not read as another."""

from __future__ import annotations

from typing import Any, Protocol

from planner.engine.settings import OFFLOAD_MODULES


class Args(Protocol):
    def get(self, name: str, *aliases: str) -> Any: ...

    def has(self, name: str) -> bool: ...

    present: bool

    def shown(self, *names: str) -> bool: ...


# Megatron's --attention-backend (AttnBackend, megatron/core/transformer/enums.py l.51 @d98e8a64) as the planner's
# attention: flash and fused (cuDNN) keep O(s) memory, and auto lets Transformer Engine pick one of them; unfused
# (TE's UnfusedDotProductAttention) and local (Megatron-Core's DotProductAttention, --spec local) keep the s x s
# scores: softmax.
ATTENTION_BACKENDS = {"flash": "flash", "fused": "flash", "auto": "flash", "unfused": "softmax", "local": "softmax"}
BACKEND_NUMBERS = {1: "flash", 2: "fused", 3: "unfused", 4: "local", 5: "auto"}  # the enum's values


def _attention(a: Args) -> str | None:
    if a.has("attention_backend"):  # "AttnBackend.unfused"; Megatron-Bridge prints the enum's value under _args_
        backend = str(a.get("attention_backend")).rpartition(".")[2]
        backend = BACKEND_NUMBERS.get(a.get("attention_backend._args_"), backend)
        return ATTENTION_BACKENDS.get(backend)
    if a.get("use_flash_attn"):
        return "flash"
    if a.shown("use_flash_attn", "attention_backend") and not a.has("use_flash_attn"):
        return "softmax"  # the dump predates flash attention in Megatron: its fused softmax keeps s^2 scores
    return None


def software(a: Args) -> dict[str, Any]:
    attention = _attention(a)
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
        "megatron_fsdp": _megatron_fsdp(a),
    }


# --data-parallel-sharding-strategy of Megatron FSDP as ZeRO stages (arguments.py l.3190 @d98e8a64: no_shard, optim,
# optim_grads, optim_grads_params, the default; DistributedDataParallelConfig in Megatron-Bridge).
FSDP_STRATEGIES = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}


def fsdp_strategy(a: Args) -> str | None:
    """The sharding strategy of a run on Megatron FSDP (None: not on it): the one the dump prints, else the
    default, optim_grads_params, or no_shard under --use-custom-fsdp, its name in core 0.11-0.13 (d165a8548b ..
    af28b5a559)."""
    if not (a.get("use_megatron_fsdp") or a.get("use_custom_fsdp")):
        return None
    default = "optim_grads_params" if a.get("use_megatron_fsdp") else "no_shard"
    return str(a.get("data_parallel_sharding_strategy") or default)


def _megatron_fsdp(a: Args) -> bool | None:
    """Megatron-FSDP sharding weights, gradients and optimizer: the zero 3 the planner prices as it
    (comm.megatron_fsdp). Its other strategies are the zero 0-2 the distributed optimizer prices."""
    return True if FSDP_STRATEGIES.get(fsdp_strategy(a) or "") == 3 else None


def _grad_dtype(a: Args) -> str | None:
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


def _moe_software(a: Args) -> dict[str, Any]:
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


def _offload_software(a: Args) -> dict[str, Any]:
    """The shares of optimizer state and activations held in host memory (--optimizer-cpu-offload with
    --optimizer-offload-fraction, OptimizerConfig; --fine-grained-activation-offloading with --offload-modules and
    --activation-offload-fraction, default 1.0, TransformerConfig; --cpu-offloading-num-layers, the layer-wise
    offload). Modules the planner does not model
    (fused_group_mlp, gdp_qkv) leave the module list unstated, rather than read as others."""
    optimizer = a.get("optimizer_offload_fraction") if a.get("optimizer_cpu_offload") else None
    fine_grained = a.get("fine_grained_activation_offloading")
    activations = a.get("activation_offload_fraction") if fine_grained else None
    if fine_grained and activations is None:
        activations = 1.0
    modules = _listed(a.get("offload_modules")) if fine_grained and a.get("offload_modules") else None
    # arguments.py l.1950-1951: above 0 it turns cpu_offloading on; a Bridge config states both (model.*)
    moves = a.get("cpu_offloading") is not False and a.get("cpu_offloading_activations") is not False  # not weights
    layers = a.get("cpu_offloading_num_layers") if moves else None
    layers = layers if isinstance(layers, int) and not isinstance(layers, bool) else None
    return {
        "optimizer_offload": float(optimizer) if optimizer else None,
        "activation_offload": float(activations) if activations else None,
        "offload_modules": modules if modules and set(modules) <= set(OFFLOAD_MODULES) else None,
        "offload_layers": layers if layers and layers > 0 else None,
    }


def _cuda_graphs(a: Args) -> bool | None:
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
