"""`search` with a GPU-count range (`--gpus 1024..131072`), `--global-batch auto` and advice when the job and the
cluster do not match (explore/advice.py decides; this module runs the searches it asks for)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from planner.cluster.failures import FailureRate, defaulted_rate, priced_options
from planner.engine import Engine
from planner.errors import PlannerError
from planner.explore.advice import (
    DEFAULT_MAX_TOKENS_PER_STEP,
    IDLE_SHARE,
    WELL,
    Advice,
    Probe,
    advise,
    batches,
    range_counts,
)
from planner.explore.results import SearchResult
from planner.hardware import HardwareProfile
from planner.io.catalog import DEFAULT_HARDWARE, load_hardware, load_model
from planner.plan import MAX_BATCH, MAX_DEGREE, default_global_batch, default_seq_len
from planner.specs import ModelSpec
from planner.units import fmt_seconds, fmt_steps


@dataclass
class Advised:
    """The search at the chosen GPU count and batch, with the advice (empty when the plan uses the GPUs well)."""

    result: SearchResult
    global_batch_default: bool
    advice: list[Advice] = field(default_factory=list)


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
    **options: Any,
) -> Advised:
    """The search `run_search` does, at the count of a `LO..HI` range and the batch `auto` choose (the largest
    count, and the smallest batch, whose best plan reaches WELL of the best tokens/s per GPU), with advice."""
    from planner.api import run_search

    spec = model if isinstance(model, ModelSpec) else load_model(model)
    hw = hardware if isinstance(hardware, HardwareProfile) else load_hardware(hardware or DEFAULT_HARDWARE)
    count, batch = _counts_and_batch(gpus, global_batch)
    bound = max_tokens_per_step or DEFAULT_MAX_TOKENS_PER_STEP
    seq_len = options.get("seq_len") or default_seq_len(spec.max_seq_len)
    if isinstance(batch, int) and batch * seq_len > bound and max_tokens_per_step:
        raise PlannerError(f"--global-batch {batch} x {seq_len} tokens is above --max-tokens-per-step {bound}")
    rate, options = _with_failures(hw, options)
    probe = _probe(spec, hw, engine, options)
    counts = range_counts(count, hw) if isinstance(count, str) else [count]
    choice, chosen = _choose(probe, counts, batch, seq_len=seq_len, bound=bound)
    b = choice[chosen]
    result = run_search(
        spec, gpus=chosen, hardware=hw, engine=engine, progress=progress, keep_rejections=keep_rejections,
        **_at(hw, chosen, options, b),
    )  # fmt: skip
    # the probes search with the same options (top 1): this search's first plan is theirs at (chosen, b)
    probe.know(chosen, b, result.top[0].score_tokens_per_s / chosen if result.top else None, result.seconds)
    if batch is None:  # the batch was the default one, passed on by value: the header says so
        result.defaulted = result.defaulted | {"global_batch"}
    out = Advised(result, batch is None)
    unit = _rate_unit(result)
    out.advice += _choices(probe, counts, choice, chosen, batch, seq_len, unit) + _checkpoints(result, rate)
    # advice is about throughput: not for a ranking by memory, whose first plan is the smallest, not the fastest
    wanted = advice and result.top and options.get("objective") != "memory"
    if wanted and (len(counts) > 1 or batch == "auto" or _idle_share(result) >= IDLE_SHARE):
        narrowed = _narrowed(spec, hw, options, result, probe, chosen, b)
        said = advise(narrowed, gpus=chosen, global_batch=b, seq_len=seq_len, node=hw.gpus_per_node,
                      max_tokens_per_step=bound, rate=unit)  # fmt: skip
        out.advice += said if narrowed is probe else _probed_with(said, result)
    return out


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
    spec: ModelSpec, hw: HardwareProfile, engine: str | Engine | list[str | Engine] | None, options: dict[str, Any]
) -> Probe:
    """best_at(gpus, batch): the top-1 search's tokens/s per GPU, what its goodput keeps where failures are priced
    (None when nothing fits or no degrees do)."""
    from planner.api import run_search

    def best_at(g: int, b: int) -> float | None:
        try:
            res = run_search(spec, gpus=g, hardware=hw, engine=engine, **{**_at(hw, g, options, b), "top": 1})
        except PlannerError:
            return None
        return res.top[0].score_tokens_per_s / g if res.top else None  # what the goodput keeps, if priced

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


def _choose(
    probe: Probe, counts: list[int], batch: int | str | None, *, seq_len: int, bound: int
) -> tuple[dict[int, int], int]:
    """(the batch for each count, the count chosen): the pairs the choice asks about are searched side by side
    first (Probe.prefetch), then read in turn."""
    base = default_global_batch(seq_len)
    if batch == "auto":  # the doubling starts within the bound: the default batch, or a power of two that fits
        if bound < seq_len:
            raise PlannerError(
                f"--max-tokens-per-step {bound} is below one sequence of {seq_len} tokens: --global-batch auto has "
                "no batch to choose"
            )
        base = min(base, 1 << ((bound // seq_len).bit_length() - 1))
    if len(counts) > 1 or batch == "auto":
        probe.prefetch(
            (g, b) for g in counts for b in _batches_tried(batch, base=base, seq_len=seq_len, bound=bound, gpus=g)
        )
    choice = {g: _batch_for(probe, g, batch, base=base, seq_len=seq_len, bound=bound) for g in counts}
    return choice, counts[0] if len(counts) == 1 else _count_for(probe, choice)


def _batches_tried(batch: int | str | None, *, base: int, seq_len: int, bound: int, gpus: int) -> list[int]:
    """The batches `_batch_for` asks the probe about: the one given, the default, or for `auto` the doubled ones."""
    if isinstance(batch, int):
        return [batch]
    if batch is None:
        return [base]
    return batches(base, seq_len=seq_len, max_tokens_per_step=bound, gpus=gpus)


def _batch_for(probe: Probe, gpus: int, batch: int | str | None, *, base: int, seq_len: int, bound: int) -> int:
    """The batch given, the default, or for `auto` the smallest of the batches `batches` tries within the bound
    (doubled, and raised to the count's odd factor) whose best plan reaches WELL of the best among them."""
    candidates = _batches_tried(batch, base=base, seq_len=seq_len, bound=bound, gpus=gpus)
    if batch != "auto":
        return candidates[0]
    rates = {b: probe(gpus, b) for b in candidates}
    best = max((r for r in rates.values() if r), default=0.0)
    return next((b for b in candidates if (rates[b] or 0.0) >= WELL * best), base) if best else base


def _count_for(probe: Probe, choice: dict[int, int]) -> int:
    rates = {g: probe(g, b) for g, b in choice.items()}
    fitting = [g for g, r in rates.items() if r]
    if not fitting:  # searched at the largest, whose closest misses say what would fit, as one count's search does
        return max(choice)
    best = max(rates[g] or 0.0 for g in fitting)
    return max(g for g in fitting if (rates[g] or 0.0) >= WELL * best)


def _rate_unit(result: SearchResult) -> str:
    """What the probes measure: tokens/s, or where failures are priced the tokens/s the goodput keeps."""
    priced = bool(result.top) and result.top[0].estimate.checkpoint is not None
    return "goodput tokens/s" if priced else "tokens/s"


def _choices(
    probe: Probe,
    counts: list[int],
    choice: dict[int, int],
    chosen: int,
    batch: int | str | None,
    seq_len: int,
    unit: str,
) -> list[Advice]:
    """What the range and `auto` chose, with the per-GPU throughput of each count tried."""
    out = []
    if len(counts) > 1 and not any(probe(g, choice[g]) for g in counts):
        out.append(
            Advice(
                "chosen_gpus",
                f"nothing fits at any GPU count of the range {counts[0]}..{counts[-1]}: searched at the largest, "
                f"{chosen}, whose closest misses follow",
                chosen,
                choice[chosen],
            )
        )
    elif len(counts) > 1:
        tried = ", ".join(f"{g}: {r:,.0f}" if (r := probe(g, choice[g])) else f"{g}: -" for g in counts)
        out.append(
            Advice(
                "chosen_gpus",
                f"{chosen} GPUs, the most whose best plan reaches >= {WELL:.0%} of the range's best {unit} per "
                f"GPU ({tried})",
                chosen,
                choice[chosen],
            )
        )
    if batch == "auto":
        b = choice[chosen]
        why = (
            f"the smallest whose best plan reaches >= {WELL:.0%} of the best {unit} per GPU on {chosen} GPUs"
            if probe(chosen, b)
            else f"the default: no batch tried fits on {chosen} GPUs"
        )
        out.append(
            Advice(
                "chosen_global_batch",
                f"global batch {b} ({b * seq_len:,} tokens), {why}",
                chosen,
                b,
            )
        )
    return out


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
        f"{fmt_seconds(ck.checkpoint_s)}): the {best.plan.gpus} GPUs fail every {fmt_seconds(ck.mtbf_s)} on "
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
