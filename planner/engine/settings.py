"""The per-run settings of an engine: their vocabularies, and the block and field of the profile each one sets.

A runs file's `software` block, a plan file's `training:` and the command line's engine settings name them;
``Engine.configured`` (profile.py) applies them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, get_args

from planner.plan import Plan

if TYPE_CHECKING:
    from planner.engine.profile import Engine
    from planner.engine.zero import ZeroStage

# The per-run settings' vocabularies (Engine.configured; plan files' training:, runs files' software:, flags).
Optimizer = Literal["adamw", "adam", "sgd"]
GradDtype = Literal["param", "fp32"]
Attention = Literal["flash", "softmax"]
RMSNormImpl = Literal["fused", "composite", "cast"]
Zero3Gather = Literal["bucketed", "per_parameter_sync"]
EdgeGroups = Literal["root", "own"]
SelectivePolicy = Literal["op", "attention"]
# Megatron's --recompute-modules (transformer_config.py l.560-582): what recompute=selective re-runs.
RecomputeModule = Literal["core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts"]
# Megatron's --offload-modules (transformer_config.py l.1328-1342): the modules whose saved inputs fine-grained
# activation offloading moves to host memory (fused_group_mlp and gdp_qkv, for TE's op fuser and GatedDeltaProduct,
# are not modelled).
OffloadModule = Literal["attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm", "expert_fc1", "moe_act"]
MomentDtype = Literal["fp32", "bf16"]
# The memory and speed options of issue 20 item 5 an engine may offer (Rules.options; cost/recipe_options.py).
RecipeOption = Literal[
    "recompute_modules", "activation_offload", "offload_layers", "optimizer_offload", "precision_aware_optimizer",
    "fp8_param_gather", "cuda_graphs",
]  # fmt: skip
RECOMPUTE_MODULES: tuple[RecomputeModule, ...] = get_args(RecomputeModule)
OFFLOAD_MODULES: tuple[OffloadModule, ...] = get_args(OffloadModule)
# The norms' groups cross CUDA graphs' boundaries (docs/user-guide/features/fine_grained_activation_offloading.md);
# the experts' groups run inside a recomputed MoE layer (transformer_config.py l.2165-2175).
GRAPH_CROSSING_MODULES: tuple[OffloadModule, ...] = ("attn_norm", "mlp_norm")
EXPERT_GROUPS: tuple[OffloadModule, ...] = ("expert_fc1", "moe_act")
# The settings that take a list of words (a comma string on the command line or in YAML), with their words.
LIST_SETTINGS: dict[str, tuple[str, ...]] = {"recompute_modules": RECOMPUTE_MODULES, "offload_modules": OFFLOAD_MODULES}
MOMENT_DTYPES: tuple[MomentDtype, ...] = get_args(MomentDtype)
RECIPE_OPTIONS: tuple[RecipeOption, ...] = get_args(RecipeOption)
OPTIMIZERS: tuple[Optimizer, ...] = get_args(Optimizer)
GRAD_DTYPES: tuple[GradDtype, ...] = get_args(GradDtype)
ATTENTIONS: tuple[Attention, ...] = get_args(Attention)
RMSNORMS: tuple[RMSNormImpl, ...] = get_args(RMSNormImpl)
ZERO3_GATHERS: tuple[Zero3Gather, ...] = get_args(Zero3Gather)
EDGE_GROUPS: tuple[EdgeGroups, ...] = get_args(EdgeGroups)
SELECTIVE_POLICIES: tuple[SelectivePolicy, ...] = get_args(SelectivePolicy)
# The on/off engine settings an engine may lack (Rules.switches): TP communication overlap, torch.compile of the
# model, and of its loss.
Switch = Literal["tp_overlap", "compile", "compiled_loss", "megatron_fsdp"]
SWITCHES: tuple[Switch, ...] = get_args(Switch)
# The per-run settings that take a word an engine may not run (Rules.setting_words), by their SETTINGS names, with
# the words the planner models for each.
WordSetting = Literal["optimizer", "attention", "selective_recompute", "zero3_gather", "rmsnorm", "grad_dtype"]
WORD_CHOICES: dict[WordSetting, tuple[str, ...]] = {
    "optimizer": OPTIMIZERS,
    "attention": ATTENTIONS,
    "selective_recompute": SELECTIVE_POLICIES,
    "zero3_gather": ZERO3_GATHERS,
    "rmsnorm": RMSNORMS,
    "grad_dtype": GRAD_DTYPES,
}
Dispatcher = Literal["alltoall", "allgather", "deepep"]
DispatchDtype = Literal["bf16", "fp8"]
DISPATCHERS: tuple[Dispatcher, ...] = get_args(Dispatcher)
DISPATCH_DTYPES: tuple[DispatchDtype, ...] = get_args(DispatchDtype)


# Each per-run setting that takes a word or a switch, by its command-line and plan-file name: its words (None: true
# or false). The plan files' `training:` check and the command line's check read them here.
SETTING_CHOICES: dict[str, tuple[str, ...] | None] = {
    "optimizer": OPTIMIZERS,
    "attention": ATTENTIONS,
    "selective_policy": SELECTIVE_POLICIES,
    "tp_overlap": None,
    "p2p_overlap": None,
    "zero3_gather": ZERO3_GATHERS,
    "fsdp_edge_groups": EDGE_GROUPS,
    "compile": None,
    "rmsnorm": RMSNORMS,
    "grad_dtype": GRAD_DTYPES,
    "master_copy": None,
    "compiled_loss": None,
    "megatron_fsdp": None,
    "moe_dispatcher": DISPATCHERS,
    "ep_overlap": None,
    "moe_dispatch_dtype": DISPATCH_DTYPES,
    "precision_aware_optimizer": None,
    "optimizer_moment_dtype": MOMENT_DTYPES,
    "fp8_param_gather": None,
    "cuda_graphs": None,
}


def check_setting_words(setting_words: dict[WordSetting, tuple[str, ...]]) -> None:
    """Each word an engine lists for a setting (rules.setting_words) is one the planner models (WORD_CHOICES)."""
    for setting, words in setting_words.items():
        known = WORD_CHOICES[setting]
        if not set(words) <= set(known):
            raise ValueError(f"setting_words.{setting}: {sorted(set(words) - set(known))} not in {list(known)}")


def listed(value: object) -> object:
    """A comma list given as text (the command line, a YAML string) as a tuple, each word once; a list or tuple
    each item once; anything else as it is."""
    if isinstance(value, str):
        return tuple(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(dict.fromkeys(value))
    return value  # the block's validation names what is wrong with it


# The per-run settings Engine.configured takes (plan files' training:, runs files' software:, the command line's
# engine settings), and the block and field each one sets.
SETTINGS: dict[str, tuple[str, str]] = {
    "attention": ("kernels", "attention"),
    "selective_recompute": ("kernels", "selective_recompute"),
    "compile": ("kernels", "compile"),
    "rmsnorm": ("kernels", "rmsnorm"),
    "tp_overlap": ("comm", "tp_overlap"),
    "p2p_overlap": ("comm", "p2p_overlap"),
    "zero3_gather": ("comm", "zero3_gather"),
    "megatron_fsdp": ("comm", "megatron_fsdp"),
    "fsdp_edge_groups": ("memory", "fsdp_edge_groups"),
    "optimizer": ("memory", "optimizer"),
    "grad_dtype": ("memory", "grad_dtype"),
    "master_copy": ("memory", "master_copy"),
    "compiled_loss": ("memory", "compiled_loss"),
    "recompute_modules": ("kernels", "recompute_modules"),
    "cuda_graphs": ("kernels", "cuda_graphs"),
    "activation_offload": ("memory", "activation_offload"),
    "offload_modules": ("memory", "offload_modules"),
    "offload_layers": ("memory", "offload_layers"),
    "optimizer_offload": ("memory", "optimizer_offload"),
    "precision_aware_optimizer": ("memory", "precision_aware_optimizer"),
    "optimizer_moment_dtype": ("memory", "optimizer_moment_dtype"),
    "fp8_param_gather": ("memory", "fp8_param_gather"),
    "moe_dispatcher": ("moe", "dispatcher"),
    "ep_overlap": ("moe", "ep_overlap"),
    "moe_imbalance": ("moe", "imbalance"),
    "moe_dispatch_dtype": ("moe", "dispatch_dtype"),
}


def meant(name: str, value: object, precision: str | None = None, stage: ZeroStage | None = None) -> object:
    """What a per-run setting's value stands for, so that a value given equal to the default a null stands for is
    no setting of the run's: recompute_modules null is core_attn (Megatron's default, transformer_config.py
    l.1940-1941); master_copy null is what the plan's ZeRO stage keeps (ZeroStage.keeps_master: DeepSpeed's ZeRO
    optimizer a copy in fp32 too), else a copy for every precision but fp32, where the plan's precision is known."""
    if value is None and name == "recompute_modules":
        return ("core_attn",)
    if value is None and name == "master_copy" and precision is not None:
        return stage.keeps_master(precision) if stage is not None else precision != "fp32"
    return tuple(value) if isinstance(value, list) else value


