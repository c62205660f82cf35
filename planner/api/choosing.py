"""What a GPU-count range (`--gpus 1024..131072`) and `--global-batch auto` choose, by one rule against one reference
(api/advising.py runs the search at the choice; explore/advice.py probes).

The reference is the most tokens/s per GPU (what the goodput keeps where failures are priced) that any count of the
range reaches with any batch tried. The count is the largest whose best plan, at its fastest batch tried, reaches
WELL of it; the batch there is the smallest that reaches WELL of it. A single count is a range of one (the batch
`auto` chooses reaches WELL of the best on that count); a fixed batch is the one batch tried. Measuring the count by
each count's chosen batch instead (the smallest within WELL of that count's own best) put the chosen count at WELL
of a best lower than the count's, which the advice then contradicted (audit: 8192 GPUs at 90% of 190, then 'use at
most 4096' at 90% of 200).
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.cluster.fabric import cluster_size
from planner.errors import PlannerError
from planner.explore.advice import WELL, Advice, batches
from planner.explore.probe import Probe
from planner.explore.probe_rate import caveat_of
from planner.hardware import HardwareProfile
from planner.plan import default_global_batch


@dataclass(frozen=True)
class Choice:
    """The batch at the count chosen, the count, and what they were measured against."""

    batch: int  # the batch chosen at the count chosen
    gpus: int  # the count chosen
    reference: float = 0.0  # the best per-GPU rate at any count and batch tried (0.0: nothing fits, or not probed)
    best: dict[int, float | None] | None = None  # each count's best per-GPU rate over its batches (None: not probed)


def choose(probe: Probe, counts: list[int], batch: int | str | None, *, seq_len: int, bound: int) -> Choice:
    """The count and batch a range and `auto` choose (the module's rule): the pairs the choice asks about are
    searched side by side first (Probe.prefetch), then read in turn. One count with a given or default batch is
    not probed: the search itself prices it."""
    base = _base(batch, seq_len=seq_len, bound=bound)
    tried = {g: batches_tried(batch, base=base, seq_len=seq_len, bound=bound, gpus=g) for g in counts}
    if len(counts) == 1 and batch != "auto":
        return Choice(tried[counts[0]][0], counts[0])
    probe.prefetch((g, b) for g in counts for b in tried[g])
    rates = {g: {b: probe(g, b) for b in tried[g]} for g in counts}
    best = {g: max((r for r in rates[g].values() if r is not None), default=None) for g in counts}  # 0.0: stalls
    reference = max((r for r in best.values() if r), default=0.0)
    if not reference:  # where plans fit but every one stalls, the smallest such count (it stalls least); where
        # nothing fits, the largest, whose closest misses say what would fit, as one count's search does
        stalled = [g for g in counts if best[g] == 0.0]
        at = min(stalled) if stalled else max(counts)
        return Choice(tried[at][0] if batch != "auto" else base, at, 0.0, best)
    target = WELL * reference
    chosen = max(g for g in counts if (best[g] or 0.0) >= target)

    def batch_at(g: int) -> int:  # the smallest reaching the target, else the fastest, else the first tried
        fastest = max(tried[g], key=lambda b: rates[g][b] or 0.0)
        return next((b for b in tried[g] if (rates[g][b] or 0.0) >= target), fastest if best[g] else tried[g][0])

    return Choice(batch_at(chosen), chosen, reference, best)


def _base(batch: int | str | None, *, seq_len: int, bound: int) -> int:
    """The default batch, or for `auto` where the doubling starts: the default or a power of two within the bound."""
    base = default_global_batch(seq_len)
    if batch != "auto":
        return base
    if bound < seq_len:
        raise PlannerError(
            f"--max-tokens-per-step {bound} is below one sequence of {seq_len} tokens: --global-batch auto has "
            "no batch to choose"
        )
    return min(base, 1 << ((bound // seq_len).bit_length() - 1))


def batches_tried(batch: int | str | None, *, base: int, seq_len: int, bound: int, gpus: int) -> list[int]:
    """The batches the choice asks the probe about: the one given, the default, or for `auto` the doubled ones
    (and those raised to the count's odd factor: explore/advice.py batches)."""
    if isinstance(batch, int):
        return [batch]
    if batch is None:
        return [base]
    return batches(base, seq_len=seq_len, max_tokens_per_step=bound, gpus=gpus)


def range_stop(gpus: object, hw: HardwareProfile) -> str | None:
    """Where a `LO..HI` range passes the cluster's size (explore/advice.py gpu_range stops there): said once, by
    search's choice and under scale's table (it was cut silently); None where it does not, or is no range."""
    cap, hi = cluster_size(hw), gpus.partition("..")[2].strip() if isinstance(gpus, str) else ""
    if cap is None or not hi.isdigit() or int(hi) <= cap:
        return None
    return f"the range stops at the cluster's {cap:,} GPUs"


def rate_unit(priced: bool) -> str:
    """What the probes measure: tokens/s, or where failures are priced the tokens/s the goodput keeps."""
    return "goodput tokens/s" if priced else "tokens/s"


def choices(
    c: Choice, counts: list[int], batch: int | str | None, seq_len: int, unit: str, stop: str | None = None
) -> list[Advice]:
    """What the range and `auto` chose, each against the one reference, with each count's best per GPU (and
    `stop`, where the range passed the cluster's size)."""
    out = []
    ranged = len(counts) > 1
    stopped = f"; {stop}" if stop else ""
    if ranged and not c.reference:
        best = c.best or {}
        said = (
            f"no GPU count of the range {counts[0]}..{counts[-1]} trains at this failure rate: where plans fit "
            f"({', '.join(str(g) for g in counts if best.get(g) == 0.0)}) failures leave no time to train; searched "
            f"at the smallest, {c.gpus}{stopped}"
            if c.gpus in best and best[c.gpus] == 0.0
            else f"nothing fits at any GPU count of the range {counts[0]}..{counts[-1]}: searched at the largest, "
            f"{c.gpus}, whose closest misses follow{stopped}"
        )
        out.append(Advice("chosen_gpus", said, c.gpus, c.batch, tuple((g, best.get(g)) for g in counts), unit))
    elif ranged:
        best = c.best or {}
        tried = ", ".join(f"{g}: {_rate(best.get(g))}" for g in counts)
        each = "; each count at its fastest batch tried" if batch == "auto" else ""
        said = (
            f"{c.gpus} GPUs, the most whose best plan reaches >= {WELL:.0%} of the range's best {unit} per GPU, "
            f"{c.reference:,.0f}{caveat_of(c.reference)} ({tried}{each}){stopped}"
        )
        out.append(Advice("chosen_gpus", said, c.gpus, c.batch, tuple((g, best.get(g)) for g in counts), unit))
    if batch == "auto":
        b = c.batch
        if not c.reference:
            why = f"the default: no batch tried fits on {c.gpus} GPUs"
        else:
            on = (
                f"on {c.gpus} GPUs reaches >= {WELL:.0%} of the range's best"
                if ranged
                else (f"reaches >= {WELL:.0%} of the best on {c.gpus} GPUs")
            )
            why = f"the smallest whose best plan {on}"
            why += f" ({c.reference:,.0f} {unit} per GPU{caveat_of(c.reference)})"
        out.append(Advice("chosen_global_batch", f"global batch {b} ({b * seq_len:,} tokens), {why}", c.gpus, b))
    return out


def _rate(r: float | None) -> str:
    """A count's best per-GPU rate as the choice says it: '-' where nothing fits, 'stalls' where failures leave no
    time to train."""
    return "-" if r is None else ("stalls" if r == 0.0 else f"{r:,.0f}")
