"""The cost model's front door: one object per (model, hardware, engine) that answers everything the commands
ask of the cost model — a plan's per-stage memory, its step time with its terms, the whole estimate, the rules
it breaks — and what the search asks of many plans at once: peak memory screened by ZeRO stage and recompute
level (peaks.py) and step-time lower bounds for branch and bound (bounds.py).

`memory`, `estimate`, `search`, `validate`, `calibrate` and the launcher's prediction all come through here,
so they cannot disagree; the pieces are pure functions of frozen specs, cached by what each depends on
(keys.py), so asking about thousands of plans costs what their distinct pieces cost.
"""

from __future__ import annotations

from planner.cluster.fabric import RESTART_S
from planner.cost.bounds import StepBounds
from planner.cost.estimate import Estimate, estimate
from planner.cost.memory import MemoryReport, memory_report
from planner.cost.params import plan_params
from planner.cost.peaks import PeakMemory
from planner.cost.schedule import StepTime, step_time
from planner.cost.states import sharded_states, state_bytes_per_param
from planner.cost.uncertainty import Uncertainty, uncertainty
from planner.engine import Engine, plan_problems, require_runs
from planner.hardware import HardwareProfile
from planner.plan import Plan, Recompute, Rejected
from planner.specs import ModelSpec


class Coster:
    """Memory, time and rules of plans of one model on one hardware profile run by one engine."""

    def __init__(self, model: ModelSpec, hw: HardwareProfile, engine: Engine) -> None:
        self.model, self.hw, self.engine = model, hw, engine
        self.capacity_bytes = hw.gpu.hbm_bytes
        self._peaks = PeakMemory(model, hw, engine)
        self._bounds = StepBounds(model, hw, engine)

    # ---- one plan, whole answers --------------------------------------------------------------------
    def problems(self, plan: Plan, gpus: int | None = None) -> list[Rejected]:
        """Every rule the plan breaks: the model's, the engine's and the hardware's (empty: it runs)."""
        return plan_problems(self.model, plan, self.engine, gpus, self.hw)

    def require(self, plan: Plan, gpus: int | None = None) -> None:
        """For commands that take one plan: every broken rule in one PlannerError."""
        require_runs(self.model, plan, self.engine, gpus, self.hw)

    def memory(self, plan: Plan) -> MemoryReport:
        """Per-GPU memory of every pipeline stage (cost.memory)."""
        return memory_report(self.model, self.hw, plan, self.engine)

    def persistent_bytes(self, plan: Plan) -> float:
        """Weights, gradients and optimizer state that outlive the step on the most loaded pipeline rank (no
        gathered copies, no accumulation buffers; cost.states): what a run's tensor count sees after a step."""
        stage = self.engine.zero_stage(plan)
        per = state_bytes_per_param(plan.precision, self.engine, stage)
        return max(
            sharded_states(plan_params(self.model, plan, self.engine, r), per, plan, stage).persistent_bytes
            for r in range(plan.pp)
        )

    def step(self, plan: Plan) -> StepTime:
        """One optimizer step on the bottleneck GPU, in terms (cost.schedule)."""
        return step_time(self.model, self.hw, plan, self.engine)

    def estimate(
        self,
        plan: Plan,
        *,
        tokens: float | None = None,
        mtbf_hours: float | None = None,
        mtbf_per: str = "gpu",
        checkpoint_bandwidth_bytes_per_s: float | None = None,
        restart_s: float = RESTART_S,
        time: StepTime | None = None,
    ) -> Estimate:
        """Memory, step time, time to train and checkpointing of one plan (cost.estimate); `time` when the
        step was already computed."""
        return estimate(
            self.model,
            self.hw,
            plan,
            self.engine,
            tokens=tokens,
            mtbf_hours=mtbf_hours,
            mtbf_per=mtbf_per,
            checkpoint_bandwidth_bytes_per_s=checkpoint_bandwidth_bytes_per_s,
            restart_s=restart_s,
            time=time,
        )

    def memory_trust(self, plan: Plan, peak_bytes: float) -> Uncertainty:
        """The 80% interval of a plan's peak memory predicted at `peak_bytes` (cost.uncertainty: widened for the
        plan's distances from the engine's runs), without a throughput: what `planner memory` shows."""
        return uncertainty(self.engine, self.hw, model=self.model, plan=plan, peak_bytes=peak_bytes)

    def memory_high_bytes(self, plan: Plan, peak_bytes: float) -> float:
        """The high end of that interval; `--risk` ranks only plans where it fits."""
        return self.memory_trust(plan, peak_bytes).memory_high_bytes(peak_bytes)

    # ---- many plans: what the search screens and prunes with ------------------------------------------
    def peak(self, plan: Plan) -> tuple[float, int]:
        """(bytes, rank) of the most loaded pipeline rank: ``memory(plan).total_bytes`` and its stage."""
        return self._peaks.peak(plan)

    def peaks(
        self, plan: Plan, zeros: tuple[int, ...], recomputes: tuple[str, ...]
    ) -> dict[tuple[int, str], tuple[float, int]]:
        """The peak of `plan` with each ZeRO stage and recompute level (no Plan built for the variants)."""
        return self._peaks.peaks(plan, zeros, recomputes)

    def levels(self, plan: Plan, zero: int, recomputes: tuple[Recompute, ...]) -> dict[Recompute, float]:
        """Each recompute level's peak with this ZeRO stage, computing only what decides whether it fits
        (0.0: fits, not computed; inf: does not fit, not computed): peaks.PeakMemory.levels."""
        return self._peaks.levels(plan, zero, recomputes)

    def cheap_bound_s(self, plan: Plan, recompute: str) -> float:
        """A lower bound of the step time at this recompute level (bounds.StepBounds.cheap_s)."""
        return self._bounds.cheap_s(plan, recompute)

    def tight_bound_s(self, plan: Plan) -> float:
        """A tighter lower bound of the step time (bounds.StepBounds.tight_s)."""
        return self._bounds.tight_s(plan)


# The front doors of one process's searches, by the identity of the (model, hardware, engine) they price: the
# advice's probes, `planner scale` and `--gpus` ranges search one model at other GPU counts and batches, and a
# Coster's caches are keyed by projections of the plan that hold every field a piece reads (keys.py), so what one
# search computed serves the next (forked workers inherit it). Each entry holds its objects: their ids stay unique.
_SHARED: dict[tuple[int, int, int], Coster] = {}
MAX_SHARED = 64


def shared_coster(model: ModelSpec, hw: HardwareProfile, engine: Engine) -> Coster:
    """The Coster of earlier searches of these very objects in this process, or a new one."""
    key = (id(model), id(hw), id(engine))
    hit = _SHARED.get(key)
    if hit is None:
        if len(_SHARED) >= MAX_SHARED:
            _SHARED.clear()
        hit = _SHARED[key] = Coster(model, hw, engine)
    return hit
