"""The engine's rules about a plan's ZeRO stage: whether the engine runs it, at the plan's pipeline degree, with the
other parallel dimensions the plan uses (its mechanism's `excludes`, engine/zero.py) and the recipe's own."""

from __future__ import annotations

from planner.engine.profile import Engine
from planner.engine.recipes import zero_recipe_problems
from planner.plan import Plan, Rejected
from planner.specs import ModelSpec


def zero_problems(
    engine: Engine, plan: Plan, zero: int | None = None, *, model: ModelSpec | None = None
) -> list[Rejected]:
    """The engine's rules about the plan's ZeRO stage (or `zero` in its place): whether it runs it, at this
    pipeline degree, and with the other parallel dimensions the plan uses."""
    r, p, name = engine.rules, plan, engine.name
    z = p.zero if zero is None else zero
    if z not in r.zero and z not in (r.zero_pp or {}):
        return [
            Rejected(
                f"{name} has no zero {z}", f"zero={z} is not something {name} runs; it runs zero in {sorted(r.zero)}"
            )
        ]
    stages = r.stages(p.pp)
    impl = stages.get(z)
    if impl is None:
        where = f"with pipeline parallelism (pp={p.pp})" if p.pp > 1 else "without pipeline parallelism"
        return [
            Rejected(
                f"{name}: zero {z} {'with' if p.pp > 1 else 'without'} pp",
                f"zero={z} does not run {where} in {name}; use zero in {sorted(stages)}",
            )
        ]
    out: list[Rejected] = []
    if impl.untied_embeddings and model is not None and model.tied_embeddings:
        out.append(
            Rejected(
                f"{name}: zero {z} with tied embeddings",
                f"zero={z} ({impl.mechanism}) needs untied embeddings in {name}; {model.name} ties them",
            )
        )
    if p.dp * p.cp > 1 or impl.excludes_always:
        used = {"tp": p.tp > 1, "cp": p.cp > 1, "pp": p.pp > 1, "vpp": p.vpp > 1, "ep": p.ep > 1}
        clash = [d for d in impl.excludes if used[d]]
        if clash:
            degrees = ", ".join(f"{d}={getattr(p, d)}" for d in clash)
            others = ", ".join(str(k) for k in sorted(stages) if k != z)
            out.append(
                Rejected(
                    f"{name}: zero {z} with {'/'.join(clash)}",
                    f"zero={z} ({impl.mechanism}) does not run with {degrees} in {name}; use zero in {others}",
                )
            )
    return out + zero_recipe_problems(engine, p, z)
