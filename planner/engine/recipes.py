"""Which precision recipes and memory/speed options an engine runs, on which GPUs, with which plans: rejections
(data, like rules.py), each naming the values and what would run.

The support matrix is data: the engine profile lists the named recipes it runs and, for each, the GPU
architectures its quantization library accepts (`rules.precision_recipes`, with the library's check cited in the
YAML); the hardware profile states its architecture (`gpu.architecture`). The options an engine offers are
`rules.options`; their constraints below are the engine's own, cited (Megatron-LM @d98e8a64).
"""

from __future__ import annotations

from collections.abc import Mapping

from planner.engine.architectures import architecture_problems
from planner.engine.moe_rules import (
    dispatch_problems,
    expert_precision_problems,
    grouped_gemm_problems,
    overlap_option_problems,
)
from planner.engine.offload_rules import offload_problems
from planner.engine.profile import Engine
from planner.engine.setting_rules import switch_problems, word_problems
from planner.engine.settings import RecipeOption
from planner.engine.zero import ZeroStage
from planner.hardware import HardwareProfile
from planner.plan import Plan, Rejected
from planner.precision import RECIPES
from planner.specs import ModelSpec


def used_options(engine: Engine) -> list[RecipeOption]:
    """The options the engine's per-run settings turn on (each against the profile's default of off)."""
    m, k = engine.memory, engine.kernels
    used: list[RecipeOption] = []
    if k.recompute_modules is not None and tuple(k.recompute_modules) != ("core_attn",):
        used.append("recompute_modules")
    if m.activation_offload > 0:
        used.append("activation_offload")
    if m.offload_layers > 0:
        used.append("offload_layers")
    if m.optimizer_offload > 0:
        used.append("optimizer_offload")
    if m.precision_aware_optimizer or m.optimizer_moment_dtype != "fp32":
        used.append("precision_aware_optimizer")
    if m.fp8_param_gather:
        used.append("fp8_param_gather")
    if k.cuda_graphs:
        used.append("cuda_graphs")
    return used


def recipe_problems(engine: Engine, hw: HardwareProfile | None, plan: Plan) -> list[Rejected]:
    """A named recipe the engine does not run, or not on this GPU's architecture (plain fp8 keeps rules.fp8 and
    the hardware's fp8 peak: an engine without rules.fp8 has no per-tensor fp8, only its named fp8 recipes if any)."""
    r = RECIPES.get(plan.precision)
    if plan.precision == "fp8" and not engine.rules.fp8:
        name, named = engine.name, [n for n in engine.rules.precision_recipes if n.startswith("fp8")]
        path = (
            f"no per-tensor fp8 (its fp8 recipes: {', '.join(named)}); use {' or '.join([*named, 'bf16'])}"
            if named
            else "no fp8 training path; use bf16"
        )
        return [Rejected(f"{name} has no fp8", f"precision=fp8: {name} has {path}")]
    if r is None:
        return []
    name, offered = engine.name, engine.rules.precision_recipes
    if r.name not in offered:
        runs = ", ".join(offered) or "none of them"
        return [
            Rejected(
                f"{name} has no {r.name}",
                f"precision={r.name}: {name} has no {r.name} training recipe (its named recipes: {runs}); use "
                + ("one of them or bf16" if offered else "bf16"),
            )
        ]
    arch = hw.gpu.architecture if hw is not None else None
    if hw is None or arch in offered[r.name]:
        return []
    where = ", ".join(offered[r.name])
    said = f"a {arch} GPU" if arch else "a GPU whose profile states no gpu.architecture"
    return [
        Rejected(
            f"{r.name} not on {arch or 'this GPU'} in {name}",
            f"precision={r.name}: {name} runs {r.name} on {where} GPUs only; {hw.name} is {said}"
            + _hint(r.name, arch, offered),
        )
    ]


def _hint(recipe: str, arch: str | None, offered: Mapping[str, tuple[str, ...]]) -> str:
    """What to use instead: the recipes this engine runs on this architecture."""
    here = [name for name, archs in offered.items() if arch in archs]
    why = (
        " (Transformer Engine only emulates it there, through MXFP8)"
        if (recipe, arch) == ("fp8-blockwise", "blackwell")
        else ""
    )
    if not here:
        return why + "; use bf16"
    return f"{why}; on {arch} it runs {', '.join(here)}"


def option_problems(engine: Engine, hw: HardwareProfile | None, plan: Plan, model: ModelSpec | None) -> list[Rejected]:
    """The options the engine's settings turn on that it does not offer, or that this GPU, model or recipe
    cannot run (the engine's own checks)."""
    out = _unoffered_problems(engine)
    if out:
        return out
    out += switch_problems(engine) + word_problems(engine)
    out += _device_problems(engine, hw) + grouped_gemm_problems(engine, hw, model)
    out += _optimizer_problems(engine)
    out += _gather_problems(engine, plan)
    out += _module_problems(engine, plan, model) + offload_problems(engine, model)
    out += dispatch_problems(engine, model) + overlap_option_problems(engine, plan, model)
    out += expert_precision_problems(engine, plan, model, hw)
    return out


