"""`planner scale`: the best plan at each GPU count, and what it means for a run of a token budget (throughput, MFU,
time to train, GPU-hours): the curve a team draws before it asks for a reservation.

Each count is one search (api/advising.py `search_advised`, top 1, so `--global-batch auto` and a cluster work
as in `search`), the counts searched side by side (explore/fanout.py); the time to train is cost/timing.py's. Where
failures are priced (a cluster's rate, or --mtbf-hours), the time to train and the GPU-hours are the expected ones:
the failure-free time over the goodput of the Young/Daly checkpoint interval (checkpoint writes, lost work and
restarts), which at 100k GPUs is no longer a rounding error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from planner.api.advising import search_advised
from planner.api.choosing import range_stop
from planner.api.resolve import choice
from planner.api.searching import engines_of
from planner.cluster.fabric import RESTART_S, cluster_of, cluster_size
from planner.cluster.failures import FailureRate, defaulted_rate, per_gpu_mtbf_hours, priced_options, restart_seconds
from planner.cost.timing import CheckpointPlan, TrainTime, expected_train, time_to_train
from planner.cost.uncertainty import Plausibility, Uncertainty
from planner.engine import Engine
from planner.errors import PlannerError
from planner.explore.advice import count_hint, gpu_counts
from planner.explore.fanout import fan_out, workers
from planner.explore.results import SearchResult
from planner.explore.space import TOKENS_RANGE, in_range
from planner.hardware import HardwareProfile
from planner.io.catalog import DEFAULT_HARDWARE, load_hardware, load_model
from planner.plan import Plan
from planner.specs import ModelSpec

SLOWER_MARGIN = 0.01  # a count 1% slower than fewer GPUs trains longer; below it, within what the interval hides


@dataclass(frozen=True)
class ScalePoint:
    """The best plan at one GPU count (plan None: nothing fits there) and the run it makes."""

    gpus: int
    plan: Plan | None
    engine: str | None = None
    tokens_per_s: float = 0.0
    mfu: float = 0.0
    step_s: float = 0.0
    train_s: float = 0.0  # failure-free
    gpu_hours: float = 0.0
    checkpoint: CheckpointPlan | None = None  # failures priced: the interval, the write, the restart, the goodput
    expected: TrainTime | None = None  # failures priced: the time and GPU-hours to train over the goodput
    note: str | None = None  # why there is no plan: nothing fits, or the search's own refusal
    defaulted: frozenset[str] = frozenset()  # what the defaults gave: global_batch, seq_len (render.batch_text)
    refused: bool = False  # the search refused its options at this count, or its rules ruled out every plan (note: why)
    plausibility: Plausibility | None = None  # the best plan's MFU against the best published (as estimate says it)
    uncertainty: Uncertainty | None = None  # the best plan's 80% intervals (as estimate and search give them)
    peak_memory_bytes: float = 0.0  # the best plan's most loaded GPU
    may_not_fit: bool = False  # it fits, but the 80% interval of its memory passes the GPU (as search flags it)

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.gpus

    @property
    def goodput(self) -> float | None:
        return self.checkpoint.goodput if self.checkpoint else None

    @property
    def stalled(self) -> bool:
        """The plan fits but failures leave it no time to train (cost/timing.py CheckpointPlan.stalled)."""
        return self.checkpoint is not None and self.checkpoint.stalled

    @property
    def priced_train_s(self) -> float:
        """The time to train as priced: expected where failures are (never: inf, where it stalls), else
        failure-free."""
        return math.inf if self.stalled else self.expected.seconds if self.expected else self.train_s

    @property
    def priced_gpu_hours(self) -> float:
        return math.inf if self.stalled else self.expected.gpu_hours if self.expected else self.gpu_hours

    def train_interval_s(self, priced: bool) -> tuple[float, float] | None:
        """The 80% interval of the time to train: failure-free, or as priced (expected, over the goodput; none where
        failures are not priced, where it stalls, or where there is no interval), as estimate's `train` gives both."""
        if self.uncertainty is None or self.plan is None or (priced and (self.stalled or self.expected is None)):
            return None
        return self.uncertainty.duration_interval(self.priced_train_s if priced else self.train_s, self.tokens_per_s)

    def as_json(self) -> dict[str, Any]:
        """The point; its figures are null where there is no plan (a script taking the least train_s must not
        pick a count that cannot run)."""
        ran, free, priced = self.plan is not None, self.train_interval_s(False), self.train_interval_s(True)
        figures = {
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "mfu": self.mfu,
            "step_s": self.step_s,
            "train_s": self.train_s,
            "gpu_hours": self.gpu_hours,
            "goodput": self.goodput,
            "checkpoint_interval_s": self.checkpoint.interval_s if self.checkpoint else None,
            "checkpoint_write_s": self.checkpoint.checkpoint_s if self.checkpoint else None,
            "expected_train_s": self.expected.seconds if self.expected else None,
            "expected_gpu_hours": self.expected.gpu_hours if self.expected else None,
            "plausibility": self.plausibility.as_dict() if self.plausibility else None,
            "uncertainty": self.uncertainty.as_dict() if self.uncertainty else None,
            "train_s_interval": list(free) if free else None,
            "expected_train_s_interval": list(priced) if priced else None,
            "peak_memory_bytes": round(self.peak_memory_bytes),  # whole bytes, as estimate gives them
            "may_not_fit": self.may_not_fit,
        }
        return {
            "gpus": self.gpus,
            "fits": ran,
            "stalled": self.stalled,
            "plan": self.plan.document(self.engine) if self.plan is not None and self.engine is not None else None,
            "engine": self.engine,
            **{k: v if ran else None for k, v in figures.items()},
            "note": self.note,
        }


