"""Megatron-LM's flags for the plan's precision recipe and the per-run engine settings it was priced with (pure;
megatron.py writes them with the parallel and batch flags): NVIDIA/Megatron-LM main @d98e8a64 arguments.py and
megatron-core's TransformerConfig.
"""

from __future__ import annotations

from collections.abc import Mapping

from planner.cost.recipe_options import default_offload_modules, offload_groups
from planner.engine import Kernels
from planner.plan import Plan
from planner.specs import ModelSpec

# Megatron-Core @d98e8a64 transformer_config.py: fp8 (--fp8-format e4m3 | hybrid), fp8_recipe (tensorwise, delayed,
# mxfp8, blockwise; default delayed), fp4 (--fp4-format e2m1) with fp4_recipe nvfp4; fp8_utils.py builds TE's
# DelayedScaling, Float8CurrentScaling, Float8BlockScaling and MXFP8BlockScaling with that format. Plain fp8 is the
# default (delayed) recipe; blockwise takes e4m3 on every tensor, as DeepSeek-V3 trained it (technical report 3.3).
FP8 = ["--bf16", "--fp8-format", "hybrid"]
PRECISION_FLAGS = {
    "fp32": [],
    "bf16": ["--bf16"],
    "fp16": ["--fp16"],
    "fp8": FP8,
    "fp8-delayed": [*FP8, "--fp8-recipe", "delayed"],
    "fp8-current": [*FP8, "--fp8-recipe", "tensorwise"],
    "fp8-blockwise": ["--bf16", "--fp8-format", "e4m3", "--fp8-recipe", "blockwise"],
    "mxfp8": [*FP8, "--fp8-recipe", "mxfp8"],
    "nvfp4": ["--bf16", "--fp4-format", "e2m1", "--fp4-recipe", "nvfp4"],
}


def setting_args(model: ModelSpec, plan: Plan, settings: Mapping[str, object]) -> list[str]:
    """The per-run settings the plan was priced with that differ from Megatron's defaults (WRITES):
    --optimizer sgd (arguments.py l.2913 at HEAD), --tp-comm-overlap (arguments.py), --no-overlap-p2p-communication
    (l.3118), --overlap-moe-expert-parallel-comm (TransformerConfig overlap_moe_expert_parallel_comm) and the
    gradients' dtype: bf16 weights accumulate and reduce
    in fp32 unless --grad-reduce-in-bf16, fp16 weights in fp16 unless --accumulate-allreduce-grads-in-fp32
    (arguments.py l.1195-1217), fp32 weights in fp32 either way; the profile's default is fp32 gradients."""
    out = ["--optimizer", "sgd"] if settings.get("optimizer") == "sgd" else []
    out += ["--tp-comm-overlap"] if settings.get("tp_overlap") is True else []
    if settings.get("p2p_overlap") is False:  # on by default (arguments.py l.3118, store_false)
        out.append("--no-overlap-p2p-communication")
    if settings.get("ep_overlap") is True:
        out.append("--overlap-moe-expert-parallel-comm")
    param_dtype = settings.get("grad_dtype") == "param"
    if plan.precision == "fp16" and not param_dtype:
        out.append("--accumulate-allreduce-grads-in-fp32")
    elif param_dtype and plan.precision not in ("fp32", "fp16"):
        out.append("--grad-reduce-in-bf16")
    return out + recipe_option_args(model, plan, settings)


