"""Measurements no GPU could make: a measured step whose model FLOPs alone, each attention core at its causal share
(cost/flops.py executed_share), need more than the GPU's dense peak for the plan's precision (and, where ingest
reads a log, a peak memory above the GPU's HBM: ingested_doubts). A wrong GPU count or
batch gives one (a log excerpt read with another --gpus); calibrating on it would move the engine's factors to fit
the mistake, so validate and calibrate leave such a run out and say why.

The peak is of the GPU the run was measured on (validate --hardware prices an H100 run on an A100: no impossible
measurement). An fp32 run is held to the GPU's 16-bit peak: its GEMMs may run on TF32 tensor cores (an A100's
156 TFLOP/s, where its fp32 peak is 19.5), which no profile states and which run at most at the 16-bit rate."""

from __future__ import annotations

from planner.cost.flops import executed_share, model_flops_per_step
from planner.errors import PlannerError
from planner.hardware import HardwareProfile
from planner.io.catalog import load_hardware
from planner.io.logs.record import IngestedRun
from planner.plan import Plan
from planner.precision import gemm_format
from planner.specs import ModelSpec
from planner.units import fmt_bytes


def measured_on(name: object, priced_on: HardwareProfile) -> HardwareProfile | None:
    """The profile a run was measured on: the one it is priced on where its entry names that one (or none), else
    the catalog's of the name it gives; None where no catalog holds that name."""
    if name is None or name == priced_on.name:
        return priced_on
    try:
        return load_hardware(str(name))
    except PlannerError:
        return None


def _bound(plan: Plan, hardware: HardwareProfile) -> tuple[str, float] | None:
    """(the format, its dense peak) a step of this precision cannot beat; None where the GPU states no such peak."""
    peaks = hardware.gpu.peak_flops
    fmt = "bf16" if plan.precision == "fp32" and "bf16" in peaks else gemm_format(plan.precision)
    peak = peaks.get(fmt)  # type: ignore[call-overload]
    return (fmt, peak) if peak else None


def peak_share(
    model: ModelSpec, plan: Plan, hardware: HardwareProfile, step_s: float, gpus: int | None = None
) -> float:
    """The share of the GPUs' dense peak (_bound) the model's executed FLOPs take in step_s on `gpus` GPUs (the
    plan's by default; the FLOPs need only its batch, sequence and precision); 0 where no peak is stated."""
    bound = _bound(plan, hardware)
    if bound is None:
        return 0.0
    executed = model_flops_per_step(model, plan) * executed_share(model, plan.seq_len)
    return executed / (step_s * (gpus or plan.gpus) * bound[1])


def beyond_peak(
    model: ModelSpec, plan: Plan, hardware: HardwareProfile | None, step_s: float | None, gpus: int | None = None
) -> str | None:
    """Why the measured step is impossible on the hardware it was measured on (None: it is not, or no profile)."""
    if not step_s or hardware is None:
        return None
    share, n = peak_share(model, plan, hardware, step_s, gpus), gpus or plan.gpus
    if share <= 1.0:
        return None
    fmt = _bound(plan, hardware)[0]  # type: ignore[index]
    return (
        f"its measured step ({step_s:.4g} s for {plan.tokens_per_step:,} tokens on {n} GPUs) needs "
        f"{share:.2f}x the dense {fmt} peak of {n} x {hardware.name} for the model's FLOPs alone: "
        "check its gpus, global_batch and seq_len"
    )


# A peak may pass the profile's HBM by this much before it is doubted: a profile states the datasheet's capacity or a
# reading, and a device can report a little more (a Primus MI325X log prints a 274.86e9-byte total, the profile
# 274.4e9).
HBM_SLACK = 1.02


def ingested_doubts(run: IngestedRun) -> list[str]:
    """What an ingested run measured that the GPU it is read as could not have: a step beyond the dense peak
    (beyond_peak, where the model, the GPUs, the batch, sequence and precision are known; validate and calibrate
    leave such a run out), a peak memory above the GPU's HBM (validate would compare it as it is). ingest writes
    the run as read, and says so."""
    if run.hardware is None:
        return []
    try:
        hw = load_hardware(run.hardware)
    except PlannerError:
        return []
    out = []
    peak = run.measured.get("peak_memory_bytes")
    if peak is not None and peak > hw.gpu.hbm_bytes * HBM_SLACK:
        out.append(
            f"{run.id}: its peak memory, {fmt_bytes(peak)}, is more than the {fmt_bytes(hw.gpu.hbm_bytes)} of one "
            f"{hw.name}, the GPU it is read as: check the hardware"
        )
    p = run.plan
    if run.model is None or run.gpus is None or None in (p.get("global_batch"), p.get("seq_len"), p.get("precision")):
        return out
    try:  # the FLOPs need the batch, the sequence and the precision only: the degrees may be unstated
        model = ModelSpec(**run.model)
        flops = Plan(global_batch=p["global_batch"], seq_len=p["seq_len"], precision=p["precision"])
    except (ValueError, PlannerError):
        return out
    impossible = beyond_peak(model, flops, hw, run.measured.get("step_s"), run.gpus)
    return out + ([f"{run.id}: {impossible}"] if impossible else [])
