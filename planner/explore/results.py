"""What a search returns: the ranked plans with their full estimates, the closest misses when nothing fits,
and the counts that add up (evaluated = valid + rejected, valid = timed + pruned)."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from planner.cost.estimate import Estimate
from planner.cost.schedule import StepTime
from planner.engine import Engine
from planner.explore.space import NOT_FIT, PRUNED_RISK, Space, Structure
from planner.hardware import HardwareProfile
from planner.plan import Plan
from planner.plan_checks import BATCH_INDIVISIBLE
from planner.specs import ModelSpec
from planner.units import fmt_bytes


@dataclass
class Ranked:
    """One plan of the answer: the full estimate (memory report + step time + checkpoints)."""

    estimate: Estimate

    @property
    def plan(self) -> Plan:
        return self.estimate.plan

    @property
    def time(self) -> StepTime:
        return self.estimate.time

    @property
    def score_tokens_per_s(self) -> float:
        return self.estimate.goodput_tokens_per_s


@dataclass(frozen=True)
class Variant:
    """A change tried on a plan that does not fit, and its peak memory."""

    change: str  # what changed, e.g. "zero 3", "recompute full", "256 GPUs (dp 64)"
    plan: Plan
    nbytes: float
    fits: bool
    settings: dict[str, object] = field(default_factory=dict)  # engine settings the change adds (offload_layers)
    may_not_fit: bool = False  # it fits, but the 80% interval of its memory passes the GPU (as estimate says it)


@dataclass
class Miss:
    """A plan that passes the checks but not memory, and what was tried to make it fit."""

    plan: Plan
    bytes: float
    capacity: float
    variants: list[Variant]
    engine: str  # the engine it was priced for (a search of several engines keeps each one's misses)
    gpus_needed: int | None = None  # smallest GPU count (x2 steps, more dp) at which it fits

    @property
    def over_bytes(self) -> float:
        return self.bytes - self.capacity


@dataclass(frozen=True)
class Rejection:
    """Why `plans` candidates like `plan` were rejected (kept for --explain)."""

    plan: Plan
    reason: str
    detail: str
    plans: int


@dataclass(frozen=True)
class TimedPlan:
    """A valid plan with its step time computed (kept for --plot: every one, with --exhaustive)."""

    plan: Plan
    nbytes: float
    tokens_per_s: float


@dataclass
class SearchResult:
    model: ModelSpec
    hardware: HardwareProfile
    engine: Engine  # the engine of the best plan when several were searched
    space: Space
    objective: str
    evaluated: int = 0
    rejected: Counter = field(default_factory=Counter)
    pruned: Counter = field(default_factory=Counter)
    timed: int = 0
    seconds: float = 0.0
    top: list[Ranked] = field(default_factory=list)
    misses: list[Miss] = field(default_factory=list)
    all_timed: list[TimedPlan] = field(default_factory=list)  # exhaustive only
    examples: dict[str, str] = field(default_factory=dict)  # reason -> one detail line
    rejections: list[Rejection] = field(default_factory=list)  # with keep_rejections only
    structures: list[Structure] = field(default_factory=list)
    engines: list[Engine] = field(default_factory=list)  # every engine searched (one unless --engine all/LIST)
    defaulted: frozenset[str] = frozenset()  # the space's values the defaults gave (global_batch, seq_len)
    precisions: tuple[str, ...] = ()  # the precisions searched when several were (search --precision A,B)
    # candidates never screened for memory: a search for its top plans only (pipeline.search counts=False) skips
    # those whose step-time lower bound cannot beat the K-th best, so they are neither valid nor rejected
    unscreened: int = 0

    def considered(self, field_name: str, value: Any) -> bool:
        """Whether any candidate had field == value (else it was outside the search space)."""
        if field_name in ("dp", "tp", "pp", "cp", "ep", "vpp", "sp", "schedule"):
            return any(getattr(st, field_name) == value for st in self.structures)
        if field_name == "zero":
            return value in self.space.zero
        if field_name == "recompute":
            return value in self.space.recompute
        if field_name == "precision":
            return value in (self.precisions or (self.space.precision,))
        return True

    @property
    def valid(self) -> int:
        return self.evaluated - sum(self.rejected.values()) - self.unscreened

    @property
    def best(self) -> Ranked | None:
        return self.top[0] if self.top else None

    def none_reason(self) -> str:
        """Why no plan was ranked, in one phrase (scale's note; search prints it at length, render/ranking.py
        print_misses): the closest miss's memory, or the one rule every candidate broke."""
        if self.misses:
            need = min(m.bytes for m in self.misses)
            return f"nothing fits in {fmt_bytes(self.hardware.gpu.hbm_bytes)} per GPU (closest: {fmt_bytes(need)})"
        if risky := self.pruned.get(PRUNED_RISK, 0):
            return (
                f"{risky:,} plans fit by the prediction, none within the 80% interval of memory that --risk ranks "
                "by: drop --risk, or give more GPUs"
            )
        reasons = [(r, n) for r, n in self.rejected.most_common() if n and r != NOT_FIT]
        if len(reasons) == 1 and self.pruned.total() == 0:
            example = self.examples.get(reasons[0][0])
            return f"no plan is valid: {reasons[0][0]}" + (f" ({example})" if example else "")
        if not reasons:
            return "no plan is valid: every candidate broke a rule before its memory was counted"
        if self.broke_the_batch:  # the rule the candidates that passed the model's shape rules broke: what binds,
            # however many more broke a shape rule (62,208 GPUs: 'most often: tp does not divide heads', audit)
            n, example = self.rejected[BATCH_INDIVISIBLE], self.examples.get(BATCH_INDIVISIBLE)
            return (
                f"no plan is valid: the global batch binds ({n:,} of the {self.evaluated:,} candidates pass the "
                f"model's shape rules and break it: {BATCH_INDIVISIBLE}" + (f"; e.g. {example})" if example else ")")
            )
        (rule, n), example = reasons[0], self.examples.get(reasons[0][0])
        return (
            f"no plan is valid, most often: {rule} ({n:,} of the {self.evaluated:,} candidates, each of which broke a "
            "rule before its memory was counted" + (f"; e.g. {example})" if example else ")")
        )

    @property
    def ruled_out(self) -> bool:
        """No candidate passed the rules: nothing ranked, no closest miss, none held back by --risk (an impossible
        request: search and scale refuse it)."""
        return not self.top and not self.misses and not self.pruned.get(PRUNED_RISK)

    @property
    def broke_the_batch(self) -> bool:
        """No plan is valid and some candidates broke the global batch's divisibility (a batch with the count's
        factors, which --global-batch auto tries, may make them valid: 62,208 GB200s = 2^8 x 243 run no dp that
        divides 2,048 sequences and takes the 243, which tp, dividing the heads, cannot)."""
        return not self.top and not self.misses and self.rejected.get(BATCH_INDIVISIBLE, 0) > 0


