"""Runs files (the schema of tests/data/calibration_runs.yaml): each published or measured run as the
model, plan, hardware and engine it ran with, and what was measured. The one reader behind `planner validate`
and `planner calibrate`.

A run's `software` block names its training stack: `engine` (a profile in engine_profiles/, null = the default
engine) and the per-run settings the engine version ran with (engine/settings.py SETTINGS, each documented in the
engine block it sets: `attention`, `tp_overlap`, `p2p_overlap`, `compile`, `grad_dtype`, `rmsnorm`, `master_copy`,
`compiled_loss`, `zero3_gather`, `megatron_fsdp`, `fsdp_edge_groups`, the MoE settings and the recipe options,
`offload_layers` among them); a null field keeps
the engine's default. An unknown engine or value is an error for the whole file (exit 2), not a skipped run: it is
a typo in the file, not a plan the engine refuses; an engine given for every run (`validate --engine`) that cannot
take a run's settings skips that run.

A run's `year` (optional) is when it was measured, the unit leave-one-year-out cross-validation leaves out; without
one it is read from the source: the first year 20YY in it ("Narayanan et al. 2021", "Dec 2024"), else a container
release YY.MM ("NeMo 24.07" = 2024). `family` (optional) overrides the publication family (run_family).
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planner.engine import Engine, plan_problems
from planner.engine.settings import SETTING_CHOICES
from planner.errors import PlannerError
from planner.fit.inputs import is_launch_profile
from planner.fit.memory_kind import MEMORY_KINDS
from planner.fit.plausible import beyond_peak, measured_on
from planner.hardware import HardwareProfile
from planner.io.catalog import DEFAULT_ENGINE, list_engines, load_engine, load_hardware, load_yaml
from planner.io.files import require_file
from planner.io.logs.record import MEASURED_FIELDS
from planner.io.planfile import LIST_KEYS, NUMBER_RANGES, RECIPE_KEYS, check_recipe_setting, pydantic_message
from planner.io.readers import yaml_kind
from planner.plan import Plan, unstated_fields
from planner.specs import ModelSpec

METRICS = ("tokens_per_s_per_gpu", "step_s", "peak_memory_bytes", "mfu")
MEASURED_KEYS = (*MEASURED_FIELDS, "peak_allocated_bytes", "from_warmup")  # what ingest writes (io/logs/record.py)
LEAST_PEAK_BYTES = 2**20  # no training run's GPU peaks under 1 MiB: a smaller peak_memory_bytes is in another unit
FROM_WARMUP = (  # measured.from_warmup: ingest's fallback on a log whose every step line averages warm-up iterations
    "its step time averages warm-up iterations (the log never passes its warm-up; a longer log has steady steps)"
)
YEARS = (2000, 2100)  # a run's year must lie in this range
SOFTWARE_KEYS = {
    "engine", "attention", "tp_overlap", "p2p_overlap", "compile", "grad_dtype", "moe_dispatcher", "ep_overlap",
    "moe_imbalance", "moe_dispatch_dtype", "rmsnorm", "master_copy", "compiled_loss", "zero3_gather", "megatron_fsdp",
    "fsdp_edge_groups", *RECIPE_KEYS,
}  # fmt: skip


@dataclass(frozen=True)
class Run:
    """One run, resolved: what ran and what was measured (measured keys: METRICS)."""

    id: str
    source: str
    family: str  # engine/hardware/publication: the unit leave-one-family-out cross-validation leaves out
    model: ModelSpec
    plan: Plan
    hardware: HardwareProfile
    engine: Engine
    measured: dict[str, float]
    year: int | None = None
    memory_kind: str | None = None  # what the measured peak counts (MEMORY_KINDS; None: the whole device)
    from_warmup: bool = False  # measured.from_warmup: the step time averages warm-up iterations (FROM_WARMUP)

    @property
    def group(self) -> str:
        """The (engine, hardware) group whose calibration residuals give this run's error bars."""
        return f"{self.engine.name}/{self.hardware.name}"

    @property
    def measured_step_s(self) -> float | None:
        """The measured step time: as published, or from tokens/s per GPU (tokens per step / (rate · GPUs))."""
        if self.measured.get("step_s"):
            return self.measured["step_s"]
        rate = self.measured.get("tokens_per_s_per_gpu")
        return self.plan.tokens_per_step / (rate * self.plan.gpus) if rate else None


@dataclass(frozen=True)
class Skipped:
    """A run that cannot be evaluated (its plan breaks a rule, its model or plan is invalid), with why."""

    id: str
    reason: str
    measured: dict[str, float]


# The fields of a run (tests/data/calibration_runs.yaml; what `planner ingest` writes).
RUN_FIELDS = (
    "id", "source", "year", "model", "hardware", "gpus", "gpus_per_node", "plan", "software", "measured", "assumed",
    "derived", "notes",
)  # fmt: skip