def _precision_and_stage(engine: Engine, plan: Plan | str | None) -> tuple[str | None, ZeroStage | None]:
    """The plan's precision and ZeRO stage as the engine runs it (a precision alone: no stage; a plan whose stage
    the engine does not run: none)."""
    if not isinstance(plan, Plan):
        return plan, None
    try:
        return plan.precision, engine.zero_stage(plan)
    except KeyError:
        return plan.precision, None


def said(settings: dict[str, object]) -> str:
    """'grad_dtype=param, recompute_modules=core_attn,layernorm'."""
    return ", ".join(f"{k}={','.join(map(str, v)) if isinstance(v, (list, tuple)) else v}" for k, v in settings.items())


def given_settings(engine: Engine, plan: Plan | str | None = None) -> dict[str, object]:
    """The per-run settings the plan was priced with that differ from the engine's profile as it was loaded (flags,
    a plan file's `training:`, a --recipe-options variant's), whether the profile came from the catalog or a file:
    `configured` records the profile's own values. A value equal to what the profile's null stands for (for the
    `plan`, or at its precision where only that is given) is no difference (settings.meant)."""
    base = engine.profile_settings
    if base is None:
        return {}
    precision, stage = _precision_and_stage(engine, plan)
    return {
        name: value
        for name, value in engine.settings().items()
        if meant(name, value, precision, stage) != meant(name, base[name], precision, stage)
    }


def changed_settings(engine: Engine, target: Engine, plan: Plan | str | None = None) -> dict[str, object]:
    """The per-run settings whose value in `engine` (the profile as configured for the plan) differs from the
    `target` engine's profile, by name (a --recipe-options variant against the profile it was made from), as
    given_settings compares them; none when the plan was priced on another engine (its settings are that engine's,
    not the target's)."""
    if (engine.variant_of or engine.name) != target.name:
        return {}
    precision, stage = _precision_and_stage(engine, plan)
    return {
        name: engine.setting(name)
        for name in SETTINGS
        if meant(name, engine.setting(name), precision, stage) != meant(name, target.setting(name), precision, stage)
    }
