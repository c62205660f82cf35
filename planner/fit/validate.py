"""Predicted vs measured for a runs file (the schema of shared/reference/calibration_runs.yaml).

Every run is predicted with the engine its software block names (fit/runs.py), on its hardware profile; a
run that cannot be evaluated is listed with its reason, never dropped silently. The summary gives the
median |error| over all runs and, per (engine, hardware) group, the median signed error: the figure that
shows a bias a group shares.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from planner.cost.estimate import estimate
from planner.cost.uncertainty import Uncertainty, uncertainty
from planner.engine import Engine
from planner.fit.runs import METRICS, Run, Skipped, parse_runs
from planner.hardware import HardwareProfile


@dataclass(frozen=True)
class RunResult:
    id: str
    predicted: dict[str, float] = field(default_factory=dict)
    measured: dict[str, float] = field(default_factory=dict)
    skipped: str | None = None  # why the run could not be evaluated
    fits: bool | None = None
    group: str = ""  # engine/hardware
    family: str = ""
    uncertainty: Uncertainty | None = None
    plausible: bool | None = None

    @property
    def error_pct(self) -> dict[str, float]:
        return {k: (self.predicted[k] / v - 1) * 100 for k, v in self.measured.items() if v and k in self.predicted}


@dataclass(frozen=True)
class Validation:
    runs: tuple[RunResult, ...]

    def summary(self) -> dict[str, dict[str, float]]:
        out = {}
        for metric in METRICS:
            errs = [abs(r.error_pct[metric]) for r in self.runs if metric in r.error_pct]
            if errs:
                out[metric] = {"median_abs_pct": statistics.median(errs), "max_abs_pct": max(errs), "n": len(errs)}
        return out

    def groups(self, metric: str = "tokens_per_s_per_gpu") -> dict[str, dict[str, float]]:
        """Per engine/hardware group: median signed and median |error| of `metric`, and the run count."""
        by: dict[str, list[float]] = {}
        for r in self.runs:
            if metric in r.error_pct:
                by.setdefault(r.group, []).append(r.error_pct[metric])
        return {
            g: {
                "median_signed_pct": statistics.median(e),
                "median_abs_pct": statistics.median(abs(x) for x in e),
                "n": len(e),
            }
            for g, e in sorted(by.items())
        }


def predict_run(run: Run | Skipped) -> RunResult:
    if isinstance(run, Skipped):
        return RunResult(run.id, measured=run.measured, skipped=run.reason)
    est = estimate(run.model, run.hardware, run.plan, run.engine)
    predicted = {
        "tokens_per_s_per_gpu": est.time.tokens_per_s_per_gpu,
        "step_s": est.time.step_s,
        "peak_memory_bytes": est.memory.total_bytes,
        "mfu": est.time.mfu,
    }
    # Published MFUs follow each source's own FLOP convention; compare through throughput instead.
    measured = {k: v for k, v in run.measured.items() if k != "mfu"}
    return RunResult(
        run.id,
        predicted=predicted,
        measured=measured,
        fits=est.fits,
        group=run.group,
        family=run.family,
        uncertainty=uncertainty(run.engine, run.hardware),
        plausible=est.plausibility.ok,
    )


def validate_runs(
    runs: list[dict[str, Any]], *, hardware: HardwareProfile | None = None, engine: Engine | None = None
) -> Validation:
    return Validation(tuple(predict_run(r) for r in parse_runs(runs, hardware=hardware, engine=engine)))
