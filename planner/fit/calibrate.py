"""Fit hardware profiles and engine factors to measured runs (scipy, imported only here).

Observations come from runs files (fit/runs.py: each run with the engine its software block names) and
from `planner launch` profile JSONs (the planner engine). The fit is least squares on log(predicted /
measured) step time with priors (a MAP fit, fit/params.py): the hardware's physical parameters stay near
their measured values unless the data insist, within the profile's bounds; the per-(engine, hardware)
compute factors and fixed step overheads take what the physics leaves out, and are reported as findings.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planner.cost.memory import memory_report
from planner.cost.schedule import step_time
from planner.engine import Engine, Fitted
from planner.errors import PlannerError
from planner.fit.params import (
    DATA_SIGMA,
    ENGINE_PARAMS,
    HARDWARE_BOUNDS,
    OVERHEAD_BOUNDS_S,
    OVERHEAD_PRIOR_S,
    SIGMA_ENGINE,
    SIGMA_GROUP,
    SIGMA_HARDWARE,
    apply_params,
    bounds_of,
    start_value,
)
from planner.fit.runs import Run, load_runs, parse_runs
from planner.hardware import Efficiency, HardwareProfile
from planner.io.files import read_text
from planner.plan import Plan
from planner.specs import ModelSpec

# Statistics of a launch profile's timed steps that observation_from_profile can use as "the" step time.
STEP_STATS = ("median", "p25", "min")
CONTRADICTION_PCT = 15.0  # the same configuration measured this far apart cannot be fitted
BOUND_HIT = 0.02  # a parameter within 2% of its range from a bound "pushes against" it
MIN_GROUP_RUNS = 2  # residual spread (error bars) needs at least this many runs of a group


@dataclass(frozen=True)
class Observation:
    id: str
    model: ModelSpec
    plan: Plan
    hardware: HardwareProfile
    engine: Engine
    measured_step_s: float
    source: str
    measured_peak_bytes: float | None = None
    family: str = ""

    @property
    def group(self) -> str:
        return f"{self.engine.name}/{self.hardware.name}"


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


# ---- observations --------------------------------------------------------------------------------
def observation_from_run(run: Run, source: str) -> Observation | None:
    """A run with a measured step time (or throughput); `source` is the file it was read from."""
    step = run.measured_step_s
    if not step:
        return None
    return Observation(
        run.id,
        run.model,
        run.plan,
        run.hardware,
        run.engine,
        step,
        source,
        run.measured.get("peak_memory_bytes"),
        run.family,
    )


def observations_from_runs(
    raws: list[dict[str, Any]], hardware: HardwareProfile | None, source: str
) -> list[Observation]:
    """Runs of the profile's hardware (every run's own profile when None) with a measured step time or
    throughput per GPU; each run with its own engine."""
    if hardware is not None:
        raws = [r for r in raws if r.get("hardware") in (hardware.name, None)]
    out = []
    for run in parse_runs(raws, hardware=hardware):
        if isinstance(run, Run):
            o = observation_from_run(run, source)
            if o is not None:
                out.append(o)
    return out


def step_stat(doc: dict[str, Any], stat: str = "median") -> float:
    """One statistic of a launch profile's timed (non-warm-up) steps: median (median_step_s), p25 or min.

    On a shared machine a step is only ever slowed down by other load, so the low quantiles of many steps
    repeat from run to run far better than the median (p25/min; the median is the default)."""
    if stat not in STEP_STATS:
        raise PlannerError(f"unknown step statistic {stat!r}; use {', '.join(STEP_STATS)}")
    if stat == "median":
        return float(doc["median_step_s"])
    rows = doc.get("step_times_s") or []
    timed = sorted(float(r["time_s"]) for r in rows if not r.get("warmup")) or sorted(float(r["time_s"]) for r in rows)
    if not timed:
        return float(doc[f"{stat}_step_s"])
    return timed[0] if stat == "min" else _quantile(timed, 0.25)


def _quantile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated quantile of sorted values (numpy's default)."""
    pos = q * (len(sorted_values) - 1)
    i = math.floor(pos)
    j = min(i + 1, len(sorted_values) - 1)
    return sorted_values[i] + (pos - i) * (sorted_values[j] - sorted_values[i])


def observation_from_profile(
    doc: dict[str, Any], hardware: HardwareProfile, source: str, *, stat: str = "median"
) -> Observation:
    """A `planner launch` profile JSON: the model spec it ran, its plan, the engine that ran it (the planner
    worker's by default) and the median (or `stat`) step time. Its id is the path it was read from, so two
    profiles of the same file name in different folders stay two observations."""
    from planner.io.catalog import load_engine, load_model

    try:
        model = ModelSpec(**doc["model"]) if isinstance(doc["model"], dict) else None
        plan = Plan(**doc["plan"])
        step = step_stat(doc, stat)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise PlannerError(
            f"{source}: not a `planner launch` profile (needs model, plan, median_step_s): {e}"
        ) from None
    if not (math.isfinite(step) and step > 0):
        raise PlannerError(f"{source}: the {stat} step time {step!r} is not a positive finite number of seconds")
    if model is None:
        model = load_model(doc["model"])
    engine = load_engine(doc.get("engine") or "planner")
    return Observation(str(doc.get("id") or source), model, plan, hardware, engine, step, source)


