"""Search: every plan for N GPUs, ranked; why the rest were rejected (STYLE.md principles 9 and 10).

A pipeline of pure stages, each testable alone:

1. **candidates** — the structural grid dp × tp × pp × vpp/schedule × cp × ep × sp × micro-batch ×
   ZeRO × recompute, from the search space (fixed degrees, limits, comma lists).
2. **checks** — ``check_plan`` once per (structure, micro-batch): the rules do not depend on ZeRO or
   recompute, so every ZeRO × recompute variant inherits the verdict; a rejected plan is counted
   once, under its first reason.
3. **memory screen** — ``peak_memory_bytes``: the same arithmetic as ``memory.memory_report`` (a test
   holds them equal) but with the pieces cached per structure and only the pipeline ranks that can be
   the peak evaluated (rank 0, the last rank, and the first middle rank of each distinct shape: memory
   is monotone in parameters and layers held, and micro-batches in flight never grow with the rank).
   ``memory_report`` itself walks every stage (~35 µs each), far too slow for 10⁴ candidates.
4. **estimates** — ``step_time`` (~100 µs) only where the plan can still win:
   - of the recompute levels of one plan that fit, only the cheapest is timed (recompute only adds
     time in the cost model); the others are valid but *dominated*;
   - for the throughput/goodput objectives, a branch and bound: a lower bound of the step time
     (rank 0's compute slot times m + (p − 1)/v, plus the fixed overhead — the schedule's
     step time can only be larger) is computed once per compute shape, the candidates are timed in
     order of that bound, and timing stops when the bound cannot beat the K-th best step. Goodput is
     throughput times a factor that depends on the GPU count only, so the same order holds.
5. **rank** the timed plans and build full ``Estimate`` objects for the top K.

Counts are honest: evaluated = valid + Σ rejected, and valid = timed + Σ pruned.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from planner.cost.compute import stage_compute
from planner.errors import PlannerError
from planner.cost.estimate import Estimate, estimate
from planner.plan import Plan, check_plan
from planner.cost.schedule import StepTime, step_time
from planner.specs import HardwareProfile, ModelSpec, Training

from planner.search.screen import MemoryScreen
from planner.search.space import (NOT_FIT, OBJECTIVES, PRUNED_BOUND, PRUNED_RECOMPUTE, RECOMPUTES, Space, Structure,
                           default_global_batch, micro_batches, structures)

__all__ = ["MemoryScreen", "NOT_FIT", "OBJECTIVES", "Space", "default_global_batch", "micro_batches", "search",
           "structures", "pareto_front", "explain", "plan_row", "time_terms"]


# ---- results ---------------------------------------------------------------------------------------
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


@dataclass
class Miss:
    """A plan that passes the checks but not memory, and what was tried to make it fit."""

    plan: Plan
    bytes: float
    capacity: float
    variants: list[tuple[str, Plan, float, bool]]  # (what changed, plan, bytes, fits)
    gpus_needed: int | None = None  # smallest GPU count (x2 steps, more dp) at which it fits

    @property
    def over_bytes(self) -> float:
        return self.bytes - self.capacity


@dataclass
class SearchResult:
    model: ModelSpec
    hardware: HardwareProfile
    space: Space
    objective: str
    evaluated: int = 0
    rejected: Counter = field(default_factory=Counter)
    pruned: Counter = field(default_factory=Counter)
    timed: int = 0
    seconds: float = 0.0
    top: list[Ranked] = field(default_factory=list)
    misses: list[Miss] = field(default_factory=list)
    all_timed: list[tuple[Plan, float, float]] = field(default_factory=list)  # (plan, bytes, tokens/s), exhaustive only
    examples: dict[str, str] = field(default_factory=dict)  # reason -> one detail line
    rejections: list[tuple[Plan, str, str, int]] = field(default_factory=list)  # (plan, reason, detail, plans)
    structures: list[Structure] = field(default_factory=list)

    def considered(self, field_name: str, value: Any) -> bool:
        """Whether any candidate had field == value (else it was outside the search space)."""
        if field_name in ("dp", "tp", "pp", "cp", "ep", "vpp", "sp", "schedule"):
            return any(getattr(st, field_name) == value for st in self.structures)
        if field_name == "zero":
            return value in self.space.zero
        if field_name == "recompute":
            return value in self.space.recompute
        return True

    @property
    def valid(self) -> int:
        return self.evaluated - sum(self.rejected.values())

    @property
    def best(self) -> Ranked | None:
        return self.top[0] if self.top else None


def _key(p: Plan) -> tuple:
    return (p.tp, p.pp, p.vpp, p.cp, p.ep, p.sp, p.micro_batch, p.recompute, p.schedule, p.precision)


def search(
    model: ModelSpec, hw: HardwareProfile, space: Space, training: Training = Training(), *,
    objective: str = "throughput", top: int = 10, exhaustive: bool = False,
    mtbf_hours: float | None = None, mtbf_per: str = "gpu", checkpoint_bandwidth: float | None = None,
    progress: Callable[[int, int], None] | None = None, keep_rejections: bool = False,
) -> SearchResult:
    """candidates → checks → memory screen → (pruned) step-time estimates → ranking."""
    if objective not in OBJECTIVES:
        raise PlannerError(f"--objective {objective!r} is not valid; choose one of {', '.join(OBJECTIVES)}")
    if top < 1:
        raise PlannerError(f"--top must be at least 1, got {top}")
    if mtbf_per not in ("gpu", "node"):
        raise PlannerError(f"--mtbf-per {mtbf_per!r} is not valid; choose gpu or node")
    space.validate()
    t0 = time.perf_counter()
    res = SearchResult(model, hw, space, objective)
    screen = MemoryScreen(model, hw, training)
    cap = screen.capacity
    structs = res.structures = structures(model, hw, space)
    if not structs:
        fixed = [f"{d}={getattr(space, d)}" for d in ("tp", "pp", "cp", "dp") if getattr(space, d) is not None]
        raise PlannerError(
            f"no candidate plans: {' x '.join(fixed) or 'the degrees within the limits'} cannot make up --gpus "
            f"{space.gpus} (tp x pp x cp x dp must equal it; choose degrees whose product divides "
            f"{space.gpus})")
    zeros, recs = space.zero, tuple(r for r in RECOMPUTES if r in space.recompute)
    per_mb = len(zeros) * len(recs)
    # groups: plans that differ only in recompute -> the cheapest that fits is timed
    fitting: list[tuple[Plan, float]] = []
    tick = itertools.count()
    near: list[tuple[float, int, Plan]] = []  # smallest overshoots, for "closest misses"
    for i, st in enumerate(structs):
        if progress is not None and i % 64 == 0:
            progress(i, len(structs))
        for mb in micro_batches(space, st.dp):
            base = Plan(dp=st.dp, tp=st.tp, pp=st.pp, vpp=st.vpp, cp=st.cp, ep=st.ep, sp=st.sp, zero=zeros[0],
                        recompute=recs[0], micro_batch=mb, global_batch=space.global_batch, seq_len=space.seq_len,
                        precision=space.precision, schedule=st.schedule)
            res.evaluated += per_mb
            problems = check_plan(model, base, space.gpus)
            if problems:
                first = problems[0]
                res.rejected[first.reason] += per_mb
                res.examples.setdefault(first.reason, first.detail)
                if keep_rejections:
                    for pr in problems:
                        res.rejections.append((base, pr.reason, pr.detail, per_mb))
                continue
            for z in zeros:
                found = False
                for rc in recs:
                    p = base.model_copy(update={"zero": z, "recompute": rc})
                    nbytes, _ = screen.peak(p)
                    if nbytes <= cap:
                        if found and not exhaustive:
                            res.pruned[PRUNED_RECOMPUTE] += 1
                        else:
                            fitting.append((p, nbytes))
                            found = True
                    else:
                        res.rejected[NOT_FIT] += 1
                        if keep_rejections:
                            res.rejections.append((p, NOT_FIT, f"{nbytes / 2**30:.1f} GiB > {cap / 2**30:.1f} GiB", 1))
                        if len(near) < 64:
                            heapq.heappush(near, (-nbytes, next(tick), p))
                        elif -near[0][0] > nbytes:
                            heapq.heapreplace(near, (-nbytes, next(tick), p))
    res.examples.setdefault(NOT_FIT, f"the plan needs more than the {cap / 2**30:.1f} GiB of one {hw.name}")

    # ---- estimates: time the survivors that can still make the top K ----
    overhead = hw.efficiency.step_overhead_s
    chosen: list[tuple[float, int, Plan, StepTime]] = []  # heap of (-score, i, plan, time)
    if objective == "memory" and not exhaustive:
        order = sorted(fitting, key=lambda x: x[1])
        for i, (p, nbytes) in enumerate(order[:top]):
            chosen.append((nbytes, i, p, step_time(model, hw, p, training)))
        res.timed = len(chosen)
        res.pruned[PRUNED_BOUND.replace("compute lower bound", "more memory")] += max(0, len(order) - top)
    else:
        bound_cache: dict[tuple, float] = {}

        def lower_bound(p: Plan) -> float:
            key = _key(p)
            c0 = bound_cache.get(key)
            if c0 is None:
                c0 = bound_cache[key] = stage_compute(model, hw, p, training, 0).total
            v = p.vpp if p.schedule == "interleaved" else 1
            return (p.num_microbatches + (p.pp - 1) / v) * c0 + overhead

        ordered = sorted(((lower_bound(p), i, p, nbytes) for i, (p, nbytes) in enumerate(fitting)),
                         key=lambda x: x[0])
        heap: list[tuple[float, int, Plan, StepTime]] = []  # max-heap on step_s via negation
        for n, (lb, i, p, nbytes) in enumerate(ordered):
            if not exhaustive and len(heap) >= top and lb >= -heap[0][0]:
                res.pruned[PRUNED_BOUND] += len(ordered) - n
                break
            t = step_time(model, hw, p, training)
            res.timed += 1
            if exhaustive:
                res.all_timed.append((p, nbytes, t.tokens_per_s))
            if objective == "memory":
                heap.append((-nbytes, i, p, t))
                continue
            if len(heap) < top:
                heapq.heappush(heap, (-t.step_s, i, p, t))
            elif t.step_s < -heap[0][0]:
                heapq.heapreplace(heap, (-t.step_s, i, p, t))
        if objective == "memory":
            heap = sorted(heap, key=lambda x: -x[0])[:top]
            chosen = [(-s, i, p, t) for s, i, p, t in heap]
        else:
            chosen = heap
    ranked = []
    for _s, _i, p, _t in chosen:
        est = estimate(model, hw, p, training, mtbf_hours=mtbf_hours, mtbf_per=mtbf_per,
                       checkpoint_bandwidth_bytes_per_s=checkpoint_bandwidth)
        ranked.append(Ranked(est))
    if objective == "memory":
        ranked.sort(key=lambda r: (r.estimate.memory.total_bytes, -r.time.tokens_per_s))
    else:
        ranked.sort(key=lambda r: (-r.score_tokens_per_s, r.estimate.memory.total_bytes))
    res.top = ranked
    if not fitting:
        res.misses = closest_misses(model, hw, space, screen, sorted(((-nb, p) for nb, _, p in near),
                                                                      key=lambda x: x[0]))
    res.seconds = time.perf_counter() - t0
    return res


# ---- nothing fits: the closest misses and what would make them fit ------------------------------------
def closest_misses(model: ModelSpec, hw: HardwareProfile, space: Space, screen: MemoryScreen,
                   near: list[tuple[float, Plan]], n: int = 3) -> list[Miss]:
    """The `n` plans with the smallest overshoot (distinct degrees), each re-evaluated with more GPUs,
    a higher ZeRO stage, full recompute and a smaller micro-batch."""
    out: list[Miss] = []
    seen: set[tuple] = set()
    cap = screen.capacity
    for nbytes, p in near:
        shape = (p.tp, p.pp, p.cp, p.vpp, p.ep)
        if shape in seen:
            continue
        seen.add(shape)
        variants: list[tuple[str, Plan, float, bool]] = []

        def try_(what: str, q: Plan) -> None:
            if check_plan(model, q):
                return
            b, _ = screen.peak(q)
            variants.append((what, q, b, b <= cap))

        if p.zero < 3 and p.dp * p.cp > 1:  # ZeRO shards over dp·cp: nothing to gain at 1
            for z in range(p.zero + 1, 4):
                try_(f"zero {z}", p.model_copy(update={"zero": z}))
        if p.recompute != "full":
            try_("recompute full", p.model_copy(update={"recompute": "full"}))
        if p.micro_batch > 1:
            try_(f"micro-batch {p.micro_batch // 2}", p.model_copy(update={"micro_batch": p.micro_batch // 2}))
            if p.micro_batch > 2:
                try_("micro-batch 1", p.model_copy(update={"micro_batch": 1}))
        saver = p.model_copy(update={"zero": 3, "recompute": "full", "micro_batch": 1})
        if saver != p:
            try_("zero 3 + recompute full + micro-batch 1", saver)
        gpus_needed = None
        base = saver if (variants and variants[-1][0].startswith("zero 3 +")) else p
        for k in range(1, 15):
            f = 2 ** k
            dp = base.dp * f
            gb = max(base.global_batch, dp * base.micro_batch)
            gb = -(-gb // (dp * base.micro_batch)) * dp * base.micro_batch
            q = base.model_copy(update={"dp": dp, "global_batch": gb})
            if check_plan(model, q):
                continue
            b, _ = screen.peak(q)
            if b <= cap:
                gpus_needed = q.gpus
                desc = f"{q.gpus} GPUs (dp {dp}" + (f", global batch {gb}" if gb != base.global_batch else "") + ")"
                if base is saver and saver != p:
                    desc += " with zero 3 + recompute full + micro-batch 1"
                variants.append((desc, q, b, True))
                break
        out.append(Miss(p, nbytes, cap, variants, gpus_needed))
        if len(out) >= n:
            break
    return out


# ---- explain: why were plans with tp=16 rejected? ------------------------------------------------------
def parse_explain(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise PlannerError(f"--explain {text!r}: expected FIELD=VALUE, e.g. tp=16 or zero=3")
    k, v = (s.strip() for s in text.split("=", 1))
    k = k.replace("-", "_")
    if k not in Plan.model_fields:
        raise PlannerError(f"--explain {text!r}: unknown field {k!r}; valid: {', '.join(Plan.model_fields)}")
    val: Any = v
    if v.lower() in ("true", "false"):
        val = v.lower() == "true"
    elif v.isdigit():
        val = int(v)
    return k, val


def explain(result: SearchResult, field_name: str, value: Any) -> tuple[int, Counter, dict[str, str], int]:
    """(rejected plans with field == value, count per reason, an example detail per reason, valid plans
    with it among those timed). Needs a search run with keep_rejections=True."""
    counts: Counter = Counter()
    details: dict[str, str] = {}
    total = 0
    for p, reason, detail, n in result.rejections:
        if getattr(p, field_name) == value:
            counts[reason] += n
            details.setdefault(reason, detail)
    total = sum(counts.values())
    valid_top = sum(1 for r in result.top if getattr(r.plan, field_name) == value)
    return total, counts, details, valid_top


def plan_row(r: Ranked) -> dict[str, Any]:
    """The JSON document of one ranked plan (DESIGN.md, `planner search --json`)."""
    from planner.render.tables import memory_json

    e, t = r.estimate, r.time
    doc = {
        "plan": e.plan.model_dump(),
        "memory": memory_json(e.model, e.hardware, e.plan, e.memory),
        "time": t.as_dict(),
        "tokens_per_s": t.tokens_per_s,
        "tokens_per_s_per_gpu": t.tokens_per_s_per_gpu,
        "mfu": t.mfu,
        "hfu": t.hfu,
        "tflops_per_gpu": t.tflops_per_gpu,
    }
    if e.checkpoint is not None:
        doc["goodput"] = e.checkpoint.goodput
        doc["goodput_tokens_per_s"] = e.goodput_tokens_per_s
    return doc


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


def time_terms(t: StepTime, n: int = 3) -> list[tuple[str, float]]:
    """The largest terms of the step: compute, recompute, bubble, exposed tp/cp/ep/pp/dp, optimizer."""
    terms = {"compute": t.compute_s, "recompute": t.recompute_s, "bubble": t.bubble_s, "optimizer": t.optimizer_s}
    terms.update({f"{d}": v for d, v in t.exposed_comm_s.items()})
    return sorted(((k, v) for k, v in terms.items() if v > 0.005 * t.step_s), key=lambda kv: -kv[1])[:n]
