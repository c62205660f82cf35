"""Compute time of one micro-batch on one GPU of each pipeline rank: its layers, kind by kind (layer_time.py),
and its embedding and output head (from the one layer layout, stages.py). The engine's fitted `compute` factor
(engine.Fitted, per hardware) multiplies the result: what the stack's kernels lose or gain beyond the
hardware's measured curves. `LayerTime` and `layer_time` are re-exported from layer_time.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.cost import dtensor_host
from planner.cost.cache import spec_cache
from planner.cost.fitted_factors import compute_factor
from planner.cost.kernels import ACT_BYTES, gemm_s
from planner.cost.layer_time import BACKWARD_KERNELS_PER_FORWARD, LayerTime, hw_rates, layer_time
from planner.cost.params import padded_vocab
from planner.cost.stages import Mix, layer_layout, plan_split, rank_mix, v_shape
from planner.engine import Engine
from planner.engine.split import SplitPolicy
from planner.hardware import Efficiency, HardwareProfile
from planner.plan import Plan
from planner.precision import head_precision
from planner.specs import ModelSpec


@dataclass(frozen=True)
class StageShape:
    """What one pipeline rank runs: the kinds of layer it holds and how many (its multi-token-prediction
    modules counted as layers of the last kind), its transformer layers, and whether it holds the embedding and
    the loss."""

    mix: Mix
    layers: int
    first: bool
    last: bool


@dataclass(frozen=True)
class StageCompute:
    """One micro-batch on one GPU of a pipeline stage (all its model chunks), seconds."""

    mix: Mix
    layers_forward_s: float
    layers_backward_s: float
    head_forward_s: float  # embedding on the first stage; final norm, logits and loss on the last
    head_backward_s: float
    recompute_s: float
    attention_core_forward_s: float  # summed over the stage's layers: what CP's KV ring can hide behind

    @property
    def num_layers(self) -> int:
        """Layers of the stage (with the multi-token-prediction modules): what ZeRO-3 gathers layer by layer."""
        return sum(n for _kind, n in self.mix)

    @property
    def forward_s(self) -> float:
        return self.layers_forward_s + self.head_forward_s

    @property
    def backward_s(self) -> float:
        return self.layers_backward_s + self.head_backward_s

    @property
    def total(self) -> float:
        return self.forward_s + self.backward_s + self.recompute_s


@spec_cache()
def _head_time(
    model: ModelSpec,
    eff: Efficiency,
    gemm_peak: float,
    hbm_bw: float,
    *,
    first: bool,
    last: bool,
    tp: int,
    cp: int,
    sp: bool,
    b: int,
    s: int,
    precision: str,
    vocab: int,
    mtp: int = 0,
    dtensor_op_s: float = 0.0,
) -> tuple[float, float]:
    """(forward_s, backward_s) of the embedding (first stage) and norm + logits + loss (last stage).

    Embedding: lookup and position add ≈ 4 reads/writes of h per token, the same in backward. Logits: one
    GEMM 2·t·h·V/tp (vocab-parallel, Megatron; V padded as the engine pads it) and its 2 backward GEMMs;
    cross-entropy over fp32 logits ≈ 3 passes forward, 2 backward, 4 bytes each (an estimate of the fused
    softmax-CE kernels). Each of `mtp` multi-token-prediction modules (DeepSeek-V3 §2.2) adds its own logits
    and loss and a 2h -> h projection GEMM (its layer is counted with the stage's layers). Host time of their ops
    on DTensors: cost.dtensor_host.
    """
    h, t = model.hidden_size, b * s / cp
    act_b = ACT_BYTES[precision]
    ko = eff.kernel_overhead_s  # fixed cost per kernel: embedding 1; norm, logits GEMM, loss 3 (0 on GPUs)
    fwd, bwd = dtensor_host.head_s(model, dtensor_op_s, first=first, last=last, sp=sp)
    if first:
        fwd += 4 * t * h * act_b / (tp if sp else 1) / hbm_bw + ko
        bwd += 4 * t * h * act_b / (tp if sp else 1) / hbm_bw + BACKWARD_KERNELS_PER_FORWARD * ko
    if last:
        g = gemm_s(2 * t * h * vocab / tp, gemm_peak, eff, precision)
        norm = 2 * t * h * act_b / (tp if sp else 1) / hbm_bw
        ce = t * vocab / tp * 4
        fwd += g + norm + 3 * ce / hbm_bw + 3 * ko
        bwd += 2 * g + 2 * norm + 2 * ce / hbm_bw + 3 * BACKWARD_KERNELS_PER_FORWARD * ko
        if mtp:
            proj = gemm_s(2 * t * 2 * h * h / tp, gemm_peak, eff, precision)
            fwd += mtp * (g + proj + norm + 3 * ce / hbm_bw)
            bwd += mtp * (2 * g + 2 * proj + 2 * norm + 2 * ce / hbm_bw)
    return fwd, bwd


@spec_cache()
def stage_shapes(
    model: ModelSpec, pp: int, vpp: int, split: SplitPolicy = "even", v_shape: bool = False
) -> tuple[StageShape, ...]:
    """Per pipeline rank: its layer mix, layers, whether it holds the embedding and the logits, from the one
    layer layout (cost.stages)."""
    layout = layer_layout(model.num_layers, pp, vpp, split, v_shape)
    shapes = []
    for r in range(pp):
        mix, layers = rank_mix(model, layout, r), layout.num_rank_layers(r)
        shapes.append(StageShape(mix, layers, layout.holds_embedding(r), layout.holds_loss(r)))
    return tuple(shapes)


def fitted_compute(hw: HardwareProfile, engine: Engine) -> float:
    """The engine's compute factor on this hardware: what the stack's kernels lose or gain beyond the hardware's
    measured curves; the GPU's own fitted factor, else the engine's pooled behaviour (cost.fitted_factors)."""
    return compute_factor(hw, engine)


def plan_stage_shapes(model: ModelSpec, plan: Plan, engine: Engine) -> tuple[StageShape, ...]:
    """`stage_shapes` of a plan: its pipeline, the split it states or its engine's, and its schedule's shape."""
    return stage_shapes(model, plan.pp, plan.vpp, plan_split(plan, engine), v_shape(plan))


def stage_compute(model: ModelSpec, hw: HardwareProfile, plan: Plan, engine: Engine, stage: int) -> StageCompute:
    """Compute time of one micro-batch on one GPU of pipeline rank `stage`, times the engine's fitted factor."""
    shape = plan_stage_shapes(model, plan, engine)[stage]
    head = head_precision(plan.precision)  # the output layer stays 16-bit under a named recipe (precision.py)
    peak, bw = hw_rates(hw, head)
    vocab = padded_vocab(model.vocab_size, plan.tp, engine.rules.vocab_padding)
    hf, hb = _head_time(
        model, hw.efficiency, peak, bw, first=shape.first, last=shape.last, tp=plan.tp, cp=plan.cp, sp=plan.sp,
        b=plan.micro_batch, s=plan.seq_len, precision=head, vocab=vocab,
        mtp=model.mtp_layers if shape.last else 0, dtensor_op_s=dtensor_host.op_s(hw, plan, engine),
    )  # fmt: skip
    f = fitted_compute(hw, engine)
    fwd = bwd = rc = core = 0.0
    for kind, n in shape.mix:
        lt = layer_time(model, hw, plan, engine, kind=kind)
        fwd, bwd, rc = fwd + n * lt.forward_s, bwd + n * lt.backward_s, rc + n * lt.recompute_s
        core += f * n * lt.attention_core_forward_s
    return StageCompute(
        mix=shape.mix,
        layers_forward_s=f * fwd,
        layers_backward_s=f * bwd,
        head_forward_s=f * hf,
        head_backward_s=f * hb,
        recompute_s=f * rc,
        attention_core_forward_s=core,
    )


__all__ = ["LayerTime", "StageCompute", "StageShape", "fitted_compute", "layer_time", "stage_compute", "stage_shapes"]
