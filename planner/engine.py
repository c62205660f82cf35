"""What a training stack does with a plan: the Engine, loaded from engine_profiles/NAME.yaml.

A plan is run by a training stack (Megatron-LM, torchtitan, DeepSpeed, llm-foundry, or this project's own
launch worker), and the stack decides which combinations run at all, what memory holds, which collectives
run when and which kernels compute attention. An engine profile is data, like a hardware profile: every
field is commented in the YAML with the engine source file or documentation it comes from. The cost model
and the launch worker both read it, so they cannot disagree.

Frozen and validated once at the edge (pydantic, ``extra="forbid"``). Per-run choices the runs files and
the command line can change (attention kernel, TP overlap, optimizer, selective-recompute policy) are
fields too; ``Engine.configured`` returns a copy with them overridden.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from planner.errors import PlannerError
from planner.plan import Plan, Rejected, check_plan
from planner.specs import Frozen, ModelSpec

State = Literal["optimizer", "gradients", "weights"]
Dimension = Literal["tp", "cp", "pp", "vpp", "ep"]
ZERO_STATES: dict[int, tuple[State, ...]] = {  # what ZeRO stage k shards (Rajbhandari et al. 2020, Figure 1)
    0: (),
    1: ("optimizer",),
    2: ("optimizer", "gradients"),
    3: ("optimizer", "gradients", "weights"),
}


class ZeroStage(Frozen):
    """How an engine realises one ZeRO stage: what it shards, holds, reduces and gathers, and when."""

    mechanism: str = Field(description="what the engine calls it (e.g. 'DDP', 'distributed optimizer')")
    shards: tuple[State, ...] = Field(description="model states divided over the dp·cp group")
    fp32_params: bool = Field(
        False,
        description="the parameters are stored in fp32 and are the master copy (FSDP2 mixed precision, "
        "DDP under autocast): no separate master in the optimizer, and 16-bit weights exist "
        "only as gathered or cast copies (see gathered_weights)",
    )
    gathered_weights: Literal["none", "unit", "all"] = Field(
        "none",
        description="unsharded 16-bit weights alive at the peak besides the states: none, one unit "
        "being gathered plus the prefetched next one, or every layer of the rank",
    )
    grad_reduce: Literal["step", "microbatch"] = Field(
        "step",
        description="gradients reduced once per optimizer step (accumulated locally over the "
        "micro-batches) or after every micro-batch's backward",
    )
    grad_collective: Literal["all_reduce", "reduce_scatter"] = Field(
        "all_reduce", description="the collective that reduces gradients over the dp·cp group"
    )
    accumulate_unsharded: bool = Field(
        False,
        description="gradients accumulate unsharded (full size, in the gradient dtype) across the "
        "micro-batches of a step before one reduce-scatter (FSDP with gradient sync off)",
    )
    weight_gather: Literal["none", "step", "microbatch_forward", "microbatch"] = Field(
        "none",
        description="all-gather of the 16-bit weights: never (replicated), once per step (after the "
        "optimizer, or kept across micro-batches), in every micro-batch's forward, or in "
        "every micro-batch's forward and again in its backward",
    )
    excludes: tuple[Dimension, ...] = Field(
        (), description="parallel dimensions the mechanism cannot combine with when dp·cp > 1"
    )

    @model_validator(mode="after")
    def _check(self) -> ZeroStage:
        if self.accumulate_unsharded and self.grad_reduce != "step":
            raise ValueError("accumulate_unsharded needs grad_reduce: step (it is what no-sync accumulation does)")
        return self


class Rules(Frozen):
    """What runs: combinations outside these are rejected with the engine's rule as the reason."""

    zero: dict[int, ZeroStage] = Field(description="the ZeRO stages the engine runs, and how")
    zero_with_pp: tuple[int, ...] | None = Field(
        None, description="ZeRO stages allowed with pipeline parallelism (default: every stage in zero)"
    )
    schedules: tuple[Literal["gpipe", "1f1b", "interleaved"], ...] = ("gpipe", "1f1b", "interleaved")
    interleaved_microbatches: Literal["multiple_of_pp", "torch_looped"] = Field(
        "multiple_of_pp",
        description="multiple_of_pp: m ≥ pp and m % pp == 0 (Megatron); torch_looped: "
        "m % max(1, m // pp) == 0 (torch.distributed.pipelining)",
    )
    vocab_divisible_by_tp: bool = Field(
        False, description="the vocabulary must divide by tp (no padding of the embedding)"
    )
    kv_head_replication: bool = Field(
        True,
        description="tp may exceed num_kv_heads, each kv head replicated on tp / kv ranks (Megatron); "
        "false: tp must divide num_kv_heads",
    )

    @model_validator(mode="after")
    def _check(self) -> Rules:
        bad = [z for z in self.zero if z not in ZERO_STATES]
        if bad:
            raise ValueError(f"zero stages must be 0-3, got {bad}")
        for z, impl in self.zero.items():
            if not set(ZERO_STATES[z]) <= set(impl.shards):
                raise ValueError(f"zero {z} shards at least {list(ZERO_STATES[z])}, not {list(impl.shards)}")
        extra = [z for z in (self.zero_with_pp or ()) if z not in self.zero]
        if extra:
            raise ValueError(f"zero_with_pp lists {extra}, which zero does not define")
        return self


