"""The parallel plan: its degrees and batch, the defaults a user gets, and a plan derived from what was given.

A plan that cannot run is data, not an exception: a ``Rejected`` with a stable ``reason`` (what the search counts
by) and a ``detail`` that names the values and what would be valid; plan_checks.py holds the checks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, get_args

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from planner.errors import PlannerError
from planner.specs import MAX_LAYERS, MAX_SEQ_LEN, Frozen, Precision

MAX_DEGREE = 1 << 20  # a million GPUs in one parallel dimension
MAX_BATCH = 1 << 31  # sequences

# The plan's vocabularies, each written once (every command, file reader and the search take them from here).
Recompute = Literal["none", "selective", "full"]
Schedule = Literal["gpipe", "1f1b", "interleaved", "dualpipev"]
RECOMPUTES: tuple[Recompute, ...] = get_args(Recompute)
SCHEDULES: tuple[Schedule, ...] = get_args(Schedule)
ZERO_STAGES = (0, 1, 2, 3)
DEGREES = ("dp", "tp", "pp", "cp", "ep", "vpp")
STATED_SPLIT = ("first_stage_layers", "last_stage_layers")  # the pipeline split a user states (engine/split.py)

# The defaults a user gets from memory, estimate and search when they leave a value out, each written once.
DEFAULT_BATCH_TOKENS = 1 << 22  # about 4M tokens per optimizer step
DEFAULT_SEQ_LEN_CAP = 8192  # the longest sequence trained by default: longer contexts are asked for by name


def default_global_batch(seq_len: int, multiple_of: int = 1) -> int:
    """About 4M tokens per step: the power of two of sequences nearest DEFAULT_BATCH_TOKENS / seq_len (GPT-3
    175B trained with 3.2M-token batches, Brown et al. 2020 Table 2.1; Llama 2 with 4M, Touvron et al. 2023;
    Llama 3 405B started at 4M, Dubey et al. 2024 section 3.4.1), rounded to a multiple of `multiple_of` (dp x
    micro-batch of a single plan) where it is not one already."""
    sequences = 1 << max(0, round(math.log2(DEFAULT_BATCH_TOKENS / seq_len)))
    return max(1, round(sequences / multiple_of)) * multiple_of


def default_seq_len(max_seq_len: int) -> int:
    """The model's context, at most DEFAULT_SEQ_LEN_CAP tokens: a config.json's 131,072-token context would
    otherwise plan context parallelism nobody asked for."""
    return min(max_seq_len, DEFAULT_SEQ_LEN_CAP)


class Plan(Frozen):
    """One way to run a training step: the `{PLAN}` document of DESIGN.md.

    World size follows Megatron: gpus = tp·pp·cp·dp; expert parallelism is carved out of dp·cp.
    """

    dp: int = Field(1, gt=0, le=MAX_DEGREE, description="data-parallel degree (ZeRO/FSDP shard ranks included)")
    tp: int = Field(1, gt=0, le=MAX_DEGREE, description="tensor-parallel degree (Megatron column/row split)")
    pp: int = Field(1, gt=0, le=MAX_DEGREE, description="pipeline-parallel degree (stages)")
    vpp: int = Field(1, gt=0, le=MAX_DEGREE, description="virtual pipeline stages (model chunks) per pipeline rank")
    cp: int = Field(1, gt=0, le=MAX_DEGREE, description="context-parallel degree (sequence split across attention)")
    ep: int = Field(1, gt=0, le=MAX_DEGREE, description="expert-parallel degree (experts over ep ranks)")
    etp: int | None = Field(
        None,
        gt=0,
        le=MAX_DEGREE,
        description="expert tensor-parallel degree; null = tp (Megatron's default). The expert layers fold ep·etp "
        "onto the tp·cp·dp ranks of a pipeline stage (Megatron-Core MoE parallel folding)",
    )
    sp: bool = Field(False, description="Megatron sequence parallelism in the TP group")
    zero: int = Field(0, ge=0, le=3, description="0 none, 1 optimizer, 2 + gradients, 3 + weights sharded")
    recompute: Recompute = "none"
    micro_batch: int = Field(1, gt=0, le=MAX_BATCH, description="sequences per micro-batch per data-parallel rank")
    global_batch: int = Field(1, gt=0, le=MAX_BATCH, description="sequences per optimizer step")
    seq_len: int = Field(2048, gt=0, le=MAX_SEQ_LEN, description="tokens per sequence")
    precision: Precision = "bf16"
    schedule: Schedule = "1f1b"
    first_stage_layers: int | None = Field(
        None,
        gt=0,
        le=MAX_LAYERS,
        description="transformer layers on the first pipeline rank, the middle ranks sharing the rest evenly "
        "(Megatron-LM --decoder-first-pipeline-num-layers); null: the engine's own split",
    )
    last_stage_layers: int | None = Field(
        None,
        gt=0,
        le=MAX_LAYERS,
        description="transformer layers on the last pipeline rank (Megatron-LM --decoder-last-pipeline-num-layers); "
        "null: the engine's own split",
    )

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        # a stated split is written where there is one: plan documents and files without it read as before
        return {k: v for k, v in handler(self).items() if v is not None or k not in STATED_SPLIT}

    @model_validator(mode="before")
    @classmethod
    def _default_schedule(cls, data: object) -> object:
        # vpp > 1 only makes sense interleaved; say so by default rather than failing a check.
        if isinstance(data, dict):
            vpp = data.get("vpp", 1)
            if isinstance(vpp, int) and vpp > 1 and "schedule" not in data:
                return {**data, "schedule": "interleaved"}
            if data.get("schedule") == "dualpipev" and data.get("vpp") is None:
                return {**data, "vpp": 2}  # DualPipeV: two chunks per rank, in a V
        return data

    def document(self, engine: str) -> dict[str, object]:
        """The `{PLAN}` document of DESIGN.md: the plan's fields and the engine that runs it."""
        return {**self.model_dump(), "engine": engine}

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.cp * self.dp

    @property
    def expert_tp(self) -> int:
        """The expert tensor-parallel degree: etp where given, else tp (Megatron's default, parallel_state.py)."""
        return self.tp if self.etp is None else self.etp

    @property
    def num_microbatches(self) -> int:
        """Micro-batches per step per pipeline (gradient-accumulation steps)."""
        return self.global_batch // (self.dp * self.micro_batch)

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq_len

    def summary(self) -> str:
        parts = [f"dp{self.dp}", f"tp{self.tp}", f"pp{self.pp}"]
        if self.vpp > 1:
            parts.append(f"vpp{self.vpp}")
        if self.cp > 1:
            parts.append(f"cp{self.cp}")
        if self.ep > 1:
            parts.append(f"ep{self.ep}")
        if self.etp is not None and self.etp != self.tp:
            parts.append(f"etp{self.etp}")
        extras = [f"zero{self.zero}", f"mb{self.micro_batch}", f"rc={self.recompute}"]
        if self.sp:
            extras.insert(0, "sp")
        if self.first_stage_layers is not None:
            parts.append(f"first{self.first_stage_layers}")
        if self.last_stage_layers is not None:
            parts.append(f"last{self.last_stage_layers}")
        return " ".join(parts + extras)

    def headline(self) -> str:
        """The summary with the precision and the global batch, which it leaves out: how an emitted file's header
        names the plan it was written for ('dp8 tp1 pp1 zero3 mb1 rc=none fp8-rowwise, global batch 32')."""
        return f"{self.summary()} {self.precision}, global batch {self.global_batch}"


