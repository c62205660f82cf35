"""The one plan resolver: model, hardware, engine and plan from options and/or a plan file, with the same
defaults for every command (memory, estimate, search, launch).

Defaults (the values in planner/plan.py):
- hardware: DEFAULT_HARDWARE; engine: DEFAULT_ENGINE (a plan file's own model, hardware and engine win over them,
  flags over the file); seq_len: the model's context, at most 8192 tokens (default_seq_len);
- global batch of memory and estimate: about 4M tokens (default_global_batch, a multiple of dp x micro-batch); of a
  launch: enough micro-batches to fill the pipeline once (dp · micro_batch · pp);
- sequence parallelism of memory and estimate: on when tp > 1 and the engine runs it; --gpus makes up dp (else the one
  degree left out, said in the header).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from planner.api.hardware_for import hardware_for
from planner.api.idle import changing_nothing
from planner.cost.coster import Coster
from planner.engine import Engine, require_runs
from planner.engine.recipe_variants import variant_named
from planner.engine.settings import SETTING_CHOICES
from planner.errors import PlannerError, did_you_mean
from planner.hardware import HardwareProfile
from planner.io.catalog import DEFAULT_ENGINE, load_engine, load_model
from planner.io.planfile import PlanFile, build_plan, read_plan_file
from planner.plan import DERIVABLE, RECOMPUTES, SCHEDULES, STATED_SPLIT, Plan, default_seq_len
from planner.specs import PRECISIONS, ModelSpec

PLAN_FLAGS = (  # the plan's fields a command line gives
    "tp", "pp", "dp", "cp", "ep", "etp", "vpp", "sp", "zero", "recompute", "micro_batch", "global_batch", "seq_len",
    "precision", "schedule", *STATED_SPLIT,
)  # fmt: skip
CHOICES: dict[str, tuple[str, ...]] = {
    "recompute": RECOMPUTES,
    "precision": PRECISIONS,
    "schedule": SCHEDULES,
    **{k: words for k, words in SETTING_CHOICES.items() if words is not None},
}


# The recipe memory and speed options (Engine.configured's names; engine/recipes.py says which engine offers which).
RECIPE_SETTINGS = (
    "recompute_modules",
    "activation_offload",
    "offload_modules",
    "offload_layers",
    "optimizer_offload",
    "precision_aware_optimizer",
    "optimizer_moment_dtype",
    "fp8_param_gather",
    "cuda_graphs",
)
# The engine's per-run settings by their command-line names, and Engine.configured's argument for each.
_SAME_NAMES = (
    "attention", "tp_overlap", "p2p_overlap", "zero3_gather", "megatron_fsdp", "fsdp_edge_groups", "compile", "rmsnorm",
    "grad_dtype", "master_copy", "compiled_loss", "moe_dispatcher", "ep_overlap", "moe_imbalance", "moe_dispatch_dtype",
    *RECIPE_SETTINGS,
)  # fmt: skip
ENGINE_SETTING_ARGS = {
    "optimizer": "optimizer",
    "selective_policy": "selective_recompute",
    **{k: k for k in _SAME_NAMES},
}
ENGINE_SETTINGS = tuple(ENGINE_SETTING_ARGS)


@dataclass(frozen=True)
class Resolved:
    """Everything a single-plan command needs, checked."""

    model: ModelSpec
    hardware: HardwareProfile
    engine: Engine
    plan: Plan
    model_ref: str  # what the user named the model by (catalog name or path)
    gpus: int | None
    defaulted: frozenset[str] = frozenset()  # the plan fields the defaults gave (global_batch, seq_len)

    @cached_property
    def coster(self) -> Coster:
        """The cost model's front door for this model, hardware and engine."""
        return Coster(self.model, self.hardware, self.engine)


def choice(flag: str, value: str | None) -> str | None:
    """A value of one of the fixed vocabularies above, or one line naming the valid ones."""
    valid = CHOICES[flag.replace("-", "_")]
    if value is not None and value not in valid:
        listed = "," in value and flag in ("recompute", "precision", "schedule")  # what search takes as a list
        one = " (this command takes one; search takes a comma list)" if listed else ""
        guess = "" if listed else did_you_mean(value, valid)
        raise PlannerError(
            f"--{flag.replace('_', '-')} {value!r} is not valid{guess}{one}; choose one of {', '.join(valid)}"
        )
    return value


