"""The Python API: what `planner memory`, `planner estimate` and `planner search` do, as functions that return the
documents `--json` prints (typed pydantic models, render/documents.py). The command line is a thin layer over
these functions.

    from planner import estimate, search
    best = search("llama3-70b", gpus=256, engine="torchtitan").plans[0]
    doc = estimate("llama3-70b", gpus=256, tp=8, pp=4, zero=1, recompute="selective")
    print(doc.tokens_per_s, doc.mfu, doc.uncertainty["tokens_per_s_rel"])

Every function takes the model as a catalog name, a path (model YAML or Hugging Face config.json) or a
`ModelSpec`; the hardware and the engine likewise (names, paths or profiles). Plan fields (`tp`, `pp`, `dp`,
`cp`, `ep`, `vpp`, `sp`, `zero`, `recompute`, `micro_batch`, `global_batch`, `seq_len`, `precision`,
`schedule`) and the engine's per-run settings (`optimizer`, `selective_policy`, `attention`, `tp_overlap`,
`compile`, `grad_dtype`) are keyword arguments with the command line's names and defaults; `plan=` takes a
`Plan`, a mapping of its fields or a plan file written by `search --save`. Bad input raises
`planner.errors.PlannerError` with the message the command line prints.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from planner.api.resolve import Resolved, resolve_request
from planner.engine import Engine
from planner.errors import PlannerError
from planner.explore.space import TOKENS_RANGE, Checkpointing, in_range
from planner.hardware import HardwareProfile
from planner.io.catalog import load_engine, load_hardware, load_model
from planner.plan import Plan
from planner.specs import ModelSpec

if TYPE_CHECKING:
    from planner.api.scaling import scale
    from planner.cost.estimate import Estimate
    from planner.cost.memory import MemoryReport
    from planner.cost.uncertainty import Uncertainty
    from planner.explore.results import Miss, SearchResult
    from planner.render.documents import EstimateDoc, MemoryDoc
    from planner.render.search_documents import SearchDoc

# The documents are loaded when first asked for: `planner memory` and `planner estimate` import this package
# for its resolver, and print tables without them.
_LAZY = {
    "EstimateDoc": "planner.render.documents",
    "MemoryDoc": "planner.render.documents",
    "SearchDoc": "planner.render.search_documents",
    "scale": "planner.api.scaling",  # searches a curve of counts: loaded with its fan-out when first called
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'planner.api' has no attribute {name!r}")


__all__ = [
    "Engine",
    "EstimateDoc",
    "HardwareProfile",
    "MemoryDoc",
    "ModelSpec",
    "Plan",
    "SearchDoc",
    "estimate",
    "load_engine",
    "load_hardware",
    "load_model",
    "memory",
    "resolve_request",
    "run_estimate",
    "run_search",
    "scale",
    "search",
]

ModelArg = str | ModelSpec | None
HardwareArg = str | HardwareProfile | None
EngineArg = str | Engine | None


def would_fit(r: Resolved, report: MemoryReport) -> Miss | None:
    """What would make the resolved plan fit (explore/misses.py), or None where it fits."""
    from planner.explore.misses import what_would_fit

    return None if report.fits else what_would_fit(r.model, r.coster, r.plan, report.total_bytes)


def memory_parts(r: Resolved) -> tuple[MemoryReport, Miss | None, Uncertainty]:
    """What `planner memory` says of the resolved plan, text or JSON, command or API: its report, what would make
    it fit, and the 80% interval of its memory."""
    report = r.coster.memory(r.plan)
    return report, would_fit(r, report), r.coster.memory_trust(r.plan, report.total_bytes)


def memory(
    model: ModelArg = None,
    *,
    gpus: int | None = None,
    hardware: HardwareArg = None,
    engine: EngineArg = None,
    plan: Plan | dict[str, Any] | str | None = None,
    **settings: Any,
) -> MemoryDoc:
    """Per-GPU memory of one plan, per pipeline stage: `planner memory --json`."""
    from planner.render.documents import memory_doc

    r = resolve_request(model=model, gpus=gpus, hardware=hardware, engine=engine, plan=plan, settings=settings)
    report, miss, trust = memory_parts(r)
    return memory_doc(r.model, r.hardware, r.plan, report, r.engine, r.defaulted, miss, trust)


def run_estimate(
    r: Resolved,
    *,
    tokens: float | None = None,
    mtbf_hours: float | None = None,
    mtbf_per: str = "gpu",
    checkpoint_bandwidth: float | None = None,
    restart_minutes: float | None = None,
) -> Estimate:
    """The estimate of a resolved plan, with time to train and checkpointing when asked, or on a cluster (its
    failure rate, restart time and storage where the options do not say: cluster/failures.py priced_options)."""
    from planner.cluster.failures import priced_options

    given = {"mtbf_hours": mtbf_hours, "mtbf_per": mtbf_per, "checkpoint_bandwidth": checkpoint_bandwidth,
             "restart_minutes": restart_minutes}  # fmt: skip
    Checkpointing(mtbf_hours, mtbf_per, checkpoint_bandwidth, restart_minutes)  # checked as the search checks it
    o = priced_options(r.hardware, given, r.plan.gpus)
    ck = Checkpointing(o["mtbf_hours"], o["mtbf_per"], o["checkpoint_bandwidth"], o["restart_minutes"])
    in_range("tokens", tokens, TOKENS_RANGE)
    return r.coster.estimate(
        r.plan,
        tokens=tokens,
        mtbf_hours=ck.mtbf_hours,
        mtbf_per=ck.mtbf_per,
        checkpoint_bandwidth_bytes_per_s=ck.bandwidth_bytes_per_s,
        restart_s=ck.restart_s,
    )


def estimate(
    model: ModelArg = None,
    *,
    gpus: int | None = None,
    hardware: HardwareArg = None,
    engine: EngineArg = None,
    plan: Plan | dict[str, Any] | str | None = None,
    tokens: float | None = None,
    mtbf_hours: float | None = None,
    mtbf_per: str = "gpu",
    checkpoint_bandwidth: float | None = None,
    restart_minutes: float | None = None,
    **settings: Any,
) -> EstimateDoc:
    """Step time in terms, throughput, MFU/HFU, their error bars and the memory of one plan: `planner
    estimate --json`; with `tokens`, the time to train; with `mtbf_hours`, checkpoints and goodput (a failure
    costs `restart_minutes`, default 10, besides the lost work)."""
    from planner.render.documents import estimate_doc

    r = resolve_request(model=model, gpus=gpus, hardware=hardware, engine=engine, plan=plan, settings=settings)
    est = run_estimate(
        r,
        tokens=tokens,
        mtbf_hours=mtbf_hours,
        mtbf_per=mtbf_per,
        checkpoint_bandwidth=checkpoint_bandwidth,
        restart_minutes=restart_minutes,
    )
    return estimate_doc(est, r.defaulted, would_fit(r, est.memory))


def run_search(
    model: ModelArg,
    *,
    gpus: int,
    hardware: HardwareArg = None,
    engine: str | Engine | list[str | Engine] | None = None,
    progress: Callable[[int, int], None] | None = None,
    keep_rejections: bool = False,
    counts: bool = True,
    **options: Any,
) -> SearchResult:
    """The search result, with what the defaults gave, for `search` and the command line (counts=False: its top
    plans only, the counts partial: explore/pipeline.py search)."""
    from planner.api.searching import run

    return run(
        model=model,
        gpus=gpus,
        hardware=hardware,
        engine=engine,
        progress=progress,
        keep_rejections=keep_rejections,
        options=options,
        counts=counts,
    )


def search(
    model: ModelArg,
    *,
    gpus: int | str,
    hardware: HardwareArg = None,
    engine: str | Engine | list[str | Engine] | None = None,
    **options: Any,
) -> SearchDoc:
    """Every valid plan for `gpus` GPUs (or the count a range `"LO..HI"` chooses, as the command does), ranked, and
    why the rest were rejected: `planner search --json` without its advice.

    `engine` is one engine, a list, or "all"; `options` are the search's (`top`, `objective`, `exhaustive`,
    `zero`, `recompute`, `micro_batches`, `schedule` as lists or comma strings, `max_tp`, ..., `mtbf_hours`,
    `global_batch` as a count or "auto", `max_tokens_per_step`) plus the plan fields to fix and the engine's per-run
    settings."""
    from planner.api.advising import search_advised
    from planner.render.search_documents import search_doc

    if isinstance(gpus, bool) or not isinstance(gpus, (int, str)):
        raise PlannerError(f"gpus={gpus!r}: give a number of GPUs, or a range 'LO..HI'")
    if model is None:
        raise PlannerError("no model given: pass a catalog name, a model YAML or config.json path, or a ModelSpec")
    found = search_advised(model, gpus=gpus, hardware=hardware, engine=engine, advice=False, **options)
    if found.result.ruled_out:  # no candidate passed the engine's rules: refused, as the command refuses it
        raise PlannerError(found.result.none_reason())
    return search_doc(found.result)
