"""Measurements no GPU could make: a measured step whose model FLOPs alone, each attention core at its causal share
(cost/flops.py executed_share), need more than the GPU's dense peak for the plan's precision. A wrong GPU count or
batch gives one (a log excerpt read with another --gpus); calibrating on it would move the engine's factors to fit
the mistake, so validate and calibrate leave such a run out and say why."""

from __future__ import annotations

from planner.cost.flops import executed_share, model_flops_per_step
from planner.errors import PlannerError
from planner.hardware import HardwareProfile
from planner.io.catalog import load_hardware
from planner.plan import Plan
from planner.specs import ModelSpec


def peak_share(model: ModelSpec, plan: Plan, hardware: HardwareProfile, step_s: float) -> float:
    """The share of the GPUs' dense peak (plan.precision's GEMM format) the model's executed FLOPs take in step_s."""
    executed = model_flops_per_step(model, plan) * executed_share(model, plan.seq_len)
    return executed / (step_s * plan.gpus * hardware.peak(plan.precision))


def own_hardware(name: object) -> HardwareProfile | None:
    """The profile a run was measured on, by the name its runs-file entry gives (validate --hardware prices it on
    another: an H100 run priced on an A100 is no impossible measurement); None where no catalog holds it."""
    try:
        return load_hardware(str(name))
    except PlannerError:
        return None


def beyond_peak(model: ModelSpec, plan: Plan, hardware: HardwareProfile | None, step_s: float | None) -> str | None:
    """Why the measured step is impossible on the hardware it was measured on (None: it is not, or no profile)."""
    if not step_s or hardware is None:
        return None
    share = peak_share(model, plan, hardware, step_s)
    if share <= 1.0:
        return None
    return (
        f"its measured step ({step_s:.4g} s for {plan.tokens_per_step:,} tokens on {plan.gpus} GPUs) needs "
        f"{share:.2f}x the dense {plan.precision} peak of {plan.gpus} x {hardware.name} for the model's FLOPs alone: "
        "check its gpus, global_batch and seq_len"
    )
