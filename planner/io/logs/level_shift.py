"""A step time that changes level part-way through a log (a slower phase after a checkpoint save, a longer warm-up
than --warmup, a job that changed speed): the median over both levels is a time no iteration had (an excerpt of
Megatron-LLM issue 11, iterations 122-125 at 86.5-89.5 s and 182-185 at 125.6-130.6 s, gave 107.5 s). The steps
from the last change on are the run's state at its end: those are used, and the change is said."""

from __future__ import annotations

import statistics
from itertools import accumulate

from planner.io.logs.log_text import Step

# The least ratio of two segments' median step times, the segments not overlapping, counted as a change of level:
# above the spread of a steady run's logged steps (the excerpts in tests/data/logs vary by at most a few percent).
LEVEL_RATIO = 1.15
LEAST_SEGMENT = 2  # steps on each side of a change: one slow step is an event, not a level
# The least share of the steps the later level holds: two slow steps at the end of a long steady run (a save or an
# evaluation no line names, contention as the job ends) are no state the run settled in.
LEAST_LATER_SHARE = 0.25


def _time(s: Step) -> float | None:
    """The step's time, or the inverse of a rate the line prints (larger: slower)."""
    if s.step_s:
        return s.step_s
    rate = s.tokens_per_s_per_gpu or s.samples_per_s or s.batches_per_s
    return 1.0 / rate if rate else None


def latest_level(used: list[Step]) -> tuple[list[Step], str | None]:
    """The steps from the change of level on (one run's, in step order: the split with the widest gap between two
    levels that do not overlap, their medians LEVEL_RATIO apart), and a note saying the change; all of them and
    None where the steps hold one level."""
    timed = [_time(s) for s in used]
    if len(used) < 2 * LEAST_SEGMENT or len({s.run for s in used}) > 1 or None in timed:
        return used, None
    times = [t for t in timed if t is not None]
    best: tuple[float, int] | None = None  # (the gap between the two levels, where the later begins)
    last_split = min(len(used) - LEAST_SEGMENT, int(len(used) * (1 - LEAST_LATER_SHARE)))
    gaps = _gaps(times)
    for k in range(LEAST_SEGMENT, last_split + 1):
        gap = gaps[k]  # above 1: two levels that do not overlap
        if gap <= 1 or (best is not None and gap <= best[0]):
            continue  # the medians only for a split that could be the best (a log holds thousands of steps)
        parts = (times[:k], times[k:])
        medians = sorted(statistics.median(part) for part in parts)
        if medians[1] / medians[0] >= LEVEL_RATIO and _steady(parts[1]):  # the level used; a warm-up is not steady
            best = (gap, k)
    if best is None:
        return used, None
    k = best[1]
    before, after = (_said(used[0], statistics.median(part)) for part in (times[:k], times[k:]))
    note = (
        f"the step time changes part-way: iterations {used[0].step}-{used[k - 1].step} run at {before}, "
        f"{used[k].step}-{used[-1].step} at {after}: the later level, the run's state at the end of the log, is used"
    )
    return used[k:], note


def _steady(part: list[float]) -> bool:
    """Whether the steps hold a level: more than half of them within LEVEL_RATIO of their median. A steady line and
    one slow event (an unnamed save) are no level: their median is the mean of the two, a time no iteration had
    (a review read a 1.62 s run as changing to 5.31 s on its last two lines). Asked of the later steps only, which
    are used: the earlier may be a warm-up still speeding up."""
    m = statistics.median(part)
    return 2 * sum(1 for t in part if max(t, m) / min(t, m) < LEVEL_RATIO) > len(part)


def _gaps(times: list[float]) -> list[float]:
    """At each split k (times[:k] against times[k:]; k from 1), the ratio by which the faster segment's slowest step
    is below the slower segment's fastest: max(min(late) / max(early), min(early) / max(late)), from running extremes
    (one pass each way, where each split's own min and max made the search quadratic in the steps)."""
    most, least = list(accumulate(times, max)), list(accumulate(times, min))
    late_most, late_least = list(accumulate(reversed(times), max))[::-1], list(accumulate(reversed(times), min))[::-1]
    gaps = [0.0] * len(times)
    for k in range(1, len(times)):
        gaps[k] = max(late_least[k] / most[k - 1], least[k - 1] / late_most[k])
    return gaps


def _said(first: Step, time: float) -> str:
    """A level as the lines print it: seconds a step, or the rate whose inverse `time` is (tokens/s per GPU,
    samples/s, batches/s)."""
    if first.step_s:
        return f"{time:.4g} s a step"
    unit = "tokens/s per GPU" if first.tokens_per_s_per_gpu else "samples/s" if first.samples_per_s else "batches/s"
    rate = 1.0 / time
    return f"{rate:,.0f} {unit}" if rate >= 100 else f"{rate:.4g} {unit}"


def latest_run(used: list[Step]) -> tuple[list[Step], str | None]:
    """The last run's steps where the runs appended to one log step at medians LEVEL_RATIO apart (two
    configurations pasted into one block, a restart on other nodes): pooled, their median is a time neither run
    had. All of them and None where one run has steps, or the runs agree."""
    runs = sorted({s.run for s in used})
    timed = {r: [t for s in used if s.run == r and (t := _time(s)) is not None] for r in runs}
    if len(runs) < 2 or not all(timed.values()):
        return used, None
    medians = {r: statistics.median(times) for r, times in timed.items()}
    if max(medians.values()) / min(medians.values()) < LEVEL_RATIO:
        return used, None
    last = [s for s in used if s.run == runs[-1]]
    levels = ", ".join(_said(next(s for s in used if s.run == r), m) for r, m in medians.items())
    note = (
        f"the runs appended to the log step at {levels} (medians), further apart than a steady run varies: the "
        "last run's steps are used, the others' left out"
    )
    return last, note
