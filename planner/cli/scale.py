"""`planner scale`: for a model, a token budget and GPU counts, the best plan at each count with its throughput, MFU,
time to train and GPU-hours; a table, --json, or a plot. Thin: parse, call planner.api.scaling.scale, render."""

from __future__ import annotations

import warnings
from typing import Annotated, Any, Optional

import typer

from planner.api.hardware_for import power_capped
from planner.api.idle import failures_unpriced
from planner.cli.callbacks import finite, written
from planner.cli.cluster_options import CLUSTER, GlobalBatchAutoOpt, MaxTokensOpt, hardware_on_cluster
from planner.cli.options import (
    CATALOG,
    POWER,
    RUN,
    EnginesOpt,
    JsonOpt,
    Opt,
    PrecisionOpt,
    SearchHardwareOpt,
    SearchModelOpt,
    SeqLenOpt,
    with_options,
    without,
)
from planner.errors import PlannerError
from planner.explore.space import TOKENS_RANGE
from planner.render.console import emit_json, escape, out

CountsOpt = Annotated[
    str,
    typer.Option(
        "--gpus",
        help="GPU counts: a comma list (1024,4096,16384) or a range LO..HI (LO, HI and the powers of two of whole "
        "nodes between; whole NVL72 racks doubled on NVL72)",
    ),
]
BudgetOpt = Annotated[  # what scale prices every count for (a missing one is refused by name, not by typer)
    Optional[float],
    typer.Option("--tokens", callback=finite(*TOKENS_RANGE), help="tokens to train (required): time and GPU-hours"),
]
PlotOpt = Annotated[
    Optional[str],
    typer.Option(
        "--plot",
        callback=written,
        help="FILE.svg|png|pdf: tokens/s, MFU, days and GPU-hours against GPUs (needs planner[plot])",
    ),
]
SCALE = (
    Opt("model", SearchModelOpt),
    Opt("hardware", SearchHardwareOpt),
    Opt("engine", EnginesOpt),
    Opt("tokens", BudgetOpt),
    Opt("global_batch", GlobalBatchAutoOpt),
    Opt("max_tokens_per_step", MaxTokensOpt),
    Opt("seq_len", SeqLenOpt),
    Opt("precision", PrecisionOpt),
)


@with_options(CATALOG, SCALE, without(RUN, "tokens"), POWER, CLUSTER)
def scale(opts: dict[str, Any], gpus: CountsOpt, plot: PlotOpt = None, as_json: JsonOpt = False) -> None:
    """The best plan at each GPU count: tokens/s, MFU, time to train and GPU-hours for --tokens (with failures
    priced, on a cluster or with --mtbf-hours: the expected time, checkpoints and lost work included)."""
    from planner.api.scaling import scale as run_scale

    if plot:
        from planner.render.plot import check_figure_path

        check_figure_path(plot)
    if opts["tokens"] is None:
        raise PlannerError("scale needs a token budget: pass --tokens N (e.g. 15e12)")
    result = run_scale(
        opts["model"],
        gpus=gpus,
        tokens=opts["tokens"],
        hardware=power_capped(hardware_on_cluster(opts), opts["power_limit"]),
        engine=opts["engine"],
        global_batch=opts["global_batch"],
        max_tokens_per_step=opts["max_tokens_per_step"],
        seq_len=opts["seq_len"],
        precision=opts["precision"],
        allow_cross_node_tp=opts["allow_cross_node_tp"],
        mtbf_hours=opts["mtbf_hours"],
        mtbf_per=opts["mtbf_per"],
        checkpoint_bandwidth=opts["checkpoint_bandwidth"],
        restart_minutes=opts["restart_minutes"],
    )
    for said in failures_unpriced(opts, priced=result.failures is not None):
        warnings.warn(said, stacklevel=1)
    if plot:
        from planner.render.scaling_table import plot_scaling

        plot_scaling(result, plot)
    if as_json:
        emit_json(result.as_json())
        return
    from planner.render.scaling_table import print_scaling

    print_scaling(out, result)
    if plot:
        out.print(f"plot written to {escape(plot)}")
