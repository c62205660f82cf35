"""Fit hardware profiles and engine factors to measured runs (scipy, imported only here).

Observations come from runs files (fit/runs.py: each run with the engine its software block names) and
from `planner launch` profile JSONs (the planner engine). The fit is least squares on log(predicted /
measured) step time with priors (a MAP fit, fit/priors.py): the hardware's physical parameters stay near
their measured values unless the data insist, within the profile's bounds; the per-(engine, hardware)
compute factors and fixed step overheads take what the physics leaves out, and are reported as findings.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable
from typing import Any

from planner.cost.schedule import step_time
from planner.engine import Engine
from planner.errors import PlannerError
from planner.fit.observations import (
    Observation,
    load_observations,
    observation_from_profile,
    observations_from_runs,
    step_stat,
)
from planner.fit.priors import (
    DATA_SIGMA,
    ENGINE_PARAMS,
    HARDWARE_BOUNDS,
    ParameterVector,
    apply_params,
    bounds_of,
    start_value,
)
from planner.fit.report import FitResult, GroupFit, group_fits
from planner.hardware import Efficiency, HardwareProfile

CONTRADICTION_PCT = 15.0  # the same configuration measured this far apart cannot be fitted
BOUND_HIT = 0.02  # a parameter within 2% of its range from a bound "pushes against" it


def _check(obs: list[Observation], n_params: int) -> None:
    if len(obs) < max(3, n_params // 3 + 1):
        raise PlannerError(
            f"calibrate needs at least {max(3, n_params // 3 + 1)} measured runs to fit {n_params} parameters; "
            f"got {len(obs)}. Give more runs, or fewer parameters with --params"
        )
    seen: dict[tuple, Observation] = {}
    for o in obs:
        key = (o.model, o.plan, o.hardware.name, o.hardware.gpus_per_node, o.engine.model_dump_json())
        other = seen.get(key)
        if other and abs(o.measured_step_s / other.measured_step_s - 1) * 100 > CONTRADICTION_PCT:
            raise PlannerError(
                f"contradictory runs: {other.id} and {o.id} are the same model, plan and engine but measured "
                f"{other.measured_step_s:.4g} s and {o.measured_step_s:.4g} s per step; drop one or check them "
                "(calibrate does not average repeats)"
            )
        seen[key] = o


# ---- the model -----------------------------------------------------------------------------------
def predict_step_s(obs: Observation, eff: Efficiency, engine: Engine | None = None) -> float:
    """Step time of an observation with this efficiency block (and the observation's own engine)."""
    hw = obs.hardware.model_copy(update={"efficiency": eff})
    return step_time(obs.model, hw, obs.plan, engine or obs.engine).step_s


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
    """The MAP fit (fit/priors.py) of hardware parameters and engine factors to the observations. `names`:
    what to fit (default: the engine factors and every hardware parameter the profiles give bounds for);
    `engine` overrides every observation's engine (a launch worker fit)."""
    import numpy as np
    from scipy.optimize import least_squares

    bases = base if isinstance(base, dict) else {base.name: base}
    if engine is not None:
        obs = [dataclasses.replace(o, engine=engine) for o in obs]
    obs = [dataclasses.replace(o, hardware=_with_nodes(bases.get(o.hardware.name), o.hardware)) for o in obs]
    if names is None:
        bounded = sorted({n for b in bases.values() for n in b.efficiency.bounds if n in HARDWARE_BOUNDS})
        names = (*bounded, *ENGINE_PARAMS)
    unknown = [n for n in names if n not in HARDWARE_BOUNDS and n not in ENGINE_PARAMS]
    if unknown:
        raise PlannerError(f"unknown parameter(s) {unknown}; valid: {', '.join([*HARDWARE_BOUNDS, *ENGINE_PARAMS])}")
    missing = sorted({o.hardware.name for o in obs} - set(bases))
    if missing:
        raise PlannerError(f"observations of hardware {missing} but no profile to fit them with")
    vec = ParameterVector(obs, bases, names)
    _check(obs, len(vec.slots))
    x0, lo, hi, sigma = (np.array(a, dtype=float) for a in (vec.x0, vec.lo, vec.hi, vec.sigma))
    measured = np.log([o.measured_step_s for o in obs])

    budget = 60 * max(1, len(x0))
    calls = itertools.count(1)

    def residuals(x: Any) -> Any:
        if progress is not None:
            progress(min(next(calls), budget), budget)
        pred = np.log(_predict(vec, vec.values(x), obs))
        prior = DATA_SIGMA * (x - x0) / sigma
        return np.concatenate([pred - measured, prior])

    width = np.maximum(hi - lo, 1e-12)
    res = least_squares(residuals, x0, bounds=(lo, hi), method="trf", x_scale=width / 10, max_nfev=budget)
    v = vec.values(res.x)
    stderr = _stderr(res, len(obs), len(x0))
    before = tuple((p / o.measured_step_s - 1) * 100 for p, o in zip(_predict(vec, vec.values(x0), obs), obs))
    after_s = _predict(vec, v, obs)
    after = tuple((p / o.measured_step_s - 1) * 100 for p, o in zip(after_s, obs))
    hw_values = {h: {n: v[("hw", h, n)] for n in vec.hw_names} for h in vec.hardware}
    hw_err = {
        h: {n: stderr[i] for i, s in enumerate(vec.slots) if s[:2] == ("hw", h) for n in [s[2]]} for h in vec.hardware
    }
    at_bound = [
        f"{h} {n} at its {'lower' if val - lo_ < hi_ - val else 'upper'} bound "
        f"{lo_ if val - lo_ < hi_ - val else hi_:.4g} (the data want it further: something the model leaves out)"
        for (kind, h, n), val in ((s, v[s]) for s in vec.slots if s[0] == "hw")
        for lo_, hi_ in [bounds_of(bases[h].efficiency, n)]
        if min(val - lo_, hi_ - val) <= BOUND_HIT * (hi_ - lo_) and abs(val - start_value(bases[h].efficiency, n)) > 0
    ]
    fitted = {h: bases[h].model_copy(update={"efficiency": vec.efficiency(v, h)}) for h in vec.hardware}
    groups = group_fits(vec, v, obs, after_s, fitted) if (vec.fit_compute or vec.fit_overhead) else {}
    return FitResult(
        bases,
        fitted,
        hw_values,
        hw_err,
        at_bound,
        groups,
        tuple(obs),
        before,
        after,
        tuple(names),
        {h: v.get(("a", h), 0.0) for h in vec.hardware},
        {e: v.get(("b", e), 0.0) for e in vec.engines},
    )


def _with_nodes(base: HardwareProfile | None, run_hw: HardwareProfile) -> HardwareProfile:
    """The profile being fitted, with the run's own GPUs per node (runs files may state another node size)."""
    if base is None:
        return run_hw
    if base.gpus_per_node != run_hw.gpus_per_node:
        return base.with_gpus_per_node(run_hw.gpus_per_node)
    return base


def _stderr(res: Any, n_data: int, n_params: int) -> list[float]:
    import numpy as np

    data = res.fun[:n_data]
    sigma2 = float(data @ data) / max(1, n_data - n_params) if n_data > n_params else float(data @ data)
    try:
        cov = np.linalg.pinv(res.jac.T @ res.jac) * sigma2
        return [float(math.sqrt(max(cov[i, i], 0.0))) for i in range(n_params)]
    except np.linalg.LinAlgError:  # pragma: no cover
        return [float("nan")] * n_params


def calibrate_paths(
    paths: list[str],
    hardware: list[HardwareProfile],
    *,
    names: tuple[str, ...] | None = None,
    stat: str = "median",
    progress: Callable[[int, int], None] | None = None,
) -> FitResult:
    """The CLI's entry: observations of the given profiles from runs files and launch profiles, fitted."""
    single = hardware[0] if len(hardware) == 1 else None
    obs = load_observations(paths, single, stat=stat)
    wanted = {h.name for h in hardware}
    obs = [o for o in obs if o.hardware.name in wanted]
    if not obs:
        raise PlannerError(
            f"no measured runs of {', '.join(sorted(wanted))} in {', '.join(paths)} (runs name their hardware; "
            "a launch profile takes the --hardware it is given)"
        )
    return fit(obs, {h.name: h for h in hardware}, names=names, progress=progress)


__all__ = [
    "FitResult",
    "GroupFit",
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