@dataclass(frozen=True)
class Rejected:
    """Why a plan cannot run: `reason` is stable (counted by search), `detail` names the values."""

    reason: str
    detail: str

    def __str__(self) -> str:
        return self.detail


@lru_cache(maxsize=4096)
def microbatch_group(num_microbatches: int, pp: int) -> int:
    """Micro-batches an interleaved schedule runs through one virtual stage before the next: the smallest N in
    [pp, m] whose last group is whole or at least pp long (m % N == 0 or m % N >= pp), which Megatron-Core's
    forward_backward_pipelining_with_interleaving accepts with no dependency bubble (schedules.py: N from
    --microbatch-group-size-per-virtual-pipeline-stage, default pp); m itself where m < pp. It is pp wherever pp
    divides m, and torch.distributed.pipelining's round, m / (m // pp), wherever that divides m (ScheduleInterleaved1F1B
    microbatches_per_round): a smaller N would leave a last group shorter than pp, as m < pp·(m // pp + 1)."""
    m = num_microbatches
    if m <= pp:
        return m
    return next(n for n in range(pp, m + 1) if m % n == 0 or m % n >= pp)


def nondefault_microbatch_group(plan: Plan) -> int | None:
    """The group an interleaved plan's virtual stages take its micro-batches in (microbatch_group) where it is not
    pp, Megatron-Core's default (model_parallel_config.py __post_init__), so a run must be told it; None for any
    other plan."""
    if plan.schedule != "interleaved" or plan.pp == 1 or plan.vpp == 1:
        return None
    group = microbatch_group(plan.num_microbatches, plan.pp)
    return None if group == plan.pp else group


