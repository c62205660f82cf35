"""The engine's behaviour applied to a plan on a GPU (engine/fitted.py): how much longer the engine's kernels
take than the hardware's measured curves, and the host time the GPU waits on.

Which numbers apply: a GPU with its own fitted entry (`engine.fitted[gpu]`) uses that entry's compute factor,
the pooled behaviour's otherwise; the host times are the engine's on every GPU
(they are CPU time), plus a GPU's own per-step overhead where calibrate fitted one. An engine profile without a
behaviour block (written before it existed, or by hand) has only its fitted entries: neutral elsewhere.
"""

from __future__ import annotations

from planner.engine import Behaviour, Engine, Fitted
from planner.hardware import HardwareProfile
from planner.plan import Plan


def behaviour_on(hw: HardwareProfile, engine: Engine) -> Behaviour | None:
    """The engine's pooled behaviour where it applies: on a GPU. It is fitted to GPU runs, whose host time is
    what the GPU waits on; on a CPU the host is the device, and the cpu profile's own fitted costs
    (`step_overhead_s`, `kernel_overhead_s`, `collective_overhead_s`, fitted to CPU launches) are its host time."""
    return None if hw.runs_on_cpu else engine.behaviour


def gpu_factors(hw: HardwareProfile, engine: Engine) -> Fitted | None:
    """The fitted entry of this GPU, or of the GPU whose kernels it runs (`kernels_of`: the same die, at a lower
    power limit or with fewer links); for an engine without a behaviour block (an older profile), its calibration
    proxy's (a sibling of the same architecture). With a behaviour block a GPU without its own entry runs the
    pooled behaviour: another GPU's deviation is that GPU's (issue 21), not its sibling's."""
    own = engine.fitted.get(hw.name) or (engine.fitted.get(hw.kernels_of) if hw.kernels_of else None)
    if own is not None or behaviour_on(hw, engine) is not None:
        return own
    return engine.fitted.get(hw.calibration_proxy) if hw.calibration_proxy else None


def compute_factor(hw: HardwareProfile, engine: Engine) -> float:
    """Compute time over the hardware's measured curves: the GPU's fitted factor, else the pooled behaviour's."""
    own = gpu_factors(hw, engine)
    if own is not None:
        return own.compute
    b = behaviour_on(hw, engine)
    return b.compute.value if b is not None else 1.0


def tp_overlap_exposed(engine: Engine) -> float:
    """The share of the TP communication the engine's TP overlap could hide but leaves exposed (0 without a
    fitted number: all that the GEMMs cover is hidden)."""
    b = engine.behaviour
    return b.tp_overlap_exposed.value if b is not None and b.tp_overlap_exposed is not None else 0.0


def host_layers(engine: Engine, layers: int) -> int:
    """Layers whose per-layer host time the GPU waits on: none when each layer's kernels are captured in a CUDA
    graph and replayed with one launch (Megatron --cuda-graph-impl, megatron/core/transformer/cuda_graphs.py;
    docs/user-guide/features/cuda_graph.md: the graph removes the host launch and Python cost of the kernels it
    captures, the GPU work is unchanged)."""
    return 0 if engine.kernels.cuda_graphs else layers


def host_overhead_s(hw: HardwareProfile, engine: Engine, plan: Plan | None = None, *, layers: int = 0) -> float:
    """Host time per step the GPU waits on: per step, plus per micro-batch and per layer of each micro-batch on
    the bottleneck pipeline rank (`layers`; none under CUDA graphs, host_layers); without a plan, the per-step
    part only (a lower bound)."""
    layers = host_layers(engine, layers)
    own = gpu_factors(hw, engine)
    seconds = own.overhead_s if own is not None else 0.0
    b = behaviour_on(hw, engine)
    if b is None:
        return seconds
    seconds += b.host_step_s.value
    if plan is not None:
        seconds += plan.num_microbatches * (b.host_microbatch_s.value + layers * b.host_layer_s.value)
    return seconds
