"""The search space: which degrees, schedules and micro-batches `planner search` enumerates, and the
structural candidates (dp, tp, pp, vpp, cp, ep, sp) for a GPU count (step 1 of search.py's pipeline)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from planner.errors import PlannerError
from planner.hardware import HardwareProfile
from planner.plan import MAX_BATCH, RECOMPUTES, SCHEDULES, ZERO_STAGES, Recompute, Schedule, divisors
from planner.specs import ModelSpec, Precision

T = TypeVar("T")
NOT_FIT = "does not fit in memory"
PRUNED_RECOMPUTE = "slower recompute of a plan that fits"

PRUNED_BOUND = "cannot beat the top plans (compute lower bound)"
OBJECTIVES = ("throughput", "memory", "goodput", "risk")  # risk: the 80% interval's low end (search --risk)
DEFAULT_BATCH_TOKENS = 1 << 22  # about 4M tokens per optimizer step
LONG_SEQ = 32768  # from this sequence length up, context parallelism is searched by default
DEFAULT_MAX_CP_LONG = 16
DEFAULT_MAX_VPP = 4
DEFAULT_MAX_MICRO_BATCH = 16


def default_global_batch(seq_len: int) -> int:
    """About 4M tokens per step: the power of two of sequences nearest DEFAULT_BATCH_TOKENS / seq_len (GPT-3
    175B trained with 3.2M-token batches, Brown et al. 2020 Table 2.1; Llama 2 with 4M, Touvron et al. 2023;
    Llama 3 405B started at 4M, Dubey et al. 2024 section 3.4.1)."""
    return 1 << max(0, round(math.log2(DEFAULT_BATCH_TOKENS / seq_len)))


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
    zero: tuple[int, ...] = (0, 1, 2, 3)
    recompute: tuple[Recompute, ...] = RECOMPUTES
    micro_batches: tuple[int, ...] | None = None  # None: powers of two up to 16 dividing global/dp
    schedules: tuple[Schedule, ...] | None = None  # None: 1f1b, and interleaved when pp > 1
    allow_cross_node_tp: bool = False  # tp wider than the NVLink domain (explore/placement.py)

    def validate(self) -> None:
        """The lists' checks, the same as the command line's (int_list, choice_list)."""
        if self.gpus < 1:
            raise PlannerError(f"--gpus must be at least 1, got {self.gpus}")
        int_list("zero", self.zero, low=min(ZERO_STAGES), high=max(ZERO_STAGES))
        choice_list("recompute", self.recompute, RECOMPUTES)
        if self.schedules is not None:
            choice_list("schedule", self.schedules, SCHEDULES)
        if self.micro_batches is not None:
            int_list("micro-batches", self.micro_batches, low=1, high=MAX_BATCH)


def _listed(value: str | int | Sequence[Any]) -> tuple[str, tuple[Any, ...]]:
    """(the text to quote in a message, the items) of a comma list or a sequence."""
    if isinstance(value, str):
        return value, tuple(x.strip() for x in value.split(",") if x.strip())
    items = (value,) if isinstance(value, int) else tuple(value)
    return ",".join(map(str, items)), items


def int_list(name: str, value: str | int | Sequence[int] | None, *, low: int, high: int) -> tuple[int, ...] | None:
    """A comma list (or sequence) of integers in [low, high], or one line naming the option and the range."""
    if value is None:
        return None
    text, items = _listed(value)
    try:
        values = tuple(int(x) if isinstance(x, str) else x for x in items)
    except ValueError:
        raise PlannerError(f"--{name} {text!r}: expected integers separated by commas, e.g. 1,2,4") from None
    if not values or any(not isinstance(v, int) or isinstance(v, bool) or not low <= v <= high for v in values):
        raise PlannerError(f"--{name} {text!r}: each value must be an integer from {low} to {high}")
    return values


def choice_list(flag: str, value: str | Sequence[str] | None, valid: tuple[T, ...]) -> tuple[T, ...] | None:
    """A comma list (or sequence) of some of `valid`, or one line naming them."""
    if value is None:
        return None
    text, words = _listed(value)
    if not words or any(w not in valid for w in words):
        raise PlannerError(f"--{flag} {text!r} is not valid; choose from {', '.join(map(str, valid))} (comma list)")
    return tuple(cast(T, w) for w in words)


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
    powers of two dividing seq_len (searched only for long sequences unless --max-cp); dp: what is left (or
    fixed)."""
    g = space.gpus
    gdiv = divisors(g)
    max_tp = max(2 * hw.gpus_per_node, hw.nvlink_domain)  # an NVL72 rack runs tp up to 72 on NVLink
    tps = _limited(gdiv, space.tp, space.max_tp if space.max_tp is not None else max_tp)
    pps = _limited(gdiv, space.pp, space.max_pp if space.max_pp is not None else model.num_layers)
    max_cp = space.max_cp if space.max_cp is not None else (DEFAULT_MAX_CP_LONG if space.seq_len >= LONG_SEQ else 1)
    cps = [space.cp] if space.cp is not None else _pow2_divisors(math.gcd(space.seq_len, g), max_cp)
    out: list[Structure] = []
    for tp in tps:
        sps = [space.sp] if space.sp is not None else [tp > 1]
        for pp in pps:
            for cp in cps:
                rest = tp * pp * cp
                if space.dp is not None:
                    dp = space.dp
                    if rest * dp != g:
                        continue
                elif g % rest:
                    continue
                else:
                    dp = g // rest
                eps = _expert_layouts(model, space, dp=dp, tp=tp, cp=cp)
                scheds: list[tuple[Schedule, int]] = []
                if space.schedules is None:
                    if space.vpp is None or space.vpp == 1:
                        scheds.append(("1f1b", 1))
                    if pp > 1:
                        vpps = [space.vpp] if space.vpp is not None else range(2, space.max_vpp + 1)
                        scheds += [("interleaved", v) for v in vpps if v > 1 and pp * v <= model.num_layers]
                else:
                    for s in space.schedules:
                        if s == "interleaved":
                            vpps = [space.vpp] if space.vpp is not None else range(2, space.max_vpp + 1)
                            scheds += [("interleaved", v) for v in vpps if pp * v <= model.num_layers or space.vpp]
                        else:
                            scheds.append((s, space.vpp or 1))
                for ep, etp in eps:
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


def micro_batches(space: Space, dp: int) -> list[int]:
    """Powers of two up to 16 that divide global_batch / dp (or the given list, checked later)."""
    if space.micro_batches is not None:
        return list(space.micro_batches)
    if space.global_batch % dp:
        return [1]  # the check will say why
    return _pow2_divisors(space.global_batch // dp, DEFAULT_MAX_MICRO_BATCH)
