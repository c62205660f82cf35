"""The documents of DESIGN.md ("JSON contracts") as typed pydantic models: what `--json` prints and what the
Python API (planner.api) returns, built from the cost model's results: memory and estimate here, search's in
search_documents.py. Sizes are bytes, times seconds, rates per second. Fields may be added, never renamed or
removed.

``as_json()`` is the dict `--json` writes (document_base.py); the time to train and the checkpoint interval are
in train_documents.py.

`tiers` (estimate, each searched plan): for each parallel group — tp, cp, ep, dp (the gradient reduction over
dp·cp ranks), pp — the slowest tier its collectives cross in the rank order the cost model prices
(cost/comm.py `group_tiers`): "nvlink" inside one NVLink domain, "network" beyond it without a cluster, else
the cluster tier's name ("leaf", "spine", ...); null for a group of one rank.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from pydantic import Field

from planner.cost.comm import group_tiers
from planner.cost.estimate import Estimate
from planner.cost.memory import MemoryBreakdown, MemoryReport
from planner.cost.uncertainty import Uncertainty
from planner.engine import Engine
from planner.engine.settings import given_settings
from planner.hardware import HardwareProfile
from planner.plan import DERIVABLE, Plan
from planner.render.document_base import Document
from planner.render.train_documents import CheckpointDoc, TrainDoc, checkpoint_doc, train_doc
from planner.specs import ModelSpec

if TYPE_CHECKING:
    from planner.explore.results import Miss, Variant


class StageDoc(Document):
    stage: int
    layers: int
    in_flight_microbatches: float
    total_bytes: int
    per_gpu_bytes: dict[str, int]


class VariantDoc(Document):
    """A change tried on a plan that does not fit, and its peak (explore/misses.py)."""

    change: str
    plan: dict[str, Any]
    total_bytes: int
    fits: bool
    # the engine settings the change adds beside the plan (offload_layers)
    settings: dict[str, Any] = Field(default_factory=dict)
    may_not_fit: bool = False  # it fits, but the 80% interval of its memory passes the GPU


def variant_docs(m: Miss) -> list[VariantDoc]:
    def doc(v: Variant) -> VariantDoc:
        return VariantDoc(change=v.change, plan=v.plan.document(m.engine), total_bytes=int(v.nbytes), fits=v.fits,
                          settings=dict(v.settings), may_not_fit=v.may_not_fit)  # fmt: skip

    return [doc(v) for v in m.variants]


class MemoryDoc(Document):
    """`planner memory --json`: the most loaded stage's terms, whether it fits, and every stage."""

    model: str
    hardware: str
    engine: str
    plan: dict[str, Any]
    stage: int
    per_gpu_bytes: dict[str, int]
    total_bytes: int
    capacity_bytes: int
    fits: bool
    headroom_bytes: int
    params: int
    active_params: int | None = None  # MoE models: the parameters one token passes through, the embedding table whole
    global_batch_default: bool | None = None  # whether the defaults gave the global batch (about 4M tokens)
    seq_len_default: bool | None = None  # whether the defaults gave the sequence length (the context, <= 8192)
    derived_degrees: list[str] | None = None  # a degree other than dp --gpus made up, dp being given
    stages: list[StageDoc]
    notes: list[str]
    # the engine's per-run settings that differ from its profile: what was priced
    settings: dict[str, Any] = Field(default_factory=dict)
    would_fit: list[VariantDoc] | None = None  # where it does not fit: the changes tried, as the search's misses


class TrustedMemoryDoc(MemoryDoc):
    """`planner memory --json`: the memory document, the 80% interval of its memory (`uncertainty`, as estimate's
    with no throughput's) and whether it may not fit (fits, but that interval passes the GPU)."""

    uncertainty: dict[str, Any]
    may_not_fit: bool


class StepDoc(Document):
    """The terms of one step (seconds)."""

    step_s: float
    compute_s: float
    recompute_s: float
    bubble_s: float
    optimizer_s: float
    overhead_s: float
    exposed_comm_s: dict[str, float]


class TimeDoc(StepDoc):
    """The terms of one step, with the communication before overlap and the stage that sets the pace."""

    comm_total_s: dict[str, float]
    bottleneck_stage: int
    tail_stage: int  # the rank whose exposed dp and optimizer step end the step (the bottleneck's or another)


class EstimateDoc(MemoryDoc):
    """`planner estimate --json`: the memory document plus time, throughput, utilisation and their trust."""

    time: TimeDoc
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    tflops_per_gpu: float
    mfu: float
    hfu: float
    model_flops_per_step: float
    uncertainty: dict[str, Any]
    may_not_fit: bool = False  # fits, but the 80% interval of its memory passes the GPU (as the text says)
    plausibility: dict[str, Any]
    train: TrainDoc | None = None
    checkpoint: CheckpointDoc | None = None
    tiers: dict[str, str | None]  # per parallel group, the slowest tier it crosses (`group_tiers`)


