"""Model states: bytes per parameter of the weights, gradients and optimizer state, and how ZeRO shards
them over the data-parallel ranks. The one place these numbers live; memory, gradient traffic, the
optimizer step and the checkpoint size read them.

Mixed-precision Adam holds 2 (16-bit weights) + 2 (16-bit gradients) + 12 (fp32 master copy, first and
second moment) = 16 bytes per parameter; ZeRO-1 shards the optimizer state, ZeRO-2 also the gradients,
ZeRO-3 also the weights (Rajbhandari et al. 2020, ZeRO, section 3.1 and Figure 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.cost.params import RankParams
from planner.plan import Plan
from planner.specs import Training

ZERO_SHARDS = {"optimizer": 1, "gradients": 2, "weights": 3}  # the ZeRO stage from which a state is sharded


@dataclass(frozen=True)
class StateBytes:
    """Bytes per parameter of each model state before sharding."""

    weights: float
    gradients: float
    optimizer: float  # the fp32 master copy (when kept) plus the optimizer's moments
    master_copy: bool

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer


def state_bytes_per_param(precision: str, training: Training) -> StateBytes:
    """Mixed-precision Adam: 2 + 2 + 12 = 16 bytes per parameter (ZeRO, section 3.1); Megatron accumulates
    grads in fp32 (+2). Pure fp32 Adam needs no master copy: 4 + 4 + 8, unless the optimizer keeps one
    anyway (DeepSpeed's ZeRO optimizer does: 4 + 4 + 12). SGD with momentum keeps one moment, not two."""
    moments = 1 if training.optimizer == "sgd" else 2
    wide = precision == "fp32"
    master = (not wide) if training.master_copy is None else training.master_copy
    weights = 4 if wide else 2  # fp8 recipes keep 16-bit weights (Transformer Engine, torchao)
    grads = 4 if (wide or training.grad_dtype == "fp32") else 2
    return StateBytes(weights, grads, 4 * (moments + (1 if master else 0)), master)


@dataclass(frozen=True)
class ModelStates:
    """Bytes of model states one GPU holds."""

    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes


def sharded_states(params: RankParams, per: StateBytes, plan: Plan) -> ModelStates:
    """A rank's model states after ZeRO: dense parameters shard over dp·cp (ZeRO shards over every
    data-parallel rank, cp included, as torchtitan and Megatron do), experts over dp·cp/ep."""
    shard = plan.dp * plan.cp
    expert_shard = max(shard // plan.ep, 1)
    sharded_params = params.dense / shard + params.expert / expert_shard
    total = params.total

    def held(state: str) -> float:
        return sharded_params if plan.zero >= ZERO_SHARDS[state] else total

    return ModelStates(per.weights * held("weights"), per.gradients * held("gradients"),
                       per.optimizer * held("optimizer"))


def model_state_bytes(*, params: float, dp: int, zero: int, precision: str = "bf16",
                      training: Training = Training()) -> ModelStates:
    """Model states of `params` parameters on one of `dp` data-parallel ranks (ZeRO, Figure 1)."""
    per = state_bytes_per_param(precision, training)
    return ModelStates(per.weights * params / (dp if zero >= 3 else 1),
                       per.gradients * params / (dp if zero >= 2 else 1),
                       per.optimizer * params / (dp if zero >= 1 else 1))


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
