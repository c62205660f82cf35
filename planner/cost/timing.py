"""Wall-clock of a whole run: time to train N tokens, and how often to checkpoint given failures.

Pure functions of a step time and a few numbers, each with its source. Checkpoint interval: Young 1974
(τ = sqrt(2·δ·M)) and Daly 2006 (higher-order refinement), with δ the checkpoint write time and M the
system mean time between failures = per-GPU MTBF / GPUs (independent failures, exponential). Each failure also
costs a restart, R: detecting it, replacing the node, restarting the processes, initialising the communicators
and reading the checkpoint back. It does not shrink as the job grows while M does, so at 100k GPUs it is most of
the waste.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.cluster.fabric import RESTART_S  # R, with its source
from planner.units import fmt_duration, fmt_seconds


@dataclass(frozen=True)
class TrainTime:
    steps: int
    seconds: float
    gpu_hours: float


def time_to_train(*, step_s: float, tokens_per_step: int, tokens: float, gpus: int) -> TrainTime:
    """ceil(tokens / tokens_per_step) steps of step_s each; GPU-hours = seconds·gpus/3600."""
    steps = math.ceil(tokens / tokens_per_step)
    seconds = steps * step_s
    return TrainTime(steps=steps, seconds=seconds, gpu_hours=seconds * gpus / 3600.0)


# Below a millionth of the wall time training, a run is said to leave no time to train rather than given a time
# a million times its failure-free one (goodputs of 1e-38 printed 4.5e40 days, and 1e-304 an infinity).
STALLED_GOODPUT = 1e-6


def expected_train(train: TrainTime, goodput: float) -> TrainTime | None:
    """The time and GPU-hours to train once failures are priced: the failure-free ones over the goodput (None:
    below STALLED_GOODPUT, no time to train)."""
    if goodput < STALLED_GOODPUT:
        return None
    return TrainTime(steps=train.steps, seconds=train.seconds / goodput, gpu_hours=train.gpu_hours / goodput)


def system_mtbf_s(*, mtbf_per_gpu_s: float, gpus: int) -> float:
    """Independent exponential failures: the first of N fails at rate N/MTBF."""
    return mtbf_per_gpu_s / gpus


def young_interval_s(*, checkpoint_s: float, mtbf_s: float) -> float:
    """Optimal compute time between checkpoints, first order: sqrt(2·δ·M) (Young 1974, Eq. 4)."""
    return math.sqrt(2.0 * checkpoint_s * mtbf_s)


def daly_interval_s(*, checkpoint_s: float, mtbf_s: float) -> float:
    """Daly 2006, Eq. 37: sqrt(2δM)·[1 + sqrt(δ/2M)/3 + (δ/2M)/9] − δ for δ < 2M, else M."""
    if checkpoint_s >= 2.0 * mtbf_s:
        return mtbf_s
    x = checkpoint_s / (2.0 * mtbf_s)
    return math.sqrt(2.0 * checkpoint_s * mtbf_s) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - checkpoint_s


@dataclass(frozen=True)
class CheckpointPlan:
    checkpoint_s: float  # δ: time to write one checkpoint
    mtbf_s: float  # M: system mean time between failures
    interval_s: float  # τ: compute time between checkpoints (Daly's, in whole steps where the step is known)
    restart_s: float  # R: time lost per failure besides the work since the last checkpoint
    goodput: float  # fraction of wall time spent on useful training steps
    checkpoint_bytes: float = 0.0  # what one checkpoint writes, all ranks together
    write_bytes_per_s: float = 0.0  # the job's aggregate write bandwidth δ is priced at
    bandwidth_from: str = ""  # where that bandwidth comes from, where not given (the per-node share times the nodes)

    @property
    def wasted_fraction(self) -> float:
        """Checkpoint writes + lost work + restarts, per unit of wall time."""
        return 1.0 - self.goodput

    @property
    def stalled(self) -> bool:
        """No time to train: the goodput is below STALLED_GOODPUT (a restart outlasts the MTBF many times over)."""
        return self.goodput < STALLED_GOODPUT

    def stall_note(self) -> str:
        """Why a stalled job never trains, in one clause (estimate, search's advice and scale say the same)."""
        return (
            f"failures every {fmt_duration(self.mtbf_s)} leave no time to train: each costs a restart of "
            f"{fmt_duration(self.restart_s)} and the work since a checkpoint written in "
            f"{fmt_seconds(self.checkpoint_s)}"
        )


def checkpoint_plan(
    *,
    checkpoint_bytes: float,
    write_bytes_per_s: float,
    mtbf_per_gpu_s: float,
    gpus: int,
    restart_s: float = RESTART_S,
    step_s: float | None = None,
    bandwidth_from: str = "",
) -> CheckpointPlan:
    """Checkpoint interval and expected waste.

    δ = bytes / aggregate write bandwidth; M = MTBF/gpus; τ from Daly 2006 (R does not move it), rounded to whole
    steps of `step_s` (a job checkpoints between steps), at least one. Wall time per unit of training under
    exponential failures, failures during writes and restarts included (Daly 2006, §3):
    T_w/T_s = M·e^(R/M)·(e^((τ+δ)/M) − 1)/τ, whose first order is 1 + δ/τ + (τ+δ)/(2M) + R/M (Young 1974): the
    writes, half an interval of work lost per failure, and a restart per failure. Goodput is T_s/T_w, taken in
    logarithms so that a hopeless job is a small number, not an overflow.
    """
    delta = checkpoint_bytes / write_bytes_per_s
    mtbf = system_mtbf_s(mtbf_per_gpu_s=mtbf_per_gpu_s, gpus=gpus)
    tau = daly_interval_s(checkpoint_s=delta, mtbf_s=mtbf)
    if step_s:
        tau = max(1, round(tau / step_s)) * step_s
    x = (tau + delta) / mtbf
    log_expm1 = x if x > 700 else math.log(math.expm1(x))
    goodput = math.exp(math.log(tau / mtbf) - restart_s / mtbf - log_expm1)
    return CheckpointPlan(delta, mtbf, tau, restart_s, goodput, checkpoint_bytes, write_bytes_per_s, bandwidth_from)
