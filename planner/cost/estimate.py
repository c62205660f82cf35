"""One plan -> Estimate: the memory report and the step-time breakdown, plus what they imply for a run.

Pure composition of the cost models (memory.py, schedule.py, timing.py); rendering lives in render.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.cluster.fabric import RESTART_S
from planner.cluster.failures import per_gpu_mtbf_hours, per_node_note, unstated_storage_bytes_per_s
from planner.cost.flops import executed_share
from planner.cost.memory import MemoryReport, memory_report
from planner.cost.schedule import StepTime, step_time
from planner.cost.states import checkpoint_bytes_per_param, state_bytes_per_param
from planner.cost.timing import CheckpointPlan, TrainTime, checkpoint_plan, expected_train, time_to_train
from planner.cost.uncertainty import Plausibility, Uncertainty, plausibility, uncertainty
from planner.engine import Engine
from planner.hardware import HardwareProfile
from planner.plan import Plan
from planner.precision import gemm_format
from planner.specs import ModelSpec

# The longest sequences of the runs behind the hardware profiles' MFU ceilings (Megatron-Core README 4,096; Llama 3
# Table 4 and NeMo 24.07's table 8,192): the ceilings count attention as those runs did.
CEILING_SEQ_LEN = 8192


@dataclass(frozen=True)
class Estimate:
    model: ModelSpec
    hardware: HardwareProfile
    engine: Engine
    plan: Plan
    memory: MemoryReport
    time: StepTime
    train: TrainTime | None = None
    checkpoint: CheckpointPlan | None = None

    @property
    def fits(self) -> bool:
        return self.memory.fits

    @property
    def may_not_fit(self) -> bool:
        """It fits, but the high end of the 80% interval of its memory passes the GPU."""
        return self.uncertainty.may_not_fit(self.memory)

    @property
    def uncertainty(self) -> Uncertainty:
        return uncertainty(
            self.engine,
            self.hardware,
            model=self.model,
            plan=self.plan,
            tokens_per_s=self.time.tokens_per_s,
            peak_bytes=self.memory.total_bytes,
        )

    @property
    def plausibility(self) -> Plausibility:
        # a named recipe's MFU counts against its format's peak, so it meets that format's ceiling (precision.py).
        # The ceilings are MFU at sequences of up to CEILING_SEQ_LEN, which count the whole s×s attention: beyond,
        # the masked half the kernels skip is taken out of the MFU set against them (as it was at that length).
        s, mfu = self.plan.seq_len, self.time.mfu
        if s > CEILING_SEQ_LEN:
            mfu *= executed_share(self.model, s) / executed_share(self.model, CEILING_SEQ_LEN)
        return plausibility(mfu, self.hardware, gemm_format(self.plan.precision))

    @property
    def expected_train(self) -> TrainTime | None:
        """The time to train with failures priced (checkpoints, lost work, restarts); None without both."""
        if self.train is None or self.checkpoint is None:
            return None
        return expected_train(self.train, self.checkpoint.goodput)

    @property
    def goodput_tokens_per_s(self) -> float:
        """The tokens/s the goodput keeps: none where the job stalls (its goodput of 1e-77 read as a rate that
        chose a GPU count: audit)."""
        if self.checkpoint is None:
            return self.time.tokens_per_s
        return 0.0 if self.checkpoint.stalled else self.time.tokens_per_s * self.checkpoint.goodput


def checkpoint_bytes(model: ModelSpec, plan: Plan, engine: Engine) -> float:
    """What a checkpoint writes for the whole model: weights and optimizer state (cost.states)."""
    per = state_bytes_per_param(plan.precision, engine, engine.zero_stage(plan))
    return model.num_params * checkpoint_bytes_per_param(per)


def estimate(
    model: ModelSpec,
    hw: HardwareProfile,
    plan: Plan,
    engine: Engine,
    *,
    tokens: float | None = None,
    mtbf_hours: float | None = None,
    mtbf_per: str = "gpu",
    checkpoint_bandwidth_bytes_per_s: float | None = None,
    restart_s: float = RESTART_S,
    time: StepTime | None = None,
) -> Estimate:
    """Memory and time of one plan; with `tokens`, the time to train; with `mtbf_hours`, checkpoints
    and failures (Young 1974 / Daly 2006 interval, expected loss, goodput; `restart_s` lost per failure). `time`:
    the plan's step time when the caller has already computed it (the search), so it is not computed twice."""
    mem = memory_report(model, hw, plan, engine)
    t = time if time is not None else step_time(model, hw, plan, engine)
    train = None
    if tokens:
        train = time_to_train(step_s=t.step_s, tokens_per_step=plan.tokens_per_step, tokens=tokens, gpus=plan.gpus)
    ckpt = None
    if mtbf_hours:
        nodes = max(1, -(-plan.gpus // hw.gpus_per_node))
        per_gpu_s = per_gpu_mtbf_hours(mtbf_hours, mtbf_per, hw.gpus_per_node) * 3600
        bandwidth = checkpoint_bandwidth_bytes_per_s or unstated_storage_bytes_per_s(hw, nodes)
        scaled = per_node_note(hw, nodes, bandwidth, given=checkpoint_bandwidth_bytes_per_s is not None)
        ckpt = checkpoint_plan(
            checkpoint_bytes=checkpoint_bytes(model, plan, engine),
            write_bytes_per_s=bandwidth,
            mtbf_per_gpu_s=per_gpu_s,
            gpus=plan.gpus,
            restart_s=restart_s,
            step_s=t.step_s,
            bandwidth_from=scaled,
        )
    return Estimate(model, hw, engine, plan, mem, t, train, ckpt)
