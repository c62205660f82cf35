"""A job restarted into the same log without a line showing its start (no second argument dump, no start line):
its iteration numbers go back (1-20, then 11-20 again from a checkpoint). Read as one run, the repeated numbers were
merged as if several ranks had printed them (the restart's first, warm-up, step taken as the slowest rank's) and
said so. Each stretch whose numbers go back is a run of its own, its warm-up left out as a shown start's.

Lines printed by every rank without a rank prefix go back too, where one rank's line lands late or its output is
buffered in blocks: those are no restart. A go-back counts only where it is one of a few long stretches (every
stretch at least LEAST_STRETCH lines: one rank a line behind another goes back every other line), and, where both
lines carry timestamps, where the line that goes back was printed after the one before it (a buffered rank's block
was printed at the times of the steps it holds)."""

from __future__ import annotations

import itertools
from dataclasses import replace

from planner.io.logs.log_text import Step

LEAST_STRETCH = 3  # lines a run goes through before its numbers go back, for the go-back to be a restart


def split_restarts(steps: list[Step]) -> tuple[list[Step], str | None]:
    """The steps with `run` advanced wherever one rank's iteration number goes back within a run (in line order)
    and the go-back is a restart, and a note saying where; as given and None where none is."""
    ordered = sorted(steps, key=lambda x: x.line)
    backs = _go_backs(ordered)
    if not backs or not _restarts(ordered, backs):
        return steps, None
    out, shift = [], 0
    for i, s in enumerate(ordered):
        shift += i in backs
        out.append(replace(s, run=s.run + shift) if shift else s)
    went_back = [f"line {ordered[i].line} (iteration {ordered[backs[i]].step}, then {ordered[i].step})" for i in backs]
    return out, (
        f"the iteration numbers go back at {', '.join(went_back)}: a job restarted into the log without a line "
        "showing its start; each restart is read as a run of its own, its warm-up left out"
    )


def _go_backs(ordered: list[Step]) -> dict[int, int]:
    """Index of each line whose number goes back -> index of the line of the same rank and run before it."""
    last: dict[tuple[int, int | None], int] = {}
    out = {}
    for i, s in enumerate(ordered):
        key = (s.run, s.rank)
        if key in last and s.step < ordered[last[key]].step:
            out[i] = last[key]
            last = {k: v for k, v in last.items() if k[0] != s.run}  # every rank of the run starts again
        last[key] = i
    return out


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
