"""Plan files (`search --save`, `--plan FILE.yaml`) and turning flags into a Plan.

A plan file is YAML: the plan's fields under `plan:`, optionally with `model`, `hardware` and `gpus`
beside it, as `search --save` writes it; a bare mapping of plan fields is accepted too. Flags given on
the command line override the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from planner.errors import PlannerError
from planner.plan import Plan, derive_plan

PLAN_FIELDS = tuple(Plan.model_fields)


def pydantic_message(err: ValidationError, where: str) -> str:
    """One line from a pydantic error: each bad field and why, plus the valid fields when a key is unknown."""
    parts = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "(top level)"
        if e["type"] == "extra_forbidden":
            parts.append(f"{loc}: unknown field")
        else:
            parts.append(f"{loc}: {e['msg']}" + (f" (got {e['input']!r})" if "input" in e and not isinstance(e["input"], dict) else ""))
    return f"{where}: " + "; ".join(parts)


def read_plan_file(path: str) -> dict[str, Any]:
    from planner.io.catalog import load_yaml

    if not Path(path).is_file():
        raise PlannerError(f"plan file {path!r} does not exist")
    doc = load_yaml(path)
    if not isinstance(doc, dict):
        raise PlannerError(f"{path}: expected a mapping with a 'plan:' section, got {type(doc).__name__}")
    if "plan" not in doc:
        doc = {"plan": doc}
    unknown = set(doc["plan"]) - set(PLAN_FIELDS)
    if unknown:
        raise PlannerError(f"{path}: unknown plan field(s) {sorted(unknown)}; valid: {', '.join(PLAN_FIELDS)}")
    extra = set(doc) - {"plan", "model", "hardware", "gpus", "predicted", "training"}
    if extra:
        raise PlannerError(f"{path}: unknown key(s) {sorted(extra)}; valid: plan, model, hardware, gpus")
    return doc


def build_plan(
    *, gpus: int | None, plan_file: str | None, flags: dict[str, Any], defaults: dict[str, Any] | None = None
) -> tuple[Plan, dict[str, Any]]:
    """The plan from --plan FILE and flags (flags win). Returns the plan and the file's other keys."""
    doc: dict[str, Any] = read_plan_file(plan_file) if plan_file else {"plan": {}}
    fields = dict(defaults or {})
    fields.update(doc["plan"])
    fields.update({k: v for k, v in flags.items() if v is not None})
    gpus = gpus if gpus is not None else doc.get("gpus")
    changed = any(flags.get(d) is not None for d in ("tp", "pp", "cp"))
    if plan_file and gpus is not None and changed and flags.get("dp") is None:
        fields.pop("dp", None)  # a degree changed on the command line: derive dp again
    try:
        plan = derive_plan(gpus, **fields)
    except ValidationError as e:
        raise PlannerError(pydantic_message(e, "plan")) from None
    return plan, doc


def write_plan_file(path: str, *, plan: Plan, model: str, hardware: str, gpus: int,
                    predicted: dict[str, Any] | None = None, header: str = "") -> None:
    """Write atomically: a half-written plan file never replaces a good one."""
    doc: dict[str, Any] = {"model": model, "hardware": hardware, "gpus": gpus, "plan": plan.model_dump()}
    if predicted:
        doc["predicted"] = predicted
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    text = (f"# {header}\n" if header else "") + yaml.safe_dump(doc, sort_keys=False)
    try:
        tmp.write_text(text)
        tmp.replace(target)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise PlannerError(f"cannot write plan file {path!r}: {e.strerror}") from None
