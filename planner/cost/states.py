"""Model states: bytes per parameter of the weights, gradients and optimizer state, and how a ZeRO stage, as
the engine runs it, shards and holds them. The one place these numbers live; memory, gradient traffic, the
optimizer step and the checkpoint size read them.

Mixed-precision Adam holds 2 (16-bit weights) + 2 (16-bit gradients) + 12 (fp32 master copy, first and
second moment) = 16 bytes per parameter; ZeRO-1 shards the optimizer state, ZeRO-2 also the gradients,
ZeRO-3 also the weights (Rajbhandari et al. 2020, ZeRO, section 3.1 and Figure 1). Engines differ in the
dtypes and in what they hold unsharded (engine.ZeroStage): Megatron keeps fp32 gradients, FSDP2 keeps the
fp32 parameters as the master and gathers 16-bit copies, and gradient accumulation with gradient sync off
holds unsharded gradients across micro-batches.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.cost.params import RankParams, expert_dp
from planner.cost.quantization import gather_bytes_per_param
from planner.engine import Engine, ZeroStage
from planner.engine import Memory as EngineMemory
from planner.plan import Plan
from planner.specs import Precision


@dataclass(frozen=True)
class StateBytes:
    """Bytes per parameter of each model state before sharding, as one engine and ZeRO stage hold them."""

    weights: float  # the stored parameters (16-bit, or fp32 when they are the master)
    gradients: float  # the gradient buffer the optimizer reads (the engine's gradient dtype)
    optimizer: float  # the fp32 master copy (when separate) plus the optimizer's moments
    master_copy: bool  # a separate fp32 master in the optimizer
    compute: float  # one 16-bit (or fp32) compute copy of a weight: what all-gathers and casts move
    quantized_gather: float | None = None  # what the weight all-gather moves per parameter with fp8 param gather
    step_upcast: float = 0.0  # fp32 copies of 16-bit gradients the optimizer step makes, per parameter it updates

    @property
    def gather(self) -> float:
        """Bytes per parameter one weight all-gather moves: the compute copy, or the quantized weight with fp8
        parameter gather (cost.quantization.gather_bytes_per_param)."""
        return self.compute if self.quantized_gather is None else self.quantized_gather


def compute_bytes(precision: str) -> int:
    """Weights are computed with in the plan's dtype; fp8 recipes keep 16-bit weights and cast per GEMM
    (Transformer Engine, torchao)."""
    return 4 if precision == "fp32" else 2


def state_bytes_per_param(precision: str, engine: Engine, stage: ZeroStage) -> StateBytes:
    """Mixed-precision Adam: 2 + 2 + 12 = 16 bytes per parameter (ZeRO, section 3.1); Megatron accumulates
    grads in fp32 (+2). Pure fp32 Adam needs no master copy: 4 + 4 + 8, unless the optimizer keeps one
    anyway (DeepSpeed's ZeRO optimizer does: 4 + 4 + 12; its engine without ZeRO does not: stage.master_copy). SGD
    with momentum keeps one moment, not two. With fp32 parameters (FSDP2 mixed precision, DDP under autocast) the
    parameters are the master: 4 + 4 + 8."""
    mem = engine.memory
    moments = 1 if mem.optimizer == "sgd" else 2
    c = compute_bytes(precision)
    if stage.fp32_params:
        return StateBytes(4, 4, 4 * moments, False, c)
    wide = precision == "fp32"
    master = stage.keeps_master(precision) if mem.master_copy is None else mem.master_copy
    grads = 4 if (wide or (stage.grad_dtype or mem.grad_dtype) == "fp32") else 2
    optimizer: float = 4 * (moments + (1 if master else 0))
    if mem.precision_aware_optimizer:
        remainders = stage.param_remainders and precision in ("bf16", "fp8", "fp8-delayed")
        optimizer = precision_aware_optimizer_bytes(mem, moments=moments, master=master, remainders=remainders)
    # A master-copy optimizer reads fp32 gradients: at the step it upcasts 16-bit ones of the parameters it updates
    # (Megatron `_copy_model_grads_to_main_grads`, `main_grad.float()`: optimizer.py l.1092-1100, distrib_optimizer.py
    # l.2782-2792 for its shard @d98e8a64; DeepSpeed ZeRO's fp32 gradient partition), but for the precision-aware
    # optimizer, which reads them as they are (`decoupled_grad`).
    upcast = 4.0 if master and grads < 4 and not mem.precision_aware_optimizer else 0.0
    return StateBytes(c, grads, optimizer, master, c, gather_bytes_per_param(precision, engine), upcast)


def precision_aware_optimizer_bytes(mem: EngineMemory, *, moments: int, master: bool, remainders: bool) -> float:
    """Megatron's precision-aware optimizer (TE FusedAdam, --use-precision-aware-optimizer): the moments stored in
    their dtype (--exp-avg-dtype, --exp-avg-sq-dtype; the kernel computes in fp32, arguments.py l.3667-3684), the
    fp32 master kept as the 16-bit remainder beside bf16 weights (store_param_remainders, optimizer_config.py
    l.192-195), which distrib_optimizer.py l.1007-1008 does with bf16 and no fp8 recipe but delayed scaling
    (use_precision_aware_optimizer_no_fp8_or_ds_fp8, optimizer_config.py l.407-413), where the stage keeps them
    (ZeroStage.param_remainders). bf16 moments with remainders: 2 + 2 + 2 = 6 bytes per parameter against 12 (notes
    §3.4: 6 + 6/d with the distributed optimizer); with fp32 main weights, 8."""
    moment = 2 if mem.optimizer_moment_dtype == "bf16" else 4
    return moments * moment + ((2 if remainders else 4) if master else 0)


@dataclass(frozen=True)
class ModelStates:
    """Bytes of model states one GPU holds at its peak."""

    weights_bytes: float  # stored parameters (sharded or not)
    gradients_bytes: float  # the gradient buffer (sharded or not)
    optimizer_bytes: float
    gathered_weights_bytes: float = 0.0  # 16-bit copies of every weight held through the step
    accumulated_grads_bytes: float = 0.0  # unsharded gradients accumulated across micro-batches, or kept 16-bit ones
    step_upcast_bytes: float = 0.0  # fp32 gradient copies the optimizer step makes (StateBytes.step_upcast)

    @property
    def persistent_bytes(self) -> float:
        """What lives between steps: the stored weights, gradients and optimizer state."""
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes

    @property
    def total_bytes(self) -> float:
        return self.persistent_bytes + self.gathered_weights_bytes + self.accumulated_grads_bytes


def sharded_states(params: RankParams, per: StateBytes, plan: Plan, stage: ZeroStage) -> ModelStates:
    """A rank's model states under the engine's ZeRO stage: sharded states divide over dp·cp (every
    data-parallel rank, cp included, as torchtitan and Megatron shard), experts over dp·cp/ep."""
    shard = plan.dp * plan.cp
    expert_shard = expert_dp(plan)
    sharded_params = params.dense / shard + params.expert / expert_shard
    total = params.total

    def held(state: str) -> float:
        return sharded_params if state in stage.shards else total

    gathered = 0.0
    if stage.gathered_weights == "all" and ("weights" in stage.shards or per.compute < per.weights):
        gathered = total * per.compute  # FSDP without reshard after forward, or autocast's cached casts
    accumulated = 0.0
    if stage.accumulate_unsharded and "gradients" in stage.shards and (plan.num_microbatches > 1 or plan.pp > 1):
        accumulated = total * per.gradients  # FSDP2 upcasts to the reduce dtype to accumulate
    elif stage.keeps_16bit_grads:
        accumulated = total * per.compute  # the module's own 16-bit gradients, beside the fp32 buffer
    return ModelStates(
        per.weights * held("weights"),
        per.gradients * held("gradients"),
        per.optimizer * held("optimizer"),
        gathered,
        accumulated,
        per.step_upcast * held("optimizer"),
    )


def model_state_bytes(
    *, params: float, dp: int, zero: int, engine: Engine, precision: Precision = "bf16"
) -> ModelStates:
    """Model states of `params` parameters on one of `dp` data-parallel ranks (ZeRO, Figure 1)."""
    plan = Plan(dp=dp, zero=zero, global_batch=dp, precision=precision)
    stage = engine.zero_stage(plan)  # as the engine runs it, with the run's settings (Engine.zero_stage)
    per = state_bytes_per_param(precision, engine, stage)
    rank = RankParams(dense=params, expert=0.0, largest_unit=0.0, num_gemms=0)
    return sharded_states(rank, per, plan, stage)


def optimizer_step_bytes_per_param(per: StateBytes) -> float:
    """HBM bytes the optimizer update moves per local parameter: it reads the optimizer state, the
    gradient twice (the global-norm clip and the update) and, without a master copy, the weights; it
    writes the optimizer state and the weights."""
    reads = per.optimizer + 2 * per.gradients + (0 if per.master_copy else per.weights)
    return reads + per.optimizer + per.weights


def checkpoint_bytes_per_param(per: StateBytes) -> float:
    """What a checkpoint writes per parameter: the weights and the optimizer state (master copy and
    moments); gradients are not saved."""
    return per.weights + per.optimizer
