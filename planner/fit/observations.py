"""Observations for `planner calibrate` and cross-validation: measured step times of known plans, read from
runs files (each run with the engine its software block names) and from `planner launch` profile JSONs."""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planner.cost.coster import Coster
from planner.engine import Engine, plan_problems
from planner.errors import PlannerError, each_or_refused
from planner.fit.inputs import is_launch_profile, states_its_plan
from planner.fit.left_out import LeftOutOfFit
from planner.fit.memory_kind import comparable_peak_bytes
from planner.fit.runs import FROM_WARMUP, Run, load_runs, parse_runs
from planner.hardware import HardwareProfile
from planner.io.catalog import load_json
from planner.io.files import require_file
from planner.io.planfile import pydantic_message
from planner.plan import Plan
from planner.specs import ModelSpec

# Statistics of a launch profile's timed steps that observation_from_profile can use as "the" step time.
STEP_STATS = ("median", "p25", "min")
CONTRADICTION_PCT = 15.0  # repeats of one configuration measured this far apart are said (launch noise is ~10%)


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
    family: str = ""  # engine/hardware/publication (fit/runs.py run_family)
    year: int | None = None
    memory_kind: str | None = None  # what measured_peak_bytes counts (fit/runs.py MEMORY_KINDS)

    def predicted_peak_bytes(self, hardware: HardwareProfile | None = None) -> float:
        """The prediction on `hardware` (default: the run's), as the measured peak counts memory."""
        hw = hardware or self.hardware
        return comparable_peak_bytes(Coster(self.model, hw, self.engine).memory(self.plan), hw, self.memory_kind)

    @property
    def group(self) -> str:
        return f"{self.engine.name}/{self.hardware.name}"

    @property
    def gpus(self) -> int:
        return self.plan.gpus


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
        run.year,
        run.memory_kind,
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
        if not isinstance(run, Run) or run.from_warmup:  # said, never dropped unseen (validate lists it)
            why = FROM_WARMUP if isinstance(run, Run) else run.reason  # a warm-up step fitted as steady (audit)
            warnings.warn(LeftOutOfFit(source, run.id, why), stacklevel=2)
            continue
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
    except ValidationError as e:
        raise PlannerError(f"{source}: not a `planner launch` profile: {pydantic_message(e, 'profile')}") from None
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as e:
        raise PlannerError(
            f"{source}: not a `planner launch` profile (needs model, plan, median_step_s): {e!r}"
        ) from None
    if not (math.isfinite(step) and step > 0):
        raise PlannerError(f"{source}: the {stat} step time {step!r} is not a positive finite number of seconds")
    shared = doc.get("ranks_per_core", 1.0)
    if not (isinstance(shared, (int, float)) and math.isfinite(shared) and shared >= 1):
        raise PlannerError(f"{source}: ranks_per_core {shared!r} is not a number of at least 1")
    step /= shared  # ranks that shared cores: the step one with a core each would take, as launch prices it
    _check_device(doc, hardware, source)
    if model is None:
        model = load_model(doc["model"])
    engine = load_engine(doc.get("engine") or "planner")
    problems = plan_problems(model, plan, engine, None, hardware)  # as a runs file's plan is checked (runs.py)
    if problems:
        raise PlannerError(f"{source}: its plan cannot run: {problems[0]}")
    family = f"{engine.name}/{hardware.name}/launch"  # as run_family names a publication's runs: these are launches
    return Observation(str(doc.get("id") or source), model, plan, hardware, engine, step, source, family=family)


def _check_device(doc: dict[str, Any], hardware: HardwareProfile, source: str) -> None:
    """A launch on CPU processes is not a run of a GPU profile (nor a GPU's of a CPU profile): its step would be
    fitted as that GPU's, replacing what the GPU's own runs gave (a CPU launch of a plan file's h100-sxm did)."""
    device = doc.get("device")
    if isinstance(device, str) and (device == "cpu") != hardware.runs_on_cpu:
        ran = "CPU processes" if device == "cpu" else device
        raise PlannerError(
            f"{source}: the run ran on {ran}, which the {hardware.name} profile does not price; calibrate it on a "
            f"profile of the machine it ran on (--hardware {'cpu' if device == 'cpu' else 'NAME'}, or one `planner "
            "bench-hardware` wrote there)"
        )


def load_observations(
    paths: list[str],
    hardware: HardwareProfile | None,
    *,
    stat: str = "median",
    model: ModelSpec | None = None,
    given: Mapping[str, Any] | None = None,
) -> list[Observation]:
    """Runs files (.yaml), launch profiles (.json) and training logs (anything else, read as `planner ingest`
    reads them); `hardware` None: each run on the profile it names (a launch profile names the one it ran on; a
    log that does not say needs `hardware`, a log that does not state its model `model`, and `given` the rest
    ingest's --gpus and --plan give: read_log's gpus, given_plan and given_software)."""

    def observed(path: str) -> list[Observation]:
        p = require_file(path, "a runs file, a launch profile or a training log")
        if is_launch_profile(p):
            doc = load_json(p, path)
            return [observation_from_profile(doc, hardware or _profile_hardware(doc, path), path, stat=stat)]
        return observations_from_runs(runs_of(p, hardware, model, **(given or {})), hardware, path)

    return [o for each in each_or_refused(paths, observed) for o in each]