def divisors(n: int) -> list[int]:
    """The divisors of n, ascending, in O(sqrt n) (hints name the divisors of an FFN width of 10^5)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


# The degrees other than dp that --gpus may make up (the one left out beside a given dp): said where it does.
DERIVABLE = ("tp", "pp", "cp")


def derive_plan(gpus: int | None, *, batch_tokens: bool = False, sp_with_tp: bool = False, **fields: object) -> Plan:
    """Fill the one degree left out so that tp·pp·cp·dp = gpus (dp by default), then what is not given:
    - the global batch: about 4M tokens (`batch_tokens`, default_global_batch as a multiple of dp x micro-batch),
      else enough micro-batches to fill the pipeline once (dp · micro_batch · pp, so m = pp: a launch rehearsal);
    - sequence parallelism: on when tp > 1 where the engine runs it (`sp_with_tp`), else off.

    `fields` holds only what the user gave; a `None` counts as not given. Values are checked by Plan
    (types and ranges) before any arithmetic.
    """
    given = {k: v for k, v in fields.items() if v is not None}
    given.update(_derived_degree(gpus, given))
    derived = Plan.model_validate({**given, "global_batch": 1})
    if "sp" not in given and sp_with_tp:
        given["sp"] = derived.tp > 1
    if "global_batch" not in given:
        if batch_tokens:
            given["global_batch"] = default_global_batch(derived.seq_len, derived.dp * derived.micro_batch)
        else:
            given["global_batch"] = derived.dp * derived.micro_batch * derived.pp
    return Plan.model_validate(given)


def _derived_degree(gpus: int | None, given: dict[str, object]) -> dict[str, int]:
    """The degree left out of tp·pp·cp·dp = gpus (dp by default), or nothing when there is none to derive."""
    probe = Plan.model_validate(given)
    if gpus is None:
        return {}
    missing = [d for d in ("dp", "tp", "pp", "cp") if d not in given]
    target = "dp" if "dp" in missing else (missing[0] if len(missing) == 1 else None)
    if target is None:
        if probe.gpus != gpus:
            raise PlannerError(
                f"tp={probe.tp} x pp={probe.pp} x cp={probe.cp} x dp={probe.dp} = {probe.gpus}, not the {gpus} GPUs "
                "asked for (--gpus, or a plan file's gpus:)"
            )
        return {}
    others = 1
    named = []
    for d in ("dp", "tp", "pp", "cp"):
        if d != target:
            others *= getattr(probe, d)
            named.append(f"{d}={getattr(probe, d)}")
    if gpus % others:
        raise PlannerError(
            f"--gpus {gpus} is not divisible by {' x '.join(named)} = {others}, so {target} cannot be "
            f"derived; choose degrees whose product divides {gpus}"
        )
    return {target: gpus // others}


def unstated_fields(plan: object) -> list[str]:
    """The fields a plan mapping leaves null where a plan needs a value, in Plan's order (a runs file's plan as
    `ingest -o` writes what a log does not state)."""
    if not isinstance(plan, dict):
        return []
    return [k for k, f in Plan.model_fields.items() if k in plan and plan[k] is None and f.default is not None]
