"""`planner search`: every plan for N GPUs on one engine, ranked; why the rest were rejected.

Thin: parse the options into a search space, call planner.explore.pipeline.search, render. Nothing here
imports matplotlib unless --plot is given.
"""

from __future__ import annotations

import sys
import warnings
from typing import TYPE_CHECKING, Annotated, Any, Optional, get_args

import typer

from planner.api.hardware_for import power_capped
from planner.api.idle import failures_unpriced
from planner.api.resolve import engine_overrides
from planner.api.saving import save_options
from planner.cli.callbacks import words, written
from planner.cli.cluster_options import (
    ADVICE,
    CLUSTER,
    GlobalBatchAutoOpt,
    GpusRangeOpt,
    hardware_on_cluster,
)
from planner.cli.options import (
    CATALOG,
    ENGINE_SETTINGS,
    PLAN_FIELDS,
    POWER,
    RUN,
    SEARCH_WHAT,
    EnginesOpt,
    JsonOpt,
    replaced,
    with_options,
    without,
)
from planner.errors import PlannerError
from planner.explore.space import OBJECTIVES
from planner.io.files import check_ours, check_writable, distinct_outputs
from planner.plan import MAX_DEGREE, RECOMPUTES, SCHEDULES
from planner.render.console import emit_json, escape, out
from planner.specs import Precision

if TYPE_CHECKING:
    from planner.api.advising import Advised
    from planner.explore.explain import Explanation
    from planner.explore.results import SearchResult

ZeroListOpt = Annotated[Optional[str], typer.Option("--zero", help="ZeRO stages to search, comma list (e.g. 1,3)")]
RecomputeListOpt = Annotated[
    Optional[str],
    typer.Option(
        "--recompute",
        help="recompute levels to search, comma list: none,selective,full",
        autocompletion=words(RECOMPUTES),
    ),
]
ScheduleListOpt = Annotated[
    Optional[str],
    typer.Option(
        "--schedule",
        help="schedules to search, comma list: 1f1b,interleaved (gpipe and dualpipev only when named)",
        autocompletion=words(SCHEDULES),
    ),
]
PrecisionListOpt = Annotated[
    Optional[str],
    typer.Option(
        "--precision",
        help="precisions to search, comma list, ranked together: fp32 | bf16 | fp16 | fp8 (the engine's default fp8 "
        "recipe) | fp8-delayed | fp8-current | fp8-rowwise | fp8-rowwise-gw-hp | fp8-blockwise | mxfp8 | nvfp4 "
        "(default bf16)",
        autocompletion=words(get_args(Precision)),
    ),
]
MicroBatchesOpt = Annotated[
    Optional[str],
    typer.Option("--micro-batches", help="micro-batch sizes to search, comma list (default: powers of 2 up to 16)"),
]
MaxTpOpt = Annotated[
    Optional[int],
    typer.Option(
        "--max-tp", min=1, max=MAX_DEGREE, help="largest tp (default: 2 nodes' GPUs, or the NVLink domain if larger)"
    ),
]
MaxPpOpt = Annotated[
    Optional[int], typer.Option("--max-pp", min=1, max=MAX_DEGREE, help="largest pp (default num_layers)")
]
MaxCpOpt = Annotated[
    Optional[int],
    typer.Option(
        "--max-cp", min=1, max=MAX_DEGREE, help="largest cp (default 16 from 32k tokens, 2 from 8k if dense, else 1)"
    ),
]
MaxEpOpt = Annotated[Optional[int], typer.Option("--max-ep", min=1, max=MAX_DEGREE, help="largest ep (MoE models)")]
MaxVppOpt = Annotated[int, typer.Option("--max-vpp", min=1, max=64, help="largest vpp for the interleaved schedule")]
ObjectiveOpt = Annotated[
    str,
    typer.Option("--objective", help=" | ".join(OBJECTIVES) + " (risk: as --risk)", autocompletion=words(OBJECTIVES)),
]
TopOpt = Annotated[int, typer.Option("--top", min=1, max=10_000, help="how many plans to show")]
SaveOpt = Annotated[Optional[str], typer.Option("--save", callback=written, help="write the best plan to FILE.yaml")]
PlotOpt = Annotated[
    Optional[str],
    typer.Option(
        "--plot", callback=written, help="FILE.svg|png: throughput vs memory of every valid plan (needs planner[plot])"
    ),
]
ExplainOpt = Annotated[
    Optional[str], typer.Option("--explain", "--why", help="FIELD=VALUE, e.g. tp=16: why such plans lost")
]
ExhaustiveOpt = Annotated[bool, typer.Option("--exhaustive", help="time every valid plan (no pruning)")]
RecipeOptionsOpt = Annotated[
    bool,
    typer.Option(
        "--recipe-options",
        help="also rank each engine with its memory options (precision-aware optimizer, recompute modules, fp8 "
        "parameter gather, offload) as variants: ENGINE+pao, +modules, +gather, +offload; and its speed options: "
        "ENGINE+bf16grad (bf16 gradient reduction), +graphs (CUDA graphs)",
    ),
]
WideOpt = Annotated[bool, typer.Option("--wide", help="more columns: per-GPU throughput, goodput, a third time term")]
RiskOpt = Annotated[
    bool, typer.Option("--risk", help="rank by the low end of the 80% interval of throughput, not the prediction")
]


