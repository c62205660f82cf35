"""Each run's step time tabulated over a grid of compute factors, for the pooled fit (fit/partial_pooling.py).

The cost model's step time is tabulated once per run over a grid of compute factors (it is piecewise
linear in the factor: the overlap terms are max(0, comm − compute)); the host terms add exactly. A fit then
costs milliseconds, so cross-validation can refit dozens of times (fit/crossval.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from planner.cost.coster import Coster
from planner.cost.fitted_factors import host_layers
from planner.engine import Engine, Fitted
from planner.fit.observations import Observation

GRID = np.exp(np.linspace(math.log(0.4), math.log(3.2), 22))  # compute factors the step is tabulated at


def neutral(engine: Engine) -> Engine:
    """The engine with nothing fitted: its rules, kernels and comm only (the physics as the engine runs it)."""
    return engine.model_copy(update={"fitted": {}, "behaviour": None})


def with_factor(engine: Engine, gpu: str, compute: float) -> Engine:
    return engine.model_copy(update={"fitted": {gpu: Fitted(compute=compute)}, "behaviour": None})


@dataclass(frozen=True)
class Tables:
    """The runs of a fit as arrays: step time (no host time) over GRID, micro-batches, layers on the bottleneck
    rank, measured step, and which engine and GPU each ran on; `unhidden` is the step over GRID with the TP
    overlap's hidden share all exposed (equal to `step` for a run without TP overlap)."""

    obs: tuple[Observation, ...]
    step: Any  # (n, len(GRID)) seconds
    unhidden: Any  # (n, len(GRID)) seconds
    micro: Any  # (n,)
    layers: Any  # (n,)
    measured: Any  # (n,) seconds
    engines: tuple[str, ...]
    gpus: tuple[str, ...]
    proxies: dict[str, str] = field(default_factory=dict)  # gpu -> its calibration proxy

    def subset(self, keep: list[int]) -> Tables:
        idx = np.array(keep, dtype=int)
        return Tables(
            tuple(self.obs[i] for i in keep),
            self.step[idx],
            self.unhidden[idx],
            self.micro[idx],
            self.layers[idx],
            self.measured[idx],
            tuple(self.engines[i] for i in keep),
            tuple(self.gpus[i] for i in keep),
            self.proxies,
        )


@dataclass(frozen=True)
class StepRow:
    """One run tabulated: its step (no host time) over GRID with the TP overlap as the engine runs it and with
    the overlap's hidden share all exposed, its micro-batches, and the layers whose host time the GPU waits on."""

    steps: list[float]  # seconds, one per GRID factor
    unhidden: list[float]  # seconds, one per GRID factor
    microbatches: int
    layers: int


_TABLE_CACHE: dict[tuple[str, str, str, str], StepRow] = {}  # by run, model, hardware, plan and engine (unfitted)


def _steps(o: Observation, engine: Engine) -> list[float]:
    return [
        Coster(o.model, o.hardware, with_factor(engine, o.hardware.name, float(f))).step(o.plan).step_s for f in GRID
    ]


def _row(o: Observation) -> StepRow:
    key = (
        f"{o.id}|{o.source}|{o.model.model_dump_json()}",
        o.hardware.model_dump_json(),
        o.plan.model_dump_json(),
        o.engine.model_dump_json(include={"name", "rules", "memory", "kernels", "comm"}),
    )
    hit = _TABLE_CACHE.get(key)
    if hit is None:
        base = neutral(o.engine)
        steps = _steps(o, base)
        overlapped = base.comm.tp_overlap and o.plan.tp > 1
        unhidden = _steps(o, base.configured(tp_overlap=False)) if overlapped else steps
        stage = Coster(o.model, o.hardware, with_factor(base, o.hardware.name, 1.0)).step(o.plan).stage
        layers = host_layers(o.engine, _layers(o, stage))
        hit = _TABLE_CACHE[key] = StepRow(steps, unhidden, o.plan.num_microbatches, layers)
    return hit


def _layers(o: Observation, stage: int) -> int:
    """Layers (every chunk) on the pipeline rank that sets the pace."""
    from planner.cost.compute import plan_stage_shapes

    shape = plan_stage_shapes(o.model, o.plan, o.engine)[stage]
    return sum(n for _kind, n in shape.mix)


def build_tables(obs: list[Observation]) -> Tables:
    """Each run's step time over the grid of compute factors (cached by run: cross-validation rebuilds none)."""
    rows = [_row(o) for o in obs]
    return Tables(
        tuple(obs),
        np.array([r.steps for r in rows], dtype=float),
        np.array([r.unhidden for r in rows], dtype=float),
        np.array([r.microbatches for r in rows], dtype=float),
        np.array([r.layers for r in rows], dtype=float),
        np.array([o.measured_step_s for o in obs], dtype=float),
        tuple(o.engine.name for o in obs),
        tuple(o.hardware.name for o in obs),
        {o.hardware.name: o.hardware.calibration_proxy for o in obs if o.hardware.calibration_proxy},
    )


def interpolate(step: Any, log_f: Any) -> Any:
    """Each row's step time at its compute factor exp(log_f), linear in the factor between grid points."""
    grid = GRID
    f = np.exp(log_f)
    i = np.clip(np.searchsorted(grid, f) - 1, 0, len(grid) - 2)
    w = (f - grid[i]) / (grid[i + 1] - grid[i])
    rows = np.arange(step.shape[0])
    return step[rows, i] * (1 - w) + step[rows, i + 1] * w


def physics(t: Tables, log_f: Any, exposed: Any) -> Any:
    """Each run's step without host time, at its compute factor and its engine's TP-overlap exposed share (the
    step is linear in the share between the tables with and without the overlap: cost/overlap.py tp_overlap_s)."""
    hidden = interpolate(t.step, log_f)
    return hidden + exposed * (interpolate(t.unhidden, log_f) - hidden)
