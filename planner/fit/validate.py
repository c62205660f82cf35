"""Predicted vs measured for a runs file (the schema of tests/data/calibration_runs.yaml).

Every run is predicted with the engine its software block names (fit/runs.py), on its hardware profile; a
run that cannot be evaluated is listed with its reason, never dropped silently. The summary gives the
median |error| over all runs and, per (engine, hardware) group, the median signed error: the figure that
shows a bias a group shares.
"""

from __future__ import annotations

import statistics
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planner.cost.coster import Coster
from planner.cost.uncertainty import Plausibility, Uncertainty
from planner.engine import Engine
from planner.errors import PlannerError
from planner.fit.memory_kind import comparable_peak_bytes
from planner.fit.runs import DEFAULT_ENGINE, FROM_WARMUP, METRICS, Run, Skipped, parse_run
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
    plausibility: Plausibility | None = None
    memory_kind: str | None = None  # what the measured peak counts (fit/memory_kind.py MEMORY_KINDS; None: the device)

    @property
    def plausible(self) -> bool | None:
        return None if self.plausibility is None else self.plausibility.ok

    @property
    def error_pct(self) -> dict[str, float]:
        return {k: (self.predicted[k] / v - 1) * 100 for k, v in self.measured.items() if v and k in self.predicted}


@dataclass(frozen=True)
class Validation:
    runs: tuple[RunResult, ...]

    def require_evaluated(self, source: str) -> None:
        """PlannerError when no run could be compared: a validation of nothing is no validation (exit 2)."""
        if any(r.skipped is None for r in self.runs):
            return
        if not self.runs:
            raise PlannerError(f"{source} holds no runs to validate")
        first, n = self.runs[0], len(self.runs)
        which = "its one run could not" if n == 1 else f"none of its {n} runs could"
        raise PlannerError(f"{source}: {which} be evaluated; {first.id}: {first.skipped}")

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
    if not any(v is not None for k, v in run.measured.items() if k != "mfu"):
        return RunResult(run.id, skipped="it states no measured throughput, step time or memory to compare with")
    est = Coster(run.model, run.hardware, run.engine).estimate(run.plan)
    counted = comparable_peak_bytes(est.memory, run.hardware, run.memory_kind)
    predicted = {
        "tokens_per_s_per_gpu": est.time.tokens_per_s_per_gpu,
        "tokens_per_s": est.time.tokens_per_s,
        "step_s": est.time.step_s,
        "peak_memory_bytes": counted,
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
        uncertainty=est.uncertainty.memory_counted_as(est.memory.total_bytes, counted),
        plausibility=est.plausibility,
        memory_kind=run.memory_kind,
    )


@dataclass(frozen=True)
class Profiles:
    """Calibrated profiles a folder holds (what `planner calibrate -o DIR --engine-out DIR` writes), by name."""

    folder: str
    hardware: dict[str, HardwareProfile]
    engines: dict[str, Engine]


def calibrated_profiles(folder: str) -> Profiles:
    """The hardware and engine profiles of a folder; PlannerError when it holds neither."""
    from planner.io.catalog import load_engine, load_hardware, load_yaml

    path = Path(folder)
    if not path.is_dir():
        raise PlannerError(f"--calibrated {folder!r} is not a folder (give the one calibrate -o / --engine-out wrote)")
    hardware, engines = {}, {}
    # the files calibrate wrote (-o / --engine-out), or a catalog folder's (--catalog: hardware_profiles/, ...)
    files = [*path.glob("*.y*ml"), *path.glob("hardware_profiles/*.y*ml"), *path.glob("engine_profiles/*.y*ml")]
    for f in sorted(files):
        doc = load_yaml(f)
        if isinstance(doc, dict) and "gpu" in doc:
            hw = load_hardware(f)
            hardware[hw.name] = hw
        elif isinstance(doc, dict) and "rules" in doc:
            eng = load_engine(f)
            engines[eng.name] = eng
    if not hardware and not engines:
        raise PlannerError(
            f"--calibrated {folder!r} holds no hardware or engine profile (.yaml), nor hardware_profiles/ or "
            "engine_profiles/ folders of them"
        )
    return Profiles(folder, hardware, engines)


def validate_runs(
    runs: list[dict[str, Any]],
    *,
    hardware: HardwareProfile | None = None,
    engine: Engine | None = None,
    profiles: Profiles | None = None,
) -> Validation:
    """Every run predicted on `hardware` and `engine` where given, else its own (with `profiles`: on the calibrated
    profiles of those names where the folder has them, the shipped or given ones elsewhere)."""
    out, applied = [], False
    for raw in runs:
        hw, eng = hardware, engine
        if profiles is not None:
            sw = raw.get("software") if isinstance(raw.get("software"), dict) else {}
            hw_name = hardware.name if hardware is not None else str(raw.get("hardware"))
            eng_name = engine.name if engine is not None else str((sw or {}).get("engine") or DEFAULT_ENGINE)
            hw = profiles.hardware.get(hw_name) or hardware
            eng = profiles.engines.get(eng_name) or engine
            applied = applied or hw_name in profiles.hardware or eng_name in profiles.engines
        run = parse_run(raw, hardware=hw, engine=eng)
        if isinstance(run, Run) and run.from_warmup:  # compared, and said: its error holds the warm-up
            warnings.warn(f"run {run.id!r}: {FROM_WARMUP}; its error includes them", stacklevel=2)
        out.append(predict_run(run))
    if profiles is not None and runs and not applied:
        raise PlannerError(_none_applies(profiles))
    return Validation(tuple(out))


def _none_applies(profiles: Profiles) -> str:
    """--calibrated of a folder whose profiles no run names: its column would be the shipped one's (audit)."""
    held = [*(f"hardware {n}" for n in profiles.hardware), *(f"engine {n}" for n in profiles.engines)]
    return (
        f"--calibrated {profiles.folder!r}: no run names its profiles ({', '.join(held)}): nothing to compare; "
        "give the folder calibrate wrote for these runs' GPUs and engines"
    )
