"""What the search is asked: the space (which degrees, schedules and micro-batches `planner search`
enumerates), the objectives and what goodput is computed with (Checkpointing, which the estimate checks its
options with too); and the structural candidates (dp, tp, pp, vpp, cp, ep, sp) for a GPU count (step 1 of
pipeline.py)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from planner.cluster.fabric import CHECKPOINT_BYTES_PER_S_RANGE, MTBF_HOURS_RANGE, RESTART_S_RANGE
from planner.cluster.failures import restart_seconds
from planner.errors import PlannerError
from planner.hardware import HardwareProfile
from planner.plan import MAX_BATCH, RECOMPUTES, SCHEDULES, ZERO_STAGES, Recompute, Schedule, divisors
from planner.specs import MAX_LAYERS, ModelSpec, Precision

NOT_FIT = "does not fit in memory"
PRUNED_RECOMPUTE = "slower recompute of a plan that fits"

PRUNED_BOUND = "cannot beat the top plans (compute lower bound)"
PRUNED_RISK = "may not fit by the 80% interval of memory, with --risk"
PRUNED_ONE_RANK = "the same run as another ZeRO stage's plan (the engine shards nothing over dp·cp = 1)"
OBJECTIVES = ("throughput", "memory", "goodput", "risk")  # risk: the 80% interval's low end (search --risk)
LONG_SEQ = 32768  # from this sequence length up, context parallelism up to DEFAULT_MAX_CP_LONG is searched by default
DEFAULT_MAX_CP_LONG = 16
# A dense model's search also takes cp 2 from 8k tokens: NVIDIA's tuned H100 bf16 recipes run Llama 3 8B at cp 2,
# Llama 3 70B at tp 4 pp 4 cp 2 and Llama 3.1 405B at tp 8 pp 8 cp 2 with 8k sequences (Megatron-Bridge
# scripts/performance/configs/llama/llama3_workload_base_configs.py, llama31_workload_base_configs.py). An MoE
# search, several times the candidates, leaves it to --max-cp 2.
DENSE_CP_SEQ, DEFAULT_MAX_CP_DENSE = 8192, 2
DEFAULT_MAX_VPP = 4
DEFAULT_MAX_MICRO_BATCH = 16


MTBF_PER = ("gpu", "node")  # what --mtbf-hours is the mean time between failures of


@dataclass(frozen=True)
class Checkpointing:
    """What goodput is computed with (the mtbf and checkpoint options of estimate and search), checked here."""

    mtbf_hours: float | None = None
    mtbf_per: str = "gpu"
    bandwidth_bytes_per_s: float | None = None
    restart_minutes: float | None = None  # None: cluster/fabric.py's RESTART_S, with its source

    def __post_init__(self) -> None:
        if self.mtbf_per not in MTBF_PER:
            raise PlannerError(f"--mtbf-per {self.mtbf_per!r} is not valid; choose one of {', '.join(MTBF_PER)}")
        in_range("mtbf-hours", self.mtbf_hours, MTBF_HOURS_RANGE)
        in_range("checkpoint-bandwidth", self.bandwidth_bytes_per_s, CHECKPOINT_BYTES_PER_S_RANGE)
        in_range("restart-minutes", self.restart_minutes, RESTART_MINUTES_RANGE)

    @property
    def restart_s(self) -> float:
        return restart_seconds(self.restart_minutes)


# Runs: finite, positive, and within what a run can be (1e18 tokens); failures: cluster/fabric.py's ranges, which a
# cluster file's own values keep to.
TOKENS_RANGE = (1.0, 1e18)
RESTART_MINUTES_RANGE = (RESTART_S_RANGE[0] / 60.0, RESTART_S_RANGE[1] / 60.0)


def in_range(name: str, value: object, bounds: tuple[float, float]) -> None:
    """A run option (None: not given) as the command line takes it: a finite number within `bounds`, else one line
    naming --name (the Python API's keywords are checked here as the options are)."""
    if value is None:
        return
    low, high = bounds
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not low <= value <= high:  # type: ignore[operator]
        raise PlannerError(f"--{name} {value!r}: give a finite number from {low:g} to {high:g}")


NO_FAILURES = Checkpointing()  # goodput is not computed


def _dense_max_cp(seq_len: int) -> int:
    """The largest cp a dense model's search takes unless told: long sequences up to 16, 8k ones 2."""
    if seq_len >= LONG_SEQ:
        return DEFAULT_MAX_CP_LONG
    return DEFAULT_MAX_CP_DENSE if seq_len >= DENSE_CP_SEQ else 1


def default_max_cp(model: ModelSpec, seq_len: int) -> int:
    """The largest cp a search takes unless told (--max-cp): a dense model's, and an MoE model's only from 32k."""
    return _dense_max_cp(seq_len) if model.moe is None or seq_len >= LONG_SEQ else 1


def cp_left_out(model: ModelSpec, space: Space) -> bool:
    """cp was not searched where a dense model's search would take it (an MoE model from 8k tokens, below 32k),
    with neither --cp nor --max-cp given: the search says so, with the option that adds it."""
    given = space.cp is not None or space.max_cp is not None
    return not given and default_max_cp(model, space.seq_len) < _dense_max_cp(space.seq_len)


# ---- the search space ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Space:
    """What to enumerate. A degree given as an int is fixed; None means search it within the limits."""

    gpus: int
    global_batch: int
    seq_len: int
    precision: Precision = "bf16"
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    cp: int | None = None
    ep: int | None = None
    etp: int | None = None
    vpp: int | None = None
    sp: bool | None = None
    max_tp: int | None = None
    max_pp: int | None = None
    max_cp: int | None = None
    max_ep: int | None = None
    max_vpp: int = DEFAULT_MAX_VPP
    zero: tuple[int, ...] = ZERO_STAGES
    recompute: tuple[Recompute, ...] = RECOMPUTES
    micro_batches: tuple[int, ...] | None = None  # None: powers of two up to 16 dividing global/dp
    schedules: tuple[Schedule, ...] | None = None  # None: 1f1b, and interleaved when pp > 1
    allow_cross_node_tp: bool = False  # tp wider than the NVLink domain (explore/placement.py)
    first_stage_layers: int | None = None  # a stated pipeline split: every plan takes it, never searched
    last_stage_layers: int | None = None

    def __post_init__(self) -> None:
        """Every space is checked once, where it is made: the GPU count and the lists (ranges and vocabularies),
        each failure one line naming the option."""
        if self.gpus < 1:
            raise PlannerError(f"--gpus must be at least 1, got {self.gpus}")
        _check_ints("zero", self.zero, low=min(ZERO_STAGES), high=max(ZERO_STAGES))
        _check_choices("recompute", self.recompute, RECOMPUTES)
        if self.schedules is not None:
            _check_choices("schedule", self.schedules, SCHEDULES)
        if self.micro_batches is not None:
            _check_ints("micro-batches", self.micro_batches, low=1, high=MAX_BATCH)
        for n, name in ((self.first_stage_layers, "first-stage-layers"), (self.last_stage_layers, "last-stage-layers")):
            if n is not None:
                _check_ints(name, (n,), low=1, high=MAX_LAYERS)


def listed(value: str | int | Sequence[Any], name: str | None = None) -> tuple[Any, ...]:
    """The items of a comma list ("1, 3" -> ("1", "3")), an int or a sequence (parsing only: Space checks); an
    empty item between commas ("1,,3") is one line naming the option `name` (a trailing comma is no item)."""
    if isinstance(value, str):
        items = tuple(x.strip() for x in value.split(","))
        items = items[:-1] if len(items) > 1 and not items[-1] else items
        if value.strip() and not all(items):
            raise PlannerError(f"{'--' + name + ' ' if name else ''}{value!r}: an empty item between commas")
        return tuple(x for x in items if x)
    return (value,) if isinstance(value, int) else tuple(value)


def int_items(name: str, value: str | int | Sequence[int]) -> tuple[int, ...]:
    """The integers of a comma list or a sequence, or one line naming the option (their range is Space's)."""
    try:
        return tuple(int(x) if isinstance(x, str) else x for x in listed(value, name))
    except ValueError:
        raise PlannerError(f"--{name} {_text(value)!r}: expected integers separated by commas, e.g. 1,2,4") from None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ",".join(map(str, listed(value)))


def _check_ints(name: str, values: tuple[Any, ...], *, low: int, high: int) -> None:
    if not values or any(not isinstance(v, int) or isinstance(v, bool) or not low <= v <= high for v in values):
        raise PlannerError(f"--{name} {_text(values)!r}: each value must be an integer from {low} to {high}")


def _check_choices(flag: str, values: tuple[Any, ...], valid: tuple[Any, ...]) -> None:
    if not values or any(w not in valid for w in values):
        choose = ", ".join(map(str, valid))
        raise PlannerError(f"--{flag} {_text(values)!r} is not valid; choose from {choose} (comma list)")


def _limited(values: Iterable[int], fixed: int | None, limit: int | None) -> list[int]:
    if fixed is not None:
        return [fixed]
    return [v for v in values if limit is None or v <= limit]


def _pow2_divisors(n: int, limit: int) -> list[int]:
    out, v = [], 1
    while v <= limit and n % v == 0:
        out.append(v)
        v *= 2
    return out


@dataclass(frozen=True)
class Structure:
    """The degrees and schedule of a plan: everything but micro-batch, ZeRO and recompute."""

    dp: int
    tp: int
    pp: int
    cp: int
    ep: int
    vpp: int
    sp: bool
    schedule: Schedule
    etp: int | None = None  # expert tensor parallelism; None: tp (Megatron's default)


def structures(model: ModelSpec, hw: HardwareProfile, space: Space) -> list[Structure]:
    """The structural grid. tp: divisors of gpus up to 2 nodes' worth, or the NVLink domain where larger, by
    default (check_plan rejects those that do not divide heads); pp: divisors of gpus up to num_layers; cp:
    powers of two dividing seq_len (default_max_cp unless --max-cp); dp: what is left (or
    fixed)."""
    g = space.gpus
    gdiv = divisors(g)
    max_tp = max(2 * hw.gpus_per_node, hw.nvlink_domain)  # an NVL72 rack runs tp up to 72 on NVLink
    tps = _limited(gdiv, space.tp, space.max_tp if space.max_tp is not None else max_tp)
    pps = _limited(gdiv, space.pp, space.max_pp if space.max_pp is not None else model.num_layers)
    max_cp = space.max_cp if space.max_cp is not None else default_max_cp(model, space.seq_len)
    cps = [space.cp] if space.cp is not None else _pow2_divisors(math.gcd(space.seq_len, g), max_cp)
    out: list[Structure] = []
    for tp in tps:
        sps = [space.sp] if space.sp is not None else [tp > 1]
        for pp in pps:
            scheds = _schedules(space, pp, model.num_layers)
            for cp in cps:
                dp = _data_parallel(space, tp * pp * cp)
                if dp is None:
                    continue
                for ep, etp in _expert_layouts(model, space, dp=dp, tp=tp, cp=cp):
                    for sp in sps:
                        for sched, v in scheds:
                            out.append(Structure(dp, tp, pp, cp, ep, v, sp, sched, etp))
    return out


def _expert_layouts(model: ModelSpec, space: Space, *, dp: int, tp: int, cp: int) -> list[tuple[int, int | None]]:
    """(ep, etp) pairs for the expert layers: with etp = tp (None) ep divides dp·cp; with etp = 1 (the folding
    Megatron's MoE README recommends for fine-grained experts) ep may also span the tensor-parallel ranks and
    divides tp·cp·dp. A fixed --ep or --etp narrows them."""
    if model.moe is None:
        return [(space.ep if space.ep is not None else 1, space.etp)]
    etps: list[int | None] = [space.etp] if space.etp is not None else ([None, 1] if tp > 1 else [None])
    out: list[tuple[int, int | None]] = []
    for etp in etps:
        if space.ep is not None:  # fixed: the rules say why it cannot run, if it cannot
            out.append((space.ep, etp))
            continue
        room = dp * cp if etp is None or etp == tp else tp * cp * dp // etp
        eps = divisors(model.moe.num_experts)
        out += [(e, etp) for e in eps if room % e == 0 and (space.max_ep is None or e <= space.max_ep)]
    return out


def _data_parallel(space: Space, rest: int) -> int | None:
    """dp for tp·pp·cp = `rest`: what is left of the GPUs (or the fixed dp), None when it does not add up."""
    if space.dp is not None:
        return space.dp if rest * space.dp == space.gpus else None
    return None if space.gpus % rest else space.gpus // rest


def _schedules(space: Space, pp: int, num_layers: int) -> list[tuple[Schedule, int]]:
    """(schedule, vpp) for pp: by default 1f1b, and interleaved with vpp 2..max_vpp where pp·vpp chunks can hold
    the layers; or the schedules asked for."""
    vpps = [space.vpp] if space.vpp is not None else range(2, space.max_vpp + 1)
    scheds: list[tuple[Schedule, int]] = []
    if space.schedules is None:
        if space.vpp is None or space.vpp == 1:
            scheds.append(("1f1b", 1))
        if pp > 1:
            scheds += [("interleaved", v) for v in vpps if v > 1 and pp * v <= num_layers]
        return scheds
    for s in space.schedules:
        if s == "interleaved":
            scheds += [("interleaved", v) for v in vpps if pp * v <= num_layers or space.vpp]
        elif s == "dualpipev":  # its two chunks per rank in a V (plan.py)
            scheds.append((s, space.vpp or 2))
        else:
            scheds.append((s, space.vpp or 1))
    return scheds


def micro_batches(space: Space, dp: int) -> list[int]:
    """Powers of two up to 16 that divide global_batch / dp (or the given list, checked later)."""
    if space.micro_batches is not None:
        return list(space.micro_batches)
    if space.global_batch % dp:
        return [1]  # the check will say why
    return _pow2_divisors(space.global_batch // dp, DEFAULT_MAX_MICRO_BATCH)
