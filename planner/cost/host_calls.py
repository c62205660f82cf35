"""Host time a GPU waits on beyond its kernels' own launches, per layer: casts made one call each, and the dispatch
of ops on DTensors (cost.dtensor_host), and op-level selective checkpointing's dispatch modes (cost.sac_host)."""

from __future__ import annotations

from planner.cost import dtensor_host, sac_host
from planner.cost.params import kind_gemm_count
from planner.engine import Kernels
from planner.layers import LayerKind
from planner.precision import is_low_precision
from planner.specs import ModelSpec

# Quantization calls per linear layer where each cast is its own call (launch/float8.py _Float8Matmul): the input
# and the weight in the forward; the output gradient, the weight and the input again in the backward.
CAST_CALLS_FORWARD, CAST_CALLS_BACKWARD = 2, 3


def host_calls_s(
    model: ModelSpec, kind: LayerKind, kernels: Kernels, precision: str, dtensor_op_s: float, *, sp: bool,
    recompute: str, sac_op_s: float = 0.0,
) -> tuple[float, float, float]:  # fmt: skip
    """(forward, backward, recompute beyond a rerun forward's) host time the GPU waits on beyond the kernels' own
    launches: casts made one call each (engine kernels.cast_host_s), the dispatch of ops on DTensors
    (cost.dtensor_host; op-level selective recompute dispatches the forward again), and op-level SAC's policy modes
    over every op of the forward and of its recompute (cost.sac_host; `sac_op_s` 0 where the plan runs none)."""
    linears = kind_gemm_count(model, kind) if kernels.cast_host_s and is_low_precision(precision) else 0
    again = recompute if recompute == "full" or sac_host.runs_op_sac(recompute, kernels) else "none"
    dt_fwd, dt_bwd, dt_rc = dtensor_host.layer_s(model, kind, dtensor_op_s, sp=sp, recompute=again)
    sac = sac_op_s * sac_host.forward_ops(model, kind) if sac_op_s else 0.0
    return (
        CAST_CALLS_FORWARD * linears * kernels.cast_host_s + dt_fwd + sac,
        CAST_CALLS_BACKWARD * linears * kernels.cast_host_s + dt_bwd,
        dt_rc + sac,
    )
