"""Whether a target's file takes a plan, as `launch --emit` checks it before writing (pure): the engine's
recipes and per-run settings its file says, the engine's own rules and what its format can express (engine
targets), or the launcher's pre-flight (cluster targets); and, where one refuses, the other engine targets that
write the plan."""

from __future__ import annotations

from planner.cost.coster import Coster
from planner.engine import Engine
from planner.engine.recipes import emit_unexpressed
from planner.engine.settings import changed_settings, given_settings, said
from planner.errors import PlannerError
from planner.hardware import HardwareProfile
from planner.launch.command import RunConfig
from planner.launch.emit.checks import (
    cluster_problems,
    engine_problems_for,
    memory_problems,
    unrun_settings,
    unwritten_settings,
)
from planner.launch.emit.targets import Target, target, target_names
from planner.plan import Plan
from planner.precision import RECIPES
from planner.specs import ModelSpec


def instead(chosen: Target, cfg: RunConfig, model: ModelSpec, engine: Engine, hardware: HardwareProfile) -> str:
    """Where an engine target refused the plan: the other engine targets that would write it, as their own checks
    say (a fixed 'emit megatron or deepspeed instead' named targets that refused it too)."""
    if not chosen.is_engine:
        return ""
    takes = []
    for other in engine_targets():
        if other.name == chosen.name:
            continue
        try:
            _settings, unfit = checked(other, cfg, model, engine, hardware, force=False)
        except PlannerError:
            continue
        takes.append(f"{other.name} (predicted not to fit as it runs it)" if unfit else other.name)
    return f"; emit {' or '.join(takes)} instead" if takes else "; no other engine's file takes it as priced"


def engine_targets() -> list[Target]:
    """The registered engine targets, in listing order."""
    return [t for n in target_names(engine=True) if (t := target(n)) is not None]


def _file_settings(engine: Engine, target_engine: str | None) -> dict[str, object]:
    """The settings of an engine read from a file under a name no catalog engine has, where they differ from the
    target engine's profile: a renamed copy's own values, priced, which the target's file would not write (a
    catalog engine's own values are another engine's, as --emit for another engine means)."""
    from planner.io.catalog import load_engine

    if target_engine is None or target_engine == engine.name:
        return {}
    try:
        load_engine(engine.variant_of or engine.name)
        return {}
    except PlannerError:
        runs_on = load_engine(target_engine)
    return {name: value for name, value in engine.settings().items() if value != runs_on.setting(name)}


def unwritten_reason(chosen: Target, precision: str, unexpressed: str) -> str:
    """Why the target's file cannot say the plan: its engine has no such recipe at all (deepspeed and mxfp8 were told
    'not yet'), or another target of the engine writes it, or none does yet."""
    from planner.io.catalog import load_engine

    if (
        chosen.engine is not None
        and precision in RECIPES
        and precision not in load_engine(chosen.engine).rules.precision_recipes
    ):
        return f"{chosen.engine} has no {precision} training recipe; emit a target whose engine runs it"
    others = [t for t in engine_targets() if t.engine == chosen.engine and precision in t.precisions]
    written = others and f"precision={precision}" in unexpressed  # the recipe is what is missing, not an option
    instead = "" if written else "; estimate it, or emit without it"  # another target's file: emit_run names it
    return f"the {chosen.name} file does not write {unexpressed} yet{instead}"


def checked(
    chosen: Target, cfg: RunConfig, model: ModelSpec, engine: Engine, hardware: HardwareProfile, *, force: bool
) -> tuple[dict[str, object], str | None]:
    """(The per-run settings an engine target writes, what to say of a plan that does not fit the GPU as the target
    runs it), once the target would accept the plan; else one line."""
    from planner.io.catalog import load_engine

    settings: dict[str, object] = {}
    warning = None
    kind = chosen.name
    unexpressed = emit_unexpressed(cfg.plan, engine, chosen.precisions, chosen.writes)  # recipes, options
    if unexpressed:  # with what else the file cannot say of this model and plan: every blocker at once (audit)
        also = chosen.format_problems(model, cfg.plan) if chosen.format_problems else []
        why = unwritten_reason(chosen, cfg.plan.precision, unexpressed)
        raise PlannerError(f"--emit {kind}: " + "; ".join([why, *also]))
    unrun = unrun_settings(engine, cfg.plan) if chosen.engine is None else ""
    if unrun:  # a cluster file launches the worker
        raise PlannerError(f"--emit {kind}: {unrun}")
    given = given_settings(engine, cfg.plan) or _file_settings(engine, chosen.engine)
    if given and chosen.engine not in (None, engine.name, engine.variant_of):  # a variant: its profile's settings
        raise PlannerError(
            f"--emit {kind}: the plan is priced on {engine.name} with {said(given)}; the {kind} file writes "
            f"{chosen.engine}'s settings: price it with --engine {chosen.engine}"
        )
    if chosen.engine is not None:
        runs_on = load_engine(chosen.engine)
        settings = changed_settings(engine, runs_on, cfg.plan)
        problems = chosen.settings_problems(cfg.plan, settings) if chosen.settings_problems else []
        unwritten = unwritten_settings(chosen, settings) or (problems[0] if problems else "")
        if unwritten:
            raise PlannerError(f"--emit {kind}: {unwritten}")
        # the target's rules with the settings its file carries (Megatron's all-to-all overlap has its own)
        configured = runs_on.configured(**settings) if settings else runs_on
        problems = engine_problems_for(chosen, model, cfg.plan, configured, hardware)
        unfit = [] if problems or force else memory_problems(Coster(model, hardware, configured), cfg.plan)
        if unfit:
            warning = f"--emit {kind}: the plan does not fit as {chosen.engine} runs it: {unfit[0].split(' (--')[0]}"
    else:
        problems = cluster_problems(model, cfg.plan, engine, hardware, force=force)
    if problems:
        who = kind if chosen.is_engine else f"the planner worker it launches ({engine.name} engine)"
        raise PlannerError(f"--emit {kind}: {who} would refuse this plan: " + "; ".join(problems))
    return settings, warning


def engine_refusals(plan: Plan, model: ModelSpec, engine: Engine, hardware: HardwareProfile) -> dict[str, str | None]:
    """Each engine target of the plan's engine (its profile's, for a recipe variant) and why its file would refuse
    the plan as `launch --emit` says it (None: it writes it), memory aside as --force puts it; {} for an engine
    no target writes. A search says so of its plans: a ranked plan no file runs is priced as the engine's own
    layers would run it, given a model definition the user brings."""
    base = engine.variant_of or engine.name
    cfg = RunConfig(model=model.name, plan=plan)
    out: dict[str, str | None] = {}
    for chosen in engine_targets():
        if chosen.engine != base:
            continue
        try:
            checked(chosen, cfg, model, engine, hardware, force=True)
            out[chosen.name] = None
        except PlannerError as e:
            out[chosen.name] = str(e)
    return out
