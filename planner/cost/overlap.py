"""What communication hides behind compute: the exposed share of each parallel dimension's traffic.

DESIGN.md "Overlap": TP is exposed unless the engine overlaps it with the GEMMs; the CP ring hides behind
the attention core; EP and PP are exposed; data-parallel gradient reduction hides behind the backward
except the last bucket (one layer's share), and ZeRO-3 prefetch hides each layer's weight all-gather
behind the previous layer (expose the excess plus the first layer's). When the engine reduces and gathers
is the engine's ZeRO stage (engine.ZeroStage); this module only decides what overlaps.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.cost.compute import LayerTime, StageCompute
from planner.cost.fitted_factors import tp_overlap_exposed
from planner.cost.moe import comm_sm_slowdown_s
from planner.cost.traffic import dp_traffic, layer_traffic
from planner.cost.zero3_gather import per_parameter_dp_s
from planner.engine import Engine, ZeroStage
from planner.hardware import HardwareProfile
from planner.layers import LayerKind
from planner.plan import Plan
from planner.specs import ModelSpec


@dataclass(frozen=True)
class LayerComm:
    """One layer, one micro-batch, one GPU: total and exposed seconds per dimension."""

    tp_s: float
    tp_exposed_s: float
    cp_s: float
    cp_exposed_s: float
    ep_s: float  # MoE layers only
    ep_exposed_s: float

    @property
    def total(self) -> float:
        return self.tp_s + self.cp_s + self.ep_s


def layer_comm(
    model: ModelSpec,
    hw: HardwareProfile,
    plan: Plan,
    engine: Engine,
    *,
    moe: bool = False,
    layer: LayerTime,
    kind: LayerKind | None = None,
) -> LayerComm:
    """TP is exposed unless the engine overlaps it with the layer's GEMMs (Wang et al. 2022; torchtitan
    async TP, Megatron --tp-comm-overlap); then what the GEMMs cover is hidden but for the engine's exposed
    share (tp_overlap_s). The CP ring hides behind the attention core, forward and backward (Liu et al. 2023);
    only the excess shows. Host cost per collective call is always exposed."""
    tr = layer_traffic(model, hw, plan, engine, moe=moe, kind=kind)
    tp = tr.tp_passes * tr.tp_one_s
    tp_exp = tp_overlap_s(tp, layer.gemm_forward_s + layer.gemm_backward_s, engine) if engine.comm.tp_overlap else tp
    co = tr.call_s
    if plan.tp > 1 and co:
        tp, tp_exp = tp + tr.tp_calls * co, tp_exp + tr.tp_calls * co
    cp = cp_exp = 0.0
    if plan.cp > 1 and tr.cp_ring_s:  # only attention layers run the ring
        one, full = tr.cp_ring_s, tr.cp_recompute
        fwd_c, bwd_c = one, 2 * one
        cp = fwd_c + bwd_c + (one if full else 0.0)
        cp_exp = (
            max(0.0, fwd_c - layer.attention_core_forward_s)
            + max(0.0, bwd_c - layer.attention_core_backward_s)
            + (max(0.0, one - layer.attention_core_forward_s) if full else 0.0)
        )
        if co:
            calls = (plan.cp - 1) * (3 + (1 if full else 0))
            cp, cp_exp = cp + calls * co, cp_exp + calls * co
    # EP: the dispatch and combine all-to-alls are exposed, unless the engine runs them behind another micro-batch's
    # layer compute (Megatron's 1F1B all-to-all overlap, combined_1f1b.py, needs pp = 1 or the interleaved
    # schedule and no full recompute; DualPipe, DeepSeek-V3 §3.2.1): then only what exceeds that compute shows.
    # That layer's wall time is its compute and the TP and CP communication it waits on: the all-to-all runs beside
    # both (counted beside the compute alone, a faster GPU would shorten its window and lengthen those waits).
    ep_exp = tr.ep_s
    if ep_hidden(plan, engine):  # the SMs its kernels hold slow the compute they hide behind (moe.py)
        compute_s = layer.forward_s + layer.backward_s
        slow_s = comm_sm_slowdown_s(hw, engine, comm_s=tr.ep_s, compute_s=compute_s)
        window_s = compute_s + tp_exp + cp_exp + tr.cp_a2a_s
        ep_exp = max(0.0, tr.ep_s - window_s - slow_s) + slow_s
    return LayerComm(tp, tp_exp, cp + tr.cp_a2a_s, cp_exp + tr.cp_a2a_s, tr.ep_s, ep_exp)


def tp_overlap_s(tp_s: float, gemm_s: float, engine: Engine) -> float:
    """Exposed seconds of `tp_s` of TP communication overlapped with `gemm_s` of the layer's GEMMs: the GEMMs
    can cover min(tp, gemm); of that the engine hides all but its exposed share s (engine behaviour
    `tp_overlap_exposed`, fitted): tp − (1 − s)·min(tp, gemm). Why a share stays exposed: Transformer Engine's
    userbuffers run the all-gathers as a ring exchange and the reduce-scatters in 4 pipelined splits whose first
    and last chunk wait, and take 16 SMs from the GEMMs they hide behind (transformer_engine/pytorch/module/base.py
    initialize_ub, `num_splits`, `num_sm`; Megatron-LM --tp-comm-overlap, arguments.py); torchtitan's async TP
    decomposes each matmul over the TP ranks with symmetric-memory copies (torch/distributed/_symmetric_memory
    fused_all_gather_matmul, fused_matmul_reduce_scatter), whose first shard is not overlapped (Wang et al. 2022)."""
    hidden = (1.0 - tp_overlap_exposed(engine)) * min(tp_s, gemm_s)
    return tp_s - hidden


def dp_comm(
    model: ModelSpec,
    hw: HardwareProfile,
    plan: Plan,
    engine: Engine,
    *,
    stage: int,
    compute: StageCompute,
    stalls_s: float = 0.0,
) -> tuple[float, float]:
    """(total, exposed) seconds of data-parallel communication per step for pipeline rank `stage`.

    It runs on its own streams beside the passes' wall time: their compute and the exposed TP/CP/EP each
    micro-batch waits on (`stalls_s`, split between forward and backward as their compute is), so a faster GPU that
    leaves an all-to-all exposed longer does not also shorten the window the gradient reduction hides behind (the
    links the two share are not priced against each other here).

    Gradient reduction overlaps the backward it follows except the last bucket (one layer's share): once,
    after the last micro-batch, or after every micro-batch, as the engine reduces; an engine that does not
    overlap it (DeepSpeed's overlap_comm off) exposes all of it. Weights gathered layer by layer in every
    micro-batch (ZeRO-3/FSDP) are prefetched behind the previous layer; weights all-gathered once after the
    optimizer step are exposed, or hidden behind the first micro-batch's forward when the engine overlaps them
    (Megatron --overlap-param-gather) (Rajbhandari et al. 2020, Sec. 7; Zhao et al. 2023, FSDP). An engine that
    gathers per micro-batch one parameter at a time, synchronously (comm.zero3_gather, DeepSpeed < 0.6), hides none
    of it (zero3_gather.py).
    """
    if plan.dp * plan.cp == 1:
        return 0.0, 0.0
    zero = engine.zero_stage(plan)
    per_micro = zero.weight_gather in ("microbatch", "microbatch_forward")
    if per_micro and engine.comm.zero3_gather == "per_parameter_sync":
        return per_parameter_dp_s(model, hw, plan, engine, stage=stage)
    tr = dp_traffic(model, hw, plan, engine, stage=stage)
    red, ag, co = tr.reduce_s, tr.gather_s, tr.call_s
    layers = max(1, compute.num_layers)
    fwd, bwd = passes_s(compute, stalls_s, recompute_comm=plan.recompute == "full")
    if per_micro:
        return _per_microbatch_dp(plan, zero, (red, ag, co), (fwd, bwd), layers)
    gather = ag if zero.weight_gather == "step" else 0.0
    gather_exp = gather
    if gather and engine.comm.param_gather_overlap:
        gather_exp = behind(gather, fwd, layers, gather / layers)
    reduces = 1 if zero.grad_reduce == "step" else plan.num_microbatches
    calls = co * (reduces + (1 if gather else 0))
    overlap = engine.comm.grad_overlap if zero.grad_overlap is None else zero.grad_overlap
    one_exp = behind(red, bwd, layers, red / layers) if overlap else red
    return reduces * red + gather + calls, reduces * one_exp + gather_exp + calls


def _per_microbatch_dp(
    plan: Plan, zero: ZeroStage, traffic: tuple[float, float, float], passes: tuple[float, float], layers: int
) -> tuple[float, float]:
    """(total, exposed) dp seconds of a stage that gathers its weights layer by layer every micro-batch
    (ZeRO-3/FSDP): `traffic` (reduction, gather, per-call) seconds; `passes` (forward, backward) wall seconds."""
    (red, ag, co), (fwd, bwd), m = traffic, passes, plan.num_microbatches
    units = layers + 1  # FSDP units: each layer and the root (embedding, output)
    fwd_exp = behind(ag, fwd, layers, ag / layers)
    back = ag if zero.weight_gather == "microbatch" else 0.0
    gathers = 2 if back else 1
    if zero.grad_reduce == "microbatch":
        calls = co * (gathers + 1) * units
        bwd_exp = behind(back + red, bwd, layers, red / layers)
        return m * (gathers * ag + red + calls), m * (fwd_exp + bwd_exp + calls)
    calls = co * gathers * units
    bwd_exp = behind(back, bwd, layers, back / layers)
    # The step's one gradient reduction runs in the last micro-batch's backward, beside that backward's own
    # re-gather: both hide behind the same backward once, not each behind all of it.
    last_exp = behind(back + red, bwd, layers, (back + red) / layers)
    exposed = (m - 1) * (fwd_exp + bwd_exp + calls) + fwd_exp + calls + last_exp + co * units
    return m * (gathers * ag + calls) + red + co * units, exposed


def passes_s(compute: StageCompute, stalls_s: float, *, recompute_comm: bool) -> tuple[float, float]:
    """(forward, backward with its recompute) wall seconds of one micro-batch: compute, and `stalls_s` of exposed
    communication shared between them as the compute that waits on it is. A recompute that runs the layer's
    collectives again (`recompute_comm`: full recompute's forward) takes its share of them; selective recompute's
    attention core sits between them and waits on none, so it lengthens the backward without drawing stalls into
    it (else the window the gradient reduction hides behind would grow by more than the recompute costs)."""
    fwd, bwd = compute.forward_s, compute.backward_s + compute.recompute_s
    waits_s = bwd if recompute_comm else compute.backward_s
    share = waits_s / (fwd + waits_s) if fwd + waits_s > 0 else 0.5
    return fwd + stalls_s * (1 - share), bwd + stalls_s * share


def behind(comm_s: float, window_s: float, layers: int, alone_s: float) -> float:
    """Exposed seconds of `comm_s` issued layer by layer beside `window_s` of compute over `layers` layers, of
    which `alone_s` (the first layer's gather, the last bucket's reduction) has no compute beside it: a two-stage
    flow shop of equal layers (Johnson 1954) ends max(window + alone, window / layers + comm), so the exposed part
    is max(alone, comm − window·(layers − 1)/layers), never more than the communication itself."""
    return max(alone_s, comm_s - window_s * (layers - 1) / layers)


def ep_hidden(plan: Plan, engine: Engine) -> bool:
    """Whether the engine overlaps a MoE layer's all-to-alls with another micro-batch's compute for this plan."""
    if plan.schedule == "dualpipev":
        return True
    return engine.moe.ep_overlap and ep_overlap_applies(plan)


def ep_overlap_applies(plan: Plan) -> bool:
    """Whether the engine's EP overlap setting can act on this plan (outside DualPipe, which always overlaps): one
    pipeline stage or the interleaved schedule, and no full recompute."""
    return (plan.pp == 1 or plan.schedule == "interleaved") and plan.recompute != "full"
