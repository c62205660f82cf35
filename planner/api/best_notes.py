"""What a search says of its best plan beneath the ranking, each in one line: the settings it was given that change
nothing for that plan (idle.py), where no file of its engine's --emit targets runs it, and what unpriced failures
would cost it where that is much (search JSON's `notes`; it also has `emit_targets` and, priced, `checkpoint`)."""

from __future__ import annotations

from planner.api.idle import changing_nothing
from planner.cluster.failures import LLAMA3_GPU_MTBF_HOURS
from planner.cost.estimate import estimate
from planner.explore.results import Ranked, SearchResult
from planner.launch.emit.refusal import engine_refusals
from planner.units import fmt_duration

# The share of time a job may lose to failures before a search that does not price them says so: Llama 3 405B kept
# over 90% of its time training on 16,384 GPUs (Dubey et al. 2024, 3.3.4).
UNPRICED_LOSS = 0.10


def best_plan_notes(result: SearchResult) -> list[str]:
    """The notes on the search's best plan ([] with none ranked)."""
    if not result.top:
        return []
    best = result.top[0]
    eng = best.estimate.engine
    said = [f"for the best plan, {s}" for s in changing_nothing(result.model, best.plan, eng)]
    unwritten = no_file_runs(engine_refusals(best.plan, result.model, eng, result.hardware), eng.name)
    return said + ([unwritten] if unwritten else []) + failures_unsaid(best)


def no_file_runs(refused: dict[str, str | None], engine_name: str) -> str | None:
    """Where every --emit target of the engine refuses the plan (a model no configuration of it names, a layout its
    files cannot say): the first one's reason, the others by name; None where one writes it or there are none."""
    if not refused or any(why is None for why in refused.values()):
        return None
    first, *others = refused
    also = f"; {' and '.join(others)} {'refuse' if len(others) > 1 else 'refuses'} it too" if others else ""
    return (
        f"no --emit file runs the best plan on {engine_name} ({refused[first]}{also}); it is priced as "
        f"{engine_name}'s own layers would run it, given a model definition of yours"
    )


def failures_unsaid(best: Ranked) -> list[str]:
    """Where a search prices no failures (no rate given, no cluster, not the goodput objective) and the best plan
    would lose more than UNPRICED_LOSS of its time to them at the published rate: how much, in one line. 98,304 B200s
    were advised 'use at most 6144 GPUs' failure-free, and 3,072 with failures priced, unsaid (audit)."""
    e = best.estimate
    if e.checkpoint is not None:
        return []
    ck = estimate(e.model, e.hardware, e.plan, e.engine, mtbf_hours=LLAMA3_GPU_MTBF_HOURS, time=e.time).checkpoint
    if ck is None or ck.goodput >= 1 - UNPRICED_LOSS:
        return []
    return [
        f"failures are not priced: at Llama 3's rate (a GPU fails every {LLAMA3_GPU_MTBF_HOURS:,.0f} h) the "
        f"{e.plan.gpus:,} GPUs fail every {fmt_duration(ck.mtbf_s)} and the best plan keeps {ck.goodput:.1%} of its "
        "time; --objective goodput ranks and advises by what it keeps"
    ]