@with_options(
    CATALOG,
    replaced(SEARCH_WHAT, engine=EnginesOpt, gpus=GpusRangeOpt),
    POWER,
    replaced(
        PLAN_FIELDS,
        zero=ZeroListOpt,
        recompute=RecomputeListOpt,
        schedule=ScheduleListOpt,
        precision=PrecisionListOpt,
        global_batch=GlobalBatchAutoOpt,
    ),
    without(RUN, "tokens"),
    ENGINE_SETTINGS,
    CLUSTER,
    ADVICE,
)
def search(
    opts: dict[str, Any],
    micro_batches: MicroBatchesOpt = None,
    max_tp: MaxTpOpt = None,
    max_pp: MaxPpOpt = None,
    max_cp: MaxCpOpt = None,
    max_ep: MaxEpOpt = None,
    max_vpp: MaxVppOpt = 4,
    objective: ObjectiveOpt = "throughput",
    top: TopOpt = 10,
    save: SaveOpt = None,
    plot: PlotOpt = None,
    explain: ExplainOpt = None,
    exhaustive: ExhaustiveOpt = False,
    recipe_options: RecipeOptionsOpt = False,
    wide: WideOpt = False,
    risk: RiskOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Every valid plan for N GPUs, ranked by throughput (or memory, goodput); why the rest were rejected."""
    if risk and objective not in ("throughput", "risk"):  # --objective risk --risk say the same
        raise PlannerError(
            f"--risk ranks by the low end of throughput's interval: give --risk or --objective {objective}, not both"
        )
    opts = {**opts, **locals(), **({"objective": "risk"} if risk else {})}
    explain_field = _explain_field(explain) if explain else None
    if plot:
        from planner.render.plot import check_figure_path

        check_figure_path(plot)
    distinct_outputs(("--save", save), ("--plot", plot))
    if save:  # both can be written, or neither is (check_figure_path checked the plot's)
        check_writable(save, what="plan file")
    if save:
        check_ours(save, option="--save", what="plan file", ours=lambda doc: isinstance(doc, dict) and "plan" in doc)
    advised = _run(opts, exhaustive=exhaustive or bool(plot), defer_advice=not as_json)  # text: ranking first
    result = advised.result
    if result.ruled_out:  # refused as estimate refuses an impossible plan (exit 2)
        raise PlannerError(_ruled_out(opts, result))
    priced = opts["mtbf_hours"] is not None or bool(opts["cluster"]) or opts["objective"] == "goodput"
    for said in failures_unpriced(opts, priced=priced, rates="--mtbf-hours, --cluster or --objective goodput"):
        warnings.warn(said, stacklevel=1)
    why = _explained(opts, result, *explain_field) if explain_field is not None else None
    if save and (as_json or result.best is not None):  # nothing to save: said after the closest misses are shown
        save_options(save, result, opts, engine_overrides(opts))
    if plot:
        from planner.render.plot import plot_search

        plot_search(result, plot)
    if as_json:
        from planner.render.documents import with_cluster
        from planner.render.search_documents import search_doc

        doc = {**search_doc(result).as_json(), "advice": [a.as_json() for a in advised.advice]}
        doc["advice_probes"] = advised.probes_json()
        from planner.api.best_notes import best_plan_notes

        doc["notes"] = best_plan_notes(result)  # the lines text prints beneath the ranking, as `note:`
        if why is not None and explain_field is not None:
            doc["explain"] = why.as_json(*explain_field)
        emit_json(with_cluster(doc, result.hardware))
        return
    from planner.render.advice_lines import print_advice, print_cluster
    from planner.render.ranking import print_explain, print_result

    print_result(out, result, save=save, plot=plot, wide=wide)
    from planner.api.best_notes import best_plan_notes

    for said in best_plan_notes(result):  # settings that change nothing for it, an engine no file runs it on
        out.print(f"[yellow]note:[/] {escape(said)}")
    print_cluster(out, result.hardware)
    advised.finish()  # its probe searches run once the ranking is on the screen
    print_advice(out, advised.advice, probes=advised.probe_searches, probe_s=advised.probe_s)
    if why is not None and explain_field is not None:
        print_explain(out, result, why, *explain_field)
    if save and result.best is None:
        save_options(save, result, opts, engine_overrides(opts))


def _explain_field(text: str) -> tuple[str, Any]:
    from planner.explore.explain import parse_explain

    return parse_explain(text)


# The options that fix what a plan may be (not the count, the model or the hardware).
_FIXABLE = tuple(o.name for o in (*PLAN_FIELDS, *ENGINE_SETTINGS))


def _ruled_out(opts: dict[str, Any], result: SearchResult) -> str:
    """Why no candidate passed the rules, with what the user fixed and, where the batch was the rule, what to try."""
    fixed = [f"--{n.replace('_', '-')}" + ("" if opts[n] is True else f" {opts[n]}") for n in _FIXABLE
             if opts.get(n) not in (None, False)]  # fmt: skip
    said = result.none_reason() + (f"; given {', '.join(fixed)}" if fixed else "")
    if result.broke_the_batch or len([n for n in result.rejected.values() if n]) > 1:
        from planner.explore.advice import count_hint

        g, domain = result.space.gpus, result.hardware.nvlink_domain
        said += f"; {count_hint(g, domain)}, or --global-batch auto (a batch the data-parallel degrees divide)"
    return said


# The plan fields a search takes as comma-list text (their options' type), not as a value.
_LISTED = ("zero", "recompute", "schedule", "precision")


def _explained(opts: dict[str, Any], result: SearchResult, field_name: str, value: Any) -> Explanation:
    """--explain: the same search (at the count and batch it chose) pinned to field == value, top 1, no advice;
    where that search is refused, the refusal."""
    from planner.explore.explain import explain

    pin = {field_name: str(value) if field_name in _LISTED else value}
    if field_name in ("tp", "pp", "cp", "ep"):  # the value asked about, not the search's own limit on it
        pin[f"max_{field_name}"] = None
    at = {"gpus": result.space.gpus, "global_batch": result.space.global_batch, "top": 1, "no_advice": True}
    on = {"hardware": result.hardware, "cluster": None, "power_limit": None}  # as placed and capped: said once
    pinned_opts = {**opts, **on, **at, **pin}
    try:
        pinned = _run(pinned_opts, exhaustive=False).result
    except PlannerError as e:
        return explain(result, field_name, value, None, str(e))
    return explain(result, field_name, value, pinned)


_PASSED_APART = ("exhaustive", "attention", "global_batch")  # given to search_advised by name below


def _run(opts: dict[str, Any], *, exhaustive: bool, defer_advice: bool = False) -> Advised:
    """The search of the command's options (at the count of a range, the batch of auto) with its advice, and a
    progress bar on a terminal once it takes a while."""
    from planner.api.advising import search_advised
    from planner.api.searching import SEARCH_OPTIONS
    from planner.render.progress import DelayedProgress

    progress = DelayedProgress(enabled=sys.stderr.isatty())
    try:
        return search_advised(
            opts["model"],
            gpus=opts["gpus"],
            hardware=power_capped(hardware_on_cluster(opts), opts["power_limit"]),
            engine=opts["engine"],
            global_batch=opts["global_batch"],
            max_tokens_per_step=opts["max_tokens_per_step"],
            advice=not opts["no_advice"],
            progress=progress,
            **{k: opts[k] for k in SEARCH_OPTIONS if k in opts and k not in _PASSED_APART},
            exhaustive=exhaustive,
            attention="softmax" if opts["no_flash"] else None,
            defer_advice=defer_advice,
        )
    finally:
        progress.close()
