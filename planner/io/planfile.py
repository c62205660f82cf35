"""Plan files (`search --save`, `--plan FILE.yaml`) and turning flags into a Plan.

A plan file is YAML: the plan's fields under `plan:`, with `model`, `hardware`, `engine`, `gpus` and the
engine's per-run settings under `training:` beside it, as `search --save` writes it (a bare mapping of plan
fields is accepted too). Flags given on the command line override the file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planner.engine.settings import LIST_SETTINGS, SETTING_CHOICES
from planner.errors import PlannerError
from planner.io.files import document_text, require_file, write_text_atomic
from planner.plan import Plan, derive_plan
from planner.specs import MAX_LAYERS

PLAN_FIELDS = tuple(Plan.model_fields)
FILE_KEYS = ("plan", "model", "hardware", "cluster", "engine", "gpus", "training", "predicted")
# The engine's per-run settings a plan file keeps (Engine.configured): name -> allowed values (None: a bool).
TRAINING_KEYS = SETTING_CHOICES
# The recipe options that take a share (0-1) or a list of modules (Engine.configured checks them again).
FRACTION_KEYS = ("activation_offload", "optimizer_offload")
# Settings that take a whole number of layers: the layers whose activations the layer-wise CPU offload moves.
COUNT_KEYS = ("offload_layers",)
# Settings that take a number in a range: the shares above, the busiest expert-parallel rank's load over the mean,
# and the counts.
NUMBER_RANGES = {
    **dict.fromkeys(FRACTION_KEYS, (0.0, 1.0)),
    "moe_imbalance": (1.0, 64.0),
    **dict.fromkeys(COUNT_KEYS, (0, MAX_LAYERS)),
}
LIST_KEYS = LIST_SETTINGS
# The recipe memory and speed options a run may state (engine.Engine.configured's names; null: the engine's default).
RECIPE_KEYS = {*FRACTION_KEYS, *COUNT_KEYS, *LIST_KEYS, "precision_aware_optimizer", "optimizer_moment_dtype",
               "fp8_param_gather", "cuda_graphs"}  # fmt: skip


@dataclass(frozen=True)
class PlanFile:
    """What a plan file says beside the plan fields."""

    plan: dict[str, Any]
    model: str | None = None
    hardware: str | None = None
    engine: str | None = None
    gpus: int | None = None
    training: dict[str, Any] = field(default_factory=dict)
    cluster: str | None = None  # the cluster the plan was priced on (search --cluster): its tiers beyond the node
    predicted: dict[str, Any] | None = None


def pydantic_message(err: ValidationError, where: str) -> str:
    """One line from a pydantic error: each bad field and why, plus the valid fields when a key is unknown."""
    parts = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "(top level)"
        if e["type"] == "extra_forbidden":
            parts.append(f"{loc}: unknown field")
        else:
            got = f" (got {e['input']!r})" if "input" in e and not isinstance(e["input"], dict) else ""
            parts.append(f"{loc}: {e['msg']}{got}")
    return f"{where}: " + "; ".join(parts)


def beside(plan_path: str, ref: str | None) -> str | None:
    """A model, hardware, engine or cluster file a plan file names, as a path from here: relative paths are the
    plan file's folder's (search --save writes them so), else, for a file written before, this folder's. A plan
    saved from an imported config loaded only from the folder search ran in (audit)."""
    from planner.io.catalog import looks_like_path

    if ref is None or not looks_like_path(ref) or Path(ref).is_absolute():
        return ref
    there = Path(plan_path).parent / ref
    return str(there) if there.exists() else ref


def relative_to_plan(plan_path: str, ref: str) -> str:
    """A file as search --save writes it: relative to the plan file's folder (`beside` reads it back)."""
    from planner.io.catalog import looks_like_path

    if not looks_like_path(ref) or not Path(ref).exists():
        return ref
    return os.path.relpath(Path(ref).resolve(), Path(plan_path).resolve().parent)


def _text(path: str, key: str, value: Any) -> str | None:
    if value is None or (isinstance(value, str) and value):
        return value
    raise PlannerError(f"{path}: {key} must be a name or a path, got {value!r}")


