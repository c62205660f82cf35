"""The pipeline bubble: the micro-batch slots a step spends waiting on its pipeline neighbours, by schedule
(Narayanan et al. 2021, Sec. 2.2; Huang et al. 2019, GPipe; deepseek-ai/DualPipe)."""

from __future__ import annotations

from planner.plan import Plan


def pipeline_slots(plan: Plan) -> float:
    """Micro-batch slots of one step on the bottleneck rank: m, plus the bubble's (p − 1)/v (v = 1 unless
    interleaved; (p − 1)/3 for DualPipeV, bubble_fraction): the step is slots × the slot time (Narayanan et al.
    2021, Sec. 2.2)."""
    if plan.schedule == "dualpipev":
        return plan.num_microbatches + (plan.pp - 1) / 3
    v = plan.vpp if plan.schedule == "interleaved" else 1
    return plan.num_microbatches + (plan.pp - 1) / v


def bubble_fraction(*, pp: int, vpp: int, num_microbatches: int, schedule: str) -> float:
    """Bubble time / ideal time: (p − 1)/m for GPipe and 1F1B, (p − 1)/(v·m) interleaved
    (Narayanan et al. 2021, Sec. 2.2.1-2.2.2); DualPipeV (p − 1)(F&B + B − 3W) per chunk pair over m slots
    (deepseek-ai/DualPipe README table, its 2p chunks): with B = 2F and the weight gradient W = half of B, and an
    overlapped forward-and-backward F&B = F + B, that is (p − 1)·F of a slot F + B, (p − 1)/(3m)."""
    if schedule == "dualpipev":
        return (pp - 1) / (3 * num_microbatches)
    v = vpp if schedule == "interleaved" else 1
    return (pp - 1) / (v * num_microbatches)
