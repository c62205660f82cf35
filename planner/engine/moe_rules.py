"""The MoE dispatch as each engine runs it: which dispatchers and dispatch dtypes it has (rules.moe_dispatchers,
rules.moe_dispatch_dtypes), and the all-to-all overlap (moe.ep_overlap, rules.ep_overlap): where it has none, the
setting is refused; DualPipe (hai-llm) hides the all-to-alls in its schedule with no further condition; Megatron's
--overlap-moe-expert-parallel-comm (combined_1f1b.py) runs only where TransformerConfig's checks pass
(megatron/core/transformer/transformer_config.py l.3002-3046 @d98e8a64), each refused here by name. What the
overlap hides is priced in cost/overlap.py ep_hidden.
"""

from __future__ import annotations

from planner.engine.profile import Engine
from planner.hardware import HardwareProfile
from planner.plan import Plan, Rejected
from planner.precision import is_low_precision
from planner.specs import ModelSpec


def _megatron_overlap(engine: Engine) -> bool:
    """The overlap is on, and it is Megatron's combined 1F1B, with Megatron's conditions."""
    return engine.moe.ep_overlap and engine.rules.ep_overlap == "combined_1f1b"


def overlap_structure_problems(engine: Engine, plan: Plan) -> list[Rejected]:
    """The all-to-all overlap where the engine has none, and the degrees Megatron's runs it with: expert
    parallelism, and virtual stages when pipelined (transformer_config.py l.3008-3015 @d98e8a64)."""
    r, p, name = engine.rules, plan, engine.name
    if not engine.moe.ep_overlap:
        return []
    if r.ep_overlap == "none":
        detail = f"ep_overlap: {name} does not overlap the MoE all-to-alls with compute; use --no-ep-overlap"
        return [Rejected(f"{name} has no all-to-all overlap", detail)]
    if r.ep_overlap != "combined_1f1b":
        return []
    out: list[Rejected] = []
    if p.ep == 1:
        detail = f"ep_overlap (--overlap-moe-expert-parallel-comm) needs expert parallelism, ep={p.ep}; use ep > 1"
        out.append(Rejected(f"{name}: all-to-all overlap without ep", f"{detail} or --no-ep-overlap"))
    if p.pp > 1 and p.schedule != "interleaved":
        detail = f"ep_overlap with pp={p.pp} needs virtual stages (schedule=interleaved), not schedule={p.schedule}"
        out.append(Rejected(f"{name}: all-to-all overlap needs virtual stages", f"{detail} ({name})"))
    return out


def overlap_recompute_problems(engine: Engine, recompute: str) -> list[Rejected]:
    """Megatron's overlap refuses full recompute (l.3021-3023)."""
    if recompute != "full" or not _megatron_overlap(engine):
        return []
    detail = "recompute=full with ep_overlap (--overlap-moe-expert-parallel-comm); use selective or --no-ep-overlap"
    return [Rejected(f"{engine.name}: full recompute with the all-to-all overlap", f"{detail} ({engine.name})")]


def dispatch_problems(engine: Engine, model: ModelSpec | None = None) -> list[Rejected]:
    """A dispatcher or dispatch dtype the engine's settings name that it does not run, and token dropping at the
    model's capacity factor where the engine routes dropless only, or not with this dispatcher."""
    r, m, name = engine.rules, engine.moe, engine.name
    out: list[Rejected] = []
    capacity = model.moe.capacity_factor if model is not None and model.moe is not None else None
    if model is not None and capacity is not None and m.dispatcher not in r.moe_capacity_dispatchers:
        why = (
            f"{name} routes dropless only"
            if not r.moe_capacity_dispatchers
            else f"{name} drops tokens with the {', '.join(r.moe_capacity_dispatchers)} dispatcher only"
        )
        detail = f"{model.name} sets moe.capacity_factor={capacity:g}; {why} (capacity_factor: null)"
        out.append(Rejected(f"{name} has no token dropping with {m.dispatcher}", detail))
    if m.dispatcher not in r.moe_dispatchers:
        runs = ", ".join(r.moe_dispatchers)
        detail = f"moe_dispatcher={m.dispatcher}: {name} dispatches MoE tokens with {runs} only"
        out.append(Rejected(f"{name} has no {m.dispatcher} dispatcher", detail))
    if m.dispatch_dtype not in r.moe_dispatch_dtypes:
        runs = ", ".join(r.moe_dispatch_dtypes)
        detail = f"moe_dispatch_dtype={m.dispatch_dtype}: {name} dispatches MoE tokens in {runs} only"
        out.append(Rejected(f"{name} has no {m.dispatch_dtype} dispatch", detail))
    return out


