"""What `planner calibrate` may move: the physical parameters of a hardware profile (within the bounds the
profile states) and the per-(engine, hardware) factors of the engines that ran on it.

Hardware parameters: matmul_scale and attention_scale multiply the profile's measured GEMM and attention
curves; hbm, intra_node, inter_node, half_bandwidth_bytes and the fixed costs replace the Efficiency field
of the same name. Each has a prior: the profile's value, with a width of half its bounds, so the data move a
measured number only when they must (and the fit reports a parameter that ends on a bound).

Engine factors (engine.Fitted): the compute factor of engine e on hardware h is exp(a_h + b_e + c_eh), a
term every stack shares on that hardware, one the engine carries on every hardware, and the group's own
(Gelman & Hill 2007, varying intercepts). Groups without runs then borrow the shared terms instead of
falling back to 1, which is what lets a fit predict a family it never saw.
"""

from __future__ import annotations

import math
from typing import Any

from planner.engine import Engine, Fitted
from planner.fit.observations import Observation
from planner.hardware import AttentionKernel, Efficiency, HardwareProfile, MatmulPoint

# Default bounds for a hardware parameter the profile gives none for (the CPU profile's fixed costs).
HARDWARE_BOUNDS: dict[str, tuple[float, float]] = {
    "matmul_scale": (0.5, 1.5),
    "attention_scale": (0.5, 1.5),
    "hbm": (0.1, 1.0),
    "intra_node": (0.05, 1.0),
    "inter_node": (0.02, 1.0),
    "half_bandwidth_bytes": (0.0, 256e6),
    "step_overhead_s": (0.0, 30.0),
    "kernel_overhead_s": (0.0, 1e-3),
    "collective_overhead_s": (0.0, 0.05),
}
SCALES = ("matmul_scale", "attention_scale")
ENGINE_PARAMS = ("compute", "overhead_s")
# Prior widths of the engine factors, in log units (see the module doc): the shared hardware term, the engine
# term, the group term. The overhead's prior pulls toward none with a width of OVERHEAD_PRIOR_S.
SIGMA_HARDWARE, SIGMA_ENGINE, SIGMA_GROUP = 0.3, 0.15, 0.1
OVERHEAD_PRIOR_S = 1.0
OVERHEAD_BOUNDS_S = (0.0, 10.0)
# The spread of one run's log error that the priors are weighed against (a MAP fit with this data noise).
DATA_SIGMA = 0.1
CLAMP = 0.98  # no scaled efficiency above this fraction of peak


def start_value(eff: Efficiency, name: str) -> float:
    return 1.0 if name in SCALES else float(getattr(eff, name))


def bounds_of(eff: Efficiency, name: str) -> tuple[float, float]:
    return tuple(eff.bounds.get(name, HARDWARE_BOUNDS[name]))  # type: ignore[return-value]


def apply_params(eff: Efficiency, values: dict[str, float]) -> Efficiency:
    """A new Efficiency with hardware parameter `values` applied (scales multiply the measured curves)."""
    update: dict[str, Any] = {}
    s = values.get("matmul_scale")
    if s is not None and s != 1.0:
        for table in ("matmul", "matmul_fp8"):
            pts = getattr(eff, table)
            if pts:
                update[table] = tuple(
                    MatmulPoint.model_construct(flops=p.flops, efficiency=min(CLAMP, p.efficiency * s)) for p in pts
                )
    a = values.get("attention_scale")
    if a is not None and a != 1.0:
        update["attention"] = {
            k: AttentionKernel.model_construct(
                forward=min(CLAMP, v.forward * a), backward=min(CLAMP, v.backward * a), half_seq=v.half_seq
            )
            for k, v in eff.attention.items()
        }
    for k, v in values.items():
        if k not in SCALES:
            update[k] = v
    return eff.model_copy(update=update)


def group_log_factor(a_h: float, b_e: float, c_eh: float) -> float:
    return a_h + b_e + c_eh


def factor_from_logs(logs: float) -> float:
    return math.exp(logs)


class ParameterVector:
    """The parameter vector: hardware parameters per profile, then a_h, b_e, c_eh and overheads."""

    def __init__(self, obs: list[Observation], bases: dict[str, HardwareProfile], names: tuple[str, ...]) -> None:
        self.bases = bases
        self.hw_names = [n for n in names if n not in ENGINE_PARAMS]
        self.fit_compute = "compute" in names
        self.fit_overhead = "overhead_s" in names
        self.hardware = sorted({o.hardware.name for o in obs})
        self.engines = sorted({o.engine.name for o in obs})
        self.groups = sorted({(o.engine.name, o.hardware.name) for o in obs})
        self.slots: list[tuple[str, ...]] = []
        self.x0: list[float] = []
        self.lo: list[float] = []
        self.hi: list[float] = []
        self.sigma: list[float] = []
        for h in self.hardware:
            eff = bases[h].efficiency
            for n in self.hw_names:
                lo, hi = bounds_of(eff, n)
                self._add(("hw", h, n), min(max(start_value(eff, n), lo), hi), lo, hi, max((hi - lo) / 2, 1e-12))
        if self.fit_compute:
            for h in self.hardware:
                self._add(("a", h), 0.0, -1.5, 1.5, SIGMA_HARDWARE)
            for e in self.engines:
                self._add(("b", e), 0.0, -1.0, 1.0, SIGMA_ENGINE)
            for e, h in self.groups:
                self._add(("c", e, h), 0.0, -1.0, 1.0, SIGMA_GROUP)
        if self.fit_overhead:
            for e, h in self.groups:
                self._add(("o", e, h), 0.0, *OVERHEAD_BOUNDS_S, OVERHEAD_PRIOR_S)

    def _add(self, slot: tuple[str, ...], x0: float, lo: float, hi: float, sigma: float) -> None:
        self.slots.append(slot)
        self.x0.append(x0)
        self.lo.append(lo)
        self.hi.append(hi)
        self.sigma.append(sigma)

    def values(self, x: Any) -> dict[tuple[str, ...], float]:
        return {s: float(v) for s, v in zip(self.slots, x)}

    def efficiency(self, v: dict[tuple[str, ...], float], h: str) -> Efficiency:
        return apply_params(self.bases[h].efficiency, {n: v[("hw", h, n)] for n in self.hw_names})

    def log_factor(self, v: dict[tuple[str, ...], float], e: str, h: str) -> tuple[float, float, float]:
        if not self.fit_compute:
            return 0.0, 0.0, 0.0
        return v.get(("a", h), 0.0), v.get(("b", e), 0.0), v.get(("c", e, h), 0.0)

    def engine(self, v: dict[tuple[str, ...], float], o: Observation) -> Engine:
        a, b, c = self.log_factor(v, o.engine.name, o.hardware.name)
        fitted = Fitted(compute=math.exp(a + b + c), overhead_s=v.get(("o", o.engine.name, o.hardware.name), 0.0))
        return o.engine.model_copy(update={"fitted": {o.hardware.name: fitted}})
