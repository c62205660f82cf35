"""The engines' behaviour fitted once across every GPU (issue 21 item 1): a maximum a posteriori fit with
partial pooling, on the GPUs' physics as the hardware profiles state it (never moved here).

For engine e on GPU h a run's step time is the cost model's step with compute factor exp(g_eh), plus the
engine's host time (engine/fitted.py):

    step = step_physics(f = exp(g_eh)) + host_step_e + m·(host_microbatch_e + L·host_layer_e)

with m micro-batches per step and L layers on the bottleneck pipeline rank (none when the layers run as CUDA
graphs: cost/fitted_factors.py host_layers). A run that overlaps TP communication with the GEMMs adds the engine's
exposed share s of what the overlap could hide: step_physics is tabulated with the overlap (s = 0) and without it
(s = 1), and is linear in s between (cost/overlap.py tp_overlap_s). Priors (Gelman & Hill 2007,
varying intercepts): a GPU's own deviation g_eh − b_e ~ N(0, SIGMA_GPU), shrunk toward none, so a GPU without
runs gets the pooled b_e (every factor stays within the compute bounds, at least 1); each engine's four numbers
~ N(μ, τ) around the mean of the engines, which an engine without runs gets (leave-one-engine-out). Least
squares on log(predicted / measured) step time, with the priors as extra residuals weighed against a data
noise of DATA_SIGMA.

The cost model's step time comes tabulated over compute factors (fit/step_tables.py), so a fit costs
milliseconds and cross-validation can refit dozens of times (fit/crossval.py). `predict_exact` checks the
table against the cost model's front door.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from planner.cost.coster import Coster
from planner.cost.uncertainty import model_family
from planner.fit.observations import Observation
from planner.fit.step_tables import Tables, physics


@dataclass(frozen=True)
class ParameterPrior:
    """One number of an engine's behaviour as the fit treats it: what calibrate may move it within, its prior
    (the centre and width of the engines' mean, and the spread τ between engines), and why it exists. compute is
    fitted in log units; its bounds (and centre) are of the factor itself."""

    name: str
    bounds: tuple[float, float]
    centre: float
    width: float
    spread: float
    mechanism: str
    source: str


PARAMETERS: tuple[ParameterPrior, ...] = (
    ParameterPrior(
        name="compute",
        bounds=(1.0, 2.5),
        centre=1.0,
        width=0.5,
        spread=0.3,
        mechanism="the engine's kernels' time over the GPU's measured GEMM, attention and memory-bound curves (1/x "
        "is their efficiency as a fraction of the measured ceiling, at most 1: no stack runs above what the GPU was "
        "measured to reach): eager or fused elementwise ops, kernel choice (cuBLAS, cuDNN, Triton), launch gaps "
        "between kernels",
        source="hardware curves: the profile's sources (MAMF, FlashAttention papers); engine kernels: its profile's "
        "`kernels:` block (Megatron/TE fused kernels, torchtitan eager PyTorch ops, llm-foundry FSDP1)",
    ),
    ParameterPrior(
        name="host_step_s",
        bounds=(0.0, 2.0),
        centre=0.0,
        width=1.0,
        spread=0.3,
        mechanism="host time per optimizer step the GPUs wait on: data loading, logging and metric reductions, "
        "optimizer bookkeeping (grad-norm, clipping, scheduler) and the synchronisation that ends a step",
        source="Megatron-LM training.py train_step and its timers; torchtitan train.py train_step; Composer Trainer",
    ),
    ParameterPrior(
        name="host_microbatch_s",
        bounds=(0.0, 0.1),
        centre=0.0,
        width=0.05,
        spread=0.02,
        mechanism="host time per micro-batch: the schedule's dispatch, FSDP/DDP pre- and post-backward hooks and "
        "gradient-accumulation bookkeeping, paid once per micro-batch",
        source="Megatron-LM core/pipeline_parallel/schedules.py; torch FSDP2 _fsdp_state.py hooks; DDP reducer",
    ),
    ParameterPrior(
        name="host_layer_s",
        bounds=(0.0, 0.005),
        centre=0.0,
        width=0.002,
        spread=0.001,
        mechanism="host time per layer of each micro-batch (forward and backward): Python dispatch of the layer's "
        "ops and modules and its FSDP unit's hooks when the GPU kernels are shorter than their launch (CUDA launch "
        "~5-10 us per kernel, eager PyTorch tens of kernels per layer)",
        source="PyTorch eager dispatch and CUDA launch latency (Ansel et al. 2024, PyTorch 2, Sec. 1); "
        "torch FSDP2 per-unit hooks",
    ),
    ParameterPrior(
        name="tp_overlap_exposed",
        bounds=(0.0, 1.0),
        centre=0.5,
        width=0.5,
        spread=0.3,
        mechanism="share of the TP communication the GEMMs could cover that the engine's TP overlap leaves exposed: "
        "the chunks of a decomposed collective that wait (the first all-gather shard, the last reduce-scatter split), "
        "the SMs the communication kernels take from the GEMMs they hide behind, and synchronisation between the "
        "chunks; identified by runs of the same plan with and without the overlap",
        source="Transformer Engine userbuffers (transformer_engine/pytorch/module/base.py initialize_ub: ring-exchange "
        "all-gathers, 4 pipelined reduce-scatter splits, 16 SMs) under Megatron-LM --tp-comm-overlap; torchtitan "
        "async TP (torch/distributed/_symmetric_memory fused_all_gather_matmul / fused_matmul_reduce_scatter; "
        "torchtitan benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md); Wang et al. 2022 (overlap by "
        "decomposition)",
    ),
)
NAMES = tuple(p.name for p in PARAMETERS)
SIGMA_GPU = 0.08  # prior width of a GPU's own log deviation of compute: GEMM ceilings move ~5-10% with software
DATA_SIGMA = 0.1  # the log spread of one run's error the priors are weighed against


@dataclass(frozen=True)
class PooledFit:
    """What the fit found: each engine's four numbers (log compute, host seconds), the engines' mean, each
    (engine, GPU)'s log deviation, their standard errors, and the runs behind each."""

    engine_params: dict[str, tuple[float, ...]]  # engine -> (log compute, host_step, host_mb, host_layer, tp exposed)
    mean_params: tuple[float, ...]
    deviations: dict[tuple[str, str], float]
    engine_stderr: dict[str, tuple[float, ...]]
    deviation_stderr: dict[tuple[str, str], float]
    runs: dict[str, int]
    group_runs: dict[tuple[str, str], int]
    proxies: dict[str, str]
    at_bound: tuple[str, ...] = ()

    def params(self, engine: str) -> tuple[float, ...]:
        return self.engine_params.get(engine, self.mean_params)

    def deviation(self, engine: str, gpu: str) -> float:
        """The GPU's own log deviation, else none: the pooled behaviour (cost/fitted_factors.py gpu_factors)."""
        return self.deviations.get((engine, gpu), 0.0)

    def predict(self, t: Tables) -> Any:
        """Predicted step seconds of every run of `t`."""
        p = np.array([self.params(e) for e in t.engines])
        log_f = p[:, 0] + np.array([self.deviation(e, h) for e, h in zip(t.engines, t.gpus)])
        return physics(t, log_f, p[:, 4]) + p[:, 1] + t.micro * (p[:, 2] + t.layers * p[:, 3])


def _on_bounds(x: Any, lo: Any, hi: Any) -> Any:
    """The fit's values, those within a billionth of their range of a bound on it: the trust region stops a hair
    inside (a host time at its bound of 0 came out 3e-28 s)."""
    near = 1e-9 * np.maximum(hi - lo, 1e-12)
    return np.where(np.abs(x - lo) <= near, lo, np.where(np.abs(hi - x) <= near, hi, x))


class _Layout:
    """Where each number sits in the parameter vector: the engines' mean, each engine's four, each group's one."""

    def __init__(self, t: Tables) -> None:
        self.engines = sorted(set(t.engines))
        self.groups = sorted(set(zip(t.engines, t.gpus)))
        k = len(NAMES)
        self.size = k * (1 + len(self.engines)) + len(self.groups)
        lo, hi = [], []
        for _ in range(1 + len(self.engines)):
            for prior in PARAMETERS:
                a, b = prior.bounds
                lo.append(math.log(a) if prior.name == "compute" else a)
                hi.append(math.log(b) if prior.name == "compute" else b)
        compute = next(p.bounds for p in PARAMETERS if p.name == "compute")
        lo += [math.log(compute[0])] * len(self.groups)
        hi += [math.log(compute[1])] * len(self.groups)
        self.lo, self.hi = np.array(lo), np.array(hi)
        self.e_index = np.array([self.engines.index(e) for e in t.engines])
        self.g_index = np.array([self.groups.index(g) for g in zip(t.engines, t.gpus)])
        self.group_engine = np.array([self.engines.index(e) for e, _h in self.groups], dtype=int)
        self.centre = np.array([0.0 if p.name == "compute" else p.centre for p in PARAMETERS])
        self.width = np.array([p.width for p in PARAMETERS])
        self.spread = np.array([p.spread for p in PARAMETERS])

    def split(self, x: Any) -> tuple[Any, Any, Any]:
        k = len(NAMES)
        return x[:k], x[k : k * (1 + len(self.engines))].reshape(len(self.engines), k), x[k * (1 + len(self.engines)) :]

    def start(self) -> Any:
        x = np.concatenate([self.centre, np.tile(self.centre, len(self.engines)), np.zeros(len(self.groups))])
        k, n = len(NAMES), len(self.engines)
        x[0 : k * (1 + n) : k] = math.log(1.2)  # a start for compute inside its bounds
        x[k * (1 + n) :] = math.log(1.2)
        return np.clip(x, self.lo, self.hi)


def _residuals(x: Any, lay: _Layout, t: Tables, log_measured: Any) -> Any:
    mean, per, group = lay.split(x)
    p = per[lay.e_index]
    pred = physics(t, group[lay.g_index], p[:, 4]) + p[:, 1] + t.micro * (p[:, 2] + t.layers * p[:, 3])
    data = np.log(np.maximum(pred, 1e-12)) - log_measured
    prior_mean = DATA_SIGMA * (mean - lay.centre) / lay.width
    prior_engine = (DATA_SIGMA * (per - mean) / lay.spread).ravel()
    prior_dev = DATA_SIGMA * (group - per[lay.group_engine, 0]) / SIGMA_GPU
    return np.concatenate([data, prior_mean, prior_engine, prior_dev])


def fit_pooled(t: Tables) -> PooledFit:
    """The MAP fit of every engine's behaviour and every (engine, GPU)'s deviation to the runs of `t`."""
    from scipy.optimize import least_squares

    lay = _Layout(t)
    log_measured = np.log(t.measured)
    res = least_squares(
        _residuals,
        lay.start(),
        bounds=(lay.lo, lay.hi),
        args=(lay, t, log_measured),
        method="trf",
        x_scale=np.maximum(lay.hi - lay.lo, 1e-9) / 20,
        max_nfev=400,
    )
    err = _stderr(res, len(t.obs))
    mean, per, group = lay.split(_on_bounds(res.x, lay.lo, lay.hi))
    _e_mean, e_per, e_dev = lay.split(np.array(err))
    k = len(NAMES)
    dev = group - per[lay.group_engine, 0]
    return PooledFit(
        {e: tuple(float(v) for v in per[i]) for i, e in enumerate(lay.engines)},
        tuple(float(v) for v in mean),
        {g: float(dev[i]) for i, g in enumerate(lay.groups)},
        {e: tuple(float(v) for v in e_per[i]) for i, e in enumerate(lay.engines)},
        {g: float(e_dev[i]) for i, g in enumerate(lay.groups)},
        {e: int(sum(x == e for x in t.engines)) for e in lay.engines},
        {g: int(sum(x == g for x in zip(t.engines, t.gpus))) for g in lay.groups},
        dict(t.proxies),
        tuple(_bound_hits(res.x, lay, k)),
    )


def _bound_hits(x: Any, lay: _Layout, k: int) -> list[str]:
    """The numbers that ended on a bound: a finding (the data want them further than the mechanism allows)."""
    labels = [f"{e} {name}" for e in ["(mean)", *lay.engines] for name in NAMES]
    labels += [f"{e}/{h} compute" for e, h in lay.groups]
    out = []
    for i, label in enumerate(labels):
        v, lo, hi = x[i], lay.lo[i], lay.hi[i]
        host = not label.endswith("compute")
        near_lo = not host and v - lo <= 0.01 * (hi - lo)  # a host time of (about) none is a finding of none
        if near_lo or hi - v <= 0.01 * (hi - lo):
            shown = v if host else math.exp(v)
            out.append(f"{label} at its {'lower' if near_lo else 'upper'} bound {shown:.4g}")
    return out


def _stderr(res: Any, n_data: int) -> list[float]:
    """1 s.e. per parameter from the Jacobian at the solution, with the data residuals' own variance."""
    data = res.fun[:n_data]
    dof = max(1, n_data - min(n_data - 1, res.x.size // 2))
    sigma2 = max(float(data @ data) / dof, DATA_SIGMA**2 / 4)
    cov = np.linalg.pinv(res.jac.T @ res.jac) * sigma2
    return [float(math.sqrt(max(cov[i, i], 0.0))) for i in range(res.x.size)]


def log_residuals(fit: PooledFit, t: Tables) -> Any:
    """log(measured / predicted) throughput of every run of `t` (positive: the run was faster than predicted)."""
    return np.log(fit.predict(t)) - np.log(t.measured)


def predict_exact(fit: PooledFit, o: Observation) -> float:
    """The step time of one run through the cost model's front door with the fitted behaviour applied: what
    `planner estimate` prints once the engine profiles carry this fit."""
    from planner.fit.write_behaviour import engine_with_fit

    engine = engine_with_fit(o.engine, fit)
    return Coster(o.model, o.hardware, engine).step(o.plan).step_s


def domain_of(obs: list[Observation] | tuple[Observation, ...], engine: str) -> dict[str, Any]:
    """What the runs cover for one engine (engine.Domain's fields)."""
    mine = [o for o in obs if o.engine.name == engine]
    return {
        "gpus": tuple(sorted({o.hardware.name for o in mine})),
        "all_gpus": tuple(sorted({o.hardware.name for o in obs})),
        "families": tuple(sorted({model_family(o.model) for o in mine})),
        "precisions": tuple(sorted({o.plan.precision for o in mine})),
        "max_gpus": max((o.gpus for o in mine), default=0),
        "max_ep": max((o.plan.ep for o in mine if o.model.moe is not None), default=0),
    }
