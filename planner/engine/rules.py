"""What runs: an engine's rules as rejections (data, never exceptions), each with the values involved and
what would be valid. The search counts plans by the stable `reason`; single-plan commands raise all of them
as one PlannerError (require_runs)."""

from __future__ import annotations

from planner.engine.architectures import model_file_problems
from planner.engine.moe_rules import deepep_plan_problems, overlap_recompute_problems, overlap_structure_problems
from planner.engine.offload_rules import offload_recompute_problems, offload_structure_problems
from planner.engine.pipeline_rules import p2p_problems, split_problems
from planner.engine.profile import Engine
from planner.engine.recipes import precision_problems
from planner.engine.zero_rules import zero_problems
from planner.errors import PlannerError
from planner.hardware import HardwareProfile
from planner.plan import Plan, Rejected
from planner.plan_checks import check_plan
from planner.precision import gemm_format
from planner.specs import ModelSpec


def engine_problems(engine: Engine, model: ModelSpec, plan: Plan) -> list[Rejected]:
    """Every rule of the engine the plan breaks (empty: the engine runs it)."""
    return (
        structure_problems(engine, model, plan)
        + recompute_problems(engine, plan.recompute)
        + batch_problems(engine, plan)
        + zero_problems(engine, plan, model=model)
    )


def plan_problems(
    model: ModelSpec, plan: Plan, engine: Engine, gpus: int | None = None, hardware: HardwareProfile | None = None
) -> list[Rejected]:
    """The model's divisibility rules (plan_checks.check_plan), the hardware's precisions, the engine's precision
    recipes and options on this GPU (engine/recipes.py) and the engine's rules."""
    hw = hardware_problems(hardware, plan) if hardware is not None else []
    hw += precision_problems(engine, None if hw else hardware, plan, model)
    return check_plan(model, plan, gpus) + hw + engine_problems(engine, model, plan)


def hardware_problems(hw: HardwareProfile, plan: Plan) -> list[Rejected]:
    """A precision the GPU has no tensor cores (or units) for: fp8 before Hopper and Ada, bf16 before Ampere."""
    if hw.supports(plan.precision):
        return []
    have = ", ".join(hw.gpu.peak_flops)
    fmt = gemm_format(plan.precision)  # a named recipe's GEMM format (precision.py)
    runs = "" if fmt == plan.precision else f" ({plan.precision} runs its GEMMs in {fmt})"
    return [
        Rejected(
            f"{hw.name} has no {plan.precision}",
            f"precision={plan.precision}: {hw.name} ({hw.gpu.name}) has no {fmt} tensor cores{runs}; use one of {have}",
        )
    ]


def require_runs(
    model: ModelSpec, plan: Plan, engine: Engine, gpus: int | None = None, hardware: HardwareProfile | None = None
) -> None:
    """For commands that take one plan: every broken rule in one PlannerError."""
    problems = plan_problems(model, plan, engine, gpus, hardware)
    if problems:
        raise PlannerError("invalid plan: " + "; ".join(str(r) for r in problems))


def structure_problems(engine: Engine, model: ModelSpec, plan: Plan) -> list[Rejected]:
    """The engine's rules that depend on neither the ZeRO stage, the recompute level nor the micro-batch:
    dimensions, schedules, layer, vocabulary and kv-head splits (the search checks them once per structure)."""
    r, p, name = engine.rules, plan, engine.name
    out = _dimension_problems(engine, plan) + overlap_structure_problems(engine, plan) + p2p_problems(engine, plan)
    out += offload_structure_problems(engine, plan) + deepep_plan_problems(engine, plan)
    out += schedule_problems(engine, p.schedule) + split_problems(engine, model, p)
    out += model_file_problems(name, r.model_files, model, p)
    if r.vocab_divisible_by_tp and model.vocab_size % p.tp:
        out.append(
            Rejected(
                "tp does not divide vocab",
                f"tp={p.tp} must divide vocab_size={model.vocab_size} ({name} splits the embedding "
                "by vocabulary and does not pad it)",
            )
        )
    if not r.kv_head_replication and model.kv_heads % p.tp:
        out.append(
            Rejected(
                "tp does not divide kv heads",
                f"tp={p.tp} must divide num_kv_heads={model.kv_heads} ({name} does not replicate kv heads)",
            )
        )
    return out