def resolve_engine(
    name: str | Engine | None,
    overrides: dict[str, Any],
    doc: PlanFile | None = None,
    *,
    default: str = DEFAULT_ENGINE,
) -> Engine:
    """The engine profile (flag, else the plan file's, else the default) with per-run overrides: the plan
    file's training block first, then the command line's."""
    engine = name if isinstance(name, Engine) else load_engine(name or (doc.engine if doc else None) or default)
    for source in ((doc.training if doc else {}), overrides):
        given = {k: v for k, v in source.items() if v is not None}
        for k, words in SETTING_CHOICES.items():
            if words is not None:
                choice(k, given.get(k))
        imbalance = given.get("moe_imbalance")
        if imbalance is not None and not (isinstance(imbalance, (int, float)) and 1 <= imbalance <= 64):
            raise PlannerError(f"--moe-imbalance {imbalance!r}: give the busiest rank's load over the mean, 1 to 64")
        engine = engine.configured(**{arg: given.get(k) for k, arg in ENGINE_SETTING_ARGS.items()})
    return engine


def given_names(overrides: dict[str, Any]) -> frozenset[str]:
    """The engine settings given on the command line, by Engine.configured's names (what a variant leaves alone)."""
    return frozenset(arg for k, arg in ENGINE_SETTING_ARGS.items() if overrides.get(k) is not None)


def _variant(
    engine: str | Engine | None, spec: ModelSpec, flags: dict[str, Any], doc: PlanFile | None, given: frozenset[str]
) -> Any:
    """A --recipe-options variant's name (megatron+pao), as a search ranks it, rebuilt from its base engine for the
    model, precision and the engine settings `given` (given_names); any other engine as given."""
    name = engine if isinstance(engine, str) else None
    if name is None or "+" not in name:
        return engine
    base = load_engine(name.split("+", 1)[0])
    precision = flags.get("precision") or (doc.plan.get("precision") if doc else None) or "bf16"
    return variant_named(base, name, spec, str(precision), given)


def whole_gpus(gpus: object) -> int:
    """The API's `gpus` as the command line takes --gpus: a whole number (a string or a float is one line)."""
    if isinstance(gpus, bool) or not isinstance(gpus, int):
        raise PlannerError(f"gpus={gpus!r}: give a whole number of GPUs")
    return gpus


def resolve(
    *,
    model: str | ModelSpec | None,
    hardware: str | HardwareProfile | None,
    engine: str | Engine | None,
    gpus: int | None,
    plan_file: str | None,
    flags: dict[str, Any],
    overrides: dict[str, Any],
    check: bool = True,
    default_engine: str = DEFAULT_ENGINE,
    user_defaults: bool = False,
    power_limit_w: float | None = None,
) -> Resolved:
    """Model, hardware, engine and a plan from options and/or a plan file (flags win), checked against the
    model's and the engine's rules unless `check` is off (launch's pre-flight reports them instead).
    `user_defaults` (memory, estimate, the Python API): about 4M tokens per step rather than a launch rehearsal's
    one pipeline's worth of micro-batches; sequence parallelism where the engine runs it with tp > 1 either way
    (a rehearsal ran --no-sp where its emitted file and estimate of the same flags ran --sp: review). `power_limit_w`:
    the hardware, wherever it came from, under that board power cap (power_capped)."""
    for k in ("recompute", "precision", "schedule"):
        choice(k, flags.get(k))
    doc = read_plan_file(plan_file) if plan_file else None
    given = model or (doc.model if doc else None)
    if given is None:
        raise PlannerError(
            "no model given: pass --model NAME|PATH (see `planner models`) or a --plan file with a model"
        )
    spec = given if isinstance(given, ModelSpec) else load_model(given)
    model_ref = spec.name if isinstance(given, ModelSpec) else given
    hw = hardware_for(hardware, doc, power_limit_w)
    variant = _variant(engine, spec, flags, doc, given_names(overrides))
    eng = resolve_engine(variant, overrides, doc, default=default_engine)
    gpus = whole_gpus(gpus) if gpus is not None else (doc.gpus if doc else None)
    plan = build_plan(
        gpus=gpus,
        doc=doc,
        flags=flags,
        defaults={"seq_len": default_seq_len(spec.max_seq_len)},
        batch_tokens=user_defaults,
        sp_with_tp=eng.rules.sequence_parallel != "never",  # a rehearsal's too: as estimate prices the flags
    )
    if check:
        require_runs(spec, plan, eng, gpus, hw)
    for said in changing_nothing(spec, plan, eng):
        warnings.warn(said, stacklevel=2)
    return Resolved(spec, hw, eng, plan, model_ref, gpus, _defaulted(plan, flags, doc))


