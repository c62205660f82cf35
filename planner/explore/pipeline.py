"""Search: every plan for N GPUs, ranked; why the rest were rejected (STYLE.md principles 9 and 10).

A pipeline of stages, each testable alone:

1. **candidates** (space.py) — the structural grid dp × tp × pp × vpp/schedule × cp × ep × sp ×
   micro-batch × ZeRO × recompute, from the search space (fixed degrees, limits, comma lists).
2. **checks** — the model's and the engine's rules (``plan_problems``): those on the structure once per
   structure, those on the micro-batch once per (structure, micro-batch), the ZeRO rules once per degrees
   and stage; every variant inherits the verdict, and a rejected plan is counted once, under its first
   reason (the structure's rules come first).
3. **memory screen** — the peak memory per GPU, asked of the cost model's front door (cost/coster.py), which
   computes it by cost.memory's own formula from pieces cached by what they depend on, on the pipeline ranks
   that can hold the peak only.
4. **estimates** — the step time only where the plan can still win:
   - of the recompute levels of one plan that fit, only the cheapest is timed (recompute only adds
     time in the cost model); the others are valid but *dominated*;
   - for the throughput/goodput objectives, a branch and bound on the front door's step-time lower bounds
     (cost/bounds.py): the candidates are timed in order of the cheap bound, and timing stops when the bound
     cannot beat the K-th best step. Goodput is throughput times a factor that depends on the GPU count only,
     so the same order holds.
5. **rank** the timed plans; the top K get a full ``Estimate`` built on the step time already computed.

Counts are honest: evaluated = valid + Σ rejected, and valid = timed + Σ pruned. A search for its top plans only
(counts=False: the advice's probes) screens and times best bound first and stops early: what it never screened is
counted `unscreened`, neither valid nor rejected.
"""

from __future__ import annotations

import gc
import heapq
import itertools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, cast

from planner.cost.coster import Coster, shared_coster
from planner.cost.schedule import StepTime
from planner.engine import Engine
from planner.errors import PlannerError
from planner.explore.fanout import fan_out, workers
from planner.explore.results import Ranked, SearchResult, TimedPlan, merge_results, rank_key
from planner.explore.screening import Fitting, Screening
from planner.explore.space import (
    NO_FAILURES,
    OBJECTIVES,
    PRUNED_BOUND,
    PRUNED_RISK,
    Checkpointing,
    Space,
    Structure,
    structures,
)
from planner.hardware import HardwareProfile
from planner.plan import Plan
from planner.specs import ModelSpec


def search(
    model: ModelSpec,
    hw: HardwareProfile,
    space: Space,
    engine: Engine,
    *,
    objective: str = "throughput",
    top: int = 10,
    exhaustive: bool = False,
    checkpointing: Checkpointing = NO_FAILURES,
    progress: Callable[[int, int], None] | None = None,
    keep_rejections: bool = False,
    counts: bool = True,
) -> SearchResult:
    """candidates → checks → memory screen → (pruned) step-time estimates → ranking. With counts=False only the
    top plans are wanted (the advice's probes read the best plan's rate): by throughput or goodput, the memory
    screen and the estimates run best bound first and stop early (_time_best_first), the counts left partial."""
    _check_arguments(objective, top)
    if space.sp is None and engine.rules.sequence_parallel == "never":  # sp where the engine runs it (tp > 1)
        space = replace(space, sp=False)
    t0 = time.perf_counter()
    res = SearchResult(model, hw, engine, space, objective, engines=[engine])
    coster = shared_coster(model, hw, engine)
    res.structures = structures(model, hw, space)
    if not res.structures:
        fixed = [f"{d}={getattr(space, d)}" for d in ("tp", "pp", "cp", "dp") if getattr(space, d) is not None]
        raise PlannerError(
            f"no candidate plans: {' x '.join(fixed) or 'the degrees within the limits'} cannot make up --gpus "
            f"{space.gpus} (tp x pp x cp x dp must equal it; choose degrees whose product divides "
            f"{space.gpus})"
        )
    best_first = not counts and not (exhaustive or keep_rejections) and objective != "memory"
    screening = Screening(res, coster, exhaustive=exhaustive, keep_rejections=keep_rejections, defer=best_first)
    with _cyclic_gc_paused():
        screening.run(progress)
        chosen = (
            _time_best_first(res, coster, screening, top=top)
            if best_first
            else _time(res, coster, screening.fitting, top=top, exhaustive=exhaustive)
        )
    res.top = _rank(res, coster, chosen, checkpointing)
    if not screening.fitting:
        from planner.explore.misses import closest_misses  # only when nothing fits

        res.misses = closest_misses(model, coster, screening.overshoots())
    res.seconds = time.perf_counter() - t0
    return res


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Stages 2-4 allocate some 10^5 small objects that hold no reference cycles (plans, keys, tuples); Python's
    cyclic collector would walk them over and over, its full pass tens of milliseconds, and free nothing. It is
    paused for them, as timeit pauses it, and restored as it was (reference counting still frees everything)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _check_arguments(objective: str, top: int) -> None:
    """The search's own arguments (the space and the checkpointing check themselves when they are made)."""
    if objective not in OBJECTIVES:
        raise PlannerError(f"--objective {objective!r} is not valid; choose one of {', '.join(OBJECTIVES)}")
    if top < 1:
        raise PlannerError(f"--top must be at least 1, got {top}")


