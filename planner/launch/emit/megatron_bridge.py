"""The plan as Megatron-Bridge recipe overrides (pure): a recipe for the model, and the Hydra-style KEY=VALUE overrides
that Bridge's recipe runner applies to the recipe's ConfigContainer.

Megatron-Bridge (NVIDIA-NeMo/Megatron-Bridge main @067f987d, 0.6.2 on PyPI): scripts/training/run_recipe.py takes
`--recipe NAME` and trailing KEY=VALUE overrides (recipe_runner.py apply_cli_overrides ->
training/utils/omegaconf_utils.py process_config_with_overrides: Hydra's OverridesParser on the ConfigContainer in
struct mode, so a key the container lacks is an error). The keys are the ConfigContainer's: `model.*` the model
provider (a megatron-core TransformerConfig), `ddp.*` DistributedDataParallelConfig, `optimizer.*` OptimizerConfig,
`train.*`, `dataset.*`, `tokenizer.*`, `dist.*`, `checkpoint.*` (training/config.py), `mixed_precision` a registered
recipe name (training/mixed_precision.py). The recipes (recipes/llama/llama3.py, llama2.py, gpt/gpt3_175b.py, the
same names in 0.3.1, 0.6.2 and main; the Qwen3, DeepSeek-V3, Kimi-K2 and GPT-OSS recipes at main: bridge_recipes.py)
fix the architecture; a model none of them builds is refused. Where a recipe's own settings differ from what the
plan is priced with (the MoE recipes dispatch through DeepEP or HybridEP; some capture CUDA graphs, keep bf16
moments and reduce gradients in bf16, pad the vocabulary to 1280, or train with Muon), the overrides set them back
to the engine profile's.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from planner.engine.split import plan_megatron_split
from planner.launch.emit.bridge_recipes import CATALOG_RECIPES, CHUNKED_ATTENTION
from planner.launch.emit.common import catalog_match, engine_torchrun, node_gpus, plain_transformer
from planner.launch.emit.megatron import expert_tp, layout_text, megatron_fsdp
from planner.launch.emit.megatron_model import DISPATCHER_CONFIG
from planner.launch.emit.targets import Target, register
from planner.plan import Plan, nondefault_microbatch_group
from planner.specs import ModelSpec

FILE_NAME = "megatron_bridge.sh"
ENGINE = "megatron"  # the engine profile whose rules its runs follow: Megatron-Bridge runs Megatron-Core
# recipe -> (mlp, norm, position, tied, layers, hidden, heads, kv heads, ffn, rope theta, linear biases) of the model
# it builds: the Hugging Face config.json the llama recipes load (AutoBridge.from_hf_pretrained: no biases) or the
# GPTModelProvider the GPT-3 recipe spells out (recipes/gpt/h100/gpt3_175b.py: TransformerConfig's add_bias_linear).
RECIPES = {
    "llama3_8b_pretrain_config": ("swiglu", "rmsnorm", "rope", False, 32, 4096, 32, 8, 14336, 500000.0, False),
    "llama3_70b_pretrain_config": ("swiglu", "rmsnorm", "rope", False, 80, 8192, 64, 8, 28672, 500000.0, False),
    "llama31_405b_pretrain_config": ("swiglu", "rmsnorm", "rope", False, 126, 16384, 128, 8, 53248, 500000.0, False),
    "llama2_7b_pretrain_config": ("swiglu", "rmsnorm", "rope", False, 32, 4096, 32, 32, 11008, 10000.0, False),
    "gpt3_175b_pretrain_config": ("gelu", "layernorm", "learned", True, 96, 12288, 96, 96, 49152, None, True),
}
MIXED_PRECISION = {  # training/mixed_precision.py registered recipes; fp8 = Megatron's default recipe, delayed
    "fp32": "null",
    "bf16": "bf16_mixed",
    "fp16": "fp16_mixed",
    "fp8": "bf16_with_fp8_delayed_scaling_mixed",
    "fp8-delayed": "bf16_with_fp8_delayed_scaling_mixed",
}
# Bridge's fp8 recipes set fp8_param_gather (training/mixed_precision.py bf16_with_fp8_delayed_scaling_mixed: True),
# and the recipe is named by a string that ConfigContainer.validate resolves after the overrides (training/config.py),
# so no override reaches its fields: a plan is written only as priced the way the recipe runs, as these flags price it
# (plain fp8, Megatron's default delayed recipe, has no quantized weights to gather in the planner: fp8-delayed does).
FP8_PARAM_GATHER = {"fp8": True, "fp8-delayed": True}
AS_THE_RECIPE_RUNS = "--precision fp8-delayed --fp8-param-gather"
# Which override carries each plan field.
PLAN_FIELDS = {
    "tp": "model.tensor_model_parallel_size",
    "pp": "model.pipeline_model_parallel_size",
    "vpp": "model.virtual_pipeline_model_parallel_size (+ the split flags)",
    "cp": "model.context_parallel_size",
    "ep": "model.expert_model_parallel_size",
    "etp": "model.expert_tensor_parallel_size",
    "sp": "model.sequence_parallel",
    "dp": "implied: world size / (tp*pp*cp)",
    "zero": "ddp/optimizer.use_distributed_optimizer (1), dist.use_torch_fsdp2 (3), ddp.use_megatron_fsdp (3 with "
    "ep > 1 or --megatron-fsdp)",
    "recompute": "model.recompute_granularity / method / num_layers / modules",
    "micro_batch": "train.micro_batch_size",
    "global_batch": "train.global_batch_size",
    "seq_len": "model.seq_length, dataset.seq_length",
    "precision": "mixed_precision",
    "schedule": "1F1B, interleaved with model.virtual_pipeline_model_parallel_size",
    "first_stage_layers": "model.num_layers_in_first_pipeline_stage",
    "last_stage_layers": "model.num_layers_in_last_pipeline_stage",
}


def recipe(model: ModelSpec) -> str | None:
    """The Bridge recipe that builds this architecture, or None: a plain GPT/Llama transformer by its shape (the
    RECIPES tuples), anything else field for field against CATALOG_RECIPES."""
    shape = (
        model.mlp,
        model.norm,
        model.position_embedding,
        model.tied_embeddings,
        model.num_layers,
        model.hidden_size,
        model.num_attention_heads,
        model.kv_heads,
        model.ffn_hidden_size,
        model.rope_theta if model.position_embedding == "rope" else None,
        model.linear_bias,
    )
    by_shape = (
        next((name for name, dims in RECIPES.items() if dims == shape), None) if plain_transformer(model) else None
    )
    return by_shape or catalog_match(model, CATALOG_RECIPES)


def format_problems(model: ModelSpec, plan: Plan) -> list[str]:
    matched = recipe(model)
    if matched is None and model.attention is not None and "C" in model.attention.pattern:
        return [f"model {model.name} has chunked attention layers (attention.pattern {model.attention.pattern!r}): "
                + CHUNKED_ATTENTION]  # fmt: skip
    if matched is None:
        return [
            f"Megatron-Bridge has no recipe building the architecture of {model.name} (recipes matched: "
            f"{', '.join([*RECIPES, *CATALOG_RECIPES])}; a RoPE model must give its rope_theta, its linear biases as "
            "the recipe's)"
        ]
    return []


def settings_problems(plan: Plan, settings: Mapping[str, object]) -> list[str]:
    """A plan priced otherwise than its fp8 recipe gathers the weights (FP8_PARAM_GATHER): refused, naming the flag
    that prices it as the recipe runs."""
    gather = FP8_PARAM_GATHER.get(plan.precision)
    if gather is None or bool(settings.get("fp8_param_gather")) == gather:
        return []
    return [
        f"precision={plan.precision} runs as Bridge's {MIXED_PRECISION[plan.precision]}, which gathers the weights in "
        f"fp8 (fp8_param_gather={gather} in training/mixed_precision.py; no override reaches a recipe named by "
        f"string): price the plan as it runs, {AS_THE_RECIPE_RUNS}"
    ]


def _value(v: object) -> str:
    """A Hydra override value: true/false, null, a list, or as written."""
    if isinstance(v, bool):
        return str(v).lower()
    if v is None:
        return "null"
    if isinstance(v, list):
        return "[" + ",".join(map(str, v)) + "]"
    return str(v)


def _split(model: ModelSpec, plan: Plan) -> dict[str, object]:
    """The pipeline split the cost model priced (engine/split.py plan_megatron_split: the plan's stated split, else
    megatron_split), as TransformerConfig fields."""
    out: dict[str, object] = {
        "model.virtual_pipeline_model_parallel_size": plan.vpp if plan.vpp > 1 else None,
        # stated always, as a recipe may set its own (Bridge's GLM-5 GB200 recipes: 6); null is megatron-core's
        # default, pp: Bridge defers megatron-core's __post_init__, which sets it, to finalize() after the overrides
        # (models/transformer_config.py TransformerConfig.finalize); its verification cards override it to null
        "model.microbatch_group_size_per_vp_stage": nondefault_microbatch_group(plan),
    }
    # every split field stated: a recipe's own (the Qwen3-235B-A22B recipe accounts for the embedding and the loss)
    # would change the split, or conflict with a layout (transformer_config.py l.2229-2258)
    out |= {
        "model.account_for_embedding_in_pipeline_split": False,
        "model.account_for_loss_in_pipeline_split": False,
        "model.num_layers_in_first_pipeline_stage": None,
        "model.num_layers_in_last_pipeline_stage": None,
    }
    if plan.vpp > 1:  # sends overlapped as priced (engine comm.p2p_overlap): comm_overlap null leaves megatron-core's
        # ModelParallelConfig default, off; Bridge's CommOverlapConfig sets the same pair with vpp > 1 (comm_overlap.py)
        out |= {"model.overlap_p2p_comm": True, "model.batch_p2p_comm": False}
    split = plan_megatron_split(model.num_layers, plan) if plan.pp > 1 else None
    if split is not None and split.method == "layout":  # it names the stages, the virtual ones too: the vpp stated
        # beside it must equal the one it implies (transformer_config.py l.2277-2287), as the DeepSeek-V3 and Kimi-K2
        # recipes' layout builders pair them; with it null the p2p overlap above would run without virtual stages
        out["model.pipeline_model_parallel_layout"] = layout_text(split, model.mtp_layers)
    elif split is not None and split.method in ("account_embedding_loss", "account_loss"):
        out["model.account_for_embedding_in_pipeline_split"] = split.method == "account_embedding_loss"
        out["model.account_for_loss_in_pipeline_split"] = True
    elif split is not None and split.method != "even":
        out["model.num_layers_in_first_pipeline_stage"] = split.first or None  # 0: not stated
        out["model.num_layers_in_last_pipeline_stage"] = split.last or None
    return out


def bridge_overrides(model: ModelSpec, plan: Plan, settings: Mapping[str, object] | None = None
                     ) -> tuple[list[str], dict[str, str]]:  # fmt: skip
    """KEY=VALUE overrides for the model's recipe, and which plan field each carries."""
    fsdp = megatron_fsdp(plan, settings or {})
    o: dict[str, object] = {
        "model.tensor_model_parallel_size": plan.tp,
        "model.pipeline_model_parallel_size": plan.pp,
        "model.context_parallel_size": plan.cp,
        "model.expert_model_parallel_size": plan.ep,
        "model.sequence_parallel": plan.sp,
        "model.pipeline_model_parallel_layout": None,
    }
    if expert_tp(plan) is not None or model.moe is not None:  # the MoE recipes set their own (1): stated always
        o["model.expert_tensor_parallel_size"] = expert_tp(plan) or plan.tp
    o |= _split(model, plan)
    o |= {
        "model.seq_length": plan.seq_len,
        "dataset.seq_length": plan.seq_len,
        "train.global_batch_size": plan.global_batch,
        "train.micro_batch_size": plan.micro_batch,
        "model.recompute_granularity": None if plan.recompute == "none" else plan.recompute,
        "model.recompute_method": "uniform" if plan.recompute == "full" else None,
        "model.recompute_num_layers": 1 if plan.recompute == "full" else None,
        "model.recompute_modules": ["core_attn"] if plan.recompute == "selective" else None,
        "ddp.use_distributed_optimizer": plan.zero == 1 or fsdp,  # Megatron-FSDP v1 runs on it (config.py)
        "optimizer.use_distributed_optimizer": plan.zero == 1 or fsdp,
        "dist.use_torch_fsdp2": plan.zero == 3 and not fsdp,
        "ddp.overlap_grad_reduce": plan.dp * plan.cp > 1 and (plan.zero != 3 or fsdp),
        "ddp.overlap_param_gather": plan.dp * plan.cp > 1 and (plan.zero == 1 or fsdp),
        "comm_overlap": None,  # no TP communication overlap: the engine profile's default (comm.tp_overlap)
        "mixed_precision": MIXED_PRECISION[plan.precision],
        "model.hidden_dropout": 0.0,  # the engine profile prices no dropout (kernels.dropout)
        "model.attention_dropout": 0.0,
        "tokenizer.vocab_size": model.vocab_size,  # the recipes' NullTokenizer has 32000 tokens otherwise
    }
    if model.norm_eps is not None:  # the recipe's own otherwise (a shape match does not compare it: common.py)
        o["model.layernorm_epsilon"] = model.norm_eps  # TransformerConfig.layernorm_epsilon
    if fsdp:  # as Megatron-Bridge's perf_recipes/deepseek/common.py sets Megatron-FSDP (config.py: both flags)
        o |= {"ddp.use_megatron_fsdp": True, "dist.use_megatron_fsdp": True, "checkpoint.ckpt_format": "fsdp_dtensor"}
        o["ddp.data_parallel_sharding_strategy"] = "optim_grads_params"
    if plan.zero == 3:  # torch FSDP2 runs without gradient-accumulation fusion (Megatron arguments.py), and
        o["model.gradient_accumulation_fusion"] = False  # Megatron-FSDP's needs TE 2.10 (mcore_fsdp_adapter.py)
    o |= _profile_settings(model)
    return [f"{k}={_value(v)}" for k, v in o.items()], dict(PLAN_FIELDS)


