"""A search's best plan written as a plan file (`search --save`): the plan with the model, hardware, cluster, engine
and per-run engine settings that priced it, for `memory`, `estimate` and `launch`."""

from __future__ import annotations

from planner.errors import PlannerError
from planner.explore.results import SearchResult
from planner.io.planfile import relative_to_plan, write_plan_file


def save_best(
    path: str, result: SearchResult, *, model_ref: str, cluster: str | None, training: dict[str, object]
) -> None:
    """Write the best plan, with the model, hardware (and cluster), engine and per-run engine settings that priced
    it."""
    gpus = result.space.gpus
    b = result.best
    if b is None:
        raise PlannerError(f"{result.none_reason()}, so there is no plan to --save to {path!r}")
    engine = b.estimate.engine  # a --recipe-options variant is saved as its engine and the settings that make it
    variant = dict(engine.variant_settings)
    if b.plan.recompute != "selective":  # the variant's modules re-run nothing at another level: not saved
        variant.pop("recompute_modules", None)
    write_plan_file(
        path,
        plan=b.plan,
        model=relative_to_plan(path, model_ref),
        hardware=result.hardware.name,
        engine=engine.variant_of or engine.name,
        gpus=gpus,
        training={k: v for k, v in {**training, **variant}.items() if v is not None},
        predicted={
            "tokens_per_s": float(b.time.tokens_per_s),
            "step_s": float(b.time.step_s),
            "mfu": float(b.time.mfu),
            "peak_memory_bytes": round(b.estimate.memory.total_bytes),
        },
        cluster=cluster,
        header=f"planner search --model {model_ref} --gpus {gpus} --hardware {result.hardware.name}"
        f"{f' --cluster {cluster}' if cluster else ''} --engine "
        f"{engine.variant_of or engine.name}: best of {result.valid} valid plans by {result.objective} (the "
        "engine's per-run settings under training:)",
    )