class Memory(Frozen):
    optimizer: Literal["adamw", "adam", "sgd"] = Field(
        "adamw", description="adam(w): fp32 master + m + v = 12 B/param; sgd with momentum: master + m = 8"
    )
    grad_dtype: Literal["param", "fp32"] = Field(
        "param",
        description="dtype gradients are accumulated and reduced in: 'param' = the weights' dtype, "
        "'fp32' = Megatron's fp32 main grads, FSDP's fp32 reduce dtype",
    )
    master_copy: bool | None = Field(
        None,
        description="a separate fp32 copy of the weights in the optimizer; default: yes for 16-bit "
        "precisions, no for fp32 (PyTorch, Megatron). DeepSpeed's ZeRO optimizer keeps one "
        "even in fp32",
    )


class Kernels(Frozen):
    """Which kernels compute the layer: they decide what activations are kept and how fast it runs."""

    attention: Literal["flash", "softmax"] = Field(
        "flash",
        description="flash: fused attention, the s×s scores are never stored (Dao et al. 2022); "
        "softmax: 2021-22 Megatron's fused softmax that keeps them",
    )
    fused_elementwise: bool = Field(
        True,
        description="fused RMSNorm and SwiGLU kernels (Megatron, Apex, compiled torchtitan); false: "
        "eager PyTorch, whose RMSNorm keeps an fp32 copy of its input and the fp32 "
        "normalised value, and whose SwiGLU keeps the SiLU output as well",
    )
    dropout: bool = Field(False, description="dropout masks kept for backward (GPT-2/3 era recipes)")
    selective_recompute: Literal["op", "attention"] = Field(
        "op",
        description="what recompute=selective recomputes: 'attention' = only the attention core "
        "(Korthikanti et al. 2022, Megatron); 'op' = per-op checkpointing that keeps the "
        "attention output and every other matmul output (torchtitan)",
    )

    @property
    def flash(self) -> bool:
        return self.attention == "flash"


class Comm(Frozen):
    tp_overlap: bool = Field(False, description="TP communication overlapped with the GEMMs")


class Engine(Frozen):
    """engine_profiles/NAME.yaml: what one training stack does with a plan."""

    name: str
    description: str = ""
    rules: Rules
    memory: Memory = Memory()
    kernels: Kernels = Kernels()
    comm: Comm = Comm()

    def zero_stage(self, plan: Plan) -> ZeroStage:
        """How this engine runs the plan's ZeRO stage (the plan must pass ``engine_problems``)."""
        return self.rules.zero[plan.zero]

    def configured(
        self,
        *,
        attention: str | None = None,
        tp_overlap: bool | None = None,
        optimizer: str | None = None,
        selective_recompute: str | None = None,
    ) -> Engine:
        """A copy with per-run choices overridden (None keeps the profile's default)."""
        kernels = {
            k: v for k, v in (("attention", attention), ("selective_recompute", selective_recompute)) if v is not None
        }
        update: dict[str, object] = {}
        if kernels:
            update["kernels"] = self.kernels.model_copy(update=kernels)
        if tp_overlap is not None:
            update["comm"] = self.comm.model_copy(update={"tp_overlap": tp_overlap})
        if optimizer is not None:
            update["memory"] = self.memory.model_copy(update={"optimizer": optimizer})
        return self.model_copy(update=update) if update else self


