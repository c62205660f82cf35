"""The optimizer step's time on one pipeline rank: a memory-bound update of the rank's shard of the states, the
share stepped on the CPU where the engine offloads it, a named precision recipe's weight casts, and the host
dispatch of the update's ops on DTensor parameters (cost.dtensor_host)."""

from __future__ import annotations

from planner.cost import dtensor_host
from planner.cost.compute import plan_stage_shapes
from planner.cost.offload import offloaded_optimizer_s
from planner.cost.params import expert_dp, plan_params
from planner.cost.quantization import weight_cast_step_s
from planner.cost.states import optimizer_step_bytes_per_param, state_bytes_per_param
from planner.engine import Engine
from planner.hardware import HardwareProfile
from planner.plan import Plan
from planner.specs import ModelSpec


def optimizer_step_s(model: ModelSpec, hw: HardwareProfile, plan: Plan, engine: Engine, *, stage: int) -> float:
    """Memory-bound optimizer update of the local shard (cost.states.optimizer_step_bytes_per_param) at
    HBM bandwidth × efficiency.hbm. ZeRO ≥ 1 shards the update over dp·cp (dp·cp/ep for experts;
    Rajbhandari et al. 2020)."""
    params = plan_params(model, plan, engine, stage)
    zero = engine.zero_stage(plan)
    dense, expert = params.dense, params.expert
    if "optimizer" in zero.shards:
        dense /= plan.dp * plan.cp
        expert /= expert_dp(plan)
    per = state_bytes_per_param(plan.precision, engine, zero)
    update = (
        (dense + expert) * optimizer_step_bytes_per_param(per) / (hw.gpu.hbm_bandwidth_bytes_per_s * hw.efficiency.hbm)
    )
    if engine.memory.optimizer_offload:  # a share stepped on the CPU (cost.offload)
        update = offloaded_optimizer_s(update, hw, engine, local_params=dense + expert, grad_bytes=per.gradients,
                                       param_bytes=per.weights)  # fmt: skip
    host = _dtensor_s(model, hw, plan, engine, stage)
    return update + host + weight_cast_step_s(model, hw, plan, engine, rank=stage)  # a named recipe's weight casts


def _dtensor_s(model: ModelSpec, hw: HardwareProfile, plan: Plan, engine: Engine, stage: int) -> float:
    """The update's DTensor dispatch (cost.dtensor_host.optimizer_s); the stage's layers are looked up only where
    a DTensor op costs the host anything (CPU profiles)."""
    if not hw.efficiency.dtensor_op_overhead_s or not engine.kernels.dtensor:
        return 0.0
    shape = plan_stage_shapes(model, plan, engine)[stage]
    return dtensor_host.optimizer_s(model, hw, plan, engine, mix=shape.mix, first=shape.first, last=shape.last)
