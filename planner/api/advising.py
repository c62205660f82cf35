"""`search` with a GPU-count range (`--gpus 1024..131072`), `--global-batch auto` and advice when the job and the
cluster do not match (explore/advice.py decides; this module runs the searches it asks for)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from planner.api.choosing import choices, choose, range_stop, rate_unit
from planner.cluster.failures import FailureRate, defaulted_rate, priced_options
from planner.engine import Engine
from planner.errors import PlannerError
from planner.explore.advice import DEFAULT_MAX_TOKENS_PER_STEP, IDLE_SHARE, Advice, advise, range_counts
from planner.explore.probe import Probe
from planner.explore.probe_rate import Rate
from planner.explore.results import SearchResult
from planner.explore.space import in_range
from planner.hardware import HardwareProfile
from planner.io.catalog import DEFAULT_HARDWARE, load_hardware, load_model
from planner.plan import MAX_BATCH, MAX_DEGREE, default_global_batch, default_seq_len
from planner.specs import MAX_SEQ_LEN, MAX_TOKENS_PER_STEP, ModelSpec
from planner.units import fmt_duration, fmt_seconds, fmt_steps


@dataclass
class Advised:
    """The search at the chosen GPU count and batch, with the advice (empty when the plan uses the GPUs well)."""

    result: SearchResult
    global_batch_default: bool
    advice: list[Advice] = field(default_factory=list)
    # the probes' advice and how many searches they ran, deferred (search_advised defer_advice)
    pending: Callable[[], tuple[list[Advice], int]] | None = None
    probe_searches: int = 0
    probe_s: float = 0.0  # how long the probes took: not in the search's own `seconds` (its header)

    def finish(self) -> Advised:
        """Itself with the deferred probes' advice added now: a command prints the ranking before they run."""
        if self.pending is not None:
            start = time.perf_counter()
            said, self.probe_searches = self.pending()
            self.advice += said
            self.pending = None
            self.probe_s = time.perf_counter() - start
        return self

    def probes_json(self) -> dict[str, object]:
        """The probes' cost, for the search JSON: searches at other GPU counts and batches, and their seconds."""
        return {"searches": self.probe_searches, "seconds": round(self.probe_s, 3)}


def parse_count(name: str, value: int | str | None, *, high: int) -> int | str | None:
    """An int option that also takes a word or a range: the int checked, anything else passed on as text."""
    if value is None or isinstance(value, int):
        count = value
    elif value.strip().isdigit():
        count = int(value)
    else:
        return value.strip()
    if count is not None and not 1 <= count <= high:
        raise PlannerError(f"--{name} {count}: must be from 1 to {high}")
    return count


def search_advised(
    model: str | ModelSpec,
    *,
    gpus: int | str,
    hardware: str | HardwareProfile | None,
    engine: str | Engine | list[str | Engine] | None,
    global_batch: int | str | None = None,
    max_tokens_per_step: int | None = None,
    advice: bool = True,
    progress: Callable[[int, int], None] | None = None,
    keep_rejections: bool = False,
    defer_advice: bool = False,
    counted: bool = True,
    **options: Any,
) -> Advised:
    """The search `run_search` does, at the count of a `LO..HI` range and the batch `auto` choose (the largest count,
    and the smallest batch, whose best plan reaches WELL of the best tokens/s per GPU), with advice (its probes left to
    Advised.finish with `defer_advice`). `counted` false: only the plans are read (planner scale): a probe's serves."""
    from planner.api import run_search

    spec = model if isinstance(model, ModelSpec) else load_model(model)
    hw = hardware if isinstance(hardware, HardwareProfile) else load_hardware(hardware or DEFAULT_HARDWARE)
    count, batch = _counts_and_batch(gpus, global_batch)
    seq_len, bound = _step_tokens(spec, batch, options.get("seq_len"), max_tokens_per_step)
    rate, options = _with_failures(hw, options)
    kept = _kept_for(options, progress, more=keep_rejections or counted)
    probe = _probe(spec, hw, engine, options, kept)
    counts = range_counts(count, hw) if isinstance(count, str) else [count]
    c = choose(probe, counts, batch, seq_len=seq_len, bound=bound)
    chosen, b = c.gpus, c.batch
    result = _planned((kept or {}).get((chosen, b))) or run_search(
        spec, gpus=chosen, hardware=hw, engine=engine, progress=progress, keep_rejections=keep_rejections,
        **_at(hw, chosen, options, b),
    )  # fmt: skip
    # the probes search with the same options (top 1): this search's first plan is theirs at (chosen, b)
    probe.know(chosen, b, result.top[0].score_tokens_per_s / chosen if result.top else None, result.seconds)
    if batch is None:  # the batch was the default one, passed on by value: the header says so
        result.defaulted = result.defaulted | {"global_batch"}
    out = Advised(result, batch is None)
    unit = rate_unit(bool(result.top) and result.top[0].estimate.checkpoint is not None)
    out.advice += choices(c, counts, batch, seq_len, unit, range_stop(count, hw)) + _checkpoints(result, rate)
    out.advice += _idle_at_default(result, chosen, options) if advice and len(counts) > 1 and batch is None else []
    # advice is about throughput: not for a ranking by memory, whose first plan is the smallest; nor after a range,
    # whose choice is the count's advice against the range's best (a scan would measure against another best)
    wanted = advice and result.top and options.get("objective") != "memory" and len(counts) == 1
    if wanted and (batch == "auto" or _idle_share(result) >= IDLE_SHARE):
        out.pending = partial(
            _advised, spec, hw, options, result, probe, (chosen, b), seq_len=seq_len, bound=bound, unit=unit
        )
    return out if defer_advice else out.finish()


