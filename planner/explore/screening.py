"""Stages 2-3 of the search (pipeline.py): every candidate checked against the rules, then screened for memory.

A candidate is a (structure, micro-batch) plan with each ZeRO stage and recompute level; the rules on the
structure run once per structure, those on the micro-batch once per candidate, and the ZeRO rules once per
degrees, every variant inheriting the verdict. A rejected plan is counted once, under its first reason (the
structure's rules come first); the memory screen (the front door's Coster.levels, cost/peaks.py) computes
only what decides whether a variant fits (a level is skipped only where the arithmetic proves its verdict),
and the smallest overshoots are kept for the closest misses.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

from planner.cost.coster import Coster
from planner.engine import recompute_problems, structure_problems, zero_problems
from planner.engine.recipes import precision_problems
from planner.engine.rules import batch_problems, hardware_problems, schedule_problems
from planner.explore.placement import placement_problems
from planner.explore.results import Rejection, SearchResult
from planner.explore.space import NOT_FIT, PRUNED_ONE_RANK, PRUNED_RECOMPUTE, RECOMPUTES, Structure, micro_batches
from planner.plan import Plan, Recompute, Rejected
from planner.plan_checks import check_batch, check_structure

NEAR_MISSES = 64  # overshooting plans kept for "closest misses"


@dataclass(frozen=True, slots=True)
class Fitting:
    """A plan that fits, as its structure plan and the ZeRO stage and recompute level it runs with (the Plan
    itself is built only for the few that are timed)."""

    base: Plan
    zero: int
    recompute: Recompute
    nbytes: float

    def plan(self) -> Plan:
        return self.base.model_copy(update={"zero": self.zero, "recompute": self.recompute})


@dataclass(frozen=True)
class Overshoot:
    """A plan that passes every rule but needs more memory than the GPU has."""

    plan: Plan
    nbytes: float


class Screening:
    """The state of stages 2-3 over one search: what fits, the closest misses, and the counts in `res`."""

    def __init__(
        self, res: SearchResult, coster: Coster, *, exhaustive: bool, keep_rejections: bool, defer: bool = False
    ) -> None:
        self.res, self.coster = res, coster
        # defer: the candidates that pass the rules are kept in `deferred` for the caller to screen (candidate), in
        # the order it chooses (pipeline.search counts=False screens them best bound first, and stops)
        self.defer, self.deferred = defer, list[tuple[Structure, Plan]]()
        self.exhaustive, self.keep = exhaustive, keep_rejections
        # every recompute level that fits is kept, with its bytes: exhaustively, or to rank by memory (more
        # recompute is slower but smaller, so the least memory is not the least recompute that fits), or where the
        # engine offloads activations: less recompute keeps more to send over the host link, so it may be slower
        # (cost/offload.py), and the least recompute that fits is not the fastest
        self.every_level = exhaustive or res.objective == "memory" or res.engine.memory.activation_offload > 0
        self.zeros = res.space.zero
        levels = [(r, recompute_problems(res.engine, r)) for r in RECOMPUTES if r in res.space.recompute]
        self.levels = len(levels)  # searched, with those the engine refuses (counted under their reason)
        self.recs: tuple[Recompute, ...] = tuple(r for r, problems in levels if not problems)
        self.refused_levels = [(r, problems) for r, problems in levels if problems]
        self._first_level = (self.recs or tuple(r for r, _ in levels))[0]  # the level structure plans are built with
        self.fitting: list[Fitting] = []
        self.near: list[tuple[float, int, Plan]] = []
        self._tick = itertools.count()
        self._zero_verdicts: dict[tuple, list[tuple[int, list[Rejected]]]] = {}  # per degrees
        precision = Plan(
            precision=res.space.precision
        )  # the precision's and the engine options' rules: the same for all
        self._precision = hardware_problems(res.hardware, precision) or precision_problems(
            res.engine, res.hardware, precision, res.model
        )
        rules = res.engine.rules  # no ZeRO stage (schedule) the space holds is one the engine runs: said first
        if not any(rules.runs_zero(z) for z in self.zeros):
            self._precision += zero_problems(res.engine, precision, zero=self.zeros[0])
        asked = res.space.schedules or ()
        if asked and not set(asked) & set(rules.schedules):  # --schedule dualpipev on megatron
            self._precision += schedule_problems(res.engine, asked[0])

    def run(self, progress: Callable[[int, int], None] | None = None) -> None:
        structures = self.res.structures
        for i, st in enumerate(structures):
            if progress is not None and i % 64 == 0:
                progress(i, len(structures))
            self.structure(st)
        self.res.examples.setdefault(
            NOT_FIT,
            f"the plan needs more than the {self.coster.capacity_bytes / 2**30:.1f} GiB of one "
            f"{self.res.hardware.name}",
        )

    def structure(self, st: Structure) -> None:
        """One structure with each of its micro-batches, ZeRO stages and recompute levels. The rules on the
        structure are checked once: when it breaks one, all its candidates are rejected under that reason
        without building their plans (unless every rejection is kept, for --explain)."""
        res, space, model = self.res, self.res.space, self.res.model
        mbs = micro_batches(space, st.dp)
        per_mb = len(self.zeros) * self.levels
        res.evaluated += per_mb * len(mbs)
        base = self._plan(st, mbs[0])
        static = (  # the precision's rules first: every candidate breaks them, so they are the reason to say
            self._precision
            + check_structure(model, base, space.gpus)
            + structure_problems(res.engine, model, base)
            + placement_problems(res.hardware, base, allow_cross_node_tp=space.allow_cross_node_tp)
        )
        if static and not self.keep:
            self._reject(base, static, per_mb * len(mbs))
            return
        for mb in mbs:
            p = base if mb == base.micro_batch else self._plan(st, mb)
            problems = static + check_batch(p) + batch_problems(res.engine, p)
            if problems:
                self._reject(p, problems, per_mb)
                continue
            for rc, refused in self.refused_levels:
                self._reject(p.model_copy(update={"recompute": rc}) if self.keep else p, refused, len(self.zeros))
            if self.recs and self.defer:
                self.deferred.append((st, p))
            elif self.recs:
                self.candidate(st, p)

    def _plan(self, st: Structure, mb: int) -> Plan:
        space = self.res.space
        return Plan(
            dp=st.dp, tp=st.tp, pp=st.pp, vpp=st.vpp, cp=st.cp, ep=st.ep, etp=st.etp, sp=st.sp, zero=self.zeros[0],
            recompute=self._first_level, micro_batch=mb, global_batch=space.global_batch, seq_len=space.seq_len,
            precision=space.precision, schedule=st.schedule, first_stage_layers=space.first_stage_layers,
            last_stage_layers=space.last_stage_layers,
        )  # fmt: skip

    def candidate(self, st: Structure, base: Plan) -> None:
        """One structure and micro-batch that pass the rules, with every ZeRO stage and recompute level."""
        runnable = self._runnable_zeros(st, base)
        peaks = self.coster.peaks(base, tuple(runnable), self.recs) if (self.every_level or self.keep) else None
        for z in runnable:
            verdicts: dict[Recompute, float] = (
                {rc: peaks[(z, rc)][0] for rc in self.recs}
                if peaks is not None
                else self.coster.levels(base, z, self.recs)
            )
            self._memory(base, z, verdicts)

    def _runnable_zeros(self, st: Structure, base: Plan) -> list[int]:
        """The ZeRO stages the engine runs with these degrees (its ZeRO rules depend on the degrees only, so
        they are checked once per structure); the others are counted as rejected for this micro-batch."""
        key = (st.dp, st.tp, st.pp, st.vpp, st.cp, st.ep, st.etp)
        verdicts = self._zero_verdicts.get(key)
        if verdicts is None:
            verdicts = self._zero_verdicts[key] = [
                (z, zero_problems(self.res.engine, base, zero=z, model=self.res.model)) for z in self.zeros
            ]
        runnable = []
        for z, problems in verdicts:
            if problems:
                self._reject(base, problems, len(self.recs), zero=z)
            else:
                runnable.append(z)
        if len(runnable) > 1 and st.dp * st.cp == 1 and not self.res.engine.rules.shards_one_rank:
            self.res.pruned[PRUNED_ONE_RANK] += (len(runnable) - 1) * len(self.recs)  # the same run as the first
            return runnable[:1]
        return runnable

    def _memory(self, base: Plan, z: int, verdicts: dict[Recompute, float]) -> None:
        """Each recompute level of one ZeRO stage: fits (the cheapest is kept, the rest are dominated) or not."""
        res, capacity, found = self.res, self.coster.capacity_bytes, False
        for rc in self.recs:
            nbytes = verdicts[rc]
            if nbytes <= capacity:
                if found and not self.every_level:
                    res.pruned[PRUNED_RECOMPUTE] += 1
                else:
                    self.fitting.append(Fitting(base, z, rc, nbytes))
                    found = True
                continue
            res.rejected[NOT_FIT] += 1
            if nbytes == math.inf:  # levels() did not compute it: another level of this plan misses by less
                continue
            if self.keep or len(self.near) < NEAR_MISSES or -self.near[0][0] > nbytes:
                p = base.model_copy(update={"zero": z, "recompute": rc})
                if self.keep:
                    over = f"{nbytes / 2**30:.1f} GiB > {capacity / 2**30:.1f} GiB"
                    res.rejections.append(Rejection(p, NOT_FIT, over, 1))
                if len(self.near) < NEAR_MISSES:
                    heapq.heappush(self.near, (-nbytes, next(self._tick), p))
                else:
                    heapq.heapreplace(self.near, (-nbytes, next(self._tick), p))

    def overshoots(self) -> list[Overshoot]:
        """The closest misses kept, smallest overshoot first."""
        return sorted((Overshoot(p, -negative) for negative, _, p in self.near), key=lambda o: o.nbytes)

    def _reject(self, plan: Plan, problems: list[Rejected], plans: int, *, zero: int | None = None) -> None:
        """Count `plans` rejected under the first reason; keep each reason with the plan (with this ZeRO stage)
        only when asked to (building the plan costs more than the count)."""
        first = problems[0]
        self.res.rejected[first.reason] += plans
        self.res.examples.setdefault(first.reason, first.detail)
        if self.keep:
            if zero is not None:
                plan = plan.model_copy(update={"zero": zero})
            self.res.rejections.extend(Rejection(plan, pr.reason, pr.detail, plans) for pr in problems)
