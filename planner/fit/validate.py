"""Predicted vs measured for a runs file (the schema of shared/reference/calibration_runs.yaml).

Every run is predicted with the same defaults; a run that cannot be evaluated is listed with its
reason, never dropped silently.
"""

from __future__ import annotations

import statistics
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planner.cost.estimate import estimate
from planner.engine import Engine, plan_problems
from planner.errors import PlannerError
from planner.io.catalog import DEFAULT_ENGINE, load_engine, load_hardware
from planner.io.planfile import pydantic_message
from planner.plan import Plan
from planner.specs import HardwareProfile, ModelSpec

# Measured field -> how the prediction is read off an Estimate.
METRICS = ("tokens_per_s_per_gpu", "step_s", "peak_memory_bytes", "mfu")


@dataclass(frozen=True)
class RunResult:
    id: str
    predicted: dict[str, float] = field(default_factory=dict)
    measured: dict[str, float] = field(default_factory=dict)
    skipped: str | None = None  # why the run could not be evaluated
    fits: bool | None = None

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


def load_runs(path: str | Path) -> list[dict[str, Any]]:
    from planner.io.catalog import load_yaml

    if not Path(path).is_file():
        raise PlannerError(f"runs file {str(path)!r} does not exist")
    doc = load_yaml(path)
    if not isinstance(doc, list) or not all(isinstance(r, dict) for r in doc):
        raise PlannerError(
            f"{path}: expected a YAML list of runs (see calibration_runs.yaml), got {type(doc).__name__}"
        )
    missing = [i for i, r in enumerate(doc) if not {"id", "model", "hardware", "plan", "measured"} <= set(r)]
    if missing:
        raise PlannerError(f"{path}: run #{missing[0]} lacks one of id, model, hardware, plan, measured")
    return doc


def run_hardware(run: dict[str, Any], override: HardwareProfile | None = None) -> HardwareProfile:
    hw = override or load_hardware(run["hardware"])
    per_node = run.get("gpus_per_node")
    if per_node and per_node != hw.gpus_per_node:
        hw = hw.model_copy(update={"gpus_per_node": per_node})
    return hw


def predict_run(
    run: dict[str, Any], *, hardware: HardwareProfile | None = None, engine: Engine | None = None
) -> RunResult:
    measured = {k: float(v) for k, v in (run.get("measured") or {}).items() if k in METRICS and v is not None}
    rid = str(run["id"])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # declared sizes in run files are rounded ("8B")
            model = ModelSpec(**run["model"])
        plan = Plan(**run["plan"])
        hw = run_hardware(run, hardware)
    except ValidationError as e:
        return RunResult(rid, measured=measured, skipped=pydantic_message(e, "run"))
    except PlannerError as e:
        return RunResult(rid, measured=measured, skipped=str(e))
    engine = engine or load_engine(DEFAULT_ENGINE)
    problems = plan_problems(model, plan, engine, run.get("gpus"))
    if problems:
        return RunResult(rid, measured=measured, skipped="; ".join(str(p) for p in problems))
    est = estimate(model, hw, plan, engine)
    predicted = {
        "tokens_per_s_per_gpu": est.time.tokens_per_s_per_gpu,
        "step_s": est.time.step_s,
        "peak_memory_bytes": est.memory.total_bytes,
        "mfu": est.time.mfu,
    }
    if "mfu" in measured:
        # Published MFUs follow each source's own FLOP convention; compare through throughput instead.
        measured.pop("mfu")
    return RunResult(rid, predicted=predicted, measured=measured, fits=est.fits)


def validate_runs(
    runs: list[dict[str, Any]], *, hardware: HardwareProfile | None = None, engine: Engine | None = None
) -> Validation:
    return Validation(tuple(predict_run(r, hardware=hardware, engine=engine) for r in runs))
