"""Cross-validation: does the engine behaviour transfer to runs it was not fitted to (issue 21 item 3)?

A split leaves one group of runs out, fits the engines' behaviour on the rest (fit/partial_pooling.py, the GPUs'
physics untouched) and predicts the group left out:

- `family`: one publication's runs of one engine on one GPU (fit/runs.py run_family);
- `gpu`: every run on one GPU (fit without H100, predict H100: the held-out GPU gets the pooled behaviour);
- `engine`: every run of one engine (predicted with the mean of the other engines' behaviour);
- `year`: every run of one year (fit/runs.py run_year);
- `run`: one run at a time (the spread inside the domain, the base of the intervals).

Each held-out prediction keeps the distances it had from its training runs (cost/uncertainty.py `distances`,
with the training runs' domain), so the interval model (fit/intervals.py) can be fitted to how far each
distance moves the error, and its coverage checked split by split.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from planner.cost.uncertainty import distances
from planner.engine import Domain
from planner.fit.observations import Observation
from planner.fit.partial_pooling import domain_of, fit_pooled, log_residuals
from planner.fit.step_tables import Tables

SPLITS: dict[str, Callable[[Observation], object]] = {
    "gpu": lambda o: o.hardware.name,
    "engine": lambda o: o.engine.name,
    "family": lambda o: o.family,
    "year": lambda o: o.year,
    "run": lambda o: (o.id, o.source),
}


@dataclass(frozen=True)
class HeldOut:
    """One run predicted by a fit that did not see it."""

    obs: Observation
    split: str  # gpu, engine, family, year, run
    fold: str  # the value left out: "h100-sxm", "torchtitan", "2021", ...
    log_error: float  # log(predicted / measured) throughput
    distances: dict[str, float]  # the distances from the training runs (cost/uncertainty.py names)

    @property
    def error_pct(self) -> float:
        return (math.exp(self.log_error) - 1) * 100


@dataclass(frozen=True)
class Fold:
    split: str
    fold: str
    held: tuple[HeldOut, ...]

    @property
    def runs(self) -> int:
        return len(self.held)

    @property
    def median_abs_pct(self) -> float:
        return statistics.median(abs(h.error_pct) for h in self.held)

    @property
    def median_signed_pct(self) -> float:
        return statistics.median(h.error_pct for h in self.held)


def training_domain(train: list[Observation], engine: str) -> Domain:
    return Domain(**domain_of(train, engine))


def _distances(o: Observation, train: list[Observation]) -> dict[str, float]:
    runs = sum(t.engine.name == o.engine.name for t in train)
    return distances(training_domain(train, o.engine.name), o.engine, o.hardware, o.model, o.plan, engine_runs=runs)


def cross_validate(t: Tables, split: str, folds: list[object] | None = None) -> list[Fold]:
    """Leave each value of `split` out in turn (or only `folds`), fit on the rest, predict what was left out."""
    key = SPLITS[split]
    # a run without a value (a launch profile has no year) is never left out by that split, only trained on
    values = folds if folds is not None else sorted({key(o) for o in t.obs} - {None}, key=str)
    out = []
    for value in values:
        keep = [i for i, o in enumerate(t.obs) if key(o) != value]
        test = [i for i, o in enumerate(t.obs) if key(o) == value]
        if not test or not keep:
            continue
        train = [t.obs[i] for i in keep]
        fitted = fit_pooled(t.subset(keep))
        logs = -log_residuals(fitted, t.subset(test))  # throughput: predicted / measured
        held = tuple(
            HeldOut(t.obs[i], split, _fold_name(value), float(x), _distances(t.obs[i], train))
            for i, x in zip(test, logs)
        )
        out.append(Fold(split, _fold_name(value), held))
    return out


def _fold_name(value: object) -> str:
    return value[0] if isinstance(value, tuple) else str(value)


def in_sample(t: Tables) -> list[float]:
    """Throughput log errors of the fit on every run, predicting every run."""
    return [float(x) for x in -log_residuals(fit_pooled(t), t)]