def load_runs(path: str | Path) -> list[dict[str, Any]]:
    """The raw runs of a runs file, checked for the fields every run needs."""
    require_file(path, "a runs file (YAML)")
    doc = load_yaml(path)
    if isinstance(doc, dict) and "median_step_s" in doc:  # what `planner launch --profile-out` writes
        raise PlannerError(
            f"{path}: a launch profile, not a runs file: `planner calibrate` fits to launch profiles; "
            "`planner validate` reads runs files (calibration_runs.yaml's schema)"
        )
    bad = [i for i, r in enumerate(doc) if not isinstance(r, dict)] if isinstance(doc, list) else [-1]
    if bad:
        got = yaml_kind(doc) if bad == [-1] else f"{yaml_kind(doc[bad[0]])} as run #{bad[0]}"
        raise PlannerError(f"{path}: expected a YAML list of runs, each a mapping (calibration_runs.yaml), got {got}")
    missing = [i for i, r in enumerate(doc) if not {"id", "model", "hardware", "plan", "measured"} <= set(r)]
    if missing:
        raise PlannerError(f"{path}: run #{missing[0]} lacks one of id, model, hardware, plan, measured")
    for i, run in enumerate(doc):
        _check_shape(path, i, run)
    ids = [str(r["id"]) for r in doc]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:  # a run counted twice in every median, and leave-one-run-out would leave one copy in
        raise PlannerError(f"{path}: run id {twice[0]!r} is given {ids.count(twice[0])} times; ids must be unique")
    return doc


def _check_shape(path: str | Path, index: int, run: dict[str, Any]) -> None:
    """The fields every run needs, of the right kinds; measured values positive finite numbers or null."""
    rid = run.get("id")
    where = (
        f"{path}: run {rid!r}" if isinstance(rid, (str, int)) and not isinstance(rid, bool) else f"{path}: run #{index}"
    )
    if not isinstance(rid, (str, int)) or isinstance(rid, bool):
        raise PlannerError(f"{where}: id must be a name, got {rid!r}")
    unknown = sorted(set(map(str, run)) - set(RUN_FIELDS))
    if unknown:  # a misspelt field (`mesured:`) would otherwise be dropped without a word
        raise PlannerError(f"{where}: unknown field(s) {', '.join(unknown)}; valid: {', '.join(RUN_FIELDS)}")
    for key in ("model", "plan", "measured"):
        if not isinstance(run.get(key), dict):
            hint = " (an inline model spec, not a catalog name)" if key == "model" else ""
            raise PlannerError(f"{where}: {key} must be a mapping{hint}, got {type(run.get(key)).__name__}")
    if not isinstance(run.get("hardware"), str) or not run["hardware"]:
        raise PlannerError(f"{where}: hardware must be a hardware profile name, got {run.get('hardware')!r}")
    for key in ("gpus", "gpus_per_node"):
        v = run.get(key)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            raise PlannerError(f"{where}: {key} must be a positive integer or null, got {v!r}")
    if bad := sorted(set(map(str, run["measured"])) - set(MEASURED_KEYS)):  # a misspelt metric: dropped unsaid
        raise PlannerError(f"{where}: unknown measured field(s) {', '.join(bad)}; valid: {', '.join(MEASURED_KEYS)}")
    for key, v in run["measured"].items():
        if key in METRICS and v is not None and not _positive_number(v):
            raise PlannerError(f"{where}: measured.{key} {v!r} is not a positive finite number (or null)")
        if key == "peak_memory_bytes" and v is not None and v < LEAST_PEAK_BYTES:  # GiB typed into bytes
            raise PlannerError(f"{where}: measured.peak_memory_bytes {v!r} is under 1 MiB: give it in bytes")
    if (warm := run["measured"].get("from_warmup")) not in (None, True, False):
        raise PlannerError(f"{where}: measured.from_warmup must be true or false, got {warm!r}")
    kind = run["measured"].get("peak_memory_kind")
    if kind is not None and kind not in MEMORY_KINDS:
        raise PlannerError(
            f"{where}: measured.peak_memory_kind {kind!r}: give one of {', '.join(MEMORY_KINDS)} or null"
        )
    year = run.get("year")
    if year is not None and (not isinstance(year, int) or isinstance(year, bool) or not YEARS[0] <= year <= YEARS[1]):
        raise PlannerError(f"{where}: year must be a year between {YEARS[0]} and {YEARS[1]} (or absent), got {year!r}")


def run_year(raw: dict[str, Any]) -> int | None:
    """The run's `year`, else the first year 20YY in its source, else a container release YY.MM in it."""
    if raw.get("year") is not None:
        return int(raw["year"])
    source = str(raw.get("source") or "")
    found = re.search(r"(?<!\d)(20\d\d)(?!\d)", source)
    if found:
        return int(found.group(1))
    release = re.search(r"(?<![\d.])(2\d)\.(0[1-9]|1[0-2])(?![\d.])", source)
    return 2000 + int(release.group(1)) if release else None


