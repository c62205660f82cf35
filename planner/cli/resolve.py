"""The one plan resolver: model, hardware, engine and plan from options and/or a plan file, with the same
defaults for every command (memory, estimate, search, launch).

Defaults, in one place:
- hardware: DEFAULT_HARDWARE; engine: DEFAULT_ENGINE (a plan file's own model, hardware and engine win over
  them, flags over the file);
- seq_len: the model's max_seq_len;
- global batch of a single plan: enough micro-batches to fill the pipeline once (dp · micro_batch · pp);
- the degree left out of --gpus: dp.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from planner.engine import Engine, require_runs
from planner.errors import PlannerError
from planner.hardware import HardwareProfile
from planner.io.catalog import DEFAULT_ENGINE, DEFAULT_HARDWARE, load_engine, load_hardware, load_model
from planner.io.planfile import PlanFile, build_plan, read_plan_file
from planner.plan import Plan
from planner.specs import ModelSpec

PLAN_FLAGS = (
    "tp",
    "pp",
    "dp",
    "cp",
    "ep",
    "vpp",
    "sp",
    "zero",
    "recompute",
    "micro_batch",
    "global_batch",
    "seq_len",
    "precision",
    "schedule",
)
CHOICES = {
    "recompute": ("none", "selective", "full"),
    "precision": ("fp32", "bf16", "fp16", "fp8"),
    "schedule": ("gpipe", "1f1b", "interleaved"),
    "optimizer": ("adamw", "adam", "sgd"),
    "selective_policy": ("op", "attention"),
    "grad_dtype": ("param", "fp32"),
}


@dataclass(frozen=True)
class Resolved:
    """Everything a single-plan command needs, checked."""

    model: ModelSpec
    hardware: HardwareProfile
    engine: Engine
    plan: Plan
    model_ref: str  # what the user named the model by (catalog name or path)
    gpus: int | None


def choice(flag: str, value: str | None) -> str | None:
    """A value of one of the fixed vocabularies above, or one line naming the valid ones."""
    valid = CHOICES[flag.replace("-", "_")]
    if value is not None and value not in valid:
        raise PlannerError(f"--{flag.replace('_', '-')} {value!r} is not valid; choose one of {', '.join(valid)}")
    return value


def resolve_engine(
    name: str | None, overrides: dict[str, Any], doc: PlanFile | None = None, *, default: str = DEFAULT_ENGINE
) -> Engine:
    """The engine profile (flag, else the plan file's, else the default) with per-run overrides: the plan
    file's training block first, then the command line's."""
    engine = load_engine(name or (doc.engine if doc else None) or default)
    for source in ((doc.training if doc else {}), overrides):
        given = {k: v for k, v in source.items() if v is not None}
        for k in ("optimizer", "selective_policy", "grad_dtype"):
            choice(k, given.get(k))
        engine = engine.configured(
            attention=given.get("attention"),
            tp_overlap=given.get("tp_overlap"),
            compile=given.get("compile"),
            optimizer=given.get("optimizer"),
            selective_recompute=given.get("selective_policy"),
            grad_dtype=given.get("grad_dtype"),
        )
    return engine


def resolve(
    *,
    model: str | None,
    hardware: str | None,
    engine: str | None,
    gpus: int | None,
    plan_file: str | None,
    flags: dict[str, Any],
    overrides: dict[str, Any],
    check: bool = True,
    default_engine: str = DEFAULT_ENGINE,
) -> Resolved:
    """Model, hardware, engine and a plan from options and/or a plan file (flags win), checked against the
    model's and the engine's rules unless `check` is off (launch's pre-flight reports them instead)."""
    for k in ("recompute", "precision", "schedule"):
        choice(k, flags.get(k))
    doc = read_plan_file(plan_file) if plan_file else None
    model_ref = model or (doc.model if doc else None)
    if model_ref is None:
        raise PlannerError(
            "no model given: pass --model NAME|PATH (see `planner models`) or a --plan file with a model"
        )
    spec = load_model(model_ref)
    hw = load_hardware(hardware or (doc.hardware if doc else None) or DEFAULT_HARDWARE)
    eng = resolve_engine(engine, overrides, doc, default=default_engine)
    gpus = gpus if gpus is not None else (doc.gpus if doc else None)
    plan = build_plan(gpus=gpus, doc=doc, flags=flags, defaults={"seq_len": spec.max_seq_len})
    if check:
        require_runs(spec, plan, eng, gpus, hw)
    return Resolved(spec, hw, eng, plan, model_ref, gpus)


def engine_overrides(opts: dict[str, Any]) -> dict[str, Any]:
    """The per-run engine settings a command's options give (None: the engine's own)."""
    return {
        "optimizer": opts.get("optimizer"),
        "selective_policy": opts.get("selective_policy"),
        "attention": "softmax" if opts.get("no_flash") else None,
        "tp_overlap": opts.get("tp_overlap"),
        "compile": opts.get("compile"),
        "grad_dtype": opts.get("grad_dtype"),
    }


def resolve_engines(arg: str | None, overrides: dict[str, Any]) -> list[Engine]:
    """`--engine` of search: one engine, a comma list, or 'all' (every catalog engine), each configured."""
    from planner.io.catalog import list_engines

    if arg is None or (arg.strip() != "all" and "," not in arg):
        return [resolve_engine(arg, overrides)]
    names = list_engines() if arg.strip() == "all" else [n.strip() for n in arg.split(",") if n.strip()]
    if not names:
        raise PlannerError(f"--engine {arg!r}: give an engine name, a comma list of them, or 'all'")
    return [resolve_engine(n, overrides) for n in dict.fromkeys(names)]


def resolve_options(opts: dict[str, Any]) -> Resolved:
    """`resolve` from a command's common options (its locals())."""
    return resolve(
        model=opts["model"],
        hardware=opts["hardware"],
        engine=opts.get("engine"),
        gpus=opts["gpus"],
        plan_file=opts["plan"],
        flags={k: opts[k] for k in PLAN_FLAGS},
        overrides=engine_overrides(opts),
    )