@dataclass(frozen=True)
class Scaling:
    model: str
    hardware: str
    tokens: float
    points: tuple[ScalePoint, ...]
    batch: str | None = None  # "global batch G x S tokens (default: ...)" where every count runs the same batch
    failures: FailureRate | None = None  # the rate the times are priced at (None: failure-free times)
    restart_s: float = RESTART_S  # what each failure costs besides the lost work, where failures are priced
    cluster: str | None = None  # the cluster file's name, where the counts were priced on one
    note: str | None = None  # the range stops at the cluster's size, where it passed it (choosing.py range_stop)
    engines_searched: str | None = None  # --engine where it names several ("all", "megatron,torchtitan")

    def as_json(self) -> dict[str, Any]:
        slower = self.slower_than_fewer()
        return {
            "model": self.model,
            "hardware": self.hardware,
            "cluster": self.cluster,
            "tokens": self.tokens,
            "failures": (
                {
                    "gpu_mtbf_hours": self.failures.gpu_mtbf_hours,
                    "source": self.failures.source,
                    "restart_s": self.restart_s,
                }
                if self.failures is not None
                else None
            ),
            "engines_searched": self.engines_searched,
            "points": [{**p.as_json(), "trains_slower_than": slower.get(p.gpus)} for p in self.points],
            "note": self.note,
        }

    def slower_than_fewer(self) -> dict[int, int]:
        """Each count that trains longer (as priced, by over SLOWER_MARGIN) than one of fewer GPUs, and the fewer
        count that trains soonest (a review read 16,384 H100s at 164 days beside 8,192 at 148, unsaid)."""
        out: dict[int, int] = {}
        soonest: ScalePoint | None = None
        for p in sorted((p for p in self.points if p.plan is not None and not p.stalled), key=lambda p: p.gpus):
            if soonest is not None and p.priced_train_s > soonest.priced_train_s * (1 + SLOWER_MARGIN):
                out[p.gpus] = soonest.gpus
            if soonest is None or p.priced_train_s < soonest.priced_train_s:
                soonest = p
        return out


def scale(
    model: str | ModelSpec,
    *,
    gpus: str | Sequence[int],
    tokens: float,
    hardware: str | HardwareProfile | None = None,
    engine: str | Engine | list[str | Engine] | None = None,
    global_batch: int | str | None = None,
    max_tokens_per_step: int | None = None,
    **options: Any,
) -> Scaling:
    """The best plan (by throughput) at each GPU count, with its time to train `tokens` and GPU-hours."""
    if tokens is None:
        raise PlannerError("scale needs a token budget: pass --tokens N (e.g. 15e12)")
    in_range("tokens", tokens, TOKENS_RANGE)  # as estimate checks it: NaN, inf, 1e30, True and "1e12" (audit)
    choice("precision", options.get("precision"))  # one precision for the whole curve, checked before any search
    spec = model if isinstance(model, ModelSpec) else load_model(model)
    hw = hardware if isinstance(hardware, HardwareProfile) else load_hardware(hardware or DEFAULT_HARDWARE)
    search_options = {"global_batch": global_batch, "max_tokens_per_step": max_tokens_per_step, **options, "top": 1}

    def point(g: int) -> ScalePoint:
        try:
            found = search_advised(
                spec, gpus=g, hardware=hw, engine=engine, advice=False, counted=False, **search_options
            )
        except PlannerError as e:  # no degrees make up this count, or more GPUs than the cluster holds
            return ScalePoint(g, None, note=str(e), refused=True)
        p = _point(g, found.result, tokens)
        if found.result.broke_the_batch:
            p = replace(p, note=f"{p.note}; {_batch_hint(spec, hw, engine, g, global_batch, search_options)}")
        return p

    counts = gpu_counts(gpus, node=hw.gpus_per_node, domain=hw.nvlink_domain, cap=cluster_size(hw))
    points = [cast(ScalePoint, p) for p in fan_out(point, counts, workers(len(counts)))]  # each count apart
    if all(p.refused for p in points):  # no count has a plan the rules allow: exit 2, as search
        raise PlannerError(_refusal(points))
    rate, restart_s = _failures(points, hw, options)
    return Scaling(
        spec.name, hw.name, tokens, tuple(points), _batch(spec, points, global_batch == "auto"), rate, restart_s,
        getattr(cluster_of(hw), "name", None), range_stop(gpus, hw), _several(engine),
    )  # fmt: skip