def _training(path: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise PlannerError(f"{path}: training must be a mapping of {', '.join(TRAINING_KEYS)}, got {value!r}")
    for k, v in value.items():
        if k in NUMBER_RANGES or k in LIST_KEYS:
            check_recipe_setting(path, f"training.{k}", k, v)
            continue
        if k not in TRAINING_KEYS:
            valid_keys = ", ".join((*TRAINING_KEYS, *NUMBER_RANGES, *LIST_KEYS))
            raise PlannerError(f"{path}: unknown training setting {k!r}; valid: {valid_keys}")
        valid = TRAINING_KEYS[k]
        if (valid is None and not isinstance(v, bool)) or (valid is not None and v not in valid):
            allowed = "true or false" if valid is None else ", ".join(valid)
            raise PlannerError(f"{path}: training.{k}={v!r} is not valid; choose {allowed}")
    return dict(value)


def check_recipe_setting(where: str, name: str, key: str, v: Any) -> None:
    """A number in its range (NUMBER_RANGES: a share in [0, 1], moe_imbalance in [1, 64], a count of layers) or a
    list of modules, as
    a YAML list or a comma string (recompute_modules, offload_modules); null keeps the engine's default."""
    if v is None:
        return
    if key in NUMBER_RANGES:
        lo, hi = NUMBER_RANGES[key]
        kind = int if key in COUNT_KEYS else (int, float)
        if isinstance(v, bool) or not isinstance(v, kind) or not lo <= v <= hi:
            what = "a whole number" if key in COUNT_KEYS else "a number"
            raise PlannerError(f"{where}: {name}={v!r} is not valid; give {what} from {lo:g} to {hi:g}")
        return
    items = [x.strip() for x in v.split(",")] if isinstance(v, str) else v
    valid = LIST_KEYS[key]
    if not isinstance(items, list) or not all(isinstance(x, str) and x in valid for x in items):
        raise PlannerError(f"{where}: {name}={v!r} is not valid; give a list of {', '.join(valid)}")


def read_plan_file(path: str) -> PlanFile:
    from planner.io.catalog import load_yaml

    require_file(path, "the plan file `planner search --save FILE` wrote",
                 missing="no such plan file (write one with `planner search --save FILE`)")  # fmt: skip
    doc = load_yaml(path)
    if not isinstance(doc, dict):
        raise PlannerError(f"{path}: expected a mapping with a 'plan:' section, got {type(doc).__name__}")
    if "plan" not in doc:
        doc = {"plan": doc}
    extra = set(doc) - set(FILE_KEYS)
    if extra:
        raise PlannerError(f"{path}: unknown key(s) {sorted(extra)}; valid: {', '.join(FILE_KEYS)}")
    plan = doc["plan"]
    if not isinstance(plan, dict):
        raise PlannerError(f"{path}: plan must be a mapping of plan fields ({', '.join(PLAN_FIELDS)}), got {plan!r}")
    plan, engine = _plan_engine(path, plan, doc.get("engine"))
    unknown = set(plan) - set(PLAN_FIELDS)
    if unknown:
        raise PlannerError(f"{path}: unknown plan field(s) {sorted(unknown)}; valid: {', '.join(PLAN_FIELDS)}")
    gpus = doc.get("gpus")
    if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1):
        raise PlannerError(f"{path}: gpus must be a positive integer, got {gpus!r}")
    predicted = doc.get("predicted")
    return PlanFile(
        plan=checked_fields(path, dict(plan)),  # strictly: `dp: true` is not dp 1
        model=beside(path, _text(path, "model", doc.get("model"))),
        hardware=beside(path, _text(path, "hardware", doc.get("hardware"))),
        cluster=beside(path, _text(path, "cluster", doc.get("cluster"))),
        engine=beside(path, _text(path, "engine", engine)),
        gpus=gpus,
        training=_training(path, doc.get("training")),
        predicted=predicted if isinstance(predicted, dict) else None,
    )


def _plan_engine(path: str, plan: dict[str, Any], engine: object) -> tuple[dict[str, Any], object]:
    """The plan's fields and the file's engine: a `{PLAN}` document (`memory`, `estimate`, `search`, `scale` --json)
    names its engine inside the plan, and reads as the file's own where the file names none or the same one."""
    if "engine" not in plan:
        return plan, engine
    fields = {k: v for k, v in plan.items() if k != "engine"}
    if engine is not None and engine != plan["engine"]:
        raise PlannerError(f"{path}: the plan's engine {plan['engine']!r} is not the file's engine {engine!r}")
    return fields, plan["engine"]


def checked_fields(path: str, fields: dict[str, Any]) -> dict[str, Any]:
    """A plan file's fields, each checked as Plan checks it, for a use that takes them one by one (ingest --plan
    fills what a log leaves unstated: no field there depends on another); one line naming the first bad one."""
    from typing import Annotated

    from pydantic import TypeAdapter

    out = {}
    for name, value in fields.items():
        info = Plan.model_fields[name]
        kind: Any = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
        try:
            out[name] = TypeAdapter(kind).validate_python(value, strict=True)
        except ValidationError as e:
            raise PlannerError(f"{path}: plan.{name}: {e.errors()[0]['msg']} (got {value!r})") from None
    return out


def build_plan(
    *,
    gpus: int | None,
    doc: PlanFile | None,
    flags: dict[str, Any],
    defaults: dict[str, Any] | None = None,
    batch_tokens: bool = False,
    sp_with_tp: bool = False,
) -> Plan:
    """The plan from defaults, then --plan FILE, then flags (flags win); derive_plan fills the rest (the global
    batch and sequence parallelism as `batch_tokens` and `sp_with_tp` say)."""
    fields = dict(defaults or {})
    fields.update(doc.plan if doc else {})
    fields.update({k: v for k, v in flags.items() if v is not None})
    changed = any(flags.get(d) is not None for d in ("tp", "pp", "cp")) or (doc is not None and gpus != doc.gpus)
    if doc and gpus is not None and changed and flags.get("dp") is None:
        fields.pop("dp", None)  # a degree or the GPU count changed on the command line: derive dp again
    try:
        return derive_plan(gpus, batch_tokens=batch_tokens, sp_with_tp=sp_with_tp, **fields)
    except ValidationError as e:
        raise PlannerError(pydantic_message(e, "plan")) from None


def write_plan_file(
    path: str,
    *,
    plan: Plan,
    model: str,
    hardware: str,
    engine: str,
    gpus: int,
    training: dict[str, Any] | None = None,
    predicted: dict[str, Any] | None = None,
    header: str = "",
    cluster: str | None = None,
) -> None:
    """Write atomically: a half-written plan file never replaces a good one."""
    doc: dict[str, Any] = {
        "model": model,
        "hardware": hardware,
        **({"cluster": cluster} if cluster else {}),
        "engine": engine,
        "gpus": gpus,
        "plan": plan.model_dump(),
    }
    if training:
        doc["training"] = training
    if predicted:
        doc["predicted"] = predicted
    write_text_atomic(path, document_text(path, doc, header=header), what="plan file")
