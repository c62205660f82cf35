"""Step time from the pipeline schedule: the micro-batch slot of the slowest stage, the bubble, exposed
DP communication, the optimizer step and a fixed per-step overhead.

slot t = forward + backward + recompute + exposed TP/CP/EP/PP of one micro-batch on the bottleneck pipeline rank
(uneven stages: cost.stages; the sends a schedule hides: cost.pipeline_p2p). GPipe and 1F1B take (m + p − 1)·t,
the bubble (p − 1)·t; interleaved with v chunks per rank shrinks the bubble to (p − 1)·t/v at the price of v× the
p2p traffic (Narayanan et al. 2021, Sec. 2.2, Eq. 1-2; Huang et al. 2019, GPipe), less so on fewer micro-batches
than stages (cost.bubble).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from planner.cost.bubble import bubble_fraction, pipeline_slots
from planner.cost.compute import StageCompute, StageShape, layer_time, plan_stage_shapes, stage_compute
from planner.cost.fitted_factors import host_overhead_s
from planner.cost.flops import hardware_flops_per_step, model_flops_per_step
from planner.cost.offload import activation_offload_s
from planner.cost.optimizer_step import optimizer_step_s
from planner.cost.overlap import dp_comm, layer_comm
from planner.cost.pipeline_p2p import pp_comm
from planner.engine import Engine
from planner.hardware import HardwareProfile
from planner.layers import LayerKind
from planner.plan import Plan
from planner.specs import ModelSpec

DIMS = ("tp", "cp", "ep", "pp", "dp")


@dataclass(frozen=True)
class CommBreakdown:
    """Communication of one step on one GPU of a pipeline rank, seconds."""

    stage: int
    tp_s: float
    cp_s: float
    ep_s: float
    pp_s: float
    dp_s: float
    tp_exposed_s: float
    cp_exposed_s: float
    ep_exposed_s: float
    pp_exposed_s: float
    dp_exposed_s: float
    host_s: float = 0.0  # activation offload over the host link (cost.offload), when the engine offloads
    host_exposed_s: float = 0.0

    @property
    def total_by_dim(self) -> dict[str, float]:
        return {d: getattr(self, f"{d}_s") for d in self._dims}

    @property
    def exposed_by_dim(self) -> dict[str, float]:
        return {d: getattr(self, f"{d}_exposed_s") for d in self._dims}

    @property
    def _dims(self) -> tuple[str, ...]:
        """DIMS, and "host" when anything goes over the host link (the documents keep their keys otherwise)."""
        return (*DIMS, "host") if self.host_s else DIMS

    @property
    def total(self) -> float:
        return sum(self.total_by_dim.values())

    @property
    def exposed(self) -> float:
        return sum(self.exposed_by_dim.values())

    @property
    def pipelined_exposed_s(self) -> float:
        """Exposed TP + CP + EP + PP (+ host offload) of the step: paid inside the micro-batch slots, so the bubble
        stretches with it (DP is paid once, outside the pipeline)."""
        return self.tp_exposed_s + self.cp_exposed_s + self.ep_exposed_s + self.pp_exposed_s + self.host_exposed_s


def layer_exposed_s(model: ModelSpec, hw: HardwareProfile, plan: Plan, engine: Engine) -> dict[LayerKind, float]:
    """Each layer kind's exposed TP/CP/EP seconds per micro-batch: what of its communication a micro-batch slot
    cannot hide (it depends on tp, cp, ep, sp, the micro-batch, recompute and precision)."""
    out = {}
    for kind in model.kind_params:
        c = layer_comm(model, hw, plan, engine, kind=kind, layer=layer_time(model, hw, plan, engine, kind=kind))
        out[kind] = c.tp_exposed_s + c.cp_exposed_s + (c.ep_exposed_s if kind.ffn == "moe" else 0.0)
    return out


def slot_lower_bound_s(
    model: ModelSpec,
    hw: HardwareProfile,
    plan: Plan,
    engine: Engine,
    stage: int,
    exposed: dict[LayerKind, float] | None = None,
) -> float:
    """A lower bound of pipeline rank `stage`'s micro-batch slot: its compute plus the exposed TP/CP/EP of its
    layers (the slot adds the pipeline sends; the step adds the bubble, DP, the optimizer and overheads).
    `exposed` is layer_exposed_s of the plan, when the caller has it."""
    c = stage_compute(model, hw, plan, engine, stage)
    exposed = exposed if exposed is not None else layer_exposed_s(model, hw, plan, engine)
    return c.total + sum(n * exposed[kind] for kind, n in c.mix)


def stage_comm(
    model: ModelSpec,
    hw: HardwareProfile,
    plan: Plan,
    engine: Engine,
    *,
    stage: int,
    compute: StageCompute | None = None,
) -> CommBreakdown:
    """Per-step communication of pipeline rank `stage` (TP/CP/EP/PP per micro-batch × micro-batches)."""
    compute = compute or stage_compute(model, hw, plan, engine, stage)
    m = plan.num_microbatches
    comms = [
        (n, layer_comm(model, hw, plan, engine, kind=kind, layer=layer_time(model, hw, plan, engine, kind=kind)))
        for kind, n in compute.mix
    ]
    pp, pp_exp = pp_comm(model, hw, plan, engine, compute)
    stalls = sum(n * (c.tp_exposed_s + c.cp_exposed_s + c.ep_exposed_s) for n, c in comms)  # one micro-batch's
    dp, dp_exp = dp_comm(model, hw, plan, engine, stage=stage, compute=compute, stalls_s=stalls)
    host, host_exp = activation_offload_s(model, hw, plan, engine, compute, stage=stage)
    return CommBreakdown(
        stage=stage,
        tp_s=m * sum(n * c.tp_s for n, c in comms),
        cp_s=m * sum(n * c.cp_s for n, c in comms),
        ep_s=sum(m * n * c.ep_s for n, c in comms),
        pp_s=pp,
        dp_s=dp,
        tp_exposed_s=m * sum(n * c.tp_exposed_s for n, c in comms),
        cp_exposed_s=m * sum(n * c.cp_exposed_s for n, c in comms),
        ep_exposed_s=sum(m * n * c.ep_exposed_s for n, c in comms),
        pp_exposed_s=pp_exp,
        dp_exposed_s=dp_exp,
        host_s=m * host,
        host_exposed_s=m * host_exp,
    )


@dataclass(frozen=True)
class Bottleneck:
    """The pipeline rank with the longest micro-batch slot (the pipeline's pace), its compute and communication,
    and the rank whose work after its last backward is longest (`tail`: exposed DP and its optimizer step; the
    embedding and head ranks often hold more of it): the step ends when that rank is done."""

    rank: int
    compute: StageCompute
    comm: CommBreakdown
    tail: tuple[int, CommBreakdown, float]  # (rank, its communication, its optimizer step s)


def bottleneck_stage(model: ModelSpec, hw: HardwareProfile, plan: Plan, engine: Engine) -> Bottleneck:
    """The pipeline rank with the longest micro-batch slot (compute + exposed per-micro-batch comm), and the one
    with the longest exposed DP + optimizer step after it."""
    best, tail = None, None
    seen: set[StageShape] = set()
    for r, shape in enumerate(plan_stage_shapes(model, plan, engine)):
        if shape in seen:
            continue
        seen.add(shape)
        c = stage_compute(model, hw, plan, engine, r)
        k = stage_comm(model, hw, plan, engine, stage=r, compute=c)
        slot = c.total + k.pipelined_exposed_s / plan.num_microbatches
        if best is None or slot > best[0]:
            best = (slot, r, c, k)
        opt = optimizer_step_s(model, hw, plan, engine, stage=r)
        if tail is None or k.dp_exposed_s + opt > tail[0]:
            tail = (k.dp_exposed_s + opt, (r, k, opt))
    assert best is not None and tail is not None
    return Bottleneck(best[1], best[2], best[3], tail[1])


@dataclass(frozen=True)
class StepTime:
    """One optimizer step on the bottleneck GPU. Seconds; exposed_comm_s keys tp, cp, ep, pp, dp are
    the public JSON contract of DESIGN.md."""

    compute_s: float  # forward + backward of all micro-batches, recompute excluded
    recompute_s: float
    bubble_s: float
    optimizer_s: float
    overhead_s: float
    exposed_comm_s: dict[str, float] = field(hash=False)
    comm_total_s: dict[str, float] = field(hash=False)  # before overlap, for explanation
    stage: int  # the pipeline rank that sets the pace
    tokens_per_step: int
    gpus: int
    model_flops_per_step: float
    hardware_flops_per_step: float
    peak_flops: float
    tail_stage: int  # the pipeline rank whose exposed DP and optimizer step end the step

    @property
    def step_s(self) -> float:
        return (
            self.compute_s
            + self.recompute_s
            + self.bubble_s
            + self.optimizer_s
            + self.overhead_s
            + sum(self.exposed_comm_s.values())
        )

    @property
    def total(self) -> float:
        return self.step_s

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.step_s

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.gpus

    @property
    def tflops_per_gpu(self) -> float:
        """Model FLOPs (no recompute) per GPU per second / 1e12."""
        return self.model_flops_per_step / self.step_s / self.gpus / 1e12

    @property
    def mfu(self) -> float:
        """Model FLOPs utilisation, a fraction of the dense peak for the plan's precision (PaLM, App. B)."""
        return self.model_flops_per_step / self.step_s / self.gpus / self.peak_flops

    @property
    def hfu(self) -> float:
        """Hardware FLOPs utilisation: recompute FLOPs counted too."""
        return self.hardware_flops_per_step / self.step_s / self.gpus / self.peak_flops

    def as_dict(self) -> dict[str, object]:
        return {
            "step_s": self.step_s,
            "compute_s": self.compute_s,
            "recompute_s": self.recompute_s,
            "bubble_s": self.bubble_s,
            "optimizer_s": self.optimizer_s,
            "overhead_s": self.overhead_s,
            "exposed_comm_s": dict(self.exposed_comm_s),
        }


def step_overhead_s(hw: HardwareProfile, engine: Engine, plan: Plan | None = None, *, layers: int = 0) -> float:
    """Host time per step: the hardware's (host-bound CPU runs) plus the engine's per step, per micro-batch and
    per layer of each micro-batch on the bottleneck rank (`layers`; cost.fitted_factors). Without a plan, the
    per-step part only: a lower bound."""
    return hw.efficiency.step_overhead_s + host_overhead_s(hw, engine, plan, layers=layers)


def step_time(model: ModelSpec, hw: HardwareProfile, plan: Plan, engine: Engine) -> StepTime:
    """Time of one optimizer step and the throughput it gives (a pure function; cheap enough for search)."""
    b = bottleneck_stage(model, hw, plan, engine)
    stage, c, k = b.rank, b.compute, b.comm
    tail_stage, tail, optimizer = b.tail
    m = plan.num_microbatches
    slot = c.total + k.pipelined_exposed_s / m
    bubble = bubble_fraction(pp=plan.pp, vpp=plan.vpp, num_microbatches=m, schedule=plan.schedule) * m * slot
    return StepTime(
        compute_s=m * (c.forward_s + c.backward_s),
        recompute_s=m * c.recompute_s,
        bubble_s=bubble,
        optimizer_s=optimizer,
        overhead_s=step_overhead_s(hw, engine, plan, layers=c.num_layers),
        exposed_comm_s={**k.exposed_by_dim, "dp": tail.dp_exposed_s},
        comm_total_s={**k.total_by_dim, "dp": tail.dp_s},
        stage=stage,
        tail_stage=tail_stage,
        tokens_per_step=plan.tokens_per_step,
        gpus=plan.gpus,
        model_flops_per_step=model_flops_per_step(model, plan),
        hardware_flops_per_step=hardware_flops_per_step(model, plan, engine),
        peak_flops=hw.peak(plan.precision),
    )


__all__ = ["DIMS", "StepTime", "bubble_fraction", "optimizer_step_s", "pipeline_slots", "step_overhead_s", "step_time"]
