"""`planner memory` and `planner estimate`: one plan's per-GPU memory and step time, broken into terms."""

from __future__ import annotations

import warnings
from typing import Annotated, Any, Optional

import typer

from planner.api.idle import failures_unpriced
from planner.api.resolve import resolve_options
from planner.cli.callbacks import written
from planner.cli.cluster_options import CLUSTER_FILE, hardware_on_cluster, run_options
from planner.cli.options import (
    CATALOG,
    ENGINE_SETTINGS,
    PLAN_FIELDS,
    PLAN_FILE,
    POWER,
    RUN,
    WHAT,
    JsonOpt,
    with_options,
)
from planner.render.console import emit_json, escape, out


@with_options(CATALOG, WHAT, POWER, PLAN_FIELDS, PLAN_FILE, ENGINE_SETTINGS, CLUSTER_FILE)
def memory(
    opts: dict[str, Any],
    per_stage: Annotated[bool, typer.Option("--per-stage", help="a row per pipeline stage")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Per-GPU memory of one plan: weights, gradients, optimizer, activations, buffers, reserved."""
    # --cluster names the GPU as estimate's does; a power cap changes no byte, and is taken so that an estimate's
    # or a search's command line runs here as it stands
    from planner.api import memory_parts

    r = resolve_options({**opts, "hardware": hardware_on_cluster(opts)})
    report, miss, trust = memory_parts(r)
    if as_json:
        from planner.render.documents import memory_doc

        emit_json(memory_doc(r.model, r.hardware, r.plan, report, r.engine, r.defaulted, miss, trust).as_json())
    else:
        from planner.render.breakdown import print_memory

        print_memory(
            out, r.model, r.hardware, r.plan, report, per_stage=per_stage, engine=r.engine, defaulted=r.defaulted,
            miss=miss, trust=trust,
        )  # fmt: skip


@with_options(CATALOG, WHAT, POWER, PLAN_FIELDS, PLAN_FILE, ENGINE_SETTINGS, RUN, CLUSTER_FILE)
def estimate(
    opts: dict[str, Any],
    timeline: Annotated[
        Optional[str],
        typer.Option("--timeline", callback=written, help="draw one step's pipeline schedule (.svg/.png/.pdf)"),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Step time breakdown, throughput, MFU/HFU and the memory summary of one plan."""
    from planner.api import run_estimate, would_fit

    if timeline:  # before any work, as search checks --plot: a drawing that cannot be written is said first
        from planner.render.plot import check_figure_path

        check_figure_path(timeline, "--timeline")  # its writability too
    r = resolve_options({**opts, "hardware": hardware_on_cluster(opts)})
    est = run_estimate(r, **run_options(opts))
    miss = would_fit(r, est.memory)
    for said in failures_unpriced(opts, priced=est.checkpoint is not None):
        warnings.warn(said, stacklevel=1)
    if timeline:
        from planner.render.timeline import draw_timeline

        draw_timeline(est, timeline)
    if as_json:
        from planner.render.documents import estimate_doc, with_cluster

        emit_json(with_cluster(estimate_doc(est, r.defaulted, miss).as_json(), est.hardware))
    else:
        from planner.render.advice_lines import print_cluster
        from planner.render.breakdown import print_estimate

        print_estimate(out, est, r.defaulted, miss)
        print_cluster(out, est.hardware)
        if timeline:
            out.print(f"timeline written to {escape(timeline)}")