def _time(
    res: SearchResult, coster: Coster, fitting: list[Fitting], *, top: int, exhaustive: bool
) -> list[tuple[Plan, StepTime]]:
    """Stage 4: step times of the plans that can still make the top K (all of them when exhaustive), in the
    order of the front door's cheap lower bound; a plan whose tighter bound cannot beat the K-th best is pruned
    without being timed."""
    if res.objective == "memory" and not exhaustive:
        order = sorted(fitting, key=lambda f: f.nbytes)[:top]
        res.timed = len(order)
        res.pruned[PRUNED_BOUND.replace("compute lower bound", "more memory")] += max(0, len(fitting) - top)
        return [(f.plan(), coster.step(f.plan())) for f in order]
    ordered = sorted(((coster.cheap_bound_s(f.base, f.recompute), i, f) for i, f in enumerate(fitting)), key=_first)
    timing = _Timing(res, coster, top=top, exhaustive=exhaustive)
    for n, (lb, i, f) in enumerate(ordered):
        if timing.beaten(lb):
            res.pruned[PRUNED_BOUND] += len(ordered) - n
            break
        timing.offer(f, i)
    return timing.chosen()


def _time_best_first(
    res: SearchResult, coster: Coster, screening: Screening, *, top: int
) -> list[tuple[Plan, StepTime]]:
    """Stages 3-4 in one pass, for a search that wants its top K only (counts=False): the candidates the rules
    passed, in the order of the cheap bound at their least recompute (more recompute never lowers a bound:
    tests/test_invariants.py; a ZeRO stage changes none), each screened for memory and its fitting variants timed,
    until the bound cannot beat the K-th best; the rest are counted unscreened. A candidate whose tight bound cannot
    beat it is passed over unscreened too. The K best are those stages 3 and 4 in turn choose (every plan not
    screened has a bound at or above the K-th best step)."""
    recs, per_candidate = screening.recs, len(screening.zeros) * len(screening.recs)
    ordered = sorted(((coster.cheap_bound_s(p, p.recompute), i, st, p) for i, (st, p) in enumerate(screening.deferred)),
                     key=_first)  # fmt: skip
    timing, tick = _Timing(res, coster, top=top, exhaustive=False), itertools.count()
    for n, (lb, _i, st, p) in enumerate(ordered):
        if timing.beaten(lb):
            res.unscreened += (len(ordered) - n) * per_candidate
            break
        assert p.recompute == recs[0], "the deferred plans are built at the least recompute searched"
        if timing.full() and timing.beaten(coster.tight_bound_s(p)):  # no bound to compute before a K-th best
            res.unscreened += per_candidate
            continue
        start = len(screening.fitting)
        screening.candidate(st, p)
        fits = sorted(((coster.cheap_bound_s(f.base, f.recompute), f) for f in screening.fitting[start:]), key=_first)
        for bound_s, f in fits:
            if timing.beaten(bound_s):
                res.pruned[PRUNED_BOUND] += 1
            else:
                timing.offer(f, next(tick))
    return timing.chosen()


