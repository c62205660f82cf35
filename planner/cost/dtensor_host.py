"""Host time of operations on DTensors, where the step waits on the host (CPU runs; 0 on GPUs, where the dispatch
runs ahead of the kernels).

An op whose arguments include a DTensor goes through DTensor's sharding propagation and redistribution in Python
before its local kernel runs: on a 2-core AVX-512/AMX box each cost 43.2 µs beyond the local op (a tiny-model step
with tensor parallelism over a mesh of one rank, no communication at all: 49.4 ms against 18.3 ms without, over
720 ops; benchmarks/dtensor_ops.py). Engines built on torch's parallel APIs hold their parallel parameters as DTensors
(engine kernels.dtensor): tensor parallelism's sharded weights (`parallelize_module`'s ColwiseParallel and
RowwiseParallel; with sequence parallelism the norms too, SequenceParallel) and FSDP2's sharded parameters
(`fully_shard`). The ops counted per micro-batch are those of the TP-sharded weights, forward and backward; the
optimizer's per-tensor update runs on every DTensor parameter once a step.

The counts are measured, not derived: TorchDispatchMode over one step of the worker's model under torch 2.13
(benchmarks/dtensor_ops.py prints them), per linear: its weight's autocast copy, transpose, view, mm and unsafe
view forward (≈6), the two backward GEMMs with their transposes and views, the gradient's cast and detach (≈11),
about 9 for a recomputed forward (checkpoint's unpacking included); per sequence-parallel RMSNorm: pow, mean, add,
rsqrt and two muls forward (≈7), about 19 backward, 17 recomputed; per parameter tensor a step:
torch.optim.AdamW's per-tensor (for-loop, CPU) update, 8 ops, on every DTensor parameter: weights, biases and
LayerNorm's two tensors (gpt3-125m at 2 layers: 26 DTensor parameters at tp 2, 36 with SP). A GPT-style model
(gpt3-125m: 72 of its 73 TP linears biased, LayerNorm) adds per biased linear its bias's cast forward (+1.0: 6.7
against 5.7 per linear) and its reduction, cast and detach backward (+4.0: 14.6 against 10.7), +1 recomputed; its
sequence-parallel LayerNorm is one fused op, 1 forward and 4 backward (7 recomputed), where RMSNorm's pieces are 7
and 19 (17)."""

from __future__ import annotations

from planner.cost.params import kind_gemm_count
from planner.engine import Engine
from planner.hardware import HardwareProfile
from planner.layers import LayerKind
from planner.plan import Plan
from planner.specs import ModelSpec

OPS_PER_LINEAR = (6, 11)  # (forward, backward) DTensor ops of one TP-sharded linear, one micro-batch
OPS_PER_BIAS = (1, 4)  # a TP-sharded linear's bias beyond its weight's ops, one micro-batch
OPS_PER_SP_NORM = {"rmsnorm": (7, 19), "layernorm": (1, 4)}  # one sequence-parallel norm (SequenceParallel)
# what a recomputed forward dispatches (full, or op-level SAC): per TP linear and bias, per SP norm
OPS_RECOMPUTED = (9, 1)
OPS_RECOMPUTED_PER_SP_NORM = {"rmsnorm": 17, "layernorm": 7}
OPS_PER_EMBEDDING = (1, 2)  # the vocabulary-parallel lookup; its backward and the gradient's detach
OPS_PER_TENSOR_STEP = 8  # AdamW's per-tensor update of one DTensor parameter (lerp, mul, addcmul, sqrt, div, ...)


def op_s(hw: HardwareProfile, plan: Plan, engine: Engine) -> float:
    """Host cost of one op on TP-sharded DTensors for this plan: 0 without tensor parallelism or DTensors."""
    return hw.efficiency.dtensor_op_overhead_s if plan.tp > 1 and engine.kernels.dtensor else 0.0


