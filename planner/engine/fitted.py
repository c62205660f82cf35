"""What `planner calibrate` fits for a training stack: its behaviour on any GPU, fitted once across every GPU it ran
on, how far its predictions can be trusted there (issue 21), and each GPU's own deviation (``Fitted``).

A prediction is the GPU's physics (the hardware profile: datasheet peaks and bandwidths, kernel ceilings from
public micro-benchmarks, never fitted to end-to-end runs) run the way the engine runs it. What the engine adds
is a few named numbers, each bounded and explained by a mechanism with its source (``Parameter``):

- ``compute``: the engine's kernels' time over the hardware's measured curves (1 / their efficiency as a
  fraction of the measured ceiling): eager vs fused elementwise ops, kernel choice, launch gaps between kernels;
- ``host_step_s``, ``host_microbatch_s``, ``host_layer_s``: host (CPU) time the GPU waits on, per step, per
  micro-batch and per layer of each micro-batch (data loading and logging; schedule and hook dispatch; the
  Python of each layer's forward and backward) — a CPU cost that does not shrink on a faster GPU. A plan whose
  layers run as captured CUDA graphs (`kernels.cuda_graphs`) replays each layer with one launch: no per-layer
  host time (cost/fitted_factors.py);
- ``tp_overlap_exposed``: the share of the TP communication that the engine's TP overlap could hide behind the
  layer's GEMMs but does not (Megatron --tp-comm-overlap through Transformer Engine userbuffers, torchtitan's async
  TP): 0 hides all the GEMMs can cover, 1 hides nothing (cost/overlap.py `layer_comm`).

`planner calibrate --behaviour` fits them across all GPUs at once with partial pooling: each GPU's own
deviation of ``compute`` is shrunk toward none (a hierarchical prior), kept in the engine's ``fitted`` block
per GPU; an engine × GPU pair without runs gets the pooled behaviour plus that GPU's physics. The ``domain`` says
what the runs behind the fit covered, and ``interval`` how wide the 80% prediction interval is inside it and how
much each named distance from it widens the interval (cost/uncertainty.py applies them).
"""

from __future__ import annotations

from pydantic import Field, model_validator

from planner.specs import Frozen


class Parameter(Frozen):
    """One fitted number of an engine's behaviour, with its bounds, standard error and why it exists."""

    value: float = Field(allow_inf_nan=False)
    bounds: tuple[float, float] = Field(description="what calibrate may move it within")
    stderr: float | None = Field(None, ge=0, allow_inf_nan=False, description="1 s.e. of the fit (None: not fitted)")
    mechanism: str = Field(description="what physical or software mechanism the number stands for")
    source: str = Field(description="where the mechanism is documented (engine source, paper)")

    @model_validator(mode="after")
    def _check(self) -> Parameter:
        lo, hi = self.bounds
        if not lo <= self.value <= hi:
            raise ValueError(f"value {self.value:g} outside its bounds [{lo:g}, {hi:g}]")
        return self


class Domain(Frozen):
    """What the runs behind the fit covered; a prediction outside it gets a wider interval."""

    gpus: tuple[str, ...] = Field((), description="GPUs this engine has runs on")
    all_gpus: tuple[str, ...] = Field((), description="GPUs any engine of the fit has runs on")
    families: tuple[str, ...] = Field((), description="model families (cost.uncertainty.model_family) of its runs")
    precisions: tuple[str, ...] = ()
    max_gpus: int = Field(0, ge=0, description="the largest run, in GPUs")
    max_ep: int = Field(0, ge=0, description="the largest expert-parallel degree of its MoE runs; 0 = no MoE run")


class Interval(Frozen):
    """The 80% prediction interval: log(measured / predicted) has spread sqrt(base² + Σ widen²) where each
    applicable distance adds its component, scaled by z (calibrated so that 80% of the cross-validated runs fall
    inside). ``scale`` is per doubling of GPUs beyond the largest run."""

    z: float = Field(gt=0, allow_inf_nan=False)
    base: float = Field(ge=0, allow_inf_nan=False, description="log spread inside the domain (leave-one-run-out)")
    widen: dict[str, float] = Field(default_factory=dict, description="distance -> log spread it adds")
    memory_base: float = Field(ge=0, allow_inf_nan=False, description="log spread of peak memory")
    memory_widen: dict[str, float] = Field(default_factory=dict)
    coverage: dict[str, float] = Field(
        default_factory=dict, description="share of runs inside the interval, per cross-validation split"
    )
    source: str = ""


class Behaviour(Frozen):
    """engine_profiles/NAME.yaml `behaviour:`: what this engine does on any GPU."""

    compute: Parameter
    host_step_s: Parameter
    host_microbatch_s: Parameter
    host_layer_s: Parameter
    tp_overlap_exposed: Parameter | None = Field(
        None, description="share of the hideable TP communication left exposed under TP overlap (None: 0)"
    )
    runs: int = Field(0, ge=0, description="runs of this engine behind the fit (0: the mean of the engines fitted)")
    source: str = Field("", description="what it was fitted to, and when")
    domain: Domain = Domain()
    interval: Interval | None = None


class Fitted(Frozen):
    """What `planner calibrate` fitted for this engine on one hardware profile, and how well it holds: the
    engine's pooled behaviour (`behaviour`) with this GPU's own deviation, shrunk toward none. A GPU without an
    entry (or its calibration proxy's) runs the pooled behaviour."""

    compute: float = Field(
        1.0,
        gt=0,
        allow_inf_nan=False,
        description="multiplies compute time on this GPU (replaces behaviour.compute): what the stack's "
        "kernels lose or gain beyond the hardware's measured curves",
    )
    overhead_s: float = Field(
        0.0,
        ge=0,
        allow_inf_nan=False,
        description="fixed time per step on this GPU, on top of the behaviour's host times (data loading, "
        "logging, host synchronisation)",
    )
    tokens_per_s_rel: float | None = Field(
        None, ge=0, allow_inf_nan=False, description="error-bar half-width of predicted throughput"
    )
    peak_memory_rel: float | None = Field(
        None, ge=0, allow_inf_nan=False, description="error-bar half-width of predicted peak memory"
    )
    runs: int = Field(0, ge=0, description="runs the factors were fitted to")
    source: str = Field("", description="what they were fitted to, and when")
