"""Fit a hardware profile's efficiency parameters to measured runs (scipy, imported only here).

Observations come from runs files (the calibration_runs.yaml schema) and from `planner launch`
profile JSONs. The fit is bounded least squares on log(predicted / measured) step time, with a weak
prior pulling each parameter toward its starting value so that parameters the data cannot see stay
put (and show a large uncertainty) instead of wandering to a bound.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import yaml

from planner.cost.schedule import step_time
from planner.engine import Engine, plan_problems
from planner.errors import PlannerError
from planner.plan import Plan
from planner.specs import Efficiency, HardwareProfile, MatmulPoint, ModelSpec

# name: (low, high) bounds. matmul_scale and matmul_small are log multipliers of the profile's GEMM
# table at its large and small end; the rest are the Efficiency fields themselves.
PARAMS: dict[str, tuple[float, float]] = {
    "matmul_scale": (-2.0, 0.5),
    "matmul_small": (-2.5, 2.5),
    "attention": (0.03, 0.95),
    "hbm": (0.1, 1.0),
    "intra_node": (0.05, 1.0),
    "inter_node": (0.02, 1.0),
    "step_overhead_s": (0.0, 30.0),
    "kernel_overhead_s": (0.0, 1e-3),
    "collective_overhead_s": (0.0, 0.05),
}
# Statistics of a launch profile's timed steps that observation_from_profile can use as "the" step time.
STEP_STATS = ("median", "p25", "min")
PRIOR_WEIGHT = 0.05  # residual weight of (θ - θ0)/range: a weak pull, ~5% of one run's log error
CONTRADICTION_PCT = 15.0  # the same configuration measured this far apart cannot be fitted


@dataclass(frozen=True)
class Observation:
    id: str
    model: ModelSpec
    plan: Plan
    hardware: HardwareProfile
    measured_step_s: float
    source: str


@dataclass(frozen=True)
class FitResult:
    base: HardwareProfile
    fitted: HardwareProfile
    names: tuple[str, ...]
    values: dict[str, float]
    stderr: dict[str, float]
    before_pct: dict[str, float]  # per observation, % error of step time before the fit
    after_pct: dict[str, float]
    observations: tuple[Observation, ...]

    @staticmethod
    def _median_abs(d: dict[str, float]) -> float:
        return statistics.median(abs(v) for v in d.values()) if d else float("nan")

    @property
    def median_before_pct(self) -> float:
        return self._median_abs(self.before_pct)

    @property
    def median_after_pct(self) -> float:
        return self._median_abs(self.after_pct)


def _default_engine() -> Engine:
    from planner.io.catalog import DEFAULT_ENGINE, load_engine

    return load_engine(DEFAULT_ENGINE)


# ---- observations --------------------------------------------------------------------------------
def observations_from_runs(runs: list[dict[str, Any]], hardware: HardwareProfile, source: str) -> list[Observation]:
    """Runs of the profile's hardware with a measured step time or throughput per GPU."""
    import warnings

    out = []
    for run in runs:
        if run.get("hardware") not in (hardware.name, None):
            continue
        m = run.get("measured") or {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = ModelSpec(**run["model"])
        plan = Plan(**run["plan"])
        if plan_problems(model, plan, _default_engine(), run.get("gpus")):
            continue
        step = m.get("step_s")
        if step is None and m.get("tokens_per_s_per_gpu"):
            step = plan.tokens_per_step / (m["tokens_per_s_per_gpu"] * plan.gpus)
        if not step:
            continue
        hw = hardware
        if run.get("gpus_per_node") and run["gpus_per_node"] != hw.gpus_per_node:
            hw = hw.model_copy(update={"gpus_per_node": run["gpus_per_node"]})
        out.append(Observation(str(run["id"]), model, plan, hw, float(step), source))
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
    """A `planner launch` profile JSON: the model spec it ran, its plan and the median (or `stat`) step time."""
    try:
        model = ModelSpec(**doc["model"]) if isinstance(doc["model"], dict) else None
        plan = Plan(**doc["plan"])
        step = step_stat(doc, stat)
    except (KeyError, TypeError, ValueError) as e:
        raise PlannerError(
            f"{source}: not a `planner launch` profile (needs model, plan, median_step_s): {e}"
        ) from None
    if model is None:
        from planner.io.catalog import load_model

        model = load_model(doc["model"])
    return Observation(str(doc.get("id") or Path(source).stem), model, plan, hardware, step, source)


def load_observations(paths: list[str], hardware: HardwareProfile, *, stat: str = "median") -> list[Observation]:
    from planner.io.catalog import load_yaml

    obs: list[Observation] = []
    for path in paths:
        p = Path(path)
        if not p.is_file():
            raise PlannerError(f"{path}: no such file")
        if p.suffix == ".json":
            try:
                doc = json.loads(p.read_text())
            except json.JSONDecodeError as e:
                raise PlannerError(f"{path}:{e.lineno}: malformed JSON ({e.msg})") from None
            obs.append(observation_from_profile(doc, hardware, path, stat=stat))
        else:
            doc = load_yaml(p)
            if not isinstance(doc, list):
                raise PlannerError(f"{path}: expected a runs file (a YAML list of runs) or a profile .json")
            obs += observations_from_runs(doc, hardware, path)
    return obs


# ---- the parameter vector -------------------------------------------------------------------------
def _start(eff: Efficiency) -> dict[str, float]:
    return {
        "matmul_scale": 0.0,
        "matmul_small": 0.0,
        "attention": eff.attention if eff.attention is not None else 0.6 * eff.matmul[-1].efficiency,
        "hbm": eff.hbm,
        "intra_node": eff.intra_node,
        "inter_node": eff.inter_node,
        "step_overhead_s": eff.step_overhead_s,
        "kernel_overhead_s": eff.kernel_overhead_s,
        "collective_overhead_s": eff.collective_overhead_s,
    }


def apply_params(eff: Efficiency, values: dict[str, float]) -> Efficiency:
    """A new Efficiency with `values` applied; the GEMM table keeps its shape, tilted and scaled."""
    pts = eff.matmul
    lo, hi = math.log(pts[0].flops), math.log(pts[-1].flops)
    scale, small = values.get("matmul_scale", 0.0), values.get("matmul_small", 0.0)
    matmul = []
    for p in pts:
        z = 0.0 if hi == lo else (math.log(p.flops) - lo) / (hi - lo)
        e = p.efficiency * math.exp(scale + small * (1.0 - z))
        matmul.append(MatmulPoint.model_construct(flops=p.flops, efficiency=min(0.98, max(1e-3, e))))
    update: dict[str, Any] = {"matmul": tuple(matmul)}
    for k in (
        "attention",
        "hbm",
        "intra_node",
        "inter_node",
        "step_overhead_s",
        "kernel_overhead_s",
        "collective_overhead_s",
    ):
        if k in values:
            update[k] = values[k]
    return eff.model_copy(update=update)


def _with_efficiency(hw: HardwareProfile, eff: Efficiency) -> HardwareProfile:
    return hw.model_copy(update={"efficiency": eff})


def predict_step_s(obs: Observation, eff: Efficiency, engine: Engine) -> float:
    return step_time(obs.model, _with_efficiency(obs.hardware, eff), obs.plan, engine).step_s


def _check_enough(obs: list[Observation], names: tuple[str, ...]) -> None:
    if len(obs) < max(3, len(names) + 1):
        raise PlannerError(
            f"calibrate needs at least {max(3, len(names) + 1)} measured runs to fit {len(names)} parameters "
            f"({', '.join(names)}); got {len(obs)}. Give more runs, or fewer parameters with --params"
        )
    seen: dict[tuple, Observation] = {}
    for o in obs:
        key = (o.model, o.plan, o.hardware.gpus_per_node)
        other = seen.get(key)
        if other and abs(o.measured_step_s / other.measured_step_s - 1) * 100 > CONTRADICTION_PCT:
            raise PlannerError(
                f"contradictory runs: {other.id} and {o.id} are the same model and plan but measured "
                f"{other.measured_step_s:.4g} s and {o.measured_step_s:.4g} s per step; drop one or check them"
            )
        seen[key] = o


def fit(
    obs: list[Observation],
    base: HardwareProfile,
    *,
    names: tuple[str, ...] = tuple(PARAMS),
    engine: Engine | None = None,
) -> FitResult:
    """Bounded least squares on log step-time error, with a weak prior; returns before/after errors."""
    import numpy as np
    from scipy.optimize import least_squares

    engine = engine or _default_engine()
    unknown = [n for n in names if n not in PARAMS]
    if unknown:
        raise PlannerError(f"unknown parameter(s) {unknown}; valid: {', '.join(PARAMS)}")
    _check_enough(obs, names)
    start = _start(base.efficiency)
    x0 = np.array([start[n] for n in names])
    lo = np.array([PARAMS[n][0] for n in names])
    hi = np.array([PARAMS[n][1] for n in names])
    x0 = np.clip(x0, lo, hi)
    width = hi - lo
    measured = np.log([o.measured_step_s for o in obs])

    def values_of(x: Any) -> dict[str, float]:
        return {**start, **dict(zip(names, map(float, x)))}

    def residuals(x: Any) -> Any:
        eff = apply_params(base.efficiency, values_of(x))
        pred = np.log([predict_step_s(o, eff, engine) for o in obs])
        prior = PRIOR_WEIGHT * (x - x0) / width
        return np.concatenate([pred - measured, prior])

    res = least_squares(residuals, x0, bounds=(lo, hi), method="trf", x_scale=width / 10, max_nfev=200 * len(names))
    values = values_of(res.x)
    n_data = len(obs)
    data_res = res.fun[:n_data]
    dof = max(1, n_data - len(names))
    sigma2 = float(data_res @ data_res) / dof
    try:
        cov = np.linalg.pinv(res.jac.T @ res.jac) * sigma2
        stderr = {n: float(math.sqrt(max(cov[i, i], 0.0))) for i, n in enumerate(names)}
    except np.linalg.LinAlgError:  # pragma: no cover
        stderr = {n: float("nan") for n in names}
    fitted_eff = apply_params(base.efficiency, values)
    before = {o.id: (predict_step_s(o, base.efficiency, engine) / o.measured_step_s - 1) * 100 for o in obs}
    after = {o.id: (predict_step_s(o, fitted_eff, engine) / o.measured_step_s - 1) * 100 for o in obs}
    fitted = _with_efficiency(base, fitted_eff)
    return FitResult(base, fitted, names, {n: values[n] for n in names}, stderr, before, after, tuple(obs))


# ---- writing the profile ---------------------------------------------------------------------------
def efficiency_yaml(eff: Efficiency, note: str) -> str:
    """The efficiency block; every number says it was fitted (the note says to what and when)."""
    c = "  # fitted, see `fitted:` below"
    lines = [
        f"efficiency:                               # {note}",
        "  matmul:                                 # achieved fraction of dense peak by FLOPs of one GEMM",
    ]
    for p in eff.matmul:
        lines.append(f"    - {{flops: {p.flops:.3e}, efficiency: {p.efficiency:.4f}}}{c}")
    if eff.attention is not None:
        lines.append(f"  attention: {eff.attention:.4f}{c} (fused attention kernel, fraction of peak)")
    lines.append(f"  hbm: {eff.hbm:.4f}{c}")
    lines.append(f"  intra_node: {eff.intra_node:.4f}{c}")
    lines.append(f"  inter_node: {eff.inter_node:.4f}{c}")
    lines.append(f"  step_overhead_s: {eff.step_overhead_s:.6f}{c}")
    if eff.kernel_overhead_s:
        lines.append(f"  kernel_overhead_s: {eff.kernel_overhead_s:.4e}{c} (per compute kernel)")
    if eff.collective_overhead_s:
        lines.append(f"  collective_overhead_s: {eff.collective_overhead_s:.4e}{c} (per collective call)")
    lines.append(f"  fitted: {json.dumps(note)}  # provenance of this block")
    return "\n".join(lines) + "\n"


def write_profile(result: FitResult, source_text: str | None, out: str) -> None:
    """Rewrite only the efficiency block of the source profile (or dump the profile), atomically."""
    today = date.today().isoformat()
    sources = sorted({o.source for o in result.observations})
    note = (
        f"fitted by planner calibrate on {today} to {len(result.observations)} runs from "
        f"{', '.join(Path(s).name for s in sources)}; median |error| {result.median_before_pct:.1f}% -> "
        f"{result.median_after_pct:.1f}%"
    )
    block = efficiency_yaml(result.fitted.efficiency, note)
    name = Path(out).stem
    if source_text:
        lines = source_text.splitlines(keepends=True)
        start = next(i for i, line in enumerate(lines) if line.startswith("efficiency:"))
        end = next((i for i in range(start + 1, len(lines)) if lines[i][:1].isalpha()), len(lines))
        text = "".join(lines[:start]) + block + "".join(lines[end:])
        text = "".join(
            f"name: {name}\n" if line.startswith("name:") else line for line in text.splitlines(keepends=True)
        )
    else:
        doc = result.fitted.model_dump()
        doc["name"] = name
        doc.pop("efficiency")
        text = yaml.safe_dump(doc, sort_keys=False) + block
    header = f"# Calibrated profile: {note}.\n# Base profile: {result.base.name}.\n"
    target = Path(out)
    tmp = target.with_name(target.name + ".tmp")
    try:
        tmp.write_text(header + text)
        tmp.replace(target)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise PlannerError(f"cannot write {out!r}: {e.strerror}") from None