def layer_s(
    model: ModelSpec, kind: LayerKind, one_op_s: float, *, sp: bool, recompute: str = "none"
) -> tuple[float, float, float]:
    """(forward, backward, recompute) host time of one layer's DTensor ops for one micro-batch. The recompute
    share is what a recomputed forward dispatches beyond the forward's own ops, which full recompute already
    repeats (cost.layer_time); `recompute`: none, full, or selective as op-level SAC runs it (every op of the
    forward dispatched again, the saved ones answered from the cache: 252 ops on tiny against full's 264)."""
    if not one_op_s:
        return 0.0, 0.0, 0.0
    linears, biases, norms = kind_gemm_count(model, kind), _biases(model, kind), (kind.blocks if sp else 0)
    norm = OPS_PER_SP_NORM[model.norm]
    fwd = one_op_s * (linears * OPS_PER_LINEAR[0] + biases * OPS_PER_BIAS[0] + norms * norm[0])
    bwd = one_op_s * (linears * OPS_PER_LINEAR[1] + biases * OPS_PER_BIAS[1] + norms * norm[1])
    per_linear, per_bias = OPS_RECOMPUTED
    again = one_op_s * (linears * per_linear + biases * per_bias + norms * OPS_RECOMPUTED_PER_SP_NORM[model.norm])
    return fwd, bwd, {"none": 0.0, "full": again - fwd}.get(recompute, again)


def head_s(model: ModelSpec, one_op_s: float, *, first: bool, last: bool, sp: bool) -> tuple[float, float]:
    """(forward, backward) host time of the embedding's (first stage) and the final norm's and output layer's
    (last stage; no bias: launch/model.py) DTensor ops for one micro-batch."""
    fwd = bwd = 0.0
    if first:
        fwd, bwd = fwd + OPS_PER_EMBEDDING[0] * one_op_s, bwd + OPS_PER_EMBEDDING[1] * one_op_s
    if last:
        norm = OPS_PER_SP_NORM[model.norm] if sp else (0, 0)
        fwd += (OPS_PER_LINEAR[0] + norm[0]) * one_op_s
        bwd += (OPS_PER_LINEAR[1] + norm[1]) * one_op_s
    return fwd, bwd


def optimizer_s(
    model: ModelSpec, hw: HardwareProfile, plan: Plan, engine: Engine, *, mix: tuple[tuple[LayerKind, int], ...],
    first: bool, last: bool,
) -> float:  # fmt: skip
    """Host time of the optimizer's per-tensor update on the rank's DTensor parameters: every one under FSDP2 (a
    ZeRO stage that shards the weights over dp·cp > 1: launch/parallelize.py data_parallel_kind), else the
    TP-sharded weights (and the norms under SP)."""
    one_op_s = hw.efficiency.dtensor_op_overhead_s
    fsdp = plan.dp * plan.cp > 1 and "weights" in engine.zero_stage(plan).shards
    if not one_op_s or not engine.kernels.dtensor or not (fsdp or plan.tp > 1):
        return 0.0
    norms = fsdp or plan.sp
    tensors = sum(n * _layer_tensors(model, k, norms=norms) for k, n in mix)
    learned = fsdp and model.position_embedding == "learned"  # TP leaves the position table whole (apply_tp)
    tensors += (1 + learned if first else 0) + (1 + (_norm_tensors(model) if norms else 0) if last else 0)
    return OPS_PER_TENSOR_STEP * tensors * one_op_s


def _layer_tensors(model: ModelSpec, kind: LayerKind, *, norms: bool) -> int:
    """Parameter tensors of one layer that are DTensors: each linear's weight and bias (q, k and v biases alone
    where only those have one), and its norms' weights and LayerNorm biases where `norms` (SP or FSDP)."""
    per_norm = _norm_tensors(model) if norms else 0
    return kind_gemm_count(model, kind) + _biases(model, kind) + kind.blocks * per_norm


def _norm_tensors(model: ModelSpec) -> int:
    """A norm's parameter tensors: its weight, and LayerNorm's bias."""
    return 2 if model.norm == "layernorm" else 1


def _biases(model: ModelSpec, kind: LayerKind) -> int:
    """The layer's biased linears: every one, or q, k and v alone where only those have one (launch/model.py)."""
    if model.has_bias:
        return kind_gemm_count(model, kind)
    return 3 if model.has_qkv_bias and kind.has_attention else 0