def runs_of(
    path: Path, hardware: HardwareProfile | None, model: ModelSpec | None, **given: Any
) -> list[dict[str, Any]]:
    """The runs-file entries of a runs file (.yaml) or of a training log (anything else but a launch profile's
    .json: read as `planner ingest` reads it, `hardware`, `model` and `given` (read_log's gpus, given_plan and
    given_software: ingest's --gpus and --plan) where the log does not say)."""
    if states_its_plan(path):
        return load_runs(path)
    require_file(path, "a runs file (YAML) or a training log")
    return _log_entries(path, hardware, model, given)


def _profile_hardware(doc: dict[str, Any], path: str) -> HardwareProfile:
    from planner.io.catalog import load_hardware

    name = doc.get("hardware") if isinstance(doc, dict) else None
    if not isinstance(name, str) or not name:
        raise PlannerError(f"{path}: the launch profile does not name its hardware; give --hardware")
    return load_hardware(name)


def _log_entries(
    path: Path, hardware: HardwareProfile | None, model: ModelSpec | None, given: dict[str, Any]
) -> list[dict[str, Any]]:
    """A training log as runs-file entries (planner.io.logs, what `planner ingest` writes)."""
    from planner.io.logs import log_file_text, read_log, runs_entries

    hw = hardware.name if hardware else None
    run = read_log(log_file_text(str(path)), source=str(path), model=model, hardware=hw, **given)
    entries = runs_entries([run], purpose="to use its measurements")
    unstated = [k for e in entries for k, v in e["plan"].items() if v is None]
    if unstated:  # what --gpus (the GPUs in all derive dp) and --plan fill, here as in ingest
        fill = "--gpus N" if unstated == ["dp"] else "--plan PLAN.yaml"
        if given.get("given_plan") and unstated != ["dp"]:  # it was given: asking for it again goes round (audit)
            raise PlannerError(
                f"run {run.id!r} ({path}): neither the log nor the --plan file states {', '.join(unstated)}; add "
                f"{'them' if len(unstated) > 1 else 'it'} to the plan file (the plan the run used)"
            )
        raise PlannerError(
            f"run {run.id!r} ({path}): the log does not state {', '.join(unstated)}; give {fill} (the plan the run "
            f"used), or write a runs file with `planner ingest {path} {fill} -o runs.yaml`"
        )
    return entries


# ---- the runs a fit takes ------------------------------------------------------------------------
def prepared_for_fit(
    obs: list[Observation], bases: dict[str, HardwareProfile], engine: Engine | None
) -> list[Observation]:
    """The runs to fit: with `engine` if given (a launch worker fit), on the profile fitted for their hardware at
    their own node size; repeats of one configuration merged into one run."""
    if engine is not None:
        obs = [dataclasses.replace(o, engine=engine) for o in obs]
    missing = sorted({o.hardware.name for o in obs} - set(bases))
    if missing:
        raise PlannerError(f"observations of hardware {missing} but no profile to fit them with")
    obs = [dataclasses.replace(o, hardware=_with_nodes(bases.get(o.hardware.name), o.hardware)) for o in obs]
    return _merged_repeats(obs)


def _with_nodes(base: HardwareProfile | None, run_hw: HardwareProfile) -> HardwareProfile:
    """The profile being fitted, with the run's own GPUs per node (runs files may state another node size)."""
    if base is None:
        return run_hw
    if base.gpus_per_node != run_hw.gpus_per_node:
        return base.with_gpus_per_node(run_hw.gpus_per_node)
    return base


def _merged_repeats(obs: list[Observation]) -> list[Observation]:
    """Repeats of one configuration as one observation at their geometric mean (the log-space fit's), so a plan
    launched n times weighs as one; repeats measured more than CONTRADICTION_PCT apart are said, since that is noise
    or a difference the files do not record."""
    if not obs:
        raise PlannerError("calibrate needs at least one measured run")
    groups: dict[tuple, list[Observation]] = {}
    for o in obs:
        key = (o.model, o.plan, o.hardware.name, o.hardware.gpus_per_node, o.engine.model_dump_json())
        groups.setdefault(key, []).append(o)
    out = []
    for same in groups.values():
        first, steps = same[0], [o.measured_step_s for o in same]
        if len(same) > 1 and (max(steps) / min(steps) - 1) * 100 > CONTRADICTION_PCT:
            warnings.warn(
                f"runs {', '.join(o.id for o in same)} are the same model, plan and engine but measured "
                f"{min(steps):.4g} to {max(steps):.4g} s per step; fitted as one run at their geometric mean (drop "
                "one if it ran something else)",
                stacklevel=3,
            )
        mean_s = math.exp(sum(math.log(t) for t in steps) / len(steps))
        extra = f" (+{len(same) - 1} repeat{'s' if len(same) > 2 else ''})" if len(same) > 1 else ""
        out.append(dataclasses.replace(first, id=first.id + extra, measured_step_s=mean_s) if extra else first)
    return out