def engine_problems(engine: Engine, model: ModelSpec, plan: Plan) -> list[Rejected]:
    """Every rule of the engine the plan breaks (empty: the engine runs it), as data: a stable reason the
    search counts by, and a detail naming the values, the engine and what would be valid."""
    return structure_problems(engine, model, plan) + zero_problems(engine, plan)


def zero_problems(engine: Engine, plan: Plan, zero: int | None = None) -> list[Rejected]:
    """The engine's rules about the plan's ZeRO stage (or `zero` in its place): whether it runs it, with
    pipeline parallelism, and with the other parallel dimensions the plan uses."""
    r, p, name = engine.rules, plan, engine.name
    z = p.zero if zero is None else zero
    impl = r.zero.get(z)
    if impl is None:
        return [
            Rejected(
                f"{name} has no zero {z}", f"zero={z} is not something {name} runs; it runs zero in {sorted(r.zero)}"
            )
        ]
    out = []
    if p.pp > 1 and r.zero_with_pp is not None and z not in r.zero_with_pp:
        out.append(
            Rejected(
                f"{name}: zero {z} with pp > 1",
                f"zero={z} ({impl.mechanism}) cannot run with pipeline parallelism (pp={p.pp}) in "
                f"{name}; with pp > 1 use zero in {list(r.zero_with_pp)}",
            )
        )
    if p.dp * p.cp > 1:
        used = {"tp": p.tp > 1, "cp": p.cp > 1, "pp": p.pp > 1, "vpp": p.vpp > 1, "ep": p.ep > 1}
        clash = [d for d in impl.excludes if used[d]]
        if clash:
            degrees = ", ".join(f"{d}={getattr(p, d)}" for d in clash)
            others = ", ".join(str(k) for k in sorted(r.zero) if k != z)
            out.append(
                Rejected(
                    f"{name}: zero {z} with {'/'.join(clash)}",
                    f"zero={z} ({impl.mechanism}) runs data parallelism alone in {name}, not "
                    f"with {degrees}; use zero in {others}",
                )
            )
    return out


def structure_problems(engine: Engine, model: ModelSpec, plan: Plan) -> list[Rejected]:
    """The engine's rules that do not depend on the ZeRO stage or recompute: schedules, micro-batch counts,
    vocabulary padding."""
    out: list[Rejected] = []
    r, p, name = engine.rules, plan, engine.name
    if p.pp > 1 and p.schedule not in r.schedules:
        out.append(
            Rejected(
                f"{name} has no {p.schedule} schedule",
                f"schedule={p.schedule} is not one {name} runs; it runs {', '.join(r.schedules)}",
            )
        )
    if p.schedule == "interleaved" and p.pp > 1 and p.vpp > 1 and p.global_batch % (p.dp * p.micro_batch) == 0:
        m = p.num_microbatches
        if r.interleaved_microbatches == "multiple_of_pp" and (m < p.pp or m % p.pp):
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


def plan_problems(model: ModelSpec, plan: Plan, engine: Engine, gpus: int | None = None) -> list[Rejected]:
    """The model's divisibility rules (plan.check_plan) and the engine's rules, in that order."""
    return check_plan(model, plan, gpus) + engine_problems(engine, model, plan)


def require_runs(model: ModelSpec, plan: Plan, engine: Engine, gpus: int | None = None) -> None:
    """For commands that take one plan: every broken rule in one PlannerError."""
    problems = plan_problems(model, plan, engine, gpus)
    if problems:
        raise PlannerError("invalid plan: " + "; ".join(str(r) for r in problems))
