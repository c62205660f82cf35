"""Search: every plan for N GPUs, ranked; why the rest were rejected (STYLE.md principles 9 and 10).

A pipeline of stages, each testable alone:

1. **candidates** (space.py) — the structural grid dp × tp × pp × vpp/schedule × cp × ep × sp ×
   micro-batch × ZeRO × recompute, from the search space (fixed degrees, limits, comma lists).
2. **checks** — the model's divisibility rules and the engine's rules (``plan_problems``) once per
   (structure, micro-batch); the engine's ZeRO rules once per stage; every recompute variant inherits
   the verdict, and a rejected plan is counted once, under its first reason.
3. **memory screen** (screen.py) — the peak memory per GPU by cost.memory's own formula, with its pieces
   cached per structure and only the pipeline ranks that can be the peak evaluated.
4. **estimates** — ``step_time`` only where the plan can still win:
   - of the recompute levels of one plan that fit, only the cheapest is timed (recompute only adds
     time in the cost model); the others are valid but *dominated*;
   - for the throughput/goodput objectives, a branch and bound: a lower bound of the step time
     (rank 0's compute slot times m + (p − 1)/v, plus the fixed overhead — the schedule's step time can
     only be larger) is computed once per compute shape, the candidates are timed in order of that
     bound, and timing stops when the bound cannot beat the K-th best step. Goodput is throughput times a
     factor that depends on the GPU count only, so the same order holds.
5. **rank** the timed plans; the top K get a full ``Estimate`` built on the step time already computed.

Counts are honest: evaluated = valid + Σ rejected, and valid = timed + Σ pruned.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from planner.cost.compute import layer_time, stage_shapes
from planner.cost.estimate import estimate
from planner.cost.schedule import StepTime, slot_lower_bound_s, step_time
from planner.engine import Engine, structure_problems, zero_problems
from planner.engine.rules import hardware_problems
from planner.errors import PlannerError
from planner.hardware import HardwareProfile
from planner.plan import Plan, check_plan
from planner.search.misses import closest_misses
from planner.search.results import Ranked, SearchResult, merge_results, rank_key
from planner.search.screen import MemoryScreen
from planner.search.space import (
    NOT_FIT,
    OBJECTIVES,
    PRUNED_BOUND,
    PRUNED_RECOMPUTE,
    RECOMPUTES,
    Space,
    micro_batches,
    structures,
)
from planner.specs import ModelSpec

NEAR_MISSES = 64  # overshooting plans kept for "closest misses"


@dataclass(frozen=True)
class Checkpointing:
    """What the goodput of the ranked plans is computed with (estimate's mtbf and checkpoint options)."""

    mtbf_hours: float | None = None
    mtbf_per: str = "gpu"
    bandwidth_bytes_per_s: float | None = None


def search(
    model: ModelSpec,
    hw: HardwareProfile,
    space: Space,
    engine: Engine,
    *,
    objective: str = "throughput",
    top: int = 10,
    exhaustive: bool = False,
    checkpointing: Checkpointing = Checkpointing(),
    progress: Callable[[int, int], None] | None = None,
    keep_rejections: bool = False,
) -> SearchResult:
    """candidates → checks → memory screen → (pruned) step-time estimates → ranking."""
    _check_arguments(space, objective, top, checkpointing)
    t0 = time.perf_counter()
    res = SearchResult(model, hw, engine, space, objective, engines=[engine])
    screen = MemoryScreen(model, hw, engine)
    res.structures = structures(model, hw, space)
    if not res.structures:
        fixed = [f"{d}={getattr(space, d)}" for d in ("tp", "pp", "cp", "dp") if getattr(space, d) is not None]
        raise PlannerError(
            f"no candidate plans: {' x '.join(fixed) or 'the degrees within the limits'} cannot make up --gpus "
            f"{space.gpus} (tp x pp x cp x dp must equal it; choose degrees whose product divides "
            f"{space.gpus})"
        )
    fitting, near = _check_and_screen(
        res, screen, progress=progress, exhaustive=exhaustive, keep_rejections=keep_rejections
    )
    chosen = _time(res, fitting, top=top, exhaustive=exhaustive)
    res.top = _rank(res, chosen, checkpointing)
    if not fitting:
        res.misses = closest_misses(model, screen, sorted(((-nb, p) for nb, _, p in near), key=lambda x: x[0]))
    res.seconds = time.perf_counter() - t0
    return res


def _check_arguments(space: Space, objective: str, top: int, checkpointing: Checkpointing) -> None:
    if objective not in OBJECTIVES:
        raise PlannerError(f"--objective {objective!r} is not valid; choose one of {', '.join(OBJECTIVES)}")
    if top < 1:
        raise PlannerError(f"--top must be at least 1, got {top}")
    if checkpointing.mtbf_per not in ("gpu", "node"):
        raise PlannerError(f"--mtbf-per {checkpointing.mtbf_per!r} is not valid; choose gpu or node")
    space.validate()


class Fitting(NamedTuple):
    """A plan that fits, as its structure plan and the ZeRO stage and recompute level it runs with (the Plan
    itself is built only for the few that are timed)."""

    base: Plan
    zero: int
    recompute: str
    nbytes: float

    def plan(self) -> Plan:
        return self.base.model_copy(update={"zero": self.zero, "recompute": self.recompute})


def _check_and_screen(
    res: SearchResult,
    screen: MemoryScreen,
    *,
    progress: Callable[[int, int], None] | None,
    exhaustive: bool,
    keep_rejections: bool,
) -> tuple[list[Fitting], list[tuple[float, int, Plan]]]:
    """Stages 1-3: every candidate checked and screened. Returns the plans that fit with their peak bytes
    (only the cheapest recompute of each unless exhaustive) and the smallest overshoots."""
    model, space, engine = res.model, res.space, res.engine
    zeros, recs = space.zero, tuple(r for r in RECOMPUTES if r in space.recompute)
    per_mb = len(zeros) * len(recs)
    fitting: list[Fitting] = []
    tick = itertools.count()
    near: list[tuple[float, int, Plan]] = []
    zero_verdicts: dict[tuple, list] = {}  # the engine's ZeRO rules depend on the degrees only
    precision = hardware_problems(res.hardware, Plan(precision=space.precision))  # the same for every candidate

    def reject(plan: Plan, problems: list, plans: int) -> None:
        first = problems[0]
        res.rejected[first.reason] += plans
        res.examples.setdefault(first.reason, first.detail)
        if keep_rejections:
            res.rejections.extend((plan, pr.reason, pr.detail, plans) for pr in problems)

    for i, st in enumerate(res.structures):
        if progress is not None and i % 64 == 0:
            progress(i, len(res.structures))
        for mb in micro_batches(space, st.dp):
            base = Plan(
                dp=st.dp,
                tp=st.tp,
                pp=st.pp,
                vpp=st.vpp,
                cp=st.cp,
                ep=st.ep,
                sp=st.sp,
                zero=zeros[0],
                recompute=recs[0],
                micro_batch=mb,
                global_batch=space.global_batch,
                seq_len=space.seq_len,
                precision=space.precision,
                schedule=st.schedule,
            )
            res.evaluated += per_mb
            problems = check_plan(model, base, space.gpus) + precision + structure_problems(engine, model, base)
            if problems:
                reject(base, problems, per_mb)
                continue
            runnable = []
            for z in zeros:
                zkey = (st.dp, st.tp, st.pp, st.vpp, st.cp, st.ep, z)
                zp = zero_verdicts.get(zkey)
                if zp is None:
                    zp = zero_verdicts[zkey] = zero_problems(engine, base, zero=z)
                if zp:
                    reject(base.model_copy(update={"zero": z}), zp, len(recs))
                else:
                    runnable.append(z)
            every = exhaustive or keep_rejections
            peaks = screen.peaks(base, tuple(runnable), recs) if every else None
            for z in runnable:
                found = False
                verdicts = (
                    {rc: peaks[(z, rc)][0] for rc in recs} if peaks is not None else _lazy_peaks(screen, base, z, recs)
                )
                for rc in recs:
                    nbytes = verdicts[rc]
                    if nbytes <= screen.capacity:
                        if found and not exhaustive:
                            res.pruned[PRUNED_RECOMPUTE] += 1
                        else:
                            fitting.append(Fitting(base, z, rc, nbytes))
                            found = True
                        continue
                    res.rejected[NOT_FIT] += 1
                    if keep_rejections or len(near) < NEAR_MISSES or -near[0][0] > nbytes:
                        p = base.model_copy(update={"zero": z, "recompute": rc})
                        if keep_rejections:
                            res.rejections.append(
                                (p, NOT_FIT, f"{nbytes / 2**30:.1f} GiB > {screen.capacity / 2**30:.1f} GiB", 1)
                            )
                        if len(near) < NEAR_MISSES:
                            heapq.heappush(near, (-nbytes, next(tick), p))
                        else:
                            heapq.heapreplace(near, (-nbytes, next(tick), p))
    res.examples.setdefault(
        NOT_FIT, f"the plan needs more than the {screen.capacity / 2**30:.1f} GiB of one {res.hardware.name}"
    )
    return fitting, near


def _lazy_peaks(screen: MemoryScreen, base: Plan, zero: int, recs: tuple[str, ...]) -> dict[str, float]:
    """Peak bytes per recompute level (most memory first), computing only what decides the outcome: activation
    memory never grows with more recompute, so when the last level does not fit none does (its bytes stand for
    all, the smallest overshoot), and after the first level that fits the rest are only counted as slower."""
    last = screen.peak_bytes(base, zero, recs[-1])
    if last > screen.capacity or len(recs) == 1:
        return dict.fromkeys(recs, last)
    out: dict[str, float] = {}
    for rc in recs[:-1]:
        out[rc] = nbytes = screen.peak_bytes(base, zero, rc)
        if nbytes <= screen.capacity:
            return {**out, **dict.fromkeys(recs[len(out) :], 0.0)}
    out[recs[-1]] = last
    return out


def _bound_key(p: Plan) -> tuple:
    return (p.tp, p.pp, p.vpp, p.cp, p.ep, p.sp, p.micro_batch, p.recompute, p.schedule, p.precision)


def _time(res: SearchResult, fitting: list[Fitting], *, top: int, exhaustive: bool) -> list[tuple[Plan, StepTime]]:
    """Stage 4: step times of the plans that can still make the top K (all of them when exhaustive)."""
    model, hw, engine = res.model, res.hardware, res.engine
    if res.objective == "memory" and not exhaustive:
        order = sorted(fitting, key=lambda f: f.nbytes)[:top]
        res.timed = len(order)
        res.pruned[PRUNED_BOUND.replace("compute lower bound", "more memory")] += max(0, len(fitting) - top)
        return [(f.plan(), step_time(model, hw, f.plan(), engine)) for f in order]
    cheap_cache: dict[tuple, float] = {}
    layer_cache: dict[tuple, tuple[float, float]] = {}
    tight_cache: dict[tuple, float] = {}
    fitted = engine.factors(hw.name, hw.calibration_proxy)
    overhead = hw.efficiency.step_overhead_s + fitted.overhead_s
    split = engine.rules.pipeline_split

    def slots(p: Plan) -> float:
        v = p.vpp if p.schedule == "interleaved" else 1
        return p.num_microbatches + (p.pp - 1) / v

    def cheap_bound(f: Fitting) -> float:
        """The step is no shorter than the busiest stage's layers over the schedule's slots (bubble
        included), plus the fixed overhead: everything else only adds. Layer times are cached."""
        b = f.base
        key = (*_bound_key(b)[:-3], f.recompute, b.schedule, b.precision)
        c0 = cheap_cache.get(key)
        if c0 is None:
            lkey = (b.tp, b.cp, b.ep, b.sp, b.micro_batch, f.recompute, b.precision)
            layers = layer_cache.get(lkey)
            if layers is None:
                p = b.model_copy(update={"recompute": f.recompute})
                dense = layer_time(model, hw, p, engine, moe=False).total
                moe = layer_time(model, hw, p, engine, moe=True).total if model.moe is not None else dense
                layers = layer_cache[lkey] = (dense, moe)
            shapes = stage_shapes(model, b.pp, b.vpp, split)
            c0 = cheap_cache[key] = fitted.compute * max(nd * layers[0] + nm * layers[1] for nd, nm, _f, _l in shapes)
        return slots(b) * c0 + overhead

    def tight_bound(p: Plan) -> float:
        """Also the embedding and output head and the exposed TP/CP/EP of the slot (schedule.slot_lower_bound_s),
        computed only for the plans the cheap bound does not rule out."""
        key = _bound_key(p)
        c0 = tight_cache.get(key)
        if c0 is None:
            shapes = stage_shapes(model, p.pp, p.vpp, split)
            first = {s: r for r, s in reversed(list(enumerate(shapes)))}
            c0 = tight_cache[key] = max(slot_lower_bound_s(model, hw, p, engine, r) for r in first.values())
        return slots(p) * c0 + overhead

    ordered = sorted(((cheap_bound(f), i, f) for i, f in enumerate(fitting)), key=lambda x: x[0])
    heap: list[tuple[float, int, Plan, StepTime]] = []  # max-heap on step_s (or bytes) via negation
    for n, (lb, i, f) in enumerate(ordered):
        if not exhaustive and len(heap) >= top and lb >= -heap[0][0]:
            res.pruned[PRUNED_BOUND] += len(ordered) - n
            break
        p, nbytes = f.plan(), f.nbytes
        if not exhaustive and len(heap) >= top and tight_bound(p) >= -heap[0][0]:
            res.pruned[PRUNED_BOUND] += 1
            continue
        t = step_time(model, hw, p, engine)
        res.timed += 1
        if exhaustive:
            res.all_timed.append((p, nbytes, t.tokens_per_s))
        if res.objective == "memory":
            heap.append((-nbytes, i, p, t))
        elif len(heap) < top:
            heapq.heappush(heap, (-t.step_s, i, p, t))
        elif t.step_s < -heap[0][0]:
            heapq.heapreplace(heap, (-t.step_s, i, p, t))
    if res.objective == "memory":
        heap = sorted(heap, key=lambda x: -x[0])[:top]
    return [(p, t) for _s, _i, p, t in heap]


def _rank(res: SearchResult, chosen: list[tuple[Plan, StepTime]], ck: Checkpointing) -> list[Ranked]:
    """Stage 5: the full estimate of each chosen plan, on the step time already computed, ranked."""
    ranked = [
        Ranked(
            estimate(
                res.model,
                res.hardware,
                p,
                res.engine,
                mtbf_hours=ck.mtbf_hours,
                mtbf_per=ck.mtbf_per,
                checkpoint_bandwidth_bytes_per_s=ck.bandwidth_bytes_per_s,
                time=t,
            )
        )
        for p, t in chosen
    ]
    ranked.sort(key=lambda r: rank_key(res.objective, r))
    return ranked


def search_engines(
    model: ModelSpec, hw: HardwareProfile, space: Space, engines: list[Engine], **kwargs: Any
) -> SearchResult:
    """The search over several engines: each engine's plans as that engine runs them, ranked together ("which
    stack and which plan"). Counts add up over the engines (a candidate is evaluated once per engine); a
    rejection reason that names no engine counts every engine's candidates."""
    if len(engines) == 1:
        return search(model, hw, space, engines[0], **kwargs)
    t0 = time.perf_counter()
    results: list[SearchResult] = []
    for engine in engines:
        try:
            results.append(search(model, hw, space, engine, **kwargs))
        except PlannerError:
            if engine is engines[-1] and not results:
                raise
    if not results:  # pragma: no cover - the last engine raised above
        raise PlannerError("no engine has candidate plans")
    return merge_results(results, top=kwargs.get("top", 10), seconds=time.perf_counter() - t0)