def _unoffered_problems(engine: Engine) -> list[Rejected]:
    """The options the engine's settings turn on that its profile does not model (rules.options): refused by name,
    not said to be absent from the engine (DeepSpeed has a ZeRO-Offload; the planner does not price it)."""
    name = engine.name
    return [
        Rejected(
            f"{o} not modelled for {name}",
            f"{o}: the planner does not model it for {name} (options modelled there: "
            f"{', '.join(engine.rules.options) or 'none'})",
        )
        for o in used_options(engine)
        if o not in engine.rules.options
    ]


def _device_problems(engine: Engine, hw: HardwareProfile | None) -> list[Rejected]:
    """Offloading needs a stated host link; CUDA graphs need an NVIDIA GPU."""
    m, k = engine.memory, engine.kernels
    out: list[Rejected] = []
    if hw is not None and hw.gpu.host_bandwidth_bytes_per_s is None and (m.activation_offload or m.optimizer_offload
                                                                         or m.offload_layers):  # fmt: skip
        out.append(
            Rejected(
                "offload without a host link",
                f"activation_offload={m.activation_offload}, offload_layers={m.offload_layers}, optimizer_offload="
                f"{m.optimizer_offload}: {hw.name} states no gpu.host_bandwidth_bytes_per_s, the host link offloading "
                "moves over",
            )
        )
    if hw is not None and k.cuda_graphs and hw.gpu.architecture in (None, "cpu", "cdna3", "cdna4"):
        out.append(
            Rejected(
                "cuda graphs need an NVIDIA GPU",
                f"cuda_graphs: {hw.name} is not a CUDA GPU the engine captures graphs on",
            )
        )
    return out


def _optimizer_problems(engine: Engine) -> list[Rejected]:
    """What the offloaded and precision-aware optimizer need (Megatron's arguments.py and optimizer_config.py)."""
    m = engine.memory
    out: list[Rejected] = []
    if m.optimizer_offload and not m.precision_aware_optimizer:
        # arguments.py l.1884-1887: the hybrid device optimizer reuses the precision-aware optimizer's code path
        out.append(
            Rejected(
                "optimizer offload needs the precision-aware optimizer",
                "optimizer_offload needs precision_aware_optimizer (Megatron arguments.py l.1884)",
            )
        )
    if m.precision_aware_optimizer and m.optimizer == "sgd":  # optimizer_config.py l.433-436: Adam only
        detail = "precision_aware_optimizer runs Adam only (TE FusedAdam); optimizer=sgd"
        out.append(Rejected("precision-aware optimizer needs adam", detail))
    if m.optimizer_moment_dtype != "fp32" and not m.precision_aware_optimizer:
        # arguments.py l.3667-3684: --exp-avg-dtype only with --use-precision-aware-optimizer
        out.append(
            Rejected(
                "moment dtype needs the precision-aware optimizer",
                f"optimizer_moment_dtype={m.optimizer_moment_dtype} needs precision_aware_optimizer (Megatron stores "
                "moments in another dtype only with --use-precision-aware-optimizer, arguments.py l.3667-3684)",
            )
        )
    return out


def _gather_problems(engine: Engine, plan: Plan) -> list[Rejected]:
    m = engine.memory
    if not m.fp8_param_gather:
        return []
    r = RECIPES.get(plan.precision)
    if r is None:
        return [
            Rejected(
                "fp8 param gather needs a named recipe",
                f"fp8_param_gather: precision={plan.precision} has no quantized weights to gather; name a recipe "
                "(fp8-delayed, fp8-current, fp8-blockwise, mxfp8, nvfp4)",
            )
        ]
    # arguments.py l.1888-1892 asserts on --fp8-param-gather only: NVFP4 gathers with --fp4-param-gather
    if m.optimizer_offload and r.name not in ("fp8-delayed", "nvfp4"):
        detail = f"optimizer_offload with fp8_param_gather needs precision=fp8-delayed, not {r.name}"
        return [Rejected("optimizer offload with fp8 param gather needs delayed scaling", f"{detail} (Megatron)")]
    return []