def recipe_option_args(model: ModelSpec, plan: Plan, settings: Mapping[str, object]) -> list[str]:
    """The recipe options the plan was priced with (cost/recipe_options.py) but recompute modules (recompute_args),
    as Megatron-LM @d98e8a64 names them: the precision-aware optimizer and its moment dtypes (arguments.py
    l.3667-3684; store_param_remainders is OptimizerConfig's default); --optimizer-cpu-offload with
    --optimizer-offload-fraction (l.2918-2923); --cpu-offloading-num-layers (model_parallel_config.py l.461);
    --fp8-param-gather, or --fp4-param-gather for NVFP4 (l.2012-2017),
    with MXFP8's gather staged in the gradient buffer (--reuse-grad-buf-for-mxfp8-param-ag, as
    cost/quantization.py prices it); per-layer CUDA graphs through Transformer Engine (--cuda-graph-impl
    transformer_engine, TransformerConfig cuda_graph_impl)."""
    out: list[str] = []
    if settings.get("precision_aware_optimizer") is True:
        out.append("--use-precision-aware-optimizer")
    moments = settings.get("optimizer_moment_dtype")
    if isinstance(moments, str):  # the planner's words are Megatron's choices (fp32, bf16)
        out += ["--exp-avg-dtype", moments, "--exp-avg-sq-dtype", moments]
    offload = settings.get("optimizer_offload")
    if isinstance(offload, (int, float)) and offload > 0:
        out += ["--optimizer-cpu-offload", "--optimizer-offload-fraction", f"{offload:g}"]
    out += activation_offload_args(model, plan, settings)
    layers = settings.get("offload_layers")
    if isinstance(layers, int) and layers > 0:  # arguments.py l.1950-1951: it turns cpu_offloading on
        out += ["--cpu-offloading-num-layers", str(layers)]
    if settings.get("fp8_param_gather") is True:
        out.append("--fp4-param-gather" if plan.precision == "nvfp4" else "--fp8-param-gather")
        if plan.precision == "mxfp8":
            out.append("--reuse-grad-buf-for-mxfp8-param-ag")
    if settings.get("cuda_graphs") is True:
        out += [
            "--cuda-graph-impl",
            "transformer_engine",
            *_graph_scope(
                model,
                ep_overlap=settings.get("ep_overlap") is True,
                offload=bool(activation_offload_args(model, plan, settings)),
            ),
        ]
    return out


def activation_offload_args(model: ModelSpec, plan: Plan, settings: Mapping[str, object]) -> list[str]:
    """Fine-grained activation offloading as priced (cost/recipe_options.py): the modules named, else the default
    ones whose groups hold something in this model, and the share of their groups where it is not all
    (TransformerConfig fine_grained_activation_offloading, offload_modules, activation_offload_fraction)."""
    share = settings.get("activation_offload")
    if not isinstance(share, (int, float)) or share <= 0:
        return []
    named = settings.get("offload_modules")
    if isinstance(named, (list, tuple)):
        modules = [str(m) for m in named]
    else:
        recomputed = settings.get("recompute_modules")
        kernels = Kernels(
            cuda_graphs=settings.get("cuda_graphs") is True,
            recompute_modules=tuple(recomputed) if isinstance(recomputed, (list, tuple)) else None,
        )
        modules = [m for m in default_offload_modules(kernels, plan.recompute) if m in offload_groups(model)]
    fraction = ["--activation-offload-fraction", f"{share:g}"] if share < 1 else []
    return ["--fine-grained-activation-offloading", "--offload-modules", *modules, *fraction]


def _graph_scope(model: ModelSpec, *, ep_overlap: bool = False, offload: bool = False) -> list[str]:
    """Which part of each layer a graph captures. A dense model's whole layer (Megatron's default scope). A
    dropless MoE layer cannot be captured whole (its expert shapes change each step: transformer_config.py
    l.2838-2842 allows the moe scope only with padded capacity), so its attention is captured, and the dense layers'
    MLPs where the model has some (the mlp scope is refused in an all-MoE model, l.2831-2836). The planner prices
    MoE layers' kernels as launched one by one (cost/layer_time.py), so their attention graphs are a gain it does
    not count. --cuda-graph-scope is megatron-core 0.16's name; later Megatron-LM reads it as --cuda-graph-modules
    (arguments.py l.634-640). With the all-to-all overlap the scope holds attention alone (transformer_config.py
    asserts no mlp or moe scope with overlap_moe_expert_parallel_comm): the dense layers' MLPs then launch their
    kernels one by one, a host cost the megatron profile prices at zero on GPUs (host_layer_s fitted to 0). With
    fine-grained activation offloading the scope also holds the router (`moe_router`), as Megatron's offloading
    guide asks of graphed MoE layers (docs/user-guide/features/fine_grained_activation_offloading.md, "CUDA Graph
    Integration", @d98e8a64)."""
    if model.moe is None:
        return []
    dense = not ep_overlap and model.num_moe_layers < model.num_layers
    return ["--cuda-graph-scope", "attn", *(["moe_router"] if offload else []), *(["mlp"] if dense else [])]