def schedule_problems(engine: Engine, schedule: str) -> list[Rejected]:
    """A schedule the engine does not run, at pp 1 too (a plan asked to run gpipe was listed as "gpipe on
    megatron"); it depends on the schedule alone, so a search whose every schedule it refuses says it first."""
    r, name = engine.rules, engine.name
    if schedule in r.schedules:
        return []
    return [
        Rejected(
            f"{name} has no {schedule} schedule",
            f"schedule={schedule} is not one {name} runs; it runs {', '.join(r.schedules)}",
        )
    ]


def batch_problems(engine: Engine, plan: Plan) -> list[Rejected]:
    """The engine's rules on the micro-batches per step: its interleaved schedule's count of micro-batches."""
    r, p = engine.rules, plan
    out: list[Rejected] = []
    if p.schedule == "interleaved" and p.pp > 1 and p.vpp > 1 and p.global_batch % (p.dp * p.micro_batch) == 0:
        m = p.num_microbatches
        if r.interleaved_microbatches == "grouped" and m < p.pp:
            out.append(
                Rejected(
                    "interleaved needs at least pp micro-batches",
                    f"schedule=interleaved needs at least pp={p.pp} micro-batches per step, not {m} (Megatron-Core's "
                    "group of micro-batches per virtual stage runs from pp to m)",
                )
            )
        elif r.interleaved_microbatches == "multiple_of_pp" and (m < p.pp or m % p.pp):
            out.append(
                Rejected(
                    "interleaved needs micro-batches divisible by pp",
                    f"schedule=interleaved needs the {m} micro-batches per step to be a multiple of "
                    f"pp={p.pp} (Megatron's interleaved schedule)",
                )
            )
        elif r.interleaved_microbatches == "torch_looped" and m % max(1, m // p.pp):
            out.append(
                Rejected(
                    "interleaved needs whole micro-batch rounds",
                    f"schedule=interleaved needs the {m} micro-batches per step to split into rounds "
                    f"of {max(1, m // p.pp)} (m % max(1, m // pp) == 0, torch.distributed.pipelining)",
                )
            )
    return out


def _dimension_problems(engine: Engine, plan: Plan) -> list[Rejected]:
    """Parallel dimensions, sequence parallelism and mixed precision the engine offers (its precisions: recipes.py)."""
    return (
        _degree_problems(engine, plan)
        + _sequence_parallel_problems(engine, plan)
        + _seq_len_problems(engine, plan)
        + _mixed_precision_problems(engine, plan)
    )


def _mixed_precision_problems(engine: Engine, plan: Plan) -> list[Rejected]:
    """An engine that trains in fp32 without FSDP when tp or pp > 1 (rules.mixed_precision_needs_fsdp)."""
    p = plan
    if not engine.rules.mixed_precision_needs_fsdp or p.precision == "fp32" or p.dp * p.cp > 1 or p.tp * p.pp == 1:
        return []
    return [
        Rejected(
            f"{engine.name}: mixed precision needs FSDP with tp or pp",
            f"precision={p.precision} with tp={p.tp}, pp={p.pp} at dp·cp=1 runs without mixed precision in "
            f"{engine.name} (no FSDP runs over one rank, and without it autocast is off with tp or pp > 1: fp32 "
            "outside any float8 linears); use dp·cp >= 2 or precision fp32",
        )
    ]


def _degree_problems(engine: Engine, plan: Plan) -> list[Rejected]:
    """The parallel dimensions the engine offers, and the expert tensor-parallel degrees it runs."""
    r, p, name = engine.rules, plan, engine.name
    out: list[Rejected] = []
    for dim, offered in (
        ("tp", r.tensor_parallel),
        ("pp", r.pipeline_parallel),
        ("cp", r.context_parallel),
        ("ep", r.expert_parallel),
    ):
        if getattr(p, dim) > 1 and not offered:
            out.append(
                Rejected(
                    f"{name} has no {dim}",
                    f"{dim}={getattr(p, dim)}: {name} does not offer this parallelism as its profile models it; "
                    f"use {dim}=1",
                )
            )
    if p.etp is None or p.etp == p.tp:
        return out
    rule = r.expert_tensor_parallel
    if rule == "tp_or_1" and p.ep == 1:  # torchtitan without ep shards the routed experts on the dense tp axis (0.3.0
        # models/common/moe_sharding.py expert_param_placement_dense; v0.2.2 apply_moe_ep_tp: experts_mesh = tp_mesh)
        out.append(Rejected(f"{name}: etp", f"etp={p.etp}: without ep {name} shards its experts over tp={p.tp}"))
    elif p.ep * p.etp > 1 and not {"any": True, "tp_or_1": p.etp == 1, "tp": False}[rule]:
        valid = {"tp_or_1": f"1 or tp={p.tp}", "tp": f"tp={p.tp}"}.get(rule, "")
        out.append(Rejected(f"{name}: etp", f"etp={p.etp}: {name} runs expert tensor parallelism only at {valid}"))
    return out


def _sequence_parallel_problems(engine: Engine, plan: Plan) -> list[Rejected]:
    """Sequence parallelism where the engine needs it (MoE under tp, always with tp) or has none."""
    r, p, name = engine.rules, plan, engine.name
    out: list[Rejected] = []
    if r.moe_tp_needs_sp and p.ep > 1 and p.tp > 1 and not p.sp:
        out.append(
            Rejected(
                f"{name}: ep with tp needs sp",
                f"ep={p.ep} with tp={p.tp}: {name} needs sequence parallelism for MoE layers under tp; use --sp",
            )
        )
    if p.tp > 1 and r.sequence_parallel == "required" and not p.sp:
        out.append(
            Rejected(
                f"{name}: tp without sp", f"{name} always runs sequence parallelism with tp > 1 (tp={p.tp}); use --sp"
            )
        )
    if p.sp and r.sequence_parallel == "never":
        out.append(Rejected(f"{name} has no sp", f"{name} has no Megatron-style sequence parallelism; use --no-sp"))
    return out


def _seq_len_problems(engine: Engine, plan: Plan) -> list[Rejected]:
    """The sequence length the engine's context-parallel (and torchtitan's tp x cp) sharding divides by."""
    r, p, name = engine.rules, plan, engine.name
    out: list[Rejected] = []
    if r.seq_len_divisor == "2cp" and p.cp > 1 and p.seq_len % (2 * p.cp):
        out.append(
            Rejected(
                "cp needs seq len divisible by 2 cp",
                f"seq_len={p.seq_len} must divide by 2 x cp = {2 * p.cp} ({name} splits each sequence "
                "into 2·cp chunks for load balance)",
            )
        )
    if r.seq_len_divisor == "2tpcp" and p.seq_len % (2 * p.tp * p.cp):
        out.append(
            Rejected(
                "seq len not divisible by 2 tp cp",
                f"seq_len={p.seq_len} must divide by 2 x tp x cp = {2 * p.tp * p.cp} ({name})",
            )
        )
    return out


def recompute_problems(engine: Engine, recompute: str) -> list[Rejected]:
    """A recompute level the engine does not offer, or does not run with its settings (Megatron's all-to-all
    overlap refuses full recompute, its CPU offload any). They depend on the level alone, so the search checks each
    level once."""
    r, name = engine.rules, engine.name
    if recompute not in r.recompute:
        return [
            Rejected(
                f"{name} has no recompute {recompute}",
                f"recompute={recompute} is not offered by {name}; use one of {', '.join(r.recompute)}",
            )
        ]
    out = overlap_recompute_problems(engine, recompute) + offload_recompute_problems(engine, recompute)
    return out + _graph_recompute_problems(engine, recompute)


def _graph_recompute_problems(engine: Engine, recompute: str) -> list[Rejected]:
    """Per-layer CUDA graphs run with selective recompute or none: Megatron-Core captures full recompute only in a
    whole-iteration graph (transformer_config.py l.2852-2856 @d98e8a64), which the planner does not price."""
    if not engine.kernels.cuda_graphs or recompute != "full":
        return []
    detail = f"cuda_graphs with recompute=full: {engine.name} captures per-layer graphs without full recompute only"
    return [Rejected("cuda graphs with full recompute", detail)]
