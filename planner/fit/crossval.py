"""Leave-one-family-out cross-validation: does a calibration transfer to runs it was not fitted to?

A family is one publication's runs of one engine on one GPU (fit/runs.py run_family: Megatron A100 2021,
Megatron H100 README, NeMo H100, torchtitan H100, ...). For each family, fit on every other family and predict
the left-out one; its engine factors then come only from the terms the fit shares across engines and across
hardware (fit/priors.py). The in-sample error is the fit on everything, predicting everything.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from planner.fit.calibrate import Observation, fit, predict_step_s
from planner.hardware import HardwareProfile


@dataclass(frozen=True)
class FamilyResult:
    family: str
    runs: int
    in_sample_pct: tuple[float, ...]  # per run, throughput error (predicted / measured - 1) in %
    held_out_pct: tuple[float, ...]

    @staticmethod
    def _median_abs(v: tuple[float, ...]) -> float:
        return statistics.median(abs(x) for x in v)

    @property
    def in_sample_median_abs_pct(self) -> float:
        return self._median_abs(self.in_sample_pct)

    @property
    def held_out_median_abs_pct(self) -> float:
        return self._median_abs(self.held_out_pct)

    @property
    def held_out_median_signed_pct(self) -> float:
        return statistics.median(self.held_out_pct)


def _throughput_error_pct(step_error_pct: float) -> float:
    """Tokens/s error from step-time error: throughput is tokens per step over the step time."""
    return (1.0 / (1.0 + step_error_pct / 100.0) - 1.0) * 100.0


def _predict_pct(result_fit: object, o: Observation) -> float:
    from planner.fit.calibrate import FitResult

    assert isinstance(result_fit, FitResult)
    hw = result_fit.fitted[o.hardware.name]
    fitted = result_fit.factors(o.engine.name, o.hardware.name)
    engine = o.engine.model_copy(update={"fitted": {o.hardware.name: fitted}})
    step = predict_step_s(o, hw.efficiency, engine)
    return _throughput_error_pct((step / o.measured_step_s - 1) * 100)


def leave_one_family_out(
    obs: list[Observation], bases: dict[str, HardwareProfile], names: tuple[str, ...] | None = None
) -> list[FamilyResult]:
    """Per family: its runs' throughput errors in-sample and when the family is left out of the fit."""
    everything = fit(obs, bases, names=names)
    in_sample = {id(o): _predict_pct(everything, o) for o in everything.observations}
    families = sorted({o.family for o in obs})
    out = []
    for fam in families:
        train = [o for o in obs if o.family != fam]
        test = [o for o in everything.observations if o.family == fam]
        result = fit(
            train, {h: b for h, b in bases.items() if any(o.hardware.name == h for o in train)} or bases, names=names
        )
        held = tuple(_predict_pct(result, o) if o.hardware.name in result.fitted else math.nan for o in test)
        out.append(FamilyResult(fam, len(test), tuple(in_sample[id(o)] for o in test), held))
    return out
