"""What a calibration found: per-hardware parameters, per-(engine, hardware) factors with their residual spread,
every parameter's move with its standard error and whether it ended on a bound, what the runs could not
identify, and every run's error before and after."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from planner.engine import Fitted
from planner.fit.observations import Observation
from planner.fit.priors import ParameterVector
from planner.hardware import HardwareProfile

MIN_GROUP_RUNS = 2  # residual spread (error bars) needs at least this many runs of a group
MOVED = 1e-3  # a parameter "moved" when it changed by more than this share of its value


@dataclass(frozen=True)
class GroupFit:
    """What the fit says about one (engine, hardware) group."""

    engine: str
    hardware: str
    fitted: Fitted


@dataclass(frozen=True)
class Move:
    """One fitted parameter: where it started, where it ended, its standard error, and a bound it ended on."""

    name: str  # "compute of megatron on h100-sxm", "h100-sxm matmul_scale"
    before: float
    after: float
    stderr: float
    bound: str | None = None  # "upper bound 0.98" when it ended there

    @property
    def moved(self) -> bool:
        """Changed by more than 0.1% (of its value, or of 1 for a value near zero)."""
        return abs(self.after - self.before) > MOVED * max(1.0 if abs(self.before) < 1 else abs(self.before), 1e-12)

    @property
    def significant(self) -> bool:
        """Moved by more than its standard error."""
        return self.moved and abs(self.after - self.before) > self.stderr


@dataclass(frozen=True)
class FitResult:
    bases: dict[str, HardwareProfile]  # by hardware name, before
    fitted: dict[str, HardwareProfile]  # after (only the efficiency block differs)
    hardware_values: dict[str, dict[str, float]]  # hardware -> parameter -> value
    hardware_stderr: dict[str, dict[str, float]]
    at_bound: list[str]  # "h100-sxm matmul_scale at its lower bound 0.88"
    groups: dict[str, GroupFit]  # "engine/hardware" -> fit, for the groups with runs
    observations: tuple[Observation, ...]
    before_pct: tuple[float, ...]  # per observation, % error of step time before the fit
    after_pct: tuple[float, ...]
    names: tuple[str, ...] = ()
    moves: tuple[Move, ...] = ()
    unidentified: tuple[str, ...] = ()  # "overhead_s of megatron on h100-sxm: 1 run can move 1 parameter"
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def nothing_moved(self) -> bool:
        return not any(m.moved for m in self.moves)

    @staticmethod
    def _median_abs(v: tuple[float, ...]) -> float:
        return statistics.median(abs(x) for x in v) if v else float("nan")

    @property
    def median_before_pct(self) -> float:
        return self._median_abs(self.before_pct)

    @property
    def median_after_pct(self) -> float:
        return self._median_abs(self.after_pct)

    @property
    def base(self) -> HardwareProfile:
        return next(iter(self.bases.values()))

    @property
    def values(self) -> dict[str, float]:
        """The first hardware's fitted parameters (the single-profile case)."""
        return next(iter(self.hardware_values.values()), {})

    @property
    def engines(self) -> dict[str, dict[str, Fitted]]:
        """engine -> hardware -> Fitted: what calibrate writes into the engine profiles."""
        out: dict[str, dict[str, Fitted]] = {}
        for g in self.groups.values():
            out.setdefault(g.engine, {})[g.hardware] = g.fitted
        return out


def _rms(logs: list[float]) -> float | None:
    if len(logs) < MIN_GROUP_RUNS:
        return None
    return math.sqrt(sum(x * x for x in logs) / (len(logs) - 1))


def group_fits(
    vec: ParameterVector,
    v: dict[tuple[str, ...], float],
    obs: list[Observation],
    pred_s: list[float],
    fitted: dict[str, HardwareProfile],
) -> dict[str, GroupFit]:
    """Per (engine, hardware) group of the runs: its factors after the fit and the residual spread."""
    stamp = date.today().isoformat()
    sources = sorted({Path(o.source).name for o in obs if o.source})
    out: dict[str, GroupFit] = {}
    for e, h in vec.groups:
        mine = [(o, p) for o, p in zip(obs, pred_s) if o.engine.name == e and o.hardware.name == h]
        logs = [math.log(p / o.measured_step_s) for o, p in mine]
        mem_logs = [
            math.log(o.predicted_peak_bytes(fitted[h]) / o.measured_peak_bytes)
            for o, _p in mine
            if o.measured_peak_bytes
        ]
        base = vec.group_fitted(v, e, h)
        rel = _rms(logs)
        f = Fitted(
            compute=round(base.compute, 4),
            overhead_s=round(base.overhead_s, 5),
            tokens_per_s_rel=None if rel is None else round(rel, 4),
            peak_memory_rel=None if len(mem_logs) < MIN_GROUP_RUNS else round(_rms(mem_logs) or 0.0, 4),
            runs=len(mine),
            source=f"planner calibrate {stamp}: {len(mine)} runs ({', '.join(sources) or 'launch profiles'})",
        )
        out[f"{e}/{h}"] = GroupFit(e, h, f)
    return out