def _module_problems(engine: Engine, plan: Plan, model: ModelSpec | None) -> list[Rejected]:
    modules = engine.kernels.recompute_modules or ()
    out: list[Rejected] = []
    if model is not None and "mla_up_proj" in modules and not model.is_mla:  # transformer_config.py l.1969-1973
        detail = f"recompute module mla_up_proj needs multi-latent attention; {model.name} has none"
        out.append(Rejected("mla_up_proj without MLA", detail))
    if model is not None and "moe_act" in modules and (model.moe is None or not engine.moe.grouped_gemm):
        # transformer_config.py l.1964-1967: moe_act recompute runs inside the grouped-GEMM experts only
        why = f"{model.name} has no MoE layers" if model.moe is None else "the engine's moe.grouped_gemm is off"
        out.append(Rejected("moe_act without grouped-GEMM experts", f"recompute module moe_act: {why} (Megatron)"))
    if plan.precision == "fp8-delayed" and {"moe_act", "layernorm"} & set(modules):
        # transformer_config.py l.2000-2006: output-discarding recompute of a quantized input needs current scaling
        detail = "recompute modules moe_act and layernorm do not run with precision=fp8-delayed; use fp8-current"
        out.append(Rejected("delayed scaling with moe_act/layernorm recompute", f"{detail} (Megatron)"))
    return out


def megatron_fsdp_hint(engine: Engine, zero: int, what: str) -> str:
    """'; or --megatron-fsdp (Megatron-FSDP, `what`)' where the engine runs this stage as Megatron-FSDP when a run
    asks for it and this run does not (rules.zero.N.with_ep, comm.megatron_fsdp), else ''."""
    stage = engine.rules.zero.get(zero)
    if (
        engine.comm.megatron_fsdp
        or stage is None
        or stage.with_ep is None
        or "megatron_fsdp" not in engine.rules.switches
    ):
        return ""
    return f"; or --megatron-fsdp ({stage.with_ep.mechanism.split(' (')[0]}, {what})"


def zero_recipe_problems(engine: Engine, plan: Plan, zero: int, stage: ZeroStage) -> list[Rejected]:
    """The precision-aware optimizer runs with Megatron's distributed optimizer only (optimizer/__init__.py
    l.1057-1060), zero 1 here or a stage that runs on it (ZeroStage.distributed_optimizer: Megatron-FSDP), and so do
    the optimizer offload and bf16 moments that need it. fp8 parameter gather needs a parameter all-gather (the
    distributed optimizer, or FSDP: arguments.py l.1095-1097); the planner models it with the distributed
    optimizer, and refuses it with FSDP (zero 3) rather than approximate it."""
    m, name = engine.memory, engine.name
    if zero == 1:
        return []
    out: list[Rejected] = []
    if m.precision_aware_optimizer and not stage.distributed_optimizer:
        detail = (
            f"precision_aware_optimizer needs the distributed optimizer (zero 1) in {name}, not zero={zero}; "
            f"give --zero 1{megatron_fsdp_hint(engine, zero, 'which runs on it')}"
        )
        out.append(Rejected(f"{name}: precision-aware optimizer without zero 1", detail))
    if m.optimizer_offload and stage.distributed_optimizer:  # Megatron-FSDP's own buffers hold the main weights
        detail = (
            f"optimizer_offload={m.optimizer_offload:g} with zero={zero} ({stage.mechanism}): the planner runs the "
            "CPU-offloaded optimizer (HybridDeviceOptimizer) on the distributed optimizer's buffers only; "
            "Megatron-FSDP keeps its main weights in its own (distrib_optimizer.py l.704-706), and no Megatron-LM "
            "path shows the offload under it; give --zero 1 or drop the offload"
        )
        out.append(Rejected(f"{name}: optimizer offload without zero 1", detail))
    if m.fp8_param_gather:
        why = "has no parameter all-gather" if zero == 0 else "(FSDP) is not modelled with it"
        detail = f"fp8_param_gather needs the distributed optimizer (zero 1); zero={zero} {why}; give --zero 1"
        out.append(Rejected(f"{name}: fp8 param gather without zero 1", detail))
    return out


def emit_unexpressed(
    plan: Plan, engine: Engine, precisions: frozenset[str] = frozenset(), writes: frozenset[str] = frozenset()
) -> str:
    """What of the plan's precision recipe and the engine's recipe options the emitter does not write (empty: all
    is written; `precisions`: the named recipes its file writes, `writes`: the per-run settings it writes): named
    here so that an emitted file never silently drops what the plan was priced with."""
    parts = [f"precision={plan.precision}"] if plan.precision in RECIPES and plan.precision not in precisions else []
    used = [o for o in used_options(engine) if o not in writes]
    return " and ".join([*parts, ", ".join(used)] if used else parts)


def precision_problems(
    engine: Engine, hw: HardwareProfile | None, plan: Plan, model: ModelSpec | None = None
) -> list[Rejected]:
    """Everything about the model's architecture, the plan's precision and the engine's options that depends
    neither on the degrees nor on the micro-batch: the search checks it once."""
    r = engine.rules
    arch = architecture_problems(engine.name, r.model_features, model, r.model_files) if model is not None else []
    return arch + recipe_problems(engine, hw, plan) + option_problems(engine, hw, plan, model)
