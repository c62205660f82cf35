"""The 80% prediction interval, fitted to cross-validated residuals (issue 21 item 4).

Every held-out prediction of fit/crossval.py has a log error r and the distances it had from its training runs.
The model: r ~ N(0, σ²) with σ² = base² + Σ_k (a_k·w_k)², a_k the amount of distance k (1, or doublings of GPUs
for `scale`) and w_k its component — a maximum-likelihood fit over the held-out predictions of every split (each
run once per split), then moved so that the coverage of each split comes as close to 80% as it can (the errors
of one held-out GPU or engine share their sign, which the likelihood underweights). A distance no held-out
prediction had keeps a stated prior component (PRIOR_WIDEN). The interval is exp(±Z·σ) around the prediction,
Z = 1.2816, and the coverage of each split and each fold is reported: the check that it means what it says.

Peak memory: nothing is fitted to measured peaks, so every run with a measured peak is out of sample; its base is
set so that 80% of them fall inside, and distances widen it by MEMORY_WIDEN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.cost.uncertainty import DISTANCES
from planner.engine import Interval
from planner.fit.crossval import HeldOut

LEVEL = 0.8
# A distance no held-out run had cannot be measured; its component (log spread) is stated instead, with why.
PRIOR_WIDEN = {
    "gpu": 0.15,  # no run on the GPU: its kernel ceilings and links are the datasheet's and micro-benchmarks' only
    "engine_gpu": 0.10,  # the GPU has other engines' runs: only this engine's own deviation there is unknown
    "engine": 0.25,  # the engines fitted differ by up to 30% in compute (fit/partial_pooling.py), an unseen one can too
    "family": 0.10,  # a new architecture class: layers the runs did not time (MLA, windows, Mamba)
    "moe": 0.30,  # no MoE run times routing imbalance, all-to-all and grouped GEMMs at this expert parallelism
    "precision": 0.10,  # a precision recipe the engine's runs did not use (fp8 scaling, casts)
    "scale": 0.03,  # per doubling of GPUs beyond the largest run: collectives over more nodes, stragglers
}
MEMORY_WIDEN = {
    "gpu": 0.03,  # reserved memory (CUDA context, NCCL) differs by GPU and driver
    "engine": 0.10,  # an engine whose memory semantics no measured peak checked
    "engine_gpu": 0.02,
    "family": 0.08,
    "moe": 0.15,  # token-routing buffers and expert imbalance
    "precision": 0.08,  # fp8 weight copies, transposes and scaling buffers
    "scale": 0.0,
}
MIN_FLAGGED = 3  # a component is fitted only when this many held-out predictions had the distance
Z = 1.2816  # the normal distribution's 90th percentile: exp(±Z·σ) holds 80% of a log-normal error
# Where the components may go (log spreads): the base at least the 2% that repeated runs of one configuration
# differ by; a distance at most a factor e; scale at most 10% per doubling of GPUs.
COMPONENT_BOUNDS = {"base": (0.02, 0.3), **dict.fromkeys(DISTANCES, (0.005, 1.0)), "scale": (0.005, 0.1)}
SMOOTH = 0.02  # the width of the smoothed inside/outside step the coverage is matched with (log units)
PULL = 0.05  # how strongly the coverage match is pulled toward the maximum-likelihood components


@dataclass(frozen=True)
class Coverage:
    split: str
    fold: str  # "" for the whole split
    runs: int
    inside: int

    @property
    def share(self) -> float:
        return self.inside / self.runs if self.runs else float("nan")


def _design(held: list[HeldOut], names: list[str]) -> np.ndarray:
    return np.array([[h.distances.get(n, 0.0) for n in names] for h in held], dtype=float)


def fit_components(held: list[HeldOut]) -> tuple[float, dict[str, float], list[str]]:
    """(base, component per distance, the distances fitted from data): maximum likelihood, then moved (within
    COMPONENT_BOUNDS, pulled toward the likelihood's values) so that each split's coverage at z = Z comes as
    close to LEVEL as it can: the held-out errors of one GPU or one engine share their sign, which a likelihood
    that counts every run as independent underweights."""
    from scipy.optimize import minimize

    names = list(DISTANCES)
    a = _design(held, names)
    fitted = [n for n, c in zip(names, (a > 0).sum(axis=0)) if c >= MIN_FLAGGED]
    free = np.array([n in fitted for n in names])
    prior = np.log([PRIOR_WIDEN[n] for n in names])
    r = np.abs(np.array([h.log_error for h in held]))
    lo, hi = zip(*[COMPONENT_BOUNDS["base"], *(COMPONENT_BOUNDS[n] for n in names)])
    bounds = list(zip(np.log(lo), np.log(hi)))

    def sigma(x: np.ndarray) -> np.ndarray:
        w = np.where(free, x[1:], prior)
        return np.sqrt(math.exp(2 * x[0]) + (a**2) @ np.exp(2 * w))

    def nll(x: np.ndarray) -> float:
        s = sigma(x)
        return float(np.sum(np.log(s) + r**2 / (2 * s**2)))

    lows, highs = (np.array(b) for b in zip(*bounds))
    start = np.clip(np.concatenate([[math.log(0.06)], prior]), lows, highs)
    ml = minimize(nll, start, method="L-BFGS-B", bounds=bounds).x
    splits = sorted({h.split for h in held})
    member = np.array([[h.split == sp for h in held] for sp in splits], dtype=float)

    def miss(x: np.ndarray) -> float:
        inside = 1 / (1 + np.exp(-(Z * sigma(x) - r) / SMOOTH))
        shares = member @ inside / member.sum(axis=1)
        return float(100 * np.sum((shares - LEVEL) ** 2) + PULL * np.sum(((x - ml)[np.r_[True, free]]) ** 2))

    x = minimize(miss, ml, method="Nelder-Mead", bounds=bounds, options={"maxiter": 4000, "xatol": 1e-4}).x
    widen = {n: (math.exp(x[1 + i]) if n in fitted else PRIOR_WIDEN[n]) for i, n in enumerate(names)}
    return math.exp(x[0]), widen, fitted


def spread(h: HeldOut, base: float, widen: dict[str, float]) -> float:
    return math.sqrt(base**2 + sum((amount * widen.get(n, 0.0)) ** 2 for n, amount in h.distances.items()))


def coverage(held: list[HeldOut], base: float, widen: dict[str, float], z: float) -> list[Coverage]:
    """Share of held-out runs inside their interval, per split and per fold."""
    out = []
    by_split: dict[str, list[HeldOut]] = {}
    for h in held:
        by_split.setdefault(h.split, []).append(h)
    for split, hs in by_split.items():
        inside = [abs(h.log_error) <= z * spread(h, base, widen) for h in hs]
        out.append(Coverage(split, "", len(hs), sum(inside)))
        folds: dict[str, list[bool]] = {}
        for h, ok in zip(hs, inside):
            folds.setdefault(h.fold, []).append(ok)
        out += [Coverage(split, f, len(v), sum(v)) for f, v in folds.items()]
    return out


def memory_base(log_errors: list[float], z: float) -> float:
    """The memory spread that puts LEVEL of the measured peaks inside exp(±z·spread)."""
    if not log_errors:
        return 0.1
    return float(np.quantile(np.abs(log_errors), LEVEL)) / z


def interval_model(held: list[HeldOut], memory_log_errors: list[float], source: str) -> tuple[Interval, list[Coverage]]:
    """The interval every engine profile stores, and its coverage by cross-validation."""
    base, widen, fitted = fit_components(held)
    z = Z
    cov = coverage(held, base, widen, z)
    stated = [n for n in DISTANCES if n not in fitted]
    note = f"{source}; components fitted: {', '.join(fitted) or 'none'}; stated (no held-out run had them): " + (
        ", ".join(stated) or "none"
    )
    interval = Interval(
        z=round(z, 4),
        base=round(base, 4),
        widen={n: round(v, 4) for n, v in widen.items()},
        memory_base=round(memory_base(memory_log_errors, z), 4),
        memory_widen=dict(MEMORY_WIDEN),
        coverage={c.split: round(c.share, 3) for c in cov if not c.fold},
        source=note,
    )
    return interval, cov


def nested_coverage(held: list[HeldOut]) -> dict[str, float]:
    """Each split's coverage with the interval fitted to the other splits only: the check that the interval was
    not fitted to the very errors it is judged on."""
    out = {}
    for split in sorted({h.split for h in held}):
        rest = [h for h in held if h.split != split]
        mine = [h for h in held if h.split == split]
        base, widen, _ = fit_components(rest)
        out[split] = sum(abs(h.log_error) <= Z * spread(h, base, widen) for h in mine) / len(mine)
    return out