def overlap_option_problems(engine: Engine, plan: Plan, model: ModelSpec | None) -> list[Rejected]:
    """What Megatron's all-to-all overlap (--overlap-moe-expert-parallel-comm) runs with besides the degrees
    (engine/rules.py checks those): the alltoall or flex (DeepEP) dispatcher, 16-bit weights, no recomputed MoE
    layer, at most one MTP layer (transformer_config.py l.3016-3046 @d98e8a64)."""
    if not _megatron_overlap(engine):
        return []
    out: list[Rejected] = []
    if engine.moe.dispatcher not in ("alltoall", "deepep"):
        detail = f"ep_overlap needs the alltoall or deepep (flex) dispatcher, not {engine.moe.dispatcher}"
        out.append(Rejected("all-to-all overlap needs the alltoall dispatcher", f"{detail} (Megatron)"))
    if "moe" in (engine.kernels.recompute_modules or ()):  # the overlap cannot run inside a recomputed MoE layer
        detail = "recompute module moe with ep_overlap (--overlap-moe-expert-parallel-comm); drop one of them"
        out.append(Rejected("moe recompute with the all-to-all overlap", f"{detail} (Megatron)"))
    if plan.precision == "fp32":
        detail = "ep_overlap runs with bf16 or fp16 weights (fp8 recipes included), not precision=fp32"
        out.append(Rejected("all-to-all overlap needs 16-bit weights", f"{detail} (Megatron)"))
    if model is not None and model.mtp_layers > 1:
        detail = f"ep_overlap runs with at most one MTP layer; {model.name} has mtp_layers={model.mtp_layers}"
        out.append(Rejected("all-to-all overlap with several MTP layers", f"{detail} (Megatron)"))
    return out


def grouped_gemm_problems(engine: Engine, hw: HardwareProfile | None, model: ModelSpec | None) -> list[Rejected]:
    """Grouped-GEMM expert kernels need compute capability 8.0 (Megatron-LM arguments.py l.1378-1380 @d98e8a64
    asserts it for --moe-grouped-gemm): a V100 MoE plan was priced, and its file crashed (audit)."""
    if hw is None or model is None or model.moe is None or hw.gpu.architecture != "volta":
        return []
    if not engine.moe.grouped_on("volta"):  # no grouped GEMM there: it runs one GEMM per expert (priced so)
        return []
    return [
        Rejected(
            "grouped GEMM before Ampere",
            f"{engine.name} runs {model.name}'s experts as grouped GEMMs, which need compute capability 8.0 or "
            f"newer; {hw.name} is volta (7.0): plan on an Ampere or newer GPU",
        )
    ]


def expert_precision_problems(
    engine: Engine, plan: Plan, model: ModelSpec | None, hw: HardwareProfile | None = None
) -> list[Rejected]:
    """A low precision whose converter leaves the routed experts in bf16 (moe.quantized_recipes): the planner
    prices a layer at one precision, so a split it does not price is refused (audit: torchtitan's tensorwise fp8
    priced Qwen3-235B-A22B's experts in fp8, 7% faster than bf16, where they run in bf16). The recipes it points
    to are those the engine runs on this GPU (a read-through: mxfp8 was offered on an H100, which refused it)."""
    reach = engine.moe.quantized_recipes
    if model is None or model.moe is None or reach is None or not is_low_precision(plan.precision):
        return []
    if plan.precision in reach:
        return []
    arch = hw.gpu.architecture if hw is not None else None
    here = [r for r in reach if arch is None or arch in engine.rules.precision_recipes.get(r, ())]
    also = f", or {' or '.join(here)}, which reaches them" if here else f" (no recipe that reaches them runs on {arch})"
    name = engine.name
    return [
        Rejected(
            f"{name}: {plan.precision} leaves the experts in bf16",
            f"precision={plan.precision}: {name}'s converter quantizes its linears, not {model.name}'s routed "
            f"experts, which run in bf16 (not priced apart); use bf16{also}",
        )
    ]


def deepep_plan_problems(engine: Engine, plan: Plan) -> list[Rejected]:
    """DeepEP where the engine runs it only with ep > 1 and no expert tensor parallelism (moe.deepep_without_etp):
    torchtitan raised on both, which the planner priced (audit)."""
    if engine.moe.dispatcher != "deepep" or not engine.moe.deepep_without_etp:
        return []
    etp = plan.expert_tp
    if plan.ep == 1:
        reason, why = "deepep needs ep", "needs expert parallelism (ep > 1)"
    elif etp > 1:
        reason, why = "deepep with etp", f"runs without expert tensor parallelism, not etp={etp}"
    else:
        return []
    detail = f"moe_dispatcher=deepep: {engine.name}'s DeepEP {why}; use alltoall, or ep > 1 with etp 1"
    return [Rejected(f"{engine.name}: {reason}", detail)]