def load_observations(paths: list[str], hardware: HardwareProfile | None, *, stat: str = "median") -> list[Observation]:
    """Runs files and launch profiles; `hardware` None: each run on its own profile (profiles need one)."""
    obs: list[Observation] = []
    for path in paths:
        p = Path(path)
        if not p.is_file():
            raise PlannerError(f"{path}: no such file")
        if p.suffix == ".json":
            try:
                doc = json.loads(read_text(p))
            except json.JSONDecodeError as e:
                raise PlannerError(f"{path}:{e.lineno}: malformed JSON ({e.msg})") from None
            if hardware is None:
                raise PlannerError(f"{path}: a launch profile needs --hardware (the profile it ran on)")
            obs.append(observation_from_profile(doc, hardware, path, stat=stat))
        else:
            obs += observations_from_runs(load_runs(p), hardware, path)
    return obs


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


class _Vector:
    """The parameter vector: hardware parameters per profile, then a_h, b_e, c_eh and overheads."""

    def __init__(self, obs: list[Observation], bases: dict[str, HardwareProfile], names: tuple[str, ...]) -> None:
        self.bases = bases
        self.hw_names = [n for n in names if n not in ENGINE_PARAMS]
        self.fit_compute = "compute" in names
        self.fit_overhead = "overhead_s" in names
        self.hardware = sorted({o.hardware.name for o in obs})
        self.engines = sorted({o.engine.name for o in obs})
        self.groups = sorted({(o.engine.name, o.hardware.name) for o in obs})
        self.slots: list[tuple[str, ...]] = []
        self.x0: list[float] = []
        self.lo: list[float] = []
        self.hi: list[float] = []
        self.sigma: list[float] = []
        for h in self.hardware:
            eff = bases[h].efficiency
            for n in self.hw_names:
                lo, hi = bounds_of(eff, n)
                self._add(("hw", h, n), min(max(start_value(eff, n), lo), hi), lo, hi, max((hi - lo) / 2, 1e-12))
        if self.fit_compute:
            for h in self.hardware:
                self._add(("a", h), 0.0, -1.5, 1.5, SIGMA_HARDWARE)
            for e in self.engines:
                self._add(("b", e), 0.0, -1.0, 1.0, SIGMA_ENGINE)
            for e, h in self.groups:
                self._add(("c", e, h), 0.0, -1.0, 1.0, SIGMA_GROUP)
        if self.fit_overhead:
            for e, h in self.groups:
                self._add(("o", e, h), 0.0, *OVERHEAD_BOUNDS_S, OVERHEAD_PRIOR_S)

    def _add(self, slot: tuple[str, ...], x0: float, lo: float, hi: float, sigma: float) -> None:
        self.slots.append(slot)
        self.x0.append(x0)
        self.lo.append(lo)
        self.hi.append(hi)
        self.sigma.append(sigma)

    def values(self, x: Any) -> dict[tuple[str, ...], float]:
        return {s: float(v) for s, v in zip(self.slots, x)}

    def efficiency(self, v: dict[tuple[str, ...], float], h: str) -> Efficiency:
        return apply_params(self.bases[h].efficiency, {n: v[("hw", h, n)] for n in self.hw_names})

    def log_factor(self, v: dict[tuple[str, ...], float], e: str, h: str) -> tuple[float, float, float]:
        if not self.fit_compute:
            return 0.0, 0.0, 0.0
        return v.get(("a", h), 0.0), v.get(("b", e), 0.0), v.get(("c", e, h), 0.0)

    def engine(self, v: dict[tuple[str, ...], float], o: Observation) -> Engine:
        a, b, c = self.log_factor(v, o.engine.name, o.hardware.name)
        fitted = Fitted(compute=math.exp(a + b + c), overhead_s=v.get(("o", o.engine.name, o.hardware.name), 0.0))
        return o.engine.model_copy(update={"fitted": {o.hardware.name: fitted}})


def _predict(vec: _Vector, v: dict[tuple[str, ...], float], obs: list[Observation]) -> list[float]:
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
    """The MAP fit (fit/params.py) of hardware parameters and engine factors to the observations. `names`:
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
    vec = _Vector(obs, bases, names)
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
    groups = _group_fits(vec, v, obs, after_s, fitted) if (vec.fit_compute or vec.fit_overhead) else {}
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
        return base.model_copy(update={"gpus_per_node": run_hw.gpus_per_node})
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


def _rms(logs: list[float]) -> float | None:
    if len(logs) < MIN_GROUP_RUNS:
        return None
    return math.sqrt(sum(x * x for x in logs) / (len(logs) - 1))


def _group_fits(
    vec: _Vector,
    v: dict[tuple[str, ...], float],
    obs: list[Observation],
    pred_s: list[float],
    fitted: dict[str, HardwareProfile],
) -> dict[str, GroupFit]:
    """Per (engine, hardware): the fitted factors and the residual spread behind the error bars. Every engine
    seen in the data gets factors on every hardware in the data (borrowing the shared terms where the pair
    has no runs)."""
    from datetime import date

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
