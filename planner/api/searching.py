"""`search` for the Python API and the command line: the engines, the model, the hardware and the search space
from options (names or objects, comma lists or sequences), then the search pipeline (explore/)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, cast

from planner.api.resolve import ENGINE_SETTINGS, choice, given_names, resolve_engine, resolve_engines
from planner.cluster.fabric import check_fits
from planner.engine import Engine
from planner.engine.recipe_variants import option_variants
from planner.errors import PlannerError
from planner.explore.fanout import fan_out, workers
from planner.explore.pipeline import Checkpointing, search_engines
from planner.explore.results import SearchResult, merge_results
from planner.explore.space import DEFAULT_MAX_VPP, Space, int_items, listed
from planner.hardware import HardwareProfile
from planner.io.catalog import DEFAULT_HARDWARE, load_hardware, load_model
from planner.plan import RECOMPUTES, STATED_SPLIT, ZERO_STAGES, default_global_batch, default_seq_len
from planner.specs import ModelSpec, Precision

DEGREES = ("tp", "pp", "dp", "cp", "ep", "etp", "vpp", "sp", "max_tp", "max_pp", "max_cp", "max_ep", "max_vpp")
SEARCH_OPTIONS = (
    *DEGREES,
    "zero",
    "recompute",
    "micro_batch",
    "micro_batches",
    "global_batch",
    "seq_len",
    "precision",
    "schedule",
    *STATED_SPLIT,
    "objective",
    "top",
    "exhaustive",
    "mtbf_hours",
    "mtbf_per",
    "checkpoint_bandwidth",
    "restart_minutes",
    "recipe_options",
    "allow_cross_node_tp",
    *ENGINE_SETTINGS,
)


def run(
    *,
    model: str | ModelSpec | None,
    gpus: int | None,
    hardware: str | HardwareProfile | None,
    engine: str | Engine | list[str | Engine] | None,
    progress: Callable[[int, int], None] | None,
    keep_rejections: bool,
    options: dict[str, Any],
    counts: bool = True,
) -> SearchResult:
    """The search of the options, with what the defaults gave (`defaulted`); counts=False: its top plans only
    (explore/pipeline.py search)."""
    unknown = sorted(set(options) - set(SEARCH_OPTIONS))
    if unknown:
        raise PlannerError(f"unknown search option {', '.join(unknown)}; valid: {', '.join(SEARCH_OPTIONS)}")
    if model is None:
        raise PlannerError("no model given: pass --model NAME|PATH (see `planner models`)")
    if gpus is None:
        raise PlannerError("no GPU count given: pass --gpus N")
    o = {k: options.get(k) for k in SEARCH_OPTIONS}
    precisions = _precisions(o["precision"])  # checked before anything is loaded
    if o["micro_batch"] is not None and o["micro_batches"] is not None:
        raise PlannerError("give --micro-batch B or --micro-batches LIST, not both")
    for deg in ("tp", "pp", "cp", "ep"):  # a pinned degree above its own limit: one of the two is a mistake
        pinned, limit = o[deg], o[f"max_{deg}"]
        if pinned is not None and limit is not None and pinned > limit:
            raise PlannerError(f"--{deg} {pinned} is above --max-{deg} {limit}: give one of them")
    overrides = {k: o[k] for k in ENGINE_SETTINGS}
    engines = engines_of(engine, overrides)
    spec = model if isinstance(model, ModelSpec) else load_model(model)
    hw = hardware if isinstance(hardware, HardwareProfile) else load_hardware(hardware or DEFAULT_HARDWARE)
    check_fits(hw, gpus)
    result = _searched(spec, hw, gpus, engines, o, precisions, progress, keep_rejections, counts)
    result.defaulted = frozenset(k for k in ("global_batch", "seq_len") if o[k] is None)
    return result


def _searched(
    spec: ModelSpec, hw: HardwareProfile, gpus: int, engines: list[Engine], o: dict[str, Any],
    precisions: list[str | None], progress: Callable[[int, int], None] | None, keep_rejections: bool,
    counts: bool = True,
) -> SearchResult:  # fmt: skip
    """Each precision's search (the engines and, with recipe_options, their variants), side by side where there
    are several, ranked together as the engines are."""
    kwargs: dict[str, Any] = {
        "objective": o["objective"] or "throughput",
        "top": 10 if o["top"] is None else o["top"],
        "exhaustive": bool(o["exhaustive"]),
        "checkpointing": Checkpointing(
            o["mtbf_hours"], o["mtbf_per"] or "gpu", o["checkpoint_bandwidth"], o["restart_minutes"]
        ),
        "keep_rejections": keep_rejections,
        "counts": counts,
    }
    given = given_names(o)  # what a variant leaves as given: the same for every precision

    def at(precision: str | None) -> SearchResult:
        space = make_space(spec, gpus, {**o, "precision": precision})
        searched = engines
        if o["recipe_options"]:  # each engine's memory options as variants ranked beside it (engine/recipes.py)
            searched = [v for e in engines for v in (e, *option_variants(e, spec, space.precision, given))]
        return search_engines(spec, hw, space, searched, progress=progress if len(precisions) == 1 else None, **kwargs)

    if len(precisions) == 1:
        return at(precisions[0])
    start = time.perf_counter()
    done = fan_out(at, precisions, workers(len(precisions)))
    found = [r for r in done if isinstance(r, SearchResult)]
    if not found:
        raise cast(PlannerError, done[-1])
    return merge_precisions(found, kwargs["top"], time.perf_counter() - start)


def _precisions(value: str | list[str] | tuple[str, ...] | None) -> list[str | None]:
    """The precisions to search (a comma list or a sequence), each checked; [None]: the default, bf16."""
    if value is None:
        return [None]
    items: list[str | None] = list(dict.fromkeys(listed(value, "precision")))
    if not items:
        raise PlannerError("--precision: give a precision or a comma list of them, e.g. bf16,fp8-current")
    for item in items:
        choice("precision", item)
    return items


def merge_precisions(results: list[SearchResult], top: int, seconds: float) -> SearchResult:
    """The searches of several precisions as one (explore/results.py merge_results), saying which were searched."""
    merged = merge_results(results, top=top, seconds=seconds)
    merged.precisions = tuple(r.space.precision for r in results)
    merged.engines = list({e.name: e for r in results for e in r.engines}.values())
    return merged


def engines_of(engine: str | Engine | list[str | Engine] | None, overrides: dict[str, Any]) -> list[Engine]:
    """The engines a search's `engine` names: one, a list, a comma list or 'all' (resolve_engines)."""
    if isinstance(engine, list):
        return [resolve_engine(e, overrides) for e in engine]
    if isinstance(engine, Engine):
        return [resolve_engine(engine, overrides)]
    return resolve_engines(engine, overrides)


def make_space(model: ModelSpec, gpus: int, o: dict[str, Any]) -> Space:
    """The search space of the options: fixed degrees, limits and the lists to search (comma lists or
    sequences; Space checks them)."""
    seq_len = o["seq_len"] or default_seq_len(model.max_seq_len)
    mb, mbs = o["micro_batch"], o["micro_batches"]
    return Space(
        gpus=gpus,
        global_batch=o["global_batch"] or default_global_batch(seq_len),
        seq_len=seq_len,
        precision=cast(Precision, o["precision"] or "bf16"),
        **{d: o[d] for d in DEGREES if d != "max_vpp"},
        max_vpp=DEFAULT_MAX_VPP if o["max_vpp"] is None else o["max_vpp"],
        zero=ZERO_STAGES if o["zero"] is None else int_items("zero", o["zero"]),
        recompute=RECOMPUTES if o["recompute"] is None else listed(o["recompute"], "recompute"),
        micro_batches=(mb,) if mb is not None else (None if mbs is None else int_items("micro-batches", mbs)),
        schedules=None if o["schedule"] is None else listed(o["schedule"], "schedule"),
        allow_cross_node_tp=bool(o["allow_cross_node_tp"]),
        **{k: o[k] for k in STATED_SPLIT},
    )
