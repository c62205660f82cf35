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

from planner.hardware import AttentionKernel, Efficiency, MatmulPoint

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