def _step_tokens(spec: ModelSpec, batch: int | str | None, seq_len: int | None, most: int | None) -> tuple[int, int]:
    """The sequence length and the bound on tokens per step (--max-tokens-per-step `most`, else the default), a
    given batch checked against a given bound."""
    in_range("max-tokens-per-step", most, (1, MAX_TOKENS_PER_STEP))  # the options' bounds: 0 was the default (audit)
    in_range("seq-len", seq_len, (1, MAX_SEQ_LEN))
    bound, seq = most or DEFAULT_MAX_TOKENS_PER_STEP, seq_len or default_seq_len(spec.max_seq_len)
    if isinstance(batch, int) and batch * seq > bound and most:
        raise PlannerError(f"--global-batch {batch} x {seq} tokens is above --max-tokens-per-step {bound}")
    if batch is None and most and default_global_batch(seq) * seq > bound:  # it was run at the default (audit)
        raise PlannerError(
            f"--max-tokens-per-step {bound} is below the default global batch ({default_global_batch(seq)} x {seq} "
            "tokens): give --global-batch N within it, or --global-batch auto"
        )
    return seq, bound


def _advised(
    spec: ModelSpec, hw: HardwareProfile, options: dict[str, Any], result: SearchResult, probe: Probe,
    at: tuple[int, int], *, seq_len: int, bound: int, unit: str,
) -> tuple[list[Advice], int]:  # fmt: skip
    """explore/advice.py advise at the searched count and batch `at`, with the probe _narrowed gives, and the
    searches that probe ran for it."""
    chosen, b = at
    narrowed = _narrowed(spec, hw, options, result, probe, chosen, b)
    before = narrowed.searched
    said = advise(narrowed, gpus=chosen, global_batch=b, seq_len=seq_len, node=hw.gpus_per_node,
                  max_tokens_per_step=bound, rate=unit)  # fmt: skip
    return (said if narrowed is probe else _probed_with(said, result)), narrowed.searched - before


def _kept_for(
    options: dict[str, Any], progress: Callable[[int, int], None] | None, *, more: bool
) -> dict[tuple[int, int], SearchResult] | None:
    """Where the probes keep their results: where this search is one they make (top 1, no progress to show, nothing
    `more` kept or counted beyond them), so that a probe's result serves it; else None."""
    return {} if options.get("top") == 1 and not more and progress is None else None


def _planned(result: SearchResult | None) -> SearchResult | None:
    """A probe's result where it found a plan; else None (its counts are partial, and a search that found nothing
    is told by them: the search runs again, counting)."""
    return result if result is not None and result.top else None


def _probed_with(said: list[Advice], result: SearchResult) -> list[Advice]:
    """The advice, saying which engine and precision its probes searched (_narrowed)."""
    top = result.top[0]
    only = f" (the counts and batches probed with {top.estimate.engine.name}, {top.plan.precision} only)"
    return [replace(a, message=a.message + only) for a in said]


def _counts_and_batch(gpus: int | str | None, global_batch: int | str | None) -> tuple[int | str, int | str | None]:
    """--gpus (a count or a range) and --global-batch (a count, auto, or the default), checked."""
    count = parse_count("gpus", gpus, high=MAX_DEGREE)
    if count is None:
        raise PlannerError("no GPU count given: pass --gpus N (or a range LO..HI)")
    batch = parse_count("global-batch", global_batch, high=MAX_BATCH)
    if isinstance(batch, str) and batch != "auto":
        raise PlannerError(f"--global-batch {batch!r}: give a number of sequences or 'auto'")
    return count, batch


def _with_failures(hw: HardwareProfile, options: dict[str, Any]) -> tuple[FailureRate | None, dict[str, Any]]:
    """The rate the defaults give where --mtbf-hours does not (the advice names its source), and the options that
    price failures (cluster/failures.py priced_options; the checkpoint bandwidth is set per count, _at)."""
    return defaulted_rate(hw, options), priced_options(hw, options)


