"""The pipeline bubble: the micro-batch slots a step spends waiting on its pipeline neighbours, by schedule
(Narayanan et al. 2021, Sec. 2.2; Huang et al. 2019, GPipe; deepseek-ai/DualPipe)."""

from __future__ import annotations

from planner.plan import Plan


def _bubble(pp: int, vpp: int, num_microbatches: int, schedule: str) -> tuple[int, int]:
    """The bubble as (chunk passes, chunk passes per micro-batch slot): p − 1 slots for GPipe and 1F1B, p − 1
    passes of 1/v of a slot interleaved (Narayanan et al. 2021, Sec. 2.2.1-2.2.2). Interleaved with fewer
    micro-batches than stages (torch's looped schedule runs them in one round; Megatron needs m >= p) each of the
    v − 1 returns from the last rank to the first waits p − m more passes: (p − 1) + (v − 1)(p − m) (tests/
    test_schedule.py simulates the order). DualPipeV (p − 1)(F&B + B − 3W) per chunk pair (deepseek-ai/DualPipe
    README table, its 2p chunks): with B = 2F, the weight gradient W half of B and an overlapped forward-and-backward
    F&B = F + B, that is (p − 1)·F, a third of a slot F + B each."""
    if schedule == "dualpipev":
        return pp - 1, 3
    if schedule != "interleaved":
        return pp - 1, 1
    return (pp - 1) + (vpp - 1) * max(0, pp - num_microbatches), vpp


def bubble_slots(*, pp: int, vpp: int, num_microbatches: int, schedule: str) -> float:
    """The bubble in micro-batch slots (_bubble)."""
    passes, per_slot = _bubble(pp, vpp, num_microbatches, schedule)
    return passes / per_slot


def bubble_fraction(*, pp: int, vpp: int, num_microbatches: int, schedule: str) -> float:
    """Bubble time / ideal time: the bubble's slots (_bubble) over the m slots of work."""
    passes, per_slot = _bubble(pp, vpp, num_microbatches, schedule)
    return passes / (per_slot * num_microbatches)


def pipeline_slots(plan: Plan) -> float:
    """Micro-batch slots of one step on the bottleneck rank: m plus the bubble's (bubble_slots): the step is
    slots × the slot time (Narayanan et al. 2021, Sec. 2.2)."""
    return plan.num_microbatches + bubble_slots(
        pp=plan.pp, vpp=plan.vpp, num_microbatches=plan.num_microbatches, schedule=plan.schedule
    )
