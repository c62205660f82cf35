"""What a target's file must pass before it is written (pure): nothing is emitted that the target refuses.

Engine targets (megatron, megatron-bridge, torchtitan, torchtitan-v0.2, deepspeed) are checked against that
engine's own rules (its engine profile, engine/rules.py) and what its configuration format can express; cluster
targets (torchrun, slurm, k8s) run this project's worker, so they get the launcher's pre-flight: the worker engine's
rules, what the worker runs on the target's devices, and the predicted peak memory against the hardware profile.
"""

from __future__ import annotations

from planner.cost.coster import Coster
from planner.engine import Engine, plan_problems
from planner.engine.settings import given_settings, said
from planner.hardware import HardwareProfile
from planner.launch.emit.targets import Target
from planner.launch.preflight import Environment, worker_limits
from planner.plan import Plan
from planner.specs import ModelSpec


def unrun_settings(engine: Engine, plan: Plan) -> str:
    """The per-run settings the plan was priced with that this project's worker does not run (it
    loads its engine profile by name and runs the profile's own settings), said in one line (empty: none): a run
    here and a cluster file refuse them rather than drop them."""
    given = given_settings(engine, plan)
    if not given:
        return ""
    return (
        f"the plan is priced with {said(given)}, which the worker does not run (the worker it launches runs the "
        f"{engine.name} profile's own settings); write them for an engine with --emit, or launch without them"
    )


def unwritten_settings(target: Target, settings: dict[str, object]) -> str:
    """The per-run engine settings (engine/settings.py) the plan was priced with that the target's file cannot
    carry, or carry only at other values, said in one line (empty: it writes them all): refused, never dropped."""
    left = [f"{name}={value}" for name, value in settings.items() if name not in target.writes]
    unrun = {n: v for n, v in settings.items() if n in target.values and v not in target.values[n]}
    if unrun:
        runs = "; ".join(f"{n}: {', '.join(map(str, target.values[n]))}" for n in unrun)
        return f"the plan is priced with {said(unrun)}, which the {target.name} file cannot say (it says {runs})"
    if not left:
        return ""
    return (
        f"the plan is priced with {', '.join(left)}, which the {target.name} file does not write "
        f"(it writes {', '.join(sorted(target.writes)) or 'none of the engine settings'}); estimate it without them"
    )


def device_kind(hw: HardwareProfile) -> str:
    """What a cluster node's scheduler calls the profile's accelerators: nvidia, amd (CDNA GPUs) or cpu (none)."""
    if target_environment(hw).device_type == "cpu":
        return "cpu"
    return "amd" if hw.gpu.architecture in ("cdna3", "cdna4") else "nvidia"


def target_environment(hw: HardwareProfile) -> Environment:
    """The devices a cluster target runs on: the hardware profile's GPUs (CPU for the cpu profile)."""
    if hw.runs_on_cpu:
        return Environment("cpu", 0, hw.gpu.name)
    return Environment("cuda", hw.gpus_per_node, hw.gpu.name)


def cluster_problems(
    model: ModelSpec, plan: Plan, engine: Engine, hw: HardwareProfile, *, force: bool = False
) -> list[str]:
    """The pre-flight of `planner launch` that does not need this machine: rules, worker limits on the
    target's devices, memory against the profile (skipped with --force, as launch skips it)."""
    coster = Coster(model, hw, engine)
    out = [str(r) for r in coster.problems(plan, plan.gpus)]
    out += worker_limits(model, plan, target_environment(hw), engine)
    return out or memory_problems(coster, plan, force=force)


def memory_problems(coster: Coster, plan: Plan, *, force: bool = False) -> list[str]:
    """The plan's predicted peak against one GPU of the profile (skipped with --force, as launch skips it)."""
    hw = coster.hw
    peak = 0.0 if force else coster.memory(plan).total_bytes
    if peak <= hw.gpu.hbm_bytes:
        return []
    return [
        f"memory: predicted peak {peak / 2**30:.1f} GiB per GPU exceeds the {hw.gpu.hbm_bytes / 2**30:.1f} "
        f"GiB of one {hw.name} (--force writes it anyway)"
    ]


def engine_problems_for(
    target: Target, model: ModelSpec, plan: Plan, engine: Engine, hw: HardwareProfile | None = None
) -> list[str]:
    """The target engine's rules on this hardware (a precision recipe only some GPUs run), then what its
    configuration format cannot express."""
    out = [str(r) for r in plan_problems(model, plan, engine, plan.gpus, hw)]
    return out + (target.format_problems(model, plan) if target.format_problems else [])


def targets_writing(targets: list[Target], model: ModelSpec, plan: Plan) -> list[str]:
    """The engine targets, of `targets`, whose engine implements the model's layers (engine/architectures.py) and
    whose file can say the model and plan (the target's format_problems): where a refusal sends the user."""
    from planner.engine.architectures import architecture_problems
    from planner.io.catalog import load_engine

    out = []
    for t in targets:
        name = t.engine or ""
        r = load_engine(name).rules
        if not architecture_problems(name, r.model_features, model, r.model_files) and not (
            t.format_problems and t.format_problems(model, plan)
        ):
            out.append(t.name)
    return out
