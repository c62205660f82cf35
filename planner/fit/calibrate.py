"""Fit a user's runs: each (engine, GPU) group's compute factor and per-step overhead, and hardware parameters
asked for by name (scipy, imported only here).

Observations come from runs files (fit/runs.py: each run with the engine its software block names), from
`planner launch` profile JSONs (the planner engine) and from training logs (planner.io.logs, as `planner ingest`
reads them). Only what the runs can identify is fitted (fit/identify.py); the rest is named with the reason. The
fit is least squares on log(predicted / measured) step time with priors (a MAP fit, fit/priors.py): a hardware
parameter stays near its measured value unless the data insist, within the profile's bounds. The engines'
behaviour pooled across GPUs is `--behaviour`'s (fit/pooled.py).
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from planner.cost.coster import Coster
from planner.engine import Engine
from planner.errors import PlannerError
from planner.fit.identify import choose
from planner.fit.observations import (
    Observation,
    load_observations,
    observation_from_profile,
    observations_from_runs,
    prepared_for_fit,
    step_stat,
)
from planner.fit.priors import (
    DATA_SIGMA,
    ENGINE_PARAMS,
    HARDWARE_BOUNDS,
    ParameterVector,
    apply_params,
)
from planner.fit.report import FitResult, GroupFit, Move, group_fits
from planner.hardware import Efficiency, HardwareProfile
from planner.specs import ModelSpec

BOUND_HIT = 0.02  # a parameter within 2% of its range from a bound "pushes against" it
JACOBIAN_STEP = 1e-3  # of a parameter's prior width: what identifiability is judged by is the local slope

START_INSIDE = 0.01  # where the fit starts, as a share of each bounded parameter's range in from its bounds


# ---- the model -----------------------------------------------------------------------------------
def predict_step_s(obs: Observation, eff: Efficiency, engine: Engine | None = None) -> float:
    """Step time of an observation with this efficiency block (and the observation's own engine)."""
    hw = obs.hardware.model_copy(update={"efficiency": eff})
    return Coster(obs.model, hw, engine or obs.engine).step(obs.plan).step_s


def _predict(vec: ParameterVector, v: dict[tuple[str, ...], float], obs: list[Observation]) -> list[float]:
    effs = {h: vec.efficiency(v, h) for h in vec.hardware}
    return [predict_step_s(o, effs[o.hardware.name], vec.engine(v, o)) for o in obs]


def fit(
    obs: list[Observation],
    base: HardwareProfile | dict[str, HardwareProfile],
    *,
    names: tuple[str, ...] | None = None,
    engine: Engine | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> FitResult:
    """The MAP fit (fit/priors.py) of what the runs can identify (fit/identify.py) among `names` (default: each
    group's compute and overhead_s; hardware parameters only by name); `engine` overrides every observation's
    engine (a launch worker fit)."""
    import numpy as np
    from scipy.optimize import least_squares

    bases = base if isinstance(base, dict) else {base.name: base}
    obs = prepared_for_fit(obs, bases, engine)
    names = names if names is not None else ENGINE_PARAMS
    _check_names(names)
    vec = ParameterVector(obs, bases, names)
    x0, lo, hi, sigma = (np.array(a, dtype=float) for a in (vec.x0, vec.lo, vec.hi, vec.sigma))
    measured = np.log([o.measured_step_s for o in obs])
    free, unidentified = _identified(vec, obs, x0, lo, hi, sigma)
    budget = 60 * max(1, free.size)
    calls = itertools.count(1)

    def full(x: Any) -> Any:
        out = x0.copy()
        out[free] = x
        return out

    def residuals(x: Any) -> Any:
        if progress is not None:
            progress(min(next(calls), budget), budget)
        pred = np.log(_predict(vec, vec.values(full(x)), obs))
        return np.concatenate([pred - measured, DATA_SIGMA * (x - x0[free]) / sigma[free]])

    width = np.maximum(hi[free] - lo[free], 1e-12)
    # Start inside the box: from a start on a bound (an overhead's prior of 0 s is its lower bound) the trust
    # region's first step is ~1e-12 and `ftol` stops it there, fitting nothing. The prior still pulls to x0.
    start = np.clip(x0[free], lo[free] + START_INSIDE * width, hi[free] - START_INSIDE * width)
    res = least_squares(
        residuals, start, bounds=(lo[free], hi[free]), method="trf", x_scale=width / 10, max_nfev=budget
    )
    return _result(
        vec, obs, bases, tuple(names), full(res.x), x0, lo, hi, free, _stderr(res, len(obs), free.size), unidentified
    )


def _check_names(names: tuple[str, ...]) -> None:
    unknown = [n for n in names if n not in HARDWARE_BOUNDS and n not in ENGINE_PARAMS]
    if unknown:
        raise PlannerError(f"unknown parameter(s) {unknown}; valid: {', '.join([*HARDWARE_BOUNDS, *ENGINE_PARAMS])}")


def _identified(
    vec: ParameterVector, obs: list[Observation], x0: Any, lo: Any, hi: Any, sigma: Any
) -> tuple[Any, tuple[str, ...]]:
    """The slots the runs identify (indices into the vector, fit/identify.py), and why each other slot keeps its
    prior; none identified is an error naming them all."""
    import numpy as np

    labels = [vec.label(s) for s in vec.slots]
    jac = _jacobian(vec, x0, lo, hi, sigma, obs)
    unpriced = [o for o, row in zip(obs, jac, strict=True) if not np.all(np.isfinite(row))]
    if unpriced:  # a profile's figure so far out (a latency of 1e308 s) that a step time overflows
        o = unpriced[0]
        raise PlannerError(
            f"{o.id}: the model's step time on {o.hardware.name} is not a finite number of seconds; check the "
            "hardware profile's bandwidths and latencies"
        )
    choice = choose(jac, vec.slots, labels, len(obs))
    free = np.array(choice.chosen, dtype=int)
    unidentified = tuple(f"{labels[i]}: {why}" for i, why in sorted(choice.reasons.items()))
    if not free.size:
        raise PlannerError(
            f"nothing to fit: the {len(obs)} run(s) identify none of {', '.join(labels)} ("
            + "; ".join(unidentified)
            + "). Give runs that differ in what you want fitted"
        )
    return free, unidentified


def _jacobian(vec: ParameterVector, x0: Any, lo: Any, hi: Any, sigma: Any, obs: list[Observation]) -> Any:
    """d log(step) / d parameter x its prior width, for every run and parameter, by (local) finite differences."""
    import numpy as np

    at = np.log(_predict(vec, vec.values(x0), obs))
    cols = []
    for i in range(len(x0)):
        step = JACOBIAN_STEP * sigma[i] if x0[i] + JACOBIAN_STEP * sigma[i] <= hi[i] else -JACOBIAN_STEP * sigma[i]
        x = x0.copy()
        x[i] = min(max(x0[i] + step, lo[i]), hi[i])
        moved = x[i] - x0[i]
        delta = np.log(_predict(vec, vec.values(x), obs)) - at
        cols.append(delta / moved * sigma[i] if moved else np.zeros(len(obs)))
    return np.array(cols).T if cols else np.zeros((len(obs), 0))


def _result(
    vec: ParameterVector,
    obs: list[Observation],
    bases: dict[str, HardwareProfile],
    names: tuple[str, ...],
    x: Any,
    x0: Any,
    lo: Any,
    hi: Any,
    free: Any,
    stderr: list[float],
    unidentified: tuple[str, ...],
) -> FitResult:
    v, v0 = vec.values(x), vec.values(x0)
    before = tuple((p / o.measured_step_s - 1) * 100 for p, o in zip(_predict(vec, v0, obs), obs))
    after_s = _predict(vec, v, obs)
    after = tuple((p / o.measured_step_s - 1) * 100 for p, o in zip(after_s, obs))
    err = dict(zip((int(i) for i in free), stderr))
    moves, at_bound = [], []
    for i in (int(j) for j in free):
        slot = vec.slots[i]
        ends = _shown(vec, slot, float(lo[i])), _shown(vec, slot, float(hi[i]))
        bound = _bound(float(x[i]), float(lo[i]), float(hi[i]), float(x0[i]), ends, floor_is_none=slot[0] == "o")
        shown = _shown(vec, slot, float(x0[i])), _shown(vec, slot, float(x[i]))
        se = err[i] * (shown[1] if slot[0] == "c" else 1.0)  # compute: log units -> the factor's
        moves.append(Move(vec.label(slot), shown[0], shown[1], se, bound))
        if bound:
            at_bound.append(
                f"{vec.label(slot)} at its {bound} (the data want it further: something the model leaves out)"
            )
    hw_values = {h: {n: v[("hw", h, n)] for n in vec.hw_names} for h in vec.hardware}
    hw_err = {
        h: {s[2]: err.get(i, float("nan")) for i, s in enumerate(vec.slots) if s[:2] == ("hw", h)} for h in vec.hardware
    }
    fitted = {h: bases[h].model_copy(update={"efficiency": vec.efficiency(v, h)}) for h in vec.hardware}
    groups = group_fits(vec, v, obs, after_s, fitted) if (vec.fit_compute or vec.fit_overhead) else {}
    return FitResult(
        bases, fitted, hw_values, hw_err, at_bound, groups, tuple(obs), before, after, names, tuple(moves), unidentified
    )


def _shown(vec: ParameterVector, slot: tuple[str, ...], value: float) -> float:
    """A parameter as the user reads it: a group's compute factor itself (not its log change)."""
    return vec.start_factor(slot[1], slot[2]) * math.exp(value) if slot[0] == "c" else value


def _bound(
    value: float, lo: float, hi: float, start: float, ends: tuple[float, float], *, floor_is_none: bool = False
) -> str | None:
    """The bound a parameter ended on (`ends`: the bounds as the user reads them); none when it did not move, or
    when the floor means "none" (an overhead of zero seconds is a finding of no overhead, not a push against
    physics)."""
    if abs(value - start) <= 1e-9 * max(1.0, abs(start)) or min(value - lo, hi - value) > BOUND_HIT * (hi - lo):
        return None
    if value - lo < hi - value:
        return None if floor_is_none else f"lower bound {ends[0]:.4g}"
    return f"upper bound {ends[1]:.4g}"


def _stderr(res: Any, n_data: int, n_params: int) -> list[float]:
    import numpy as np

    data = res.fun[:n_data]
    sigma2 = (
        float(data @ data) / max(1, n_data - n_params) if n_data > n_params else max(float(data @ data), DATA_SIGMA**2)
    )
    try:
        cov = np.linalg.pinv(res.jac.T @ res.jac) * sigma2
        return [float(math.sqrt(max(cov[i, i], 0.0))) for i in range(n_params)]
    except np.linalg.LinAlgError:  # pragma: no cover
        return [float("nan")] * n_params


def calibrate_paths(
    paths: list[str],
    hardware: list[HardwareProfile] | None = None,
    *,
    names: tuple[str, ...] | None = None,
    stat: str = "median",
    progress: Callable[[int, int], None] | None = None,
    model: ModelSpec | None = None,
    given: Mapping[str, Any] | None = None,
) -> FitResult:
    """The CLI's entry: the runs of runs files, launch profiles and logs, fitted on the hardware they name (or on
    the given profiles: only their runs); `model` and `given` fill what a log does not state (load_observations)."""
    single = hardware[0] if hardware and len(hardware) == 1 else None
    with warnings.catch_warnings(record=True) as left_out:  # said with the fit, or with its refusal (which drops
        warnings.simplefilter("always")  # a refused command's warnings: cli/__init__.py)
        obs = load_observations(paths, single, stat=stat, model=model, given=given)
    if hardware:
        wanted = {h.name for h in hardware}
        obs = [o for o in obs if o.hardware.name in wanted]
        bases = {h.name: h for h in hardware}
    else:
        bases = {}
        for o in obs:
            bases.setdefault(o.hardware.name, _catalog_profile(o.hardware))
    if not obs:
        which = ", ".join(sorted(bases)) if hardware else "any hardware"
        why = f" ({left_out[0].message}{' ...' if len(left_out) > 1 else ''})" if left_out else ""
        raise PlannerError(f"no measured runs of {which} in {', '.join(paths)}{why}")
    for said in left_out:
        warnings.warn(said.message, stacklevel=2)  # the warning itself: a LeftOutOfFit keeps its parts
    return fit(obs, bases, names=names, progress=progress)


def _catalog_profile(hw: HardwareProfile) -> HardwareProfile:
    """The profile a run names, at its catalog node size (a run's own node size is applied per run)."""
    from planner.io.catalog import load_hardware

    try:
        return load_hardware(hw.name)
    except PlannerError:
        return hw


__all__ = [
    "FitResult",
    "GroupFit",
    "Move",
    "Observation",
    "apply_params",
    "calibrate_paths",
    "fit",
    "load_observations",
    "observation_from_profile",
    "observations_from_runs",
    "predict_step_s",
    "step_stat",
]
