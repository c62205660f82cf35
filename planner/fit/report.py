"""What a calibration found: per-hardware parameters, per-(engine, hardware) factors with their residual
spread (the error bars estimates print), and every run's error before and after."""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from planner.cost.memory import memory_report
from planner.engine import Fitted
from planner.fit.observations import Observation
from planner.fit.priors import ParameterVector
from planner.hardware import HardwareProfile

MIN_GROUP_RUNS = 2  # residual spread (error bars) needs at least this many runs of a group


@dataclass(frozen=True)
class GroupFit:
    """What the fit says about one (engine, hardware) group."""

    engine: str
    hardware: str
    fitted: Fitted
    log_terms: tuple[float, float, float]  # a_h, b_e, c_eh


@dataclass(frozen=True)
class FitResult:
    bases: dict[str, HardwareProfile]  # by hardware name, before
    fitted: dict[str, HardwareProfile]  # after (only the efficiency block differs)
    hardware_values: dict[str, dict[str, float]]  # hardware -> parameter -> value
    hardware_stderr: dict[str, dict[str, float]]
    at_bound: list[str]  # "h100-sxm matmul_scale at its lower bound 0.88"
    groups: dict[str, GroupFit]  # "engine/hardware" -> fit (groups with runs, and those borrowing terms)
    observations: tuple[Observation, ...]
    before_pct: tuple[float, ...]  # per observation, % error of step time before the fit
    after_pct: tuple[float, ...]
    names: tuple[str, ...] = ()
    hardware_terms: dict[str, float] = dataclasses.field(default_factory=dict)  # a_h (log)
    engine_terms: dict[str, float] = dataclasses.field(default_factory=dict)  # b_e (log)

    def factors(self, engine: str, hardware: str) -> Fitted:
        """The fitted factors of an engine on a fitted hardware profile: the group's own when it had runs,
        else the shared terms (a_h, plus b_e when the engine ran on other hardware), with no error bar of
        its own (the estimate says so: uncalibrated width)."""
        group = self.groups.get(f"{engine}/{hardware}")
        if group is not None:
            return group.fitted
        logs = self.hardware_terms.get(hardware, 0.0) + self.engine_terms.get(engine, 0.0)
        return Fitted(
            compute=round(math.exp(logs), 4),
            runs=0,
            source="planner calibrate: no runs of this engine on this hardware; the terms shared with "
            "the other engines on it" + (" and with this engine elsewhere" if engine in self.engine_terms else ""),
        )

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
    """Per (engine, hardware): the fitted factors and the residual spread behind the error bars. Every engine
    seen in the data gets factors on every hardware in the data (borrowing the shared terms where the pair
    has no runs)."""
    stamp = date.today().isoformat()
    sources = sorted({Path(o.source).name for o in obs if o.source})
    out: dict[str, GroupFit] = {}
    for e in vec.engines:
        for h in vec.hardware:
            mine = [(o, p) for o, p in zip(obs, pred_s) if o.engine.name == e and o.hardware.name == h]
            logs = [math.log(p / o.measured_step_s) for o, p in mine]
            mem_logs = []
            for o, _p in mine:
                if o.measured_peak_bytes:
                    peak = memory_report(o.model, fitted[h], o.plan, o.engine).total_bytes
                    mem_logs.append(math.log(peak / o.measured_peak_bytes))
            a, b, c = vec.log_factor(v, e, h)
            rel = _rms(logs)
            what = (
                f"{len(mine)} runs"
                if mine
                else "no runs of its own: the terms it shares with the other engines "
                "on this hardware and with this engine on other hardware"
            )
            f = Fitted(
                compute=round(math.exp(a + b + c), 4),
                overhead_s=round(v.get(("o", e, h), 0.0), 5),
                tokens_per_s_rel=None if rel is None else round(rel, 4),
                peak_memory_rel=None if len(mem_logs) < MIN_GROUP_RUNS else round(_rms(mem_logs) or 0.0, 4),
                runs=len(mine),
                source=f"planner calibrate {stamp}: {what} ({', '.join(sources) or 'launch profiles'})",
            )
            out[f"{e}/{h}"] = GroupFit(e, h, f, (a, b, c))
    return out