def _at(hw: HardwareProfile, gpus: int, options: dict[str, Any], global_batch: int) -> dict[str, Any]:
    """The search options at one count: the batch, and the checkpoint bandwidth a cluster's storage allows."""
    return {**priced_options(hw, options, gpus), "global_batch": global_batch}


def _probe(
    spec: ModelSpec,
    hw: HardwareProfile,
    engine: str | Engine | list[str | Engine] | None,
    options: dict[str, Any],
    kept: dict[tuple[int, int], SearchResult] | None = None,
) -> Probe:
    """best_at(gpus, batch): the top-1 search's tokens/s per GPU, what its goodput keeps where failures are priced
    (None when nothing fits or no degrees do); each search's result put in `kept` where given (a search run in
    this process: a forked worker's stays there), for the search at the chosen pair not to run again where it
    found a plan (`planner scale` searched each count's chosen pair twice). Only the best plan is read: no search
    counts its rejections in full (that took 1.5-2.4x as long a search, more than the one search it saved:
    benchmarks/bench_probes.py, Kimi-K2 on 36,864 GB200s with --global-batch auto, 14.1 s against 8.3)."""
    from planner.api import run_search

    def best_at(g: int, b: int) -> float | None:
        try:
            res = run_search(
                spec,
                gpus=g,
                hardware=hw,
                engine=engine,
                counts=False,
                **{**_at(hw, g, options, b), "top": 1},
            )
        except PlannerError:
            return None
        if kept is not None:
            kept[(g, b)] = res
        if not res.top:
            return None
        top = res.top[0]  # what the goodput keeps, if priced; and what the plan is flagged with (probe_rate.py)
        flags = [*(["predicts an MFU above the best published"] if not top.estimate.plausibility.ok else []),
                 *(["may not fit"] if top.estimate.may_not_fit else [])]  # fmt: skip
        return Rate(top.score_tokens_per_s / g, g, " and ".join(flags))

    return Probe(best_at)


def _narrowed(
    spec: ModelSpec, hw: HardwareProfile, options: dict[str, Any], result: SearchResult, probe: Probe, g: int, b: int
) -> Probe:
    """The advice's probe: where the search ranked several engines, --recipe-options variants or precisions, the
    probes search only the best plan's engine and precision (each probe is a search; the product of variants and
    precisions made the advice 20-60 s on the largest MoE models). Else the probe the choices used."""
    several = len(result.engines) > 1 or len(result.precisions) > 1
    best = result.top[0] if result.top else None
    if not several or best is None:
        return probe
    narrow = {**options, "precision": best.plan.precision, "recipe_options": False}
    out = _probe(spec, hw, best.estimate.engine, narrow)
    out.know(g, b, best.score_tokens_per_s / g, result.seconds)
    return out


def _idle_at_default(result: SearchResult, chosen: int, options: dict[str, Any]) -> list[Advice]:
    """After a range at the default batch, whose choice scans no batches: where the plan chosen idles IDLE_SHARE of
    its step or more, a line pointing to --global-batch auto (a review found 9,216 GB200s idle 62%, unsaid); its
    global_batch null, as the advice names no batch (not for a ranking by memory, as the scan is not)."""
    if not result.top or options.get("objective") == "memory" or (idle := _idle_share(result)) < IDLE_SHARE:
        return []
    said = f"the plan chosen at {chosen:,} GPUs idles {idle:.0%} of its step at the default batch: --global-batch auto "
    return [Advice("global_batch", said + "chooses a batch with the count", chosen, None)]


def _idle_share(result: SearchResult) -> float:
    t = result.top[0].time
    return (t.bubble_s + sum(t.exposed_comm_s.values())) / t.step_s if t.step_s else 0.0


def _checkpoints(result: SearchResult, rate: FailureRate | None) -> list[Advice]:
    """The best plan's checkpoint interval (Young 1974 / Daly 2006) and goodput under the failure rate used."""
    best = result.best
    ck = best.estimate.checkpoint if best is not None else None
    if best is None or ck is None:
        return []
    source = f" ({rate.source})" if rate is not None else " (--mtbf-hours)"
    text = (
        f"no plan trains on {best.plan.gpus} GPUs at this failure rate{source}: {ck.stall_note()}"
        if ck.stalled
        else f"checkpoint every {fmt_steps(ck.interval_s, best.time.step_s)} (Young/Daly; a write takes "
        f"{fmt_seconds(ck.checkpoint_s)}): the {best.plan.gpus} GPUs fail every {fmt_duration(ck.mtbf_s)} on "
        f"average{source}; goodput {ck.goodput:.1%} with a restart of {ck.restart_s / 60:g} min per failure"
    )
    return [
        Advice(
            "checkpoint",
            text,
            best.plan.gpus,
            best.plan.global_batch,
        )
    ]