def _several(engine: str | Engine | list[str | Engine] | None) -> str | None:
    """--engine where it names several engines, read as the searches read it (searching.engines_of): 'all' where
    one word names them, else their names."""
    names = list(dict.fromkeys(e.name for e in engines_of(engine, {})))
    if len(names) < 2:
        return None
    return "all" if isinstance(engine, str) and "," not in engine else ",".join(names)


def _refusal(points: list[ScalePoint]) -> str:
    """Why no count has a valid plan: the one reason they share (an engine without the model's layers), or each's."""
    notes = list(dict.fromkeys(p.note or "" for p in points))
    if len(notes) == 1:
        return notes[0]
    return "no count has a valid plan: " + "; ".join(f"at {p.gpus:,} GPUs, {p.note}" for p in points)


def _batch_hint(
    spec: ModelSpec, hw: HardwareProfile, engine: Any, gpus: int, batch: int | str | None, options: dict[str, Any]
) -> str:
    """Where no data-parallel degree divides the batch (10,000 GPUs = 2^4 x 5^4 and 512 sequences): the batch
    --global-batch auto finds at this count (it tries the count's odd factor, 1,250 there), else a count with more
    factors of two (explore/advice.py count_hint)."""
    if batch != "auto":
        try:
            found = search_advised(spec, gpus=gpus, hardware=hw, engine=engine, advice=False,
                                   **{**options, "global_batch": "auto"})  # fmt: skip
        except PlannerError:
            found = None
        if found is not None and found.result.best is not None:
            return f"--global-batch auto finds {found.result.best.plan.global_batch} at {gpus:,} GPUs"
    return f"{count_hint(gpus, hw.nvlink_domain)}, or another --global-batch, gives more to try"


def _point(g: int, result: SearchResult, tokens: float) -> ScalePoint:
    """One count's best plan and the run it makes: failure-free, or over its goodput where failures are priced."""
    best = result.best
    if best is None:
        return ScalePoint(g, None, note=result.none_reason(), refused=result.ruled_out)
    t, ck = best.time, best.estimate.checkpoint
    run = time_to_train(step_s=t.step_s, tokens_per_step=best.plan.tokens_per_step, tokens=tokens, gpus=g)
    expected = expected_train(run, ck.goodput) if ck is not None else None
    # a plan that fits but stalls at this failure rate keeps its failure-free figures and its checkpoint plan (the
    # rate the table is priced at); it has no expected time, and its note says why (it was a count where nothing
    # fits, with the rate dropped and --restart-minutes said to change nothing: audit)
    return ScalePoint(
        g, best.plan, best.estimate.engine.name, t.tokens_per_s, t.mfu, t.step_s, run.seconds, run.gpu_hours,
        checkpoint=ck, expected=expected, defaulted=result.defaulted, plausibility=best.estimate.plausibility,
        uncertainty=best.estimate.uncertainty, note=ck.stall_note() if ck is not None and ck.stalled else None,
        peak_memory_bytes=best.estimate.memory.total_bytes, may_not_fit=best.estimate.may_not_fit,
    )  # fmt: skip


def _failures(
    points: list[ScalePoint], hw: HardwareProfile, options: dict[str, Any]
) -> tuple[FailureRate | None, float]:
    """The per-GPU failure rate and the restart the counts were priced at, as their checkpoint plans have them
    (cost/estimate.py, cluster/failures.py), with where the rate comes from; where no count has a plan, the rate
    the options give all the same (the footer said 'failure-free times' beside --mtbf-hours); (None, RESTART_S)
    where none was given or defaulted."""
    given = options.get("mtbf_hours")
    if given is None:
        rate = defaulted_rate(hw, options)
        source = rate.source if rate is not None else ""
    else:
        source = f"--mtbf-hours {given:g} per {'node' if options.get('mtbf_per') == 'node' else 'GPU'}"
    o = priced_options(hw, options)
    if o.get("mtbf_hours") is None:
        return None, RESTART_S
    per_gpu = per_gpu_mtbf_hours(o["mtbf_hours"], o.get("mtbf_per"), hw.gpus_per_node)
    return FailureRate(per_gpu, source), restart_seconds(o.get("restart_minutes"))


def _batch(spec: ModelSpec, points: list[ScalePoint], auto: bool = False) -> str | None:
    """The header's batch, as every command states it, where every count's best plan runs the same one; with
    --global-batch auto, that auto chose it (at each count), or where the counts' batches differ that the batch
    column has them (the header printed auto's common batch as if it had been given)."""
    from planner.render.breakdown import batch_text

    shapes = {(p.plan.global_batch, p.plan.seq_len) for p in points if p.plan is not None}
    if not shapes or (len(shapes) != 1 and not auto) or len({s for _, s in shapes}) != 1:
        return None
    (global_batch, seq_len), first = min(shapes), next(p for p in points if p.plan is not None)
    chosen = f"{global_batch} at every count" if len(shapes) == 1 else "per count, in the batch column"
    return batch_text(global_batch, seq_len, spec, first.defaulted, label=f"auto ({chosen})" if auto else "")