def _positive_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def _software(raw: dict[str, Any]) -> dict[str, Any]:
    sw = raw.get("software") or {}
    rid = raw.get("id")
    if not isinstance(sw, dict):
        raise PlannerError(f"run {rid}: software must be a mapping of {', '.join(sorted(SOFTWARE_KEYS))}")
    unknown = set(sw) - SOFTWARE_KEYS
    if unknown:
        raise PlannerError(f"run {rid}: unknown software field(s) {sorted(unknown)}; valid: {sorted(SOFTWARE_KEYS)}")
    for key, words in SETTING_CHOICES.items():  # the settings' words, from their one home
        value = sw.get(key)
        if key not in SOFTWARE_KEYS or value is None:
            continue
        if words is None and value not in (True, False):
            raise PlannerError(f"run {rid}: software.{key} {value!r} must be true, false or null")
        if words is not None and value not in words:
            raise PlannerError(f"run {rid}: software.{key} {value!r} is not one of {', '.join(words)}")
    for key in (*NUMBER_RANGES, *LIST_KEYS):
        check_recipe_setting(f"run {rid}", f"software.{key}", key, sw.get(key))
    return sw


def run_engine(raw: dict[str, Any], override: Engine | None = None) -> Engine:
    """The engine a run used, as its software block configures it (null fields: the engine's defaults)."""
    sw = _software(raw)
    if override is not None:
        engine = override
    else:
        name = sw.get("engine") or DEFAULT_ENGINE
        if name not in list_engines():
            raise PlannerError(
                f"run {raw.get('id')}: software.engine {name!r} is not an engine profile; "
                f"known: {', '.join(list_engines())}"
            )
        engine = load_engine(name)
    return engine.configured(**{k: sw.get(k) for k in sorted(SOFTWARE_KEYS - {"engine"})})  # Engine.configured's names


def run_hardware(raw: dict[str, Any], override: HardwareProfile | None = None) -> HardwareProfile:
    hw = override or load_hardware(raw["hardware"])
    per_node = raw.get("gpus_per_node")
    if per_node and per_node != hw.gpus_per_node:
        hw = hw.with_gpus_per_node(per_node)
    return hw


def run_family(raw: dict[str, Any], engine: Engine, hardware: str) -> str:
    """engine/hardware/publication, the publication being the source's first word (an author or a repository:
    'Narayanan', 'NVIDIA/NeMo', 'pytorch/torchtitan'); a run may name its family itself."""
    if raw.get("family"):
        return str(raw["family"])
    first = str(raw.get("source") or "unknown").replace(",", " ").split()
    return f"{engine.name}/{hardware}/{first[0] if first else 'unknown'}"


def parse_run(
    raw: dict[str, Any], *, hardware: HardwareProfile | None = None, engine: Engine | None = None
) -> Run | Skipped:
    """A resolved run, or why it cannot be evaluated."""
    rid = str(raw["id"])
    measured = {k: float(v) for k, v in (raw.get("measured") or {}).items() if k in METRICS and v is not None}
    _software(raw)  # a typo in the block (a key, a word) is an error for the whole file, an engine given or not
    try:  # an engine given for every run (validate --engine) that cannot take this one's settings skips it
        eng = run_engine(raw, engine)
    except PlannerError as e:
        if engine is None:
            raise  # a value its own engine refuses: an error for the whole file (above)
        return Skipped(rid, f"{engine.name} does not run its software block: {e}", measured)
    unstated = unstated_fields(raw.get("plan"))
    if unstated:
        return Skipped(
            rid,
            f"its plan leaves {', '.join(unstated)} unstated (null: what its log did not say); fill them in, or "
            "validate the log itself with --gpus and --plan PLAN.yaml",
            measured,
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # declared sizes in run files are rounded ("8B")
            model = ModelSpec(**raw["model"])
        plan = Plan(**raw["plan"])
        hw = run_hardware(raw, hardware)
    except ValidationError as e:
        return Skipped(rid, pydantic_message(e, "run"), measured)
    except PlannerError as e:
        return Skipped(rid, str(e), measured)
    problems = plan_problems(model, plan, eng, raw.get("gpus"), hw)
    if problems:
        return Skipped(rid, "; ".join(str(p) for p in problems), measured)
    family = run_family(raw, eng, hw.name)
    kind = (raw.get("measured") or {}).get("peak_memory_kind")
    warm = bool((raw.get("measured") or {}).get("from_warmup"))
    run = Run(rid, str(raw.get("source") or ""), family, model, plan, hw, eng, measured, run_year(raw), kind, warm)
    impossible = beyond_peak(model, plan, measured_on(raw.get("hardware"), hw), run.measured_step_s)
    return run if impossible is None else Skipped(rid, impossible, measured)


def runs_hardware(paths: list[str]) -> list[str]:
    """The catalog hardware profiles the runs files name, in order of first appearance."""
    names: list[str] = []
    for path in paths:
        if is_launch_profile(path):
            continue
        for raw in load_runs(path):
            hw = str(raw.get("hardware"))
            if hw not in names:
                names.append(hw)
    if not names:
        raise PlannerError("no runs file names a hardware profile: give --hardware (a launch profile needs it)")
    return names


def parse_runs(
    raws: list[dict[str, Any]], *, hardware: HardwareProfile | None = None, engine: Engine | None = None
) -> list[Run | Skipped]:
    return [parse_run(r, hardware=hardware, engine=engine) for r in raws]
