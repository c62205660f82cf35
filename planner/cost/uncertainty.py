"""How far to trust a prediction: error bars from the calibration residuals of its (engine, hardware) group,
and a plausibility flag when the predicted MFU beats the best published for the hardware.

Error bars are relative half-widths (the root-mean-square log residual of the group after the fit, so about
68% of the group's runs fall inside), stored by `planner calibrate` in the engine profile's `fitted` block
with the run count. A hardware profile without its own calibration may borrow a calibrated sibling's
(`calibration_proxy`, e.g. h200 -> h100-sxm: the same SMs), with the band widened; a group without any runs
gets a wide default, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.engine import Engine
from planner.hardware import HardwareProfile

# No calibration runs of this engine on this hardware (or its proxy): what the leave-one-family-out
# cross-validation of the shipped profiles shows for a family the fit never saw (README, "Accuracy").
UNCALIBRATED_TOKENS_REL = 0.30
# No measured peak memory in the group: the spread of the memory model on the runs with a measured peak,
# widened for engines whose memory semantics were not checked against a measurement.
UNMEASURED_MEMORY_REL = 0.10
# Borrowing a sibling profile's calibration: the band widens by this factor (different clocks, memory, links).
PROXY_WIDENING = 1.5


@dataclass(frozen=True)
class Uncertainty:
    tokens_per_s_rel: float
    peak_memory_rel: float
    basis: str  # "megatron/h100-sxm", "megatron/h100-sxm as h200", or "megatron/b200: no calibration runs"
    runs: int
    calibrated: bool

    def as_dict(self) -> dict[str, object]:
        return {
            "tokens_per_s_rel": self.tokens_per_s_rel,
            "peak_memory_rel": self.peak_memory_rel,
            "basis": self.basis,
            "runs": self.runs,
        }

    def describe(self) -> str:
        """'±9% (megatron/a100-80gb, 21 runs)'."""
        if not self.calibrated:
            return f"±{self.tokens_per_s_rel:.0%} ({self.basis})"
        return f"±{self.tokens_per_s_rel:.0%} ({self.basis}, {self.runs} runs)"


def uncertainty(engine: Engine, hw: HardwareProfile) -> Uncertainty:
    """The error bars of a prediction for this engine on this hardware."""
    name, proxy = hw.name, hw.calibration_proxy
    fitted, widen, basis = engine.fitted.get(name), 1.0, f"{engine.name}/{name}"
    if (fitted is None or fitted.tokens_per_s_rel is None) and proxy:
        fitted, widen, basis = engine.fitted.get(proxy), PROXY_WIDENING, f"{engine.name}/{proxy} as {name}"
    if fitted is None or fitted.tokens_per_s_rel is None:
        return Uncertainty(
            UNCALIBRATED_TOKENS_REL, UNMEASURED_MEMORY_REL, f"{engine.name}/{name}: no calibration runs", 0, False
        )
    memory = fitted.peak_memory_rel if fitted.peak_memory_rel is not None else UNMEASURED_MEMORY_REL
    return Uncertainty(widen * fitted.tokens_per_s_rel, widen * memory, basis, fitted.runs, True)


@dataclass(frozen=True)
class Plausibility:
    ok: bool
    mfu: float
    mfu_ceiling: float | None  # best published MFU of this hardware class at this precision (None: not known)
    source: str

    def as_dict(self) -> dict[str, object]:
        return {"ok": self.ok, "mfu_ceiling": self.mfu_ceiling, "source": self.source}


def plausibility(mfu: float, hw: HardwareProfile, precision: str) -> Plausibility:
    """A predicted MFU above the best published for the hardware is implausible: the plan may be fine, but the
    prediction claims more than anyone has measured, so something in the model is likely optimistic."""
    ceiling = hw.plausibility.mfu_ceiling.get(precision)  # type: ignore[call-overload]
    if ceiling is None:
        return Plausibility(True, mfu, None, "no published ceiling for this hardware and precision")
    return Plausibility(mfu <= ceiling, mfu, ceiling, hw.plausibility.source)