def _profile_settings(model: ModelSpec) -> dict[str, object]:
    """The recipes' own settings set back to the target engine profile's (ENGINE), which the plan is priced
    with and the file cannot change (it writes none of the engine settings): the 16-GPU Qwen3 recipes turn on
    the precision-aware optimizer and bf16 gradient reduction, the 30B-A3B one CUDA graphs, the DeepSeek-V3 one
    bf16 moments and main grads and a 1280 vocabulary padding, the Kimi-K2 one Muon, and the MoE recipes pass
    DeepEP or HybridEP to apply_flex_dispatcher_backend. The fields: transformer_config.py (mtp_num_layers l.68,
    moe_* l.717-921, cuda_graph_impl l.1075), model_parallel_config.py l.343, optimizer_config.py (l.187-209;
    dtypes other than fp32 assert without the precision-aware optimizer, l.468-480), DistributedDataParallelConfig,
    Bridge's GPTModelProvider.make_vocab_size_divisible_by (models/gpt_provider.py l.141: padded to it x tp)."""
    from planner.io.catalog import load_engine

    e = load_engine(ENGINE)
    moments = "fp32" if e.memory.optimizer_moment_dtype == "fp32" else "bf16"  # Bridge's str_to_dtype names
    out: dict[str, object] = {
        "model.cuda_graph_impl": "transformer_engine" if e.kernels.cuda_graphs else "none",  # the recipes' impl
        "optimizer.optimizer": "adam",  # the profile's adamw: Megatron's adam with decoupled_weight_decay (l.250)
        "optimizer.use_precision_aware_optimizer": e.memory.precision_aware_optimizer,
        "optimizer.main_params_dtype": "fp32",
        "optimizer.main_grads_dtype": "fp32" if e.memory.grad_dtype == "fp32" else "bf16",
        "optimizer.exp_avg_dtype": moments,
        "optimizer.exp_avg_sq_dtype": moments,
        "ddp.grad_reduce_in_fp32": e.memory.grad_dtype == "fp32",
        "model.make_vocab_size_divisible_by": e.rules.vocab_padding,
        "model.mtp_num_layers": model.mtp_layers or None,  # the recipe's own (DeepSeek-V3: 1), stated as priced
    }
    if model.moe is None:
        return out
    kind, backend = DISPATCHER_CONFIG[e.moe.dispatcher]
    capacity = model.moe.capacity_factor
    return out | {
        "model.moe_token_dispatcher_type": kind,
        "model.moe_flex_dispatcher_backend": backend,
        "model.overlap_moe_expert_parallel_comm": e.moe.ep_overlap,
        "model.moe_shared_expert_overlap": False,  # megatron-core's default, which the planner prices
        "model.moe_grouped_gemm": e.moe.grouped_gemm,
        "model.moe_expert_capacity_factor": capacity,
        "model.moe_pad_expert_input_to_capacity": capacity is not None,
    }


