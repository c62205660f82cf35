"""A search's best plan written as a plan file (`search --save`): the plan with the model, hardware, cluster, engine
and per-run engine settings that priced it, for `memory`, `estimate` and `launch`."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from planner.errors import PlannerError
from planner.explore.results import SearchResult
from planner.io.catalog import load_engine, load_hardware, looks_like_path
from planner.io.planfile import relative_to_plan, write_plan_file


def save_best(
    path: str,
    result: SearchResult,
    *,
    model_ref: str,
    cluster: str | None,
    training: dict[str, object],
    hardware_ref: str | None = None,
    engine_ref: str | None = None,
) -> None:
    """Write the best plan, with the model, hardware (and cluster), engine and per-run engine settings that priced
    it. A model, hardware, engine or cluster given as a file is written as its path from the plan file (a
    calibrated profile was saved by its `name:`, which then named the shipped one or nothing: audit)."""
    gpus = result.space.gpus
    b = result.best
    if b is None:
        raise PlannerError(f"{result.none_reason()}, so there is no plan to --save to {path!r}")
    engine = b.estimate.engine  # a --recipe-options variant is saved as its engine and the settings that make it
    variant = dict(engine.variant_settings)
    if b.plan.recompute != "selective":  # the variant's modules re-run nothing at another level: not saved
        variant.pop("recompute_modules", None)
    engine_name = engine.variant_of or engine.name
    hardware = _hardware_ref(path, result, hardware_ref)
    said_hw = hardware_ref if hardware != result.hardware.name else hardware  # a file as given; a cap by its name
    write_plan_file(
        path,
        plan=b.plan,
        model=relative_to_plan(path, model_ref),
        hardware=hardware,
        engine=relative_to_plan(path, _engine_files(engine_ref).get(engine_name, engine_name)),
        gpus=gpus,
        training={k: v for k, v in {**training, **variant}.items() if v is not None},
        predicted={
            "tokens_per_s": float(b.time.tokens_per_s),
            "step_s": float(b.time.step_s),
            "mfu": float(b.time.mfu),
            "peak_memory_bytes": round(b.estimate.memory.total_bytes),
        },
        cluster=relative_to_plan(path, cluster) if cluster else None,
        header=f"planner search --model {model_ref} --gpus {gpus} --hardware {said_hw}"
        f"{f' --cluster {cluster}' if cluster else ''} --engine "
        f"{engine_ref or engine_name}: best of {result.valid} valid plans by {result.objective} (the "
        "engine's per-run settings under training:)",
    )


def _hardware_ref(path: str, result: SearchResult, given: str | None) -> str:
    """The hardware as the plan file names it: a file given as one, by its path from the plan file (a power cap on
    it is not a name: said, to be given again); else the profile's name (a capped one's, `h100-sxm-500w`)."""
    if given is None or not looks_like_path(given) or not Path(given).is_file():
        return result.hardware.name
    if load_hardware(given).name != result.hardware.name:
        warnings.warn(
            f"--save: {path} names the hardware file {given}; the power cap it was searched under is not saved "
            "with it: give --power-limit again with --plan",
            stacklevel=2,
        )
    return relative_to_plan(path, given)


def _engine_files(given: str | None) -> dict[str, str]:
    """The engine profiles --engine gave as files, by the name they load as."""
    parts = [p.strip() for p in (given or "").split(",")]
    return {load_engine(p).name: p for p in parts if p and looks_like_path(p) and Path(p).is_file()}


def save_options(path: str, result: SearchResult, opts: dict[str, Any], training: dict[str, object]) -> None:
    """save_best with the command line's model, hardware, engine and cluster as it named them."""
    save_best(path, result, model_ref=opts["model"], cluster=opts["cluster"], training=training,
              hardware_ref=opts["hardware"], engine_ref=opts["engine"])  # fmt: skip
