"""What of a step's pipeline sends and receives is exposed, where the engine overlaps them with compute.

Each pipeline rank sends one activation forward and one gradient backward per model chunk per micro-batch
(cost.traffic.pp_microbatch_s): m·v transfers each way, v = vpp chunks. Without overlap every transfer waits.

Megatron-LM's interleaved 1F1B with `overlap_p2p_comm` (megatron/core/pipeline_parallel/schedules.py
forward_backward_pipelining_with_interleaving, NVIDIA/Megatron-LM @d98e8a64) posts each steady-state transfer
asynchronously and waits on it only before the chunk that needs it: a forward's send and receive run under the
backward that follows it in the 1F1B pair (pp_post_forward ... pp_pre_backward), a backward's under the next
forward (pp_post_backward ... pp_pre_forward). The warm-up forwards and the cool-down backwards still send and
receive blocking (wait_on_reqs unless --overlap-p2p-communication-warmup-flush). get_pp_rank_microbatches gives
the warm-up chunk count: 2(p − r − 1) + (v − 1)·g on rank r, g = microbatch_group_size_per_vp_stage (p by default,
the group the plan's micro-batches need where p does not divide them: plan.microbatch_group),
at most m·v (then every chunk is warm-up: nothing overlaps); the cool-down runs as many backwards. Rank 0's is
the longest, and it starts and ends the step, so exposed per step is

    2·W·t + (m·v − W)·(max(0, t − b) + max(0, t − f)),   W = min(2(p − 1) + (v − 1)·g, m·v)

with t one chunk's transfer one way, f and b one chunk's forward and backward (+ recompute): a steady-state
transfer longer than the compute it hides behind leaves the excess. Megatron turns the option off without
virtual stages (training/arguments.py validate_args; the non-interleaved schedule raises on it), so plain 1F1B
charges every transfer as before.
"""

from __future__ import annotations

from planner.cost.compute import StageCompute
from planner.cost.stages import warmup_chunks
from planner.cost.traffic import pp_microbatch_s
from planner.engine import Engine
from planner.hardware import HardwareProfile
from planner.plan import Plan
from planner.specs import ModelSpec


def p2p_overlapped(plan: Plan, engine: Engine) -> bool:
    """The engine overlaps this plan's pipeline sends with compute (its setting, under one of its schedules)."""
    return plan.pp > 1 and engine.comm.p2p_overlap and plan.schedule in engine.comm.p2p_overlap_schedules


def first_rank_warmup(plan: Plan) -> int:
    """Forward chunks of the first pipeline rank's warm-up (stages.warmup_chunks), at most m·v."""
    return warmup_chunks(plan.pp, plan.vpp, plan.num_microbatches)


def pp_exposed_s(plan: Plan, engine: Engine, compute: StageCompute, pp_per_microbatch_s: float) -> float:
    """Exposed pipeline send/receive seconds of one step on a rank whose micro-batch is `compute`, given the
    rank's send/receive seconds per micro-batch (both directions, all chunks: traffic.pp_microbatch_s)."""
    m = plan.num_microbatches
    if plan.schedule == "dualpipev":  # DualPipe overlaps the sends with the paired chunk's compute too
        return 0.0
    if not p2p_overlapped(plan, engine):
        return m * pp_per_microbatch_s
    v = plan.vpp
    one_way_s = pp_per_microbatch_s / (2 * v)
    forward_s = compute.forward_s / v
    backward_s = (compute.backward_s + compute.recompute_s) / v
    warm = first_rank_warmup(plan)
    steady = m * v - warm
    excess_s = max(0.0, one_way_s - backward_s) + max(0.0, one_way_s - forward_s)
    return 2 * warm * one_way_s + steady * excess_s


def pp_comm(
    model: ModelSpec, hw: HardwareProfile, plan: Plan, engine: Engine, compute: StageCompute
) -> tuple[float, float]:
    """(total, exposed) pipeline send/receive seconds of one step on a rank whose micro-batch is `compute`."""
    per_microbatch_s = pp_microbatch_s(model, hw, plan, engine)
    return plan.num_microbatches * per_microbatch_s, pp_exposed_s(plan, engine, compute, per_microbatch_s)


__all__ = ["first_rank_warmup", "p2p_overlapped", "pp_comm", "pp_exposed_s"]