def bridge_file(model: ModelSpec, plan: Plan, settings: Mapping[str, object] | None = None, *, nodes: int = 1,
                per_node: int | None = None) -> str:  # fmt: skip
    """The overrides as a bash array, and the torchrun line that runs the recipe with them on `nodes` nodes of
    `per_node` GPUs (default: the plan's GPUs on one node)."""
    overrides, _ = bridge_overrides(model, plan, settings)
    name = recipe(model)
    body = "\n  ".join(shlex.quote(x) for x in overrides)
    program = f"scripts/training/run_recipe.py --recipe {name} --mode pretrain"
    where = "" if nodes == 1 else f" on each of the {nodes} nodes, MASTER_ADDR set to one node's address"
    unset = "unset CUDA_DEVICE_MAX_CONNECTIONS  # Megatron-FSDP needs it > 1 or unset (Bridge config.py)\n"
    return (
        f"# Megatron-Bridge recipe overrides; plan: {plan.headline()}; model {model.name} = recipe {name}\n"
        "# Run with Megatron-Bridge's recipe runner (it applies KEY=VALUE overrides to the recipe's ConfigContainer)"
        f"{where}:\n"
        f"#   {engine_torchrun(nodes, node_gpus(plan, nodes, per_node), program)} \\\n"
        '#     --dataset mock "${BRIDGE_OVERRIDES[@]}"\n'
        "# (or scripts/training/train.sh ... --recipe RECIPE KEY=VALUE...; the data set replaces --dataset mock)\n"
        + (unset if megatron_fsdp(plan, settings or {}) else "")
        + f"RECIPE={name}\n"
        f"BRIDGE_OVERRIDES=(\n  {body}\n)\n"
    )


register(
    Target(
        "megatron-bridge",
        4,
        FILE_NAME,
        lambda o: bridge_file(o.model, o.cfg.plan, o.settings, nodes=o.nodes, per_node=o.per_node),
        engine=ENGINE,
        writes=frozenset({"fp8_param_gather", "megatron_fsdp"}),
        format_problems=format_problems,
        precisions=frozenset({"fp8-delayed"}),
        settings_problems=settings_problems,
    )
)
