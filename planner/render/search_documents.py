"""`planner search --json` as typed pydantic models (the search's part of DESIGN.md's JSON contracts, beside
documents.py): the counts that add up, the ranked plans with their memory and time, the closest misses."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from planner.explore.results import Miss, Ranked, SearchResult
from planner.launch.emit.refusal import engine_refusals
from planner.render.document_base import Document
from planner.render.documents import MemoryDoc, StepDoc, VariantDoc, memory_doc, rates, variant_docs
from planner.render.train_documents import CheckpointDoc, checkpoint_doc


class RankedDoc(Document):
    """One plan of `planner search --json`."""

    engine: str
    plan: dict[str, Any]
    memory: MemoryDoc
    time: StepDoc
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    mfu: float
    hfu: float
    tflops_per_gpu: float
    uncertainty: dict[str, Any]
    plausibility: dict[str, Any]
    goodput: float | None = None
    goodput_tokens_per_s: float | None = None
    checkpoint: CheckpointDoc | None = None  # as estimate's: the interval, restart and goodput, failures priced
    tiers: dict[str, str | None]  # per parallel group, the slowest tier it crosses (documents.py)
    may_not_fit: bool = False  # fits, but the 80% interval of its memory passes the GPU (as estimate's and the text)
    # each --emit target of its engine: None where its file runs the plan, else why it refuses (launch/emit/refusal.py)
    emit_targets: dict[str, str | None] = Field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        doc = super().as_json()
        doc["memory"] = self.memory.as_json()  # as memory --json prints it: absent sections left out, not null
        return doc


class MissDoc(Document):
    plan: dict[str, Any]
    total_bytes: int
    over_bytes: int
    variants: list[VariantDoc]
    gpus_needed: int | None


class SearchDoc(Document):
    """`planner search --json`: the counts that add up, the ranked plans, and the closest misses."""

    evaluated: int
    valid: int
    rejected: dict[str, int]
    timed: int
    pruned: dict[str, int]
    seconds: float
    model: str
    hardware: str
    engines: list[str]
    gpus: int
    global_batch: int
    global_batch_default: bool
    seq_len: int
    seq_len_default: bool
    objective: str
    precisions: list[str]
    plans: list[RankedDoc]
    closest_misses: list[MissDoc] | None = None

    def as_json(self) -> dict[str, Any]:
        doc = super().as_json()
        doc["plans"] = [p.as_json() for p in self.plans]
        return doc


def ranked_doc(r: Ranked) -> RankedDoc:
    e, t = r.estimate, r.time
    return RankedDoc(
        engine=e.engine.name,
        plan=e.plan.document(e.engine.name),
        memory=memory_doc(e.model, e.hardware, e.plan, e.memory, e.engine),
        time=StepDoc.model_validate(t.as_dict()),
        **rates(e),
        goodput=e.checkpoint.goodput if e.checkpoint is not None else None,
        goodput_tokens_per_s=e.goodput_tokens_per_s if e.checkpoint is not None else None,
        checkpoint=checkpoint_doc(e),
        may_not_fit=e.may_not_fit,
        emit_targets=engine_refusals(e.plan, e.model, e.engine, e.hardware),
    )


def miss_doc(m: Miss) -> MissDoc:
    return MissDoc(
        plan=m.plan.document(m.engine),
        total_bytes=int(m.bytes),
        over_bytes=int(m.over_bytes),
        variants=variant_docs(m),
        gpus_needed=m.gpus_needed,
    )


def search_doc(result: SearchResult) -> SearchDoc:
    s = result.space
    return SearchDoc(
        evaluated=result.evaluated,
        valid=result.valid,
        rejected=dict(result.rejected),
        timed=result.timed,
        pruned=dict(result.pruned),
        seconds=result.seconds,
        model=result.model.name,
        hardware=result.hardware.name,
        engines=[e.name for e in result.engines],
        gpus=s.gpus,
        global_batch=s.global_batch,
        global_batch_default="global_batch" in result.defaulted,
        seq_len=s.seq_len,
        seq_len_default="seq_len" in result.defaulted,
        objective=result.objective,
        precisions=list(result.precisions) or [s.precision],
        plans=[ranked_doc(r) for r in result.top],
        closest_misses=[miss_doc(m) for m in result.misses] if result.misses else None,
    )