class _Timing:
    """Stage 4's state: the K best step times so far (by throughput; by memory for that objective) and the plans
    timed, counted in the result."""

    def __init__(self, res: SearchResult, coster: Coster, *, top: int, exhaustive: bool) -> None:
        self.res, self.coster, self.top, self.exhaustive = res, coster, top, exhaustive
        self.heap: list[tuple[float, int, Plan, StepTime]] = []  # max-heap on step_s (or bytes) via negation

    def full(self) -> bool:
        """Whether K plans are kept: a bound can rule a plan out only then."""
        return len(self.heap) >= self.top

    def beaten(self, bound_s: float) -> bool:
        """Whether a plan with this step-time lower bound cannot beat the K-th best."""
        return not self.exhaustive and len(self.heap) >= self.top and bound_s >= -self.heap[0][0]

    def offer(self, f: Fitting, i: int) -> None:
        """Time one fitting plan (unless --risk or its tighter bound prunes it) and keep it if it is among the K
        (`i` breaks ties of step time: the smaller is dropped first)."""
        res, coster, heap = self.res, self.coster, self.heap
        p, nbytes = f.plan(), f.nbytes
        if res.objective == "risk" and coster.memory_high_bytes(p, nbytes) > coster.capacity_bytes:
            res.pruned[PRUNED_RISK] += 1  # may not fit: --risk ranks only plans sure to
            return
        if self.full() and self.beaten(coster.tight_bound_s(p)):
            res.pruned[PRUNED_BOUND] += 1
            return
        t = coster.step(p)
        res.timed += 1
        if self.exhaustive:
            res.all_timed.append(TimedPlan(p, nbytes, t.tokens_per_s))
        if res.objective == "memory":
            heap.append((-nbytes, i, p, t))
        elif len(heap) < self.top:
            heapq.heappush(heap, (-t.step_s, i, p, t))
        elif t.step_s < -heap[0][0]:
            heapq.heapreplace(heap, (-t.step_s, i, p, t))

    def chosen(self) -> list[tuple[Plan, StepTime]]:
        heap = sorted(self.heap, key=lambda x: -x[0])[: self.top] if self.res.objective == "memory" else self.heap
        return [(p, t) for _s, _i, p, t in heap]


def _first(item: tuple) -> float:
    return item[0]


def _rank(res: SearchResult, coster: Coster, chosen: list[tuple[Plan, StepTime]], ck: Checkpointing) -> list[Ranked]:
    """Stage 5: the full estimate of each chosen plan, on the step time already computed, ranked."""
    ranked = [
        Ranked(
            coster.estimate(
                p,
                mtbf_hours=ck.mtbf_hours,
                mtbf_per=ck.mtbf_per,
                checkpoint_bandwidth_bytes_per_s=ck.bandwidth_bytes_per_s,
                restart_s=ck.restart_s,
                time=t,
            )
        )
        for p, t in chosen
    ]
    ranked.sort(key=lambda r: rank_key(res.objective, r))
    return ranked


def search_engines(
    model: ModelSpec, hw: HardwareProfile, space: Space, engines: list[Engine], jobs: int | None = None, **kwargs: Any
) -> SearchResult:
    """The search over several engines: each engine's plans as that engine runs them, ranked together ("which
    stack and which plan"). Counts add up over the engines (a candidate is evaluated once per engine); a
    rejection reason that names no engine counts every engine's candidates. The engines are searched side by side
    on up to `jobs` CPUs (explore/fanout.py; default: those this process may use)."""
    if len(engines) == 1:
        return search(model, hw, space, engines[0], **kwargs)
    t0 = time.perf_counter()
    processes, progress = workers(len(engines), jobs), None
    if processes > 1:  # side by side, the bar counts the engines searched, not one engine's structures
        progress, kwargs["progress"] = kwargs.get("progress"), None
    order = _heaviest_first(engines, structures(model, hw, space), space) if processes > 1 else range(len(engines))
    done = fan_out(lambda i: search(model, hw, space, engines[i], **kwargs), list(order), processes, progress)
    outcomes = [r for _i, r in sorted(zip(order, done), key=_first)]  # back in the engines' order
    results = [r for r in outcomes if isinstance(r, SearchResult)]
    if not results:  # every engine refused the space: the last one's reason, as a search in turn gives
        raise cast(PlannerError, outcomes[-1])
    return merge_results(results, top=kwargs.get("top", 10), seconds=time.perf_counter() - t0)


def _heaviest_first(engines: list[Engine], candidates: list[Structure], space: Space) -> list[int]:
    """The engines' indices by the memory screens each is expected to run, most first, so that the longest search
    starts first and the workers finish together: the structures whose degrees the engine offers, each with the
    ZeRO stages it runs at that pipeline degree. Only the order the work is done in depends on it."""

    def screens(engine: Engine) -> int:
        r = engine.rules
        return sum(
            len(set(r.stages(st.pp)) & set(space.zero))
            for st in candidates
            if (st.tp == 1 or r.tensor_parallel)
            and (st.pp == 1 or r.pipeline_parallel)
            and (st.cp == 1 or r.context_parallel)
            and (st.ep == 1 or r.expert_parallel)
        )

    work = [screens(e) for e in engines]
    return sorted(range(len(engines)), key=lambda i: -work[i])
