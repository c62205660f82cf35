"""`planner calibrate --behaviour`: every engine's behaviour fitted across every GPU of the runs
(fit/partial_pooling.py), cross-validated split by split (fit/crossval.py), with the interval model fitted to the
held-out errors (fit/intervals.py) — what the shipped engine profiles are made of."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from planner.cost.coster import Coster
from planner.engine import Interval
from planner.fit.crossval import Fold, cross_validate
from planner.fit.intervals import Coverage, interval_model
from planner.fit.memory_kind import memory_log_error
from planner.fit.observations import Observation
from planner.fit.partial_pooling import PooledFit, fit_pooled, log_residuals
from planner.fit.step_tables import Tables, build_tables
from planner.fit.write_behaviour import engine_behaviour, gpu_entries, opts_out, write_behaviour

SPLITS = ("run", "gpu", "engine", "family", "year")


@dataclass(frozen=True)
class BehaviourCalibration:
    fit: PooledFit
    tables: Tables
    interval: Interval
    coverage: tuple[Coverage, ...]
    folds: dict[str, list[Fold]]
    before_pct: tuple[float, ...]  # throughput error per run with the engine profiles as they were
    after_pct: tuple[float, ...]  # in-sample, with the fit
    memory_log_errors: tuple[float, ...]  # log(predicted / measured) peak of the runs that state one

    @property
    def observations(self) -> tuple[Observation, ...]:
        return self.tables.obs

    def group_rms(self) -> dict[str, float]:
        """Per engine/GPU: the in-sample root-mean-square log throughput error (two runs or more)."""
        by: dict[str, list[float]] = {}
        for o, e in zip(self.observations, self.after_pct):
            by.setdefault(o.group, []).append(math.log1p(e / 100))
        return {g: math.sqrt(sum(x * x for x in v) / (len(v) - 1)) for g, v in by.items() if len(v) > 1}


def _pct(log_error: float) -> float:
    return (math.exp(log_error) - 1) * 100


def _before(o: Observation) -> float:
    return _pct(math.log(o.measured_step_s / Coster(o.model, o.hardware, o.engine).step(o.plan).step_s))


def _memory(o: Observation) -> float | None:
    if not o.measured_peak_bytes:
        return None
    return memory_log_error(o.predicted_peak_bytes(), o.measured_peak_bytes)


def calibrate_behaviour(obs: list[Observation], *, splits: tuple[str, ...] = SPLITS) -> BehaviourCalibration:
    """The pooled fit on every run, the cross-validation of each split, and the interval model."""
    t = build_tables(obs)
    fit = fit_pooled(t)
    folds = {s: cross_validate(t, s) for s in splits}
    held = [h for fs in folds.values() for f in fs for h in f.held]
    memory = tuple(m for m in (_memory(o) for o in obs) if m is not None)
    names = sorted({Path(o.source).name for o in obs if o.source})
    interval, cov = interval_model(held, list(memory), f"cross-validation ({', '.join(splits)}) on {', '.join(names)}")
    return BehaviourCalibration(
        fit,
        t,
        interval,
        tuple(cov),
        folds,
        tuple(_before(o) for o in obs),
        tuple(_pct(x) for x in -log_residuals(fit, t)),
        memory,
    )


def write_engine_behaviours(cal: BehaviourCalibration, out_dir: Path) -> list[Path]:
    """Every catalog engine (and every engine of the runs) with its behaviour and GPU entries: its own where it
    had runs; where it had none, the behaviour its profile has from runs of its own fitted apart (the planner
    worker's, from its launches: a fit on published runs does not erase it), else the engines' mean (and no GPU
    entries); none where its profile says `behaviour: null`."""
    from planner.io.catalog import engine_source_path, list_engines, load_engine

    obs = cal.observations
    engines = sorted(set(list_engines()) | {o.engine.name for o in obs})
    rms = cal.group_rms()
    written = []
    for e in engines:
        source = engine_source_path(e)
        if not source.is_file():
            continue
        target = out_dir / f"{e}.yaml"
        own = load_engine(source)
        if not cal.fit.runs.get(e) and own.behaviour is not None and own.behaviour.runs:
            write_behaviour(source, target, own.behaviour, own.fitted)  # fitted apart, on runs of its own
        else:
            behaviour = None if opts_out(source) else engine_behaviour(cal.fit, e, obs, cal.interval)
            write_behaviour(source, target, behaviour, gpu_entries(cal.fit, e, obs, rms))
        written.append(target)
    return written


def summary(folds: list[Fold]) -> tuple[float, float]:
    """(median over folds of each fold's median |error|, the worst fold's median signed error)."""
    med = statistics.median(f.median_abs_pct for f in folds)
    worst = max((f.median_signed_pct for f in folds), key=abs)
    return med, worst