# ---- builders ----------------------------------------------------------------------------------------
def _ints(b: MemoryBreakdown) -> dict[str, int]:
    """Whole bytes per term that add up to the rounded total (largest remainders take the spare bytes), so a
    reader who sums the terms gets total_bytes."""
    terms = b.as_dict()
    whole = {k: math.floor(v) for k, v in terms.items()}
    spare = round(b.total_bytes) - sum(whole.values())
    for k in sorted(terms, key=lambda k: whole[k] - terms[k])[:spare]:
        whole[k] += 1
    return whole


def memory_doc(
    model: ModelSpec,
    hw: HardwareProfile,
    plan: Plan,
    report: MemoryReport,
    engine: Engine,
    defaulted: frozenset[str] | None = None,
    miss: Miss | None = None,
    trust: Uncertainty | None = None,
) -> MemoryDoc:
    """The memory document; `defaulted` (memory and estimate of one plan) says which of the global batch and the
    sequence length the defaults gave, `miss` what would make a plan that does not fit fit (api.would_fit),
    `trust` the 80% interval of its memory (Coster.memory_trust)."""
    peak = report.peak
    trusted: dict[str, Any] = (
        {} if trust is None else {"uncertainty": trust.as_dict(), "may_not_fit": trust.may_not_fit(report)}
    )
    return (MemoryDoc if trust is None else TrustedMemoryDoc)(
        **trusted,  # built once, as the class it is (the fields keep the classes' order)
        model=model.name,
        hardware=hw.name,
        engine=engine.name,
        plan=plan.document(engine.name),
        stage=peak.stage,
        per_gpu_bytes=_ints(peak.breakdown),
        total_bytes=round(report.total_bytes),
        capacity_bytes=round(report.capacity_bytes),
        fits=report.fits,
        headroom_bytes=round(report.capacity_bytes) - round(report.total_bytes),
        params=model.num_params,
        active_params=model.num_active_params if model.moe is not None else None,
        global_batch_default=None if defaulted is None else "global_batch" in defaulted,
        seq_len_default=None if defaulted is None else "seq_len" in defaulted,
        derived_degrees=None if defaulted is None else [d for d in DERIVABLE if d in defaulted],
        stages=[
            StageDoc(
                stage=s.stage,
                layers=s.layers,
                in_flight_microbatches=s.in_flight_microbatches,
                total_bytes=round(s.total_bytes),
                per_gpu_bytes=_ints(s.breakdown),
            )
            for s in report.stages
        ],
        notes=list(report.notes),
        settings={k: list(v) if isinstance(v, tuple) else v for k, v in given_settings(engine, plan).items()},
        would_fit=None if miss is None else variant_docs(miss),
    )


def rates(est: Estimate) -> dict[str, Any]:
    """Throughput, utilisation and their trust: the fields estimate's document and each searched plan share."""
    t = est.time
    return {
        "tokens_per_s": t.tokens_per_s,
        "tokens_per_s_per_gpu": t.tokens_per_s_per_gpu,
        "tflops_per_gpu": t.tflops_per_gpu,
        "mfu": t.mfu,
        "hfu": t.hfu,
        "uncertainty": est.uncertainty.as_dict(),
        "plausibility": est.plausibility.as_dict(),
        "tiers": group_tiers(est.hardware, est.plan),
    }


def estimate_doc(est: Estimate, defaulted: frozenset[str] | None = None, miss: Miss | None = None) -> EstimateDoc:
    """The estimate document; `miss` what would make a plan that does not fit fit (api.would_fit)."""
    t = est.time
    mem = memory_doc(est.model, est.hardware, est.plan, est.memory, est.engine, defaulted, miss)
    return EstimateDoc(
        **dict(mem),
        time=TimeDoc.model_validate(
            {
                **t.as_dict(),
                "comm_total_s": dict(t.comm_total_s),
                "bottleneck_stage": t.stage,
                "tail_stage": t.tail_stage,
            }
        ),
        **rates(est),
        model_flops_per_step=t.model_flops_per_step,
        may_not_fit=est.may_not_fit,
        train=train_doc(est),
        checkpoint=checkpoint_doc(est),
    )


def with_cluster(doc: dict[str, Any], hw: HardwareProfile) -> dict[str, Any]:
    """A plan command's document with the cluster its hardware was placed on (`--cluster`), where there is one:
    what search and estimate price their tiers, storage and failures with."""
    from planner.cluster import cluster_of

    cluster = cluster_of(hw)
    return {**doc, "cluster": cluster.model_dump()} if cluster is not None else doc
