"""The engine profiles' `behaviour:` and `fitted:` blocks from a pooled fit (fit/partial_pooling.py): every parameter
with its value, bounds, standard error, mechanism and source, the domain of the runs, the interval model, and
each GPU's own compute factor (the pooled one times its shrunk deviation). Written atomically (io/files.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import date
from pathlib import Path

import yaml

from planner.engine import Behaviour, Domain, Engine, Fitted, Interval, Parameter
from planner.fit.observations import Observation
from planner.fit.partial_pooling import NAMES, PARAMETERS, PooledFit, domain_of
from planner.io.files import write_text_atomic

BLOCKS = ("behaviour:", "fitted:")


def _sources(obs: Sequence[Observation]) -> str:
    return ", ".join(sorted({Path(o.source).name for o in obs if o.source})) or "launch profiles"


def engine_behaviour(
    fit: PooledFit, name: str, obs: Sequence[Observation], interval: Interval | None = None
) -> Behaviour:
    """The behaviour block of one engine (the engines' mean when it had no runs)."""
    values, errors = fit.params(name), fit.engine_stderr.get(name)
    runs = fit.runs.get(name, 0)
    params = {}
    for i, prior in enumerate(PARAMETERS):
        pname, bounds, v = prior.name, prior.bounds, values[i]
        value = math.exp(v) if pname == "compute" else v
        err = None if errors is None else (value * errors[i] if pname == "compute" else errors[i])
        params[pname] = Parameter(
            value=round(min(max(value, bounds[0]), bounds[1]), 6),
            bounds=bounds,
            stderr=None if err is None else round(err, 6),
            mechanism=prior.mechanism,
            source=prior.source,
        )
    what = f"{runs} runs on {', '.join(sorted({o.hardware.name for o in obs if o.engine.name == name}))}"
    if not runs:
        what = f"no runs of its own: the mean of the engines fitted ({', '.join(sorted(fit.engine_params))})"
    stamp = date.today().isoformat()
    return Behaviour(
        **params,
        runs=runs,
        source=f"planner calibrate --behaviour {stamp}: {what} ({_sources(obs)})",
        domain=Domain(**domain_of(list(obs), name)),
        interval=interval,
    )


def gpu_entries(fit: PooledFit, name: str, obs: Sequence[Observation], rms: dict[str, float]) -> dict[str, Fitted]:
    """Each GPU's own compute factor for one engine: exp(pooled + shrunk deviation), with its runs."""
    b = fit.params(name)[0]
    stamp = date.today().isoformat()
    out = {}
    for (e, gpu), dev in sorted(fit.deviations.items()):
        if e != name:
            continue
        n = fit.group_runs[(e, gpu)]
        out[gpu] = Fitted(
            compute=round(math.exp(b + dev), 4),
            tokens_per_s_rel=round(rms[f"{e}/{gpu}"], 4) if f"{e}/{gpu}" in rms else None,
            runs=n,
            source=f"planner calibrate --behaviour {stamp}: {n} runs; the engine's pooled compute x "
            f"{math.exp(dev):.3f}, this GPU's deviation shrunk toward none ({_sources(obs)})",
        )
    return out


def engine_with_fit(
    engine: Engine, fit: PooledFit, obs: Sequence[Observation] = (), interval: Interval | None = None
) -> Engine:
    """The engine with the fit's behaviour and GPU entries (replacing what it had)."""
    behaviour = engine_behaviour(fit, engine.name, obs, interval)
    return engine.model_copy(update={"behaviour": behaviour, "fitted": gpu_entries(fit, engine.name, obs, {})})


OPT_OUT = "behaviour: null"


def opts_out(source: Path) -> bool:
    """Whether an engine profile declines a pooled behaviour (a top-level `behaviour: null` line)."""
    return any(line.startswith(OPT_OUT) for line in source.read_text().splitlines())


def blocks_text(behaviour: Behaviour | None, fitted: dict[str, Fitted], kept: str = "") -> str:
    """The two YAML blocks, as engine_profiles/*.yaml end (`kept`: the opt-out line and its comment)."""
    if behaviour is None:
        lines = kept.splitlines() or [OPT_OUT]
    else:
        doc = behaviour.model_dump(mode="json", exclude_none=True)
        head = "behaviour:                                 # by planner calibrate --behaviour: what it does on any GPU"
        body = yaml.safe_dump(doc, sort_keys=False, width=10**6, default_flow_style=None)
        lines = [head, *("  " + line for line in body.splitlines())]
    lines.append(
        "fitted:                                    # each GPU's own compute factor (pooled x shrunk deviation)"
    )
    if not fitted:
        why = "the pooled behaviour everywhere" if behaviour is not None else "no runs of its own"
        lines[-1] = f"fitted: {{}}                                 # no GPU of its own: {why}"
    for gpu, f in fitted.items():
        entry = {k: v for k, v in f.model_dump().items() if v is not None}
        lines.append(f"  {gpu}: {yaml.safe_dump(entry, default_flow_style=True, width=10**6).strip()}")
    return "\n".join(lines) + "\n"


def write_behaviour(source: Path, out: Path, behaviour: Behaviour | None, fitted: dict[str, Fitted]) -> None:
    """The engine profile at `source` with its behaviour and fitted blocks replaced, written to `out`
    (behaviour None: the profile's own `behaviour: null` block is kept)."""
    kept: list[str] = []
    opt_out: list[str] = []
    block = ""
    for line in source.read_text().splitlines():
        if line[:1].isalpha():
            block = next((b for b in BLOCKS if line.startswith(b)), "")
        if not block:
            kept.append(line)
        elif block == "behaviour:" and (line.startswith(OPT_OUT) or (opt_out and not line[:1].isalpha())):
            opt_out.append(line)
    body = "\n".join(kept).rstrip("\n") + "\n"
    text = body + blocks_text(behaviour, fitted, "\n".join(opt_out))
    write_text_atomic(out, text, what="engine profile")


__all__ = [
    "NAMES",
    "OPT_OUT",
    "blocks_text",
    "engine_behaviour",
    "engine_with_fit",
    "gpu_entries",
    "opts_out",
    "write_behaviour",
]
