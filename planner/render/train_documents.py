"""The time to train and the checkpoint interval with its goodput, as `estimate --json` and each of `search
--json`'s plans give them (`train`, `checkpoint`: absent where not asked for or where failures are not priced)."""

from __future__ import annotations

from planner.cost.estimate import Estimate
from planner.render.document_base import Document


class TrainDoc(Document):
    tokens: int
    steps: int
    seconds: float  # failure-free
    gpu_hours: float
    expected_seconds: float | None = None  # with failures priced (--mtbf-hours or a cluster): over the goodput
    expected_gpu_hours: float | None = None
    seconds_interval: tuple[float, float] | None = None  # 80%, from the throughput's (Uncertainty.duration_interval)
    expected_seconds_interval: tuple[float, float] | None = None


class CheckpointDoc(Document):
    write_s: float
    checkpoint_bytes: int
    write_bytes_per_s: float  # the job's aggregate, given or as `bandwidth_from` says
    bandwidth_from: str  # "" where given (--checkpoint-bandwidth, a cluster's storage)
    system_mtbf_s: float
    interval_s: float
    restart_s: float
    wasted_fraction: float
    goodput: float
    goodput_tokens_per_s: float


def train_doc(est: Estimate) -> TrainDoc | None:
    """The time and GPU-hours to train the tokens asked for, failure-free and with failures priced, with their 80%
    intervals (from the throughput's: Uncertainty.duration_interval)."""
    if not est.train:
        return None
    tr, ex, u, rate = est.train, est.expected_train, est.uncertainty, est.time.tokens_per_s
    return TrainDoc(
        tokens=tr.steps * est.plan.tokens_per_step, steps=tr.steps, seconds=tr.seconds, gpu_hours=tr.gpu_hours,
        expected_seconds=ex.seconds if ex else None, expected_gpu_hours=ex.gpu_hours if ex else None,
        seconds_interval=u.duration_interval(tr.seconds, rate),
        expected_seconds_interval=u.duration_interval(ex.seconds, rate) if ex else None,
    )  # fmt: skip


def checkpoint_doc(est: Estimate) -> CheckpointDoc | None:
    """The checkpoint interval, the restart and the goodput where failures are priced (estimate, each search plan)."""
    c = est.checkpoint
    if c is None:
        return None
    return CheckpointDoc(
        write_s=c.checkpoint_s,
        checkpoint_bytes=round(c.checkpoint_bytes),
        write_bytes_per_s=c.write_bytes_per_s,
        bandwidth_from=c.bandwidth_from,
        system_mtbf_s=c.mtbf_s,
        interval_s=c.interval_s,
        restart_s=c.restart_s,
        wasted_fraction=c.wasted_fraction,
        goodput=c.goodput,
        goodput_tokens_per_s=est.goodput_tokens_per_s,
    )
