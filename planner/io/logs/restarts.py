"""A job restarted into the same log without a line showing its start (no second argument dump, no start line):
its iteration numbers go back (1-20, then 11-20 again from a checkpoint). Read as one run, the repeated numbers were
merged as if several ranks had printed them (the restart's first, warm-up, step taken as the slowest rank's) and
said so. Each stretch whose numbers go back is a run of its own, its warm-up left out as a shown start's."""

from __future__ import annotations

from dataclasses import replace

from planner.io.logs.log_text import Step


def split_restarts(steps: list[Step]) -> tuple[list[Step], str | None]:
    """The steps with `run` advanced wherever one rank's iteration number goes back within a run (in line order),
    and a note saying where; as given and None where no number goes back."""
    out: list[Step] = []
    last: dict[tuple[int, int | None], int] = {}  # (run as read, rank) -> the last step number seen
    shift, went_back = 0, []
    for s in sorted(steps, key=lambda x: x.line):
        key = (s.run, s.rank)
        if key in last and s.step < last[key]:
            shift += 1
            went_back.append(f"line {s.line} (iteration {last[key]}, then {s.step})")
            last = {k: v for k, v in last.items() if k[0] != s.run}  # every rank of the run starts again
        last[key] = s.step
        out.append(replace(s, run=s.run + shift) if shift else s)
    if not went_back:
        return steps, None
    return out, (
        f"the iteration numbers go back at {', '.join(went_back)}: a job restarted into the log without a line "
        "showing its start; each restart is read as a run of its own, its warm-up left out"
    )
