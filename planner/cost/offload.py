"""What offloading to host memory costs in time: the activations' trips over the host link each micro-batch, and
the optimizer step of a CPU-held share (cost.recipe_options holds what stays on the GPU).

Activation offload (Megatron --fine-grained-activation-offloading, docs/user-guide/features/
fine_grained_activation_offloading.md): the offloaded share of the offload groups a rank's layers save goes to pinned
host memory by async D2H on a side stream during the forward and comes back by H2D before the backward; a transfer
hides behind the compute it runs beside, and only its excess shows (the "host" row of the exposed communication).
Layer-wise CPU offload (--cpu-offloading-num-layers, Transformer Engine's cpu_offload.py) moves all that its first
N layers keep the same way: layer i's offload may run until the forward of layer L - N + i and its reload from the
backward of layer L - 1 - N + i (OffloadSynchronizer._default_offload_sync_init @00382b96), one stream each way, so
the N layers' trips hide behind the pass unless they take longer than it.

Optimizer offload (--optimizer-cpu-offload --optimizer-offload-fraction, optimizer/cpu_offloading/README.md):
Megatron's HybridDeviceOptimizer steps the GPU share and the CPU share at once; the CPU share's gradients go down
and its updated 16-bit parameters come back up, overlapped with the CPU update (--overlap-cpu-optimizer-d2h-h2d):
the step takes the longer of the GPU share's update and the CPU share's max(transfers, CPU Adam).
"""

from __future__ import annotations

from planner.cost.compute import StageCompute
from planner.cost.memory import activation_pieces, first_layers, mix_pieces
from planner.cost.recipe_options import CPU_ADAM_BYTES_PER_PARAM, HOST_OPTIMIZER_BYTES_PER_S
from planner.cost.stages import plan_layout
from planner.engine import Engine
from planner.hardware import HardwareProfile
from planner.plan import Plan
from planner.specs import ModelSpec


def activation_offload_s(
    model: ModelSpec, hw: HardwareProfile, plan: Plan, engine: Engine, compute: StageCompute, *, stage: int
) -> tuple[float, float]:
    """(transfer seconds, exposed seconds) of one micro-batch's activation offload on a pipeline rank: the
    offloaded bytes down during the forward and up during the backward, each hidden behind that pass."""
    m, bw = engine.memory, hw.gpu.host_bandwidth_bytes_per_s
    if not (m.activation_offload or m.offload_layers) or not bw:
        return 0.0, 0.0
    sizes = plan_layout(model, plan, engine).chunk_sizes(stage)
    pieces = activation_pieces(model, plan, engine)
    _keep, _work, moved = mix_pieces(
        compute.mix, pieces, chunk_sizes=sizes, share=m.activation_offload, offloaded=first_layers(model, engine)
    )
    one_way = moved / bw
    exposed = max(0.0, one_way - compute.forward_s) + max(0.0, one_way - compute.backward_s - compute.recompute_s)
    return 2 * one_way, exposed


def offloaded_optimizer_s(gpu_update_s: float, hw: HardwareProfile, engine: Engine, *, local_params: float,
                          grad_bytes: float, param_bytes: float) -> float:  # fmt: skip
    """The optimizer step with a share `f` of the local (sharded) parameters on the CPU: max(the GPU share's
    update, max(the CPU share's gradient down + parameter up over the host link, its CPU Adam update))."""
    f, bw = engine.memory.optimizer_offload, hw.gpu.host_bandwidth_bytes_per_s
    if not f or not bw:
        return gpu_update_s
    cpu_params = f * local_params
    transfer = cpu_params * (grad_bytes + param_bytes) / bw
    cpu_update = cpu_params * CPU_ADAM_BYTES_PER_PARAM / HOST_OPTIMIZER_BYTES_PER_S
    return max((1.0 - f) * gpu_update_s, max(transfer, cpu_update))
