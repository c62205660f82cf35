"""The engine's rules about a plan's ZeRO stage: whether the engine runs it, at the plan's pipeline degree, with the
other parallel dimensions the plan uses (its mechanism's `excludes`, engine/zero.py) and the recipe's own."""

from __future__ import annotations

from planner.engine.profile import Engine
from planner.engine.recipes import megatron_fsdp_hint, zero_recipe_problems
from planner.engine.zero import ZeroStage
from planner.plan import Plan, Rejected
from planner.specs import ModelSpec


def zero_problems(
    engine: Engine, plan: Plan, zero: int | None = None, *, model: ModelSpec | None = None
) -> list[Rejected]:
    """The engine's rules about the plan's ZeRO stage (or `zero` in its place): whether it runs it, at this
    pipeline degree, and with the other parallel dimensions the plan uses."""
    r, p, name = engine.rules, plan, engine.name
    z = p.zero if zero is None else zero
    if not r.runs_zero(z):
        return [
            Rejected(
                f"{name} has no zero {z}",
                f"zero={z} is not something {name} runs; it runs zero in {', '.join(map(str, sorted(r.zero)))}",
            )
        ]
    stages = r.stages(p.pp)
    impl = stages.get(z)
    if impl is None:
        where = f"with pipeline parallelism (pp={p.pp})" if p.pp > 1 else "without pipeline parallelism"
        flat = r.stages(1).get(z) if p.pp > 1 else None  # a mechanism that excludes pp: its one rule, said once
        return [
            Rejected(
                _excluded(name, z, flat.excludes)
                if flat and "pp" in flat.excludes
                else f"{name}: zero {z} {'with' if p.pp > 1 else 'without'} pp",
                f"zero={z} does not run {where} in {name}; use zero in {', '.join(map(str, sorted(stages)))}",
            )
        ]
    # a variant (Megatron-FSDP for ep or asked for, DeepSpeed's bf16) has its own rules
    impl = impl.running(p.precision, ep=p.ep, megatron_fsdp=engine.comm.megatron_fsdp)
    other = megatron_fsdp_hint(engine, z, "which runs them tied")
    out: list[Rejected] = []
    if impl.untied_embeddings and model is not None and model.tied_embeddings:
        out.append(
            Rejected(
                f"{name}: zero {z} with tied embeddings",
                f"zero={z} ({impl.mechanism}) needs untied embeddings in {name}; {model.name} ties them{other}",
            )
        )
    if p.precision in impl.excludes_precisions:
        out.append(
            Rejected(
                f"{name}: zero {z} with {p.precision}",
                f"zero={z} ({impl.mechanism}) does not run precision={p.precision} in {name}; use bf16 or another "
                "zero stage",
            )
        )
    if p.dp * p.cp > 1 or impl.excludes_always:
        out += _excluded_dims(engine, p, z, impl, stages)
    return out + zero_recipe_problems(engine, p, z, impl)


def _excluded_dims(engine: Engine, p: Plan, z: int, impl: ZeroStage, stages: dict[int, ZeroStage]) -> list[Rejected]:
    """The plan's parallel dimensions the stage's mechanism cannot run beside (its `excludes`); a clash found in the
    pipeline's own stages (zero_pp) is with pp too, which a plan without it does not have."""
    used = {"tp": p.tp > 1, "cp": p.cp > 1, "pp": p.pp > 1, "vpp": p.vpp > 1, "ep": p.ep > 1}
    clash = [d for d in impl.excludes if used[d]]
    if not clash:
        return []
    degrees = ", ".join(f"{d}={getattr(p, d)}" for d in clash)
    others = ", ".join(str(k) for k, s in sorted(stages.items()) if k != z and not set(clash) & set(s.excludes))
    flat = engine.rules.zero.get(z)  # the stage without a pipeline: where it runs them, the clash is with pp
    with_pp = p.pp > 1 and engine.rules.zero_pp is not None and (flat is None or not set(clash) & set(flat.excludes))
    beside = f" beside pipeline parallelism (pp={p.pp})" if with_pp else ""
    drop = f"{degrees} or pp={p.pp}" if beside else degrees
    use = f"use zero in {others}" if others else f"no zero stage does: drop {drop}"
    return [
        Rejected(
            _excluded(engine.name, z, impl.excludes) + (" beside pp" if beside else ""),
            f"zero={z} ({impl.mechanism}) does not run with {degrees}{beside} in {engine.name}; {use}",
        )
    ]


def _excluded(name: str, zero: int, dims: tuple[str, ...]) -> str:
    """One rejection reason for a ZeRO mechanism's excluded dimensions, whichever of them a plan uses (torchtitan's
    DDP was counted under a row for each combination: with tp, with cp, with tp/cp, with pp)."""
    return (
        f"{name}: zero {zero} with {' or '.join(dims) if len(dims) < 3 else ', '.join(dims[:-1]) + ' or ' + dims[-1]}"
    )
