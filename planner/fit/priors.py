"""What `planner calibrate` may move on a user's runs: the physical parameters of a hardware profile (within the
bounds the profile states, only when asked for by name: physics is never fitted to end-to-end runs by default) and,
per (engine, hardware) group of the runs, that engine's compute factor and per-step overhead on that GPU.

Hardware parameters: matmul_scale and attention_scale multiply the profile's measured GEMM and attention
curves; hbm, intra_node, inter_node, half_bandwidth_bytes and the fixed costs replace the Efficiency field
of the same name. Each has a prior: the profile's value, with a width of half its bounds, so the data move a
measured number only when they must (and the fit reports a parameter that ends on a bound).

Group factors (engine.Fitted): the compute factor of engine e on GPU h is its current one (the GPU's own entry,
else the engine's pooled behaviour: cost/fitted_factors.py) times exp(c_eh), c_eh ~ N(0, SIGMA_GROUP); the per-step
overhead starts from the group's own and is pulled toward it with a width of OVERHEAD_PRIOR_S. The engines' pooled
behaviour across GPUs is fitted by `planner calibrate --behaviour` (fit/partial_pooling.py), not here.
"""

from __future__ import annotations

import math
from typing import Any

from planner.cost.fitted_factors import compute_factor, gpu_factors
from planner.engine import Engine, Fitted
from planner.fit.observations import Observation
from planner.fit.partial_pooling import PARAMETERS
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
    "dtensor_op_overhead_s": (0.0, 1e-3),
    "sac_op_overhead_s": (0.0, 1e-3),
    "collective_overhead_s": (0.0, 0.05),
}
SCALES = ("matmul_scale", "attention_scale")
ENGINE_PARAMS = ("compute", "overhead_s")
# Prior width of a group's compute change, in log units (see the module doc): a user's own runs of their own GPU
# are the best evidence there is, so the prior only keeps a fit of few runs from running off. The overhead's prior
# pulls toward the group's current one with a width of OVERHEAD_PRIOR_S.
SIGMA_GROUP = 0.3
COMPUTE_BOUNDS = (-1.0, 1.0)  # log change of a group's compute factor: x0.37 .. x2.7
# ... and never below the floor of the factor itself (partial_pooling.py PARAMETERS: no stack runs above the GPU's
# measured ceiling); a fit below it gave an MFU above 100% (audit)
COMPUTE_FLOOR = next(p.bounds[0] for p in PARAMETERS if p.name == "compute")
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
        first = {(o.engine.name, o.hardware.name): o for o in reversed(obs)}
        self._start_compute = {g: compute_factor(o.hardware, o.engine) for g, o in first.items()}
        self._start_overhead = {g: _own_overhead(o) for g, o in first.items()}
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
            for e, h in self.groups:
                lo = max(COMPUTE_BOUNDS[0], math.log(COMPUTE_FLOOR / self._start_compute[(e, h)]))
                self._add(("c", e, h), max(0.0, lo), lo, max(lo, COMPUTE_BOUNDS[1]), SIGMA_GROUP)
        if self.fit_overhead:
            for e, h in self.groups:
                start = self._start_overhead[(e, h)]
                self._add(("o", e, h), start, *OVERHEAD_BOUNDS_S, OVERHEAD_PRIOR_S)

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

    def label(self, slot: tuple[str, ...]) -> str:
        """'h100-sxm matmul_scale', 'compute of megatron on h100-sxm'."""
        if slot[0] == "hw":
            return f"{slot[1]} {slot[2]}"
        what = "compute" if slot[0] == "c" else "overhead_s"
        return f"{what} of {slot[1]} on {slot[2]}"

    def start_factor(self, e: str, h: str) -> float:
        return self._start_compute[(e, h)]

    def group_fitted(self, v: dict[tuple[str, ...], float], e: str, h: str) -> Fitted:
        """The group's factors at parameter values `v` (unfitted ones as they were)."""
        return Fitted(
            compute=self._start_compute[(e, h)] * math.exp(v.get(("c", e, h), 0.0)),
            overhead_s=v.get(("o", e, h), self._start_overhead[(e, h)]),
        )

    def engine(self, v: dict[tuple[str, ...], float], o: Observation) -> Engine:
        fitted = self.group_fitted(v, o.engine.name, o.hardware.name)
        return o.engine.model_copy(update={"fitted": {**o.engine.fitted, o.hardware.name: fitted}})


def _own_overhead(o: Observation) -> float:
    own = gpu_factors(o.hardware, o.engine)
    return own.overhead_s if own is not None else 0.0
