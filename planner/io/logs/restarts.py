"""A job restarted into the same log without a line showing its start (no second argument dump, no start line):
its iteration numbers go back (1-20, then 11-20 again from a checkpoint). Read as one run, the repeated numbers were
merged as if several ranks had printed them (the restart's first, warm-up, step taken as the slowest rank's) and
said so. Each stretch whose numbers go back is a run of its own, its warm-up left out as a shown start's.

Lines printed by every rank without a rank prefix go back too, where one rank's line lands late or its output is
buffered in blocks: those are no restart. A go-back counts only where it is one of a few long stretches (every
stretch at least LEAST_STRETCH lines: one rank a line behind another goes back every other line), and, where both
lines carry timestamps, where the line that goes back was printed after the one before it (a buffered rank's block
was printed at the times of the steps it holds).

Every rank prints a step's line as the step ends, within the step of one another (the step's collectives hold them
together): a line whose number repeats or goes back, printed more than a step's time after the line it repeats
(both timestamped, the step time printed), is another run's, however short the stretches (Megatron-LM pull
request 3067 pasted two runs' iteration-100 lines, 11 days apart, into one block)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace

from planner.io.logs.log_text import Step
from planner.units import fmt_duration

LEAST_STRETCH = 3  # lines a run goes through before its numbers go back, for the go-back to be a restart


def split_restarts(steps: list[Step]) -> tuple[list[Step], str | None]:
    """The steps with `run` advanced wherever one rank's iteration number goes back within a run (in line order)
    and the go-back is a restart, and a note saying where; as given and None where none is."""
    ordered = sorted(steps, key=lambda x: x.line)
    backs = _go_backs(ordered)
    if not _restarts(ordered, backs):
        backs = {}
    backs |= _printed_later(ordered)
    if not backs:
        return steps, None
    out, shift = [], 0
    for i, s in enumerate(ordered):
        shift += i in backs
        out.append(replace(s, run=s.run + shift) if shift else s)
    went_back = [_went_back(ordered[backs[i]], ordered[i]) for i in sorted(backs)]
    return out, (
        f"the iteration numbers go back at {', '.join(went_back)}: a job restarted into the log without a line "
        "showing its start (or another run's lines appended); each is read as a run of its own, its warm-up left out, "
        "and their steady steps pooled"
    )


def _went_back(before: Step, now: Step) -> str:
    late = _late_s(before, now)
    after = f", printed {fmt_duration(late)} after iteration {before.step}'s line" if late is not None else ""
    return f"line {now.line} (iteration {before.step}, then {now.step}{after})"


def _number_back(before: Step, now: Step) -> bool:
    return now.step < before.step


def _go_backs(ordered: list[Step], back: Callable[[Step, Step], bool] = _number_back) -> dict[int, int]:
    """Index of each line whose number goes back (`back`, given the line of the same rank and run before it) ->
    index of that line before it."""
    last: dict[tuple[int, int | None], int] = {}
    out = {}
    for i, s in enumerate(ordered):
        key = (s.run, s.rank)
        if key in last and back(ordered[last[key]], s):
            out[i] = last[key]
            last = {k: v for k, v in last.items() if k[0] != s.run}  # every rank of the run starts again
        last[key] = i
    return out


def _late_s(before: Step, now: Step) -> float | None:
    """How long after `before` the line `now` was printed, where that is more than a step's time (both
    timestamped, a step time printed); None where the lines cannot tell, or `now` was printed within a step of
    `before`, as ranks print one step's lines."""
    step_s = max(before.step_s or 0.0, now.step_s or 0.0)
    if now.time_s is None or before.time_s is None or step_s <= 0:
        return None
    late = now.time_s - before.time_s
    return late if late > step_s else None


def _printed_later(ordered: list[Step]) -> dict[int, int]:
    """Index of each line whose number repeats or goes back, printed later than ranks print one step's lines ->
    index of the line of the same rank and run before it."""
    return _go_backs(ordered, lambda before, now: now.step <= before.step and _late_s(before, now) is not None)


def _restarts(ordered: list[Step], backs: dict[int, int]) -> bool:
    """Whether the go-backs are restarts: long stretches between them, each printed after the line before it."""
    bounds = [0, *sorted(backs), len(ordered)]
    if any(b - a < LEAST_STRETCH for a, b in itertools.pairwise(bounds)):
        return False
    for i, before in backs.items():
        now, then = ordered[i].time_s, ordered[before].time_s
        if now is not None and then is not None and now <= then:
            return False
    return True