def merge_results(results: list[SearchResult], *, top: int, seconds: float) -> SearchResult:
    """Several engines' searches as one: the top plans of all, by the objective; counts summed."""
    first = results[0]
    ranked = sorted((r for res in results for r in res.top), key=lambda r: rank_key(first.objective, r))
    best_engine = ranked[0].estimate.engine if ranked else first.engine
    out = SearchResult(first.model, first.hardware, best_engine, first.space, first.objective)
    for res in results:
        out.evaluated += res.evaluated
        out.rejected.update(res.rejected)
        out.pruned.update(res.pruned)
        out.timed += res.timed
        out.unscreened += res.unscreened
        out.all_timed += res.all_timed
        out.rejections += res.rejections
        out.structures += res.structures
        for reason, detail in res.examples.items():
            out.examples.setdefault(reason, detail)
        if not ranked:
            out.misses += res.misses
    out.top = ranked[:top]
    out.misses = sorted(out.misses, key=lambda m: m.over_bytes)[:3]
    out.engines = [res.engine for res in results]
    out.defaulted = first.defaulted
    out.seconds = seconds
    return out


def rank_key(objective: str, r: Ranked) -> tuple[float, ...]:
    """Best first: the most tokens/s (or what the goodput keeps of them, then the most tokens/s: equal goodput,
    e.g. none at all, ranks the faster plan first), then the least memory; or the least memory, then the most
    tokens/s."""
    if objective == "memory":
        return (r.estimate.memory.total_bytes, -r.time.tokens_per_s)
    if objective == "risk":  # the low end of the 80% interval: a plan sure to be fast before one that may be faster
        return (-(r.estimate.uncertainty.tokens_per_s_interval or (r.time.tokens_per_s,))[0], -r.time.tokens_per_s)
    return (-r.score_tokens_per_s, -r.time.tokens_per_s, r.estimate.memory.total_bytes)


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points (memory, throughput) no other point beats on both (less memory, more
    throughput), sorted by memory."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1]))
    front, best = [], -math.inf
    for i in order:
        if points[i][1] > best:
            front.append(i)
            best = points[i][1]
    return front