def _defaulted(plan: Plan, flags: dict[str, Any], doc: PlanFile | None) -> frozenset[str]:
    """What the defaults gave: the global batch, the sequence length, and a degree other than dp that --gpus made
    up where dp was given (plan.py derive_plan), each said in the header."""
    unset = {k for k in ("global_batch", "seq_len", "dp", "tp", "pp", "cp") if flags.get(k) is None}
    unset -= set(doc.plan) if doc else set()
    made = {d for d in DERIVABLE if d in unset and "dp" not in unset and getattr(plan, d) > 1}
    return frozenset({k for k in ("global_batch", "seq_len") if k in unset} | made)


def engine_overrides(opts: dict[str, Any]) -> dict[str, Any]:
    """The per-run engine settings a command's options give (None: the engine's own)."""
    out = {k: opts.get(k) for k in ENGINE_SETTINGS}
    out["attention"] = "softmax" if opts.get("no_flash") else None
    return out


def resolve_engines(arg: str | None, overrides: dict[str, Any]) -> list[Engine]:
    """`--engine` of search: one engine, a comma list, or 'all' (every catalog engine a user can install: not an
    in-house stack kept to check the model against its reports), each configured."""
    from planner.io.catalog import list_engines

    if arg is not None and not isinstance(arg, str):
        raise PlannerError(f"engine={arg!r}: give an engine name, a comma list of them, 'all', or an Engine")
    every = arg is not None and arg.strip().lower() == "all"  # names are case-insensitive: so is 'all'
    if arg is None or (not every and "," not in arg):
        return [resolve_engine(arg, overrides)]
    if every:
        engines = [resolve_engine(n, overrides) for n in list_engines()]
        return [e for e in engines if e.installable]
    names = [n.strip() for n in arg.split(",")]
    if not all(names) or any(n.lower() == "all" for n in names):  # 'all' in a list was looked up as an engine
        raise PlannerError(  # an empty name ('megatron,,torchtitan') was passed over (audit)
            f"--engine {arg!r}: give an engine name, a comma list of them (no empty one), or 'all' alone"
        )
    engines = [resolve_engine(n, overrides) for n in dict.fromkeys(names)]
    named = [e.name for e in engines]
    if twice := next((n for n in named if named.count(n) > 1), None):  # ranked as one: its rows, its files mixed
        raise PlannerError(f"--engine {arg!r}: two of them are named {twice}; give each engine once")
    return engines


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
        user_defaults=True,
        power_limit_w=opts.get("power_limit"),
    )


def _plan_mapping(plan: object) -> dict[str, Any]:
    """The API's `plan`: a Plan's fields, a mapping of plan fields (a search plan's, with its engine), or a plan
    file's path (read by resolve); anything else, or a field no plan has, is one line (it was priced as the
    default plan without a word)."""
    if plan is None or isinstance(plan, str):
        return {}
    if isinstance(plan, Plan):
        return plan.model_dump()
    if not isinstance(plan, dict):
        raise PlannerError(f"plan={plan!r}: give a Plan, a mapping of plan fields, or a plan file's path")
    unknown = sorted(str(k) for k in set(plan) - set(PLAN_FLAGS) - {"engine"})
    if unknown:
        raise PlannerError(f"plan: unknown field(s) {', '.join(unknown)}; valid: {', '.join(PLAN_FLAGS)}, engine")
    return dict(plan)


def resolve_request(
    *,
    model: str | ModelSpec | None,
    gpus: int | None,
    hardware: str | HardwareProfile | None,
    engine: str | Engine | None,
    plan: Plan | dict[str, Any] | str | None,
    settings: dict[str, Any],
) -> Resolved:
    """`resolve` for the Python API: `plan` is a Plan, a mapping of its fields or a plan file; `settings` are the
    plan fields and the engine's per-run settings by their command-line names (given ones win over `plan`)."""
    unknown = sorted(set(settings) - set(PLAN_FLAGS) - set(ENGINE_SETTINGS))
    if unknown:
        valid = ", ".join((*PLAN_FLAGS, *ENGINE_SETTINGS))
        raise PlannerError(f"unknown setting {', '.join(unknown)}; valid: {valid}")
    base = _plan_mapping(plan)
    if engine is None and base.get("engine") is not None:  # a search plan's mapping names the engine that ranked it
        engine = base["engine"]
    flags = {k: settings.get(k, base.get(k)) for k in PLAN_FLAGS}
    return resolve(
        model=model,
        hardware=hardware,
        engine=engine,
        gpus=gpus,
        plan_file=plan if isinstance(plan, str) else None,
        flags=flags,
        overrides={k: settings.get(k) for k in ENGINE_SETTINGS},
        user_defaults=True,
    )
