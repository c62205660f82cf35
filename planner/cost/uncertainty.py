"""How far to trust a prediction: an 80% prediction interval for throughput and for peak memory, and a
plausibility flag when the predicted MFU beats the best published for the hardware.

The interval comes from the engine's behaviour block (engine/fitted.py `Interval`, written by `planner
calibrate --behaviour` from cross-validated residuals): log(measured / predicted) spreads by `base` inside the
domain of the runs the engine was fitted to, and each named distance from that domain adds its own component in
quadrature — a GPU without runs, an engine × GPU pair without runs, an engine without runs, a model family, MoE
or an expert-parallel degree beyond the runs, a precision recipe, each doubling of GPUs beyond the largest run —
all scaled by z so that 80% of cross-validated runs fall inside. `widened_for` names the distances that applied.

An engine profile without an interval model (written before it, or by hand) keeps the older error bars: the
root-mean-square log residual of its (engine, hardware) group (`fitted.<gpu>.tokens_per_s_rel`), a calibrated
sibling's widened (`calibration_proxy`), or a wide default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from planner.cost.fitted_factors import behaviour_on, gpu_factors
from planner.cost.memory import MemoryReport
from planner.engine import Domain, Engine, Interval
from planner.hardware import HardwareProfile
from planner.plan import Plan
from planner.specs import ModelSpec
from planner.units import fmt_bytes_range, fmt_range

# No calibration runs of this engine on this hardware (or its proxy), and no interval model: what the
# leave-one-family-out cross-validation showed for a family the fit never saw.
UNCALIBRATED_TOKENS_REL = 0.30
# No measured peak memory in the group: the spread of the memory model on the runs with a measured peak,
# widened for engines whose memory semantics were not checked against a measurement.
UNMEASURED_MEMORY_REL = 0.10
# Borrowing a sibling profile's calibration: the band widens by this factor (different clocks, memory, links).
PROXY_WIDENING = 1.5
# The distances an interval widens for, by the name the interval model stores them under, and how they read.
DISTANCES = {
    "gpu": "GPU without runs",
    "engine_gpu": "engine x GPU without runs",
    "engine": "engine without runs",
    "family": "model family without runs",
    "moe": "MoE / EP beyond the runs",
    "precision": "precision without runs",
    "scale": "GPUs beyond the largest run",
}


def model_family(model: ModelSpec) -> str:
    """The architecture class of a model: MLP, position embedding, attention (MHA, GQA, MLA, local windows),
    Mamba hybrid and MoE. GPT-3 is gelu/learned/mha, Llama 3 swiglu/rope/gqa, Mixtral swiglu/rope/gqa/moe."""
    attention = "mla" if model.is_mla else "gqa" if model.kv_heads < model.num_attention_heads else "mha"
    parts = [model.mlp, model.position_embedding, attention]
    if model.attention is not None and set(model.attention.pattern) - {"G"}:
        parts.append("local")
    if model.mamba is not None:
        parts.append("hybrid")
    if model.moe is not None:
        parts.append("moe")
    return "/".join(parts)


@dataclass(frozen=True)
class Uncertainty:
    tokens_per_s_rel: float  # relative half-width of the 80% interval (its upper side: hi / predicted - 1)
    peak_memory_rel: float
    basis: str  # "megatron/h100-sxm", "torchtitan/b200: pooled over a100-80gb, h100-sxm, h200"
    runs: int
    calibrated: bool  # the engine has runs on this GPU (or its calibration proxy)
    widened_for: tuple[str, ...] = ()
    tokens_per_s_interval: tuple[float, float] | None = None  # absolute 80% interval (lo, hi)
    peak_memory_interval: tuple[float, float] | None = None
    level: float = field(default=0.8)

    def as_dict(self) -> dict[str, object]:
        memory = self.peak_memory_interval
        return {
            "tokens_per_s_rel": self.tokens_per_s_rel,
            "peak_memory_rel": self.peak_memory_rel,
            "tokens_per_s_interval": list(self.tokens_per_s_interval) if self.tokens_per_s_interval else None,
            "peak_memory_interval": [round(b) for b in memory] if memory else None,  # whole bytes (DESIGN.md)
            "basis": self.basis,
            "runs": self.runs,
            "widened_for": list(self.widened_for),
        }

    def tokens_text(self) -> str:
        """The throughput interval, '181–196k', or the relative half-width '±9%' without absolute values."""
        if self.tokens_per_s_interval is None:
            return f"±{self.tokens_per_s_rel:.0%}"
        return fmt_range(*self.tokens_per_s_interval)

    def duration_interval(self, seconds: float, tokens_per_s: float) -> tuple[float, float] | None:
        """The 80% interval of a time that a run at `tokens_per_s` takes `seconds` for (a step, the time to train):
        time goes as one over throughput, so the slow end of the throughput interval gives the long time."""
        if self.tokens_per_s_interval is None or tokens_per_s <= 0 or self.tokens_per_s_interval[0] <= 0:
            return None
        lo, hi = self.tokens_per_s_interval
        return seconds * tokens_per_s / hi, seconds * tokens_per_s / lo

    def memory_high_bytes(self, peak_bytes: float) -> float:
        """The high end of the 80% interval of a peak memory predicted at `peak_bytes` (the relative bar where
        there is no interval): what `--risk` and "may not fit" compare with the GPU."""
        if self.peak_memory_interval is not None:
            return self.peak_memory_interval[1]
        return peak_bytes * (1 + self.peak_memory_rel)

    def memory_counted_as(self, peak_bytes: float, counted_bytes: float) -> Uncertainty:
        """The same trust with the memory interval around `counted_bytes`, the peak predicted at `peak_bytes` as a
        measurement counts it (fit/memory_kind.py comparable_peak_bytes): the same relative spread, so that the
        interval and the prediction beside it count one quantity (validate's allocator peaks, audit)."""
        if self.peak_memory_interval is None or peak_bytes <= 0:
            return self
        lo, hi = self.peak_memory_interval
        scale = counted_bytes / peak_bytes
        return replace(self, peak_memory_interval=(lo * scale, hi * scale))

    def memory_text(self) -> str:
        if self.peak_memory_interval is None:
            return f"±{self.peak_memory_rel:.0%}"
        return fmt_bytes_range(*self.peak_memory_interval)

    def may_not_fit(self, report: MemoryReport) -> bool:
        """It fits, but the high end of the 80% interval of its memory passes the GPU."""
        return self.may_not_fit_at(report.total_bytes, report.capacity_bytes)

    def may_not_fit_at(self, peak_bytes: float, capacity_bytes: float) -> bool:
        """A peak predicted at `peak_bytes` fits `capacity_bytes`, but the high end of its 80% interval passes it."""
        return peak_bytes <= capacity_bytes < self.memory_high_bytes(peak_bytes)

    def source_text(self) -> str:
        """'(megatron/a100-80gb, 19 runs)', '(torchtitan/b200: ...; widened for GPU without runs)'."""
        runs = f", {self.runs} runs" if self.calibrated or self.runs else ""
        widened = f"; widened for {', '.join(self.widened_for)}" if self.widened_for else ""
        return f"({self.basis}{runs}{widened})"

    def describe(self) -> str:
        """'80% 181–196k (megatron/a100-80gb, 19 runs)': the throughput interval and where it comes from."""
        level = f"{self.level:.0%} " if self.tokens_per_s_interval is not None else ""
        return f"{level}{self.tokens_text()} {self.source_text()}"

    def describe_memory(self) -> str:
        """'80% 58.93–68.95 GiB (megatron/h100-sxm, 20 runs)': the memory interval and where it comes from."""
        level = f"{self.level:.0%} " if self.peak_memory_interval is not None else ""
        return f"{level}{self.memory_text()} {self.source_text()}"


def distances(domain: Domain, engine: Engine, hw: HardwareProfile, model: ModelSpec | None, plan: Plan | None,
              *, engine_runs: int) -> dict[str, float]:  # fmt: skip
    """The named distances of a prediction from the runs behind the fit, each with its amount (1, or doublings
    of GPUs beyond the largest run)."""
    out: dict[str, float] = {}
    if engine_runs == 0:
        out["engine"] = 1.0
    if hw.name not in domain.all_gpus:  # a calibration proxy's runs are not this GPU's: the distance stands
        out["gpu"] = 1.0
    elif engine_runs and hw.name not in domain.gpus:
        out["engine_gpu"] = 1.0
    if model is not None and engine_runs and model_family(model) not in domain.families:
        out["family"] = 1.0
    if (
        model is not None
        and plan is not None
        and model.moe is not None
        and plan.ep > domain.max_ep - (domain.max_ep == 0)
    ):
        out["moe"] = 1.0  # no MoE run (max_ep 0: any MoE plan), or more experts apart than any run
    if plan is not None and engine_runs and plan.precision not in domain.precisions:
        out["precision"] = 1.0
    if plan is not None and domain.max_gpus and plan.gpus > domain.max_gpus:
        out["scale"] = math.log2(plan.gpus / domain.max_gpus)
    return out


def _spread(base: float, widen: dict[str, float], found: dict[str, float]) -> float:
    return math.sqrt(base**2 + sum((amount * widen.get(name, 0.0)) ** 2 for name, amount in found.items()))


def _interval(value: float | None, half_log: float) -> tuple[float, float] | None:
    return None if value is None else (value * math.exp(-half_log), value * math.exp(half_log))


def uncertainty(
    engine: Engine,
    hw: HardwareProfile,
    *,
    model: ModelSpec | None = None,
    plan: Plan | None = None,
    tokens_per_s: float | None = None,
    peak_bytes: float | None = None,
) -> Uncertainty:
    """The 80% interval of a prediction for this engine on this hardware (absolute when the predicted
    tokens/s and peak bytes are given), widened for the plan's distances from the engine's runs."""
    b = behaviour_on(hw, engine)
    if b is None or b.interval is None:
        return _legacy(engine, hw, tokens_per_s, peak_bytes)
    iv: Interval = b.interval
    found = distances(b.domain, engine, hw, model, plan, engine_runs=b.runs)
    half = iv.z * _spread(iv.base, iv.widen, found)
    half_mem = iv.z * _spread(iv.memory_base, iv.memory_widen, found)
    # the entry the prediction runs on (fitted_factors.py gpu_factors: the GPU's own, or its die's): a sibling's
    # label on a pooled prediction said "megatron/h100-sxm as h200, 1 runs" of a figure that run never moved (audit)
    group = gpu_factors(hw, engine)
    own = group is not None
    if group is not None and group.runs:
        where = hw.name if hw.name in engine.fitted else f"{hw.kernels_of} as {hw.name}"
        basis, runs = f"{engine.name}/{where}", group.runs
    else:
        pooled = ", ".join(b.domain.gpus) or "no runs: the mean of the engines fitted"
        basis, runs = f"{engine.name}/{hw.name}: behaviour pooled over {pooled}", b.runs
    return Uncertainty(
        math.exp(half) - 1,
        math.exp(half_mem) - 1,
        basis,
        runs,
        own and group is not None and group.runs > 0,
        tuple(DISTANCES[n] for n in found),
        _interval(tokens_per_s, half),
        _interval(peak_bytes, half_mem),
    )


def _legacy(engine: Engine, hw: HardwareProfile, tokens_per_s: float | None, peak_bytes: float | None) -> Uncertainty:
    """Error bars of an engine profile without an interval model: its group's residual spread (about 68%)."""
    name, proxy = hw.name, hw.calibration_proxy
    fitted, widen, basis = engine.fitted.get(name), 1.0, f"{engine.name}/{name}"
    if (fitted is None or fitted.tokens_per_s_rel is None) and proxy:
        fitted, widen, basis = engine.fitted.get(proxy), PROXY_WIDENING, f"{engine.name}/{proxy} as {name}"
    if fitted is None or fitted.tokens_per_s_rel is None:
        rel, mem, basis, runs, calibrated = (
            UNCALIBRATED_TOKENS_REL,
            UNMEASURED_MEMORY_REL,
            f"{engine.name}/{name}: no calibration runs",
            0,
            False,
        )
    else:
        memory = fitted.peak_memory_rel if fitted.peak_memory_rel is not None else UNMEASURED_MEMORY_REL
        rel, mem, runs, calibrated = widen * fitted.tokens_per_s_rel, widen * memory, fitted.runs, True
    return Uncertainty(
        rel,
        mem,
        basis,
        runs,
        calibrated,
        (),
        None if tokens_per_s is None else (tokens_per_s * (1 - rel), tokens_per_s * (1 + rel)),
        None if peak_bytes is None else (peak_bytes * (1 - mem), peak_bytes * (1 + mem)),
    )


@dataclass(frozen=True)
class Plausibility:
    ok: bool
    mfu: float
    mfu_ceiling: float | None  # best published MFU of this hardware class at this precision (None: not known)
    source: str

    def as_dict(self) -> dict[str, object]:
        """`mfu_compared`: the MFU set against the ceiling, which beyond the ceilings' sequence length leaves out the
        masked half of attention the kernels skip (Estimate.plausibility), so it can be below the plan's `mfu`."""
        return {"ok": self.ok, "mfu_ceiling": self.mfu_ceiling, "mfu_compared": self.mfu, "source": self.source}


def plausibility(mfu: float, hw: HardwareProfile, precision: str) -> Plausibility:
    """A predicted MFU above the best published for the hardware is implausible: the plan may be fine, but the
    prediction claims more than anyone has measured, so something in the model is likely optimistic."""
    ceiling = hw.plausibility.mfu_ceiling.get(precision)  # type: ignore[call-overload]
    if ceiling is None:
        return Plausibility(True, mfu, None, "no published ceiling for this hardware and precision")
    return Plausibility(mfu <= ceiling, mfu, ceiling, hw.plausibility.source)
