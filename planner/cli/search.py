"""`planner search`: every plan for N GPUs on one engine, ranked; why the rest were rejected.

Thin: parse the options into a search space, call planner.explore.pipeline.search, render. Nothing here
imports matplotlib unless --plot is given.
"""

from __future__ import annotations

import sys
from typing import Annotated, Optional, TypeVar, cast

import typer

from planner.cli.options import (
    CheckpointBwOpt,
    CompileOpt,
    CpOpt,
    DpOpt,
    EnginesOpt,
    EpOpt,
    GlobalBatchOpt,
    GpusOpt,
    GradDtypeOpt,
    HardwareOpt,
    JsonOpt,
    MicroBatchOpt,
    ModelOpt,
    MtbfOpt,
    MtbfPerOpt,
    NoFlashOpt,
    OptimizerOpt,
    PpOpt,
    PrecisionOpt,
    SelectivePolicyOpt,
    SeqLenOpt,
    SpOpt,
    TpOpt,
    TpOverlapOpt,
    VppOpt,
)
from planner.cli.resolve import choice, engine_overrides, resolve_engines
from planner.errors import PlannerError
from planner.plan import MAX_BATCH, MAX_DEGREE
from planner.render.console import emit_json, out
from planner.specs import Precision

T = TypeVar("T")

ZeroListOpt = Annotated[Optional[str], typer.Option("--zero", help="ZeRO stages to search, comma list (e.g. 1,3)")]
RecomputeListOpt = Annotated[
    Optional[str], typer.Option("--recompute", help="recompute levels to search, comma list: none,selective,full")
]
ScheduleListOpt = Annotated[
    Optional[str],
    typer.Option("--schedule", help="schedules to search, comma list: 1f1b,interleaved (gpipe only when named)"),
]
MicroBatchesOpt = Annotated[
    Optional[str],
    typer.Option("--micro-batches", help="micro-batch sizes to search, comma list (default: powers of 2 up to 16)"),
]
MaxTpOpt = Annotated[
    Optional[int], typer.Option("--max-tp", min=1, max=MAX_DEGREE, help="largest tp (default 2 nodes' GPUs)")
]
MaxPpOpt = Annotated[
    Optional[int], typer.Option("--max-pp", min=1, max=MAX_DEGREE, help="largest pp (default num_layers)")
]
MaxCpOpt = Annotated[
    Optional[int],
    typer.Option("--max-cp", min=1, max=MAX_DEGREE, help="largest cp (default 1, or 16 when seq_len >= 32768)"),
]
MaxEpOpt = Annotated[Optional[int], typer.Option("--max-ep", min=1, max=MAX_DEGREE, help="largest ep (MoE models)")]
MaxVppOpt = Annotated[int, typer.Option("--max-vpp", min=1, max=64, help="largest vpp for the interleaved schedule")]
ObjectiveOpt = Annotated[str, typer.Option("--objective", help="throughput | memory | goodput")]
TopOpt = Annotated[int, typer.Option("--top", min=1, max=10_000, help="how many plans to show")]
SaveOpt = Annotated[Optional[str], typer.Option("--save", help="write the best plan to FILE.yaml")]
PlotOpt = Annotated[
    Optional[str],
    typer.Option("--plot", help="FILE.svg|png: throughput vs memory of every valid plan (needs planner[plot])"),
]
ExplainOpt = Annotated[
    Optional[str], typer.Option("--explain", "--why", help="FIELD=VALUE, e.g. tp=16: why such plans lost")
]
ExhaustiveOpt = Annotated[bool, typer.Option("--exhaustive", help="time every valid plan (no pruning)")]
WideOpt = Annotated[bool, typer.Option("--wide", help="more columns: per-GPU throughput, goodput, a third time term")]


def _ints(name: str, text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise PlannerError(f"--{name} {text!r}: expected integers separated by commas, e.g. 1,2,4") from None
    high = 3 if name == "zero" else MAX_BATCH
    bad = [v for v in values if not (0 if name == "zero" else 1) <= v <= high]
    if bad or not values:
        low = 0 if name == "zero" else 1
        raise PlannerError(f"--{name} {text!r}: each value must be an integer from {low} to {high}")
    return values


def _choices(flag: str, text: str | None, valid: tuple[T, ...]) -> tuple[T, ...] | None:
    """A comma list of some of `valid`, or None when the option was not given."""
    if text is None:
        return None
    words = [x.strip() for x in text.split(",") if x.strip()]
    bad = [w for w in words if w not in valid]
    if bad or not words:
        raise PlannerError(f"--{flag} {text!r} is not valid; choose from {', '.join(map(str, valid))} (comma list)")
    return tuple(cast(T, w) for w in words)


def _check_plot(plot: str) -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise PlannerError("--plot needs matplotlib: pip install 'planner[plot]'") from None
    if not plot.lower().endswith((".svg", ".png", ".pdf")):
        raise PlannerError(f"--plot {plot!r}: the file name must end in .svg, .png or .pdf")


def search(
    model: ModelOpt = None,  # type: ignore[assignment]
    hardware: HardwareOpt = None,
    engine: EnginesOpt = None,
    gpus: GpusOpt = None,
    tp: TpOpt = None,
    pp: PpOpt = None,
    dp: DpOpt = None,
    cp: CpOpt = None,
    ep: EpOpt = None,
    vpp: VppOpt = None,
    sp: SpOpt = None,
    zero: ZeroListOpt = None,
    recompute: RecomputeListOpt = None,
    micro_batch: MicroBatchOpt = None,
    micro_batches: MicroBatchesOpt = None,
    global_batch: GlobalBatchOpt = None,
    seq_len: SeqLenOpt = None,
    precision: PrecisionOpt = None,
    schedule: ScheduleListOpt = None,
    max_tp: MaxTpOpt = None,
    max_pp: MaxPpOpt = None,
    max_cp: MaxCpOpt = None,
    max_ep: MaxEpOpt = None,
    max_vpp: MaxVppOpt = 4,
    objective: ObjectiveOpt = "throughput",
    top: TopOpt = 10,
    mtbf_hours: MtbfOpt = None,
    mtbf_per: MtbfPerOpt = "gpu",
    checkpoint_bandwidth: CheckpointBwOpt = None,
    optimizer: OptimizerOpt = None,
    selective_policy: SelectivePolicyOpt = None,
    no_flash: NoFlashOpt = False,
    tp_overlap: TpOverlapOpt = None,
    compile: CompileOpt = None,
    grad_dtype: GradDtypeOpt = None,
    save: SaveOpt = None,
    plot: PlotOpt = None,
    explain: ExplainOpt = None,
    exhaustive: ExhaustiveOpt = False,
    wide: WideOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Every valid plan for N GPUs, ranked by throughput (or memory, goodput); why the rest were rejected."""
    from planner.explore.explain import parse_explain
    from planner.explore.pipeline import Checkpointing, search_engines
    from planner.explore.space import OBJECTIVES, RECOMPUTES, SCHEDULES, Space, default_global_batch
    from planner.io.catalog import DEFAULT_HARDWARE, load_hardware, load_model
    from planner.render.documents import search_doc
    from planner.render.progress import DelayedProgress
    from planner.render.ranking import print_explain, print_result

    if model is None:
        raise PlannerError("no model given: pass --model NAME|PATH (see `planner models`)")
    if gpus is None:
        raise PlannerError("no GPU count given: pass --gpus N")
    if objective not in OBJECTIVES:
        raise PlannerError(f"--objective {objective!r} is not valid; choose one of {', '.join(OBJECTIVES)}")
    choice("precision", precision)
    if micro_batch is not None and micro_batches is not None:
        raise PlannerError("give --micro-batch B or --micro-batches LIST, not both")
    explain_field = parse_explain(explain) if explain else None
    if plot:
        _check_plot(plot)
    engines = resolve_engines(engine, engine_overrides(locals()))
    spec = load_model(model)
    hw = load_hardware(hardware or DEFAULT_HARDWARE)
    gb_default = global_batch is None
    space = Space(
        gpus=gpus,
        global_batch=global_batch or default_global_batch(seq_len or spec.max_seq_len),
        seq_len=seq_len or spec.max_seq_len,
        precision=cast(Precision, choice("precision", precision) or "bf16"),
        tp=tp,
        pp=pp,
        dp=dp,
        cp=cp,
        ep=ep,
        vpp=vpp,
        sp=sp,
        max_tp=max_tp,
        max_pp=max_pp,
        max_cp=max_cp,
        max_ep=max_ep,
        max_vpp=max_vpp,
        zero=_ints("zero", zero) or (0, 1, 2, 3),
        recompute=_choices("recompute", recompute, RECOMPUTES) or RECOMPUTES,
        micro_batches=(micro_batch,) if micro_batch is not None else _ints("micro-batches", micro_batches),
        schedules=_choices("schedule", schedule, SCHEDULES),
    )
    progress = DelayedProgress(enabled=sys.stderr.isatty())
    try:
        result = search_engines(
            spec,
            hw,
            space,
            engines,
            objective=objective,
            top=top,
            exhaustive=exhaustive or bool(plot),
            checkpointing=Checkpointing(mtbf_hours, mtbf_per, checkpoint_bandwidth),
            progress=progress,
            keep_rejections=explain_field is not None,
        )
    finally:
        progress.close()
    if save:
        _save(save, result, model_ref=model, gpus=gpus, training=engine_overrides(locals()))
    if plot:
        from planner.render.plot import plot_search

        plot_search(result, plot)
    if as_json:
        emit_json(search_doc(result, gb_default).as_json())
        return
    print_result(out, result, global_batch_default=gb_default, save=save, plot=plot, wide=wide)
    if explain_field is not None:
        print_explain(out, result, *explain_field)


def _save(path: str, result: object, *, model_ref: str, gpus: int, training: dict[str, object]) -> None:
    """Write the best plan, with the model, hardware, engine and per-run engine settings that priced it."""
    from planner.explore.results import SearchResult
    from planner.io.planfile import write_plan_file

    assert isinstance(result, SearchResult)
    b = result.best
    if b is None:
        raise PlannerError(f"nothing fits, so there is no plan to --save to {path!r}")
    write_plan_file(
        path,
        plan=b.plan,
        model=model_ref,
        hardware=result.hardware.name,
        engine=b.estimate.engine.name,
        gpus=gpus,
        training={k: v for k, v in training.items() if v is not None},
        predicted={
            "tokens_per_s": float(b.time.tokens_per_s),
            "step_s": float(b.time.step_s),
            "mfu": float(b.time.mfu),
            "peak_memory_bytes": int(b.estimate.memory.total_bytes),
        },
        header=f"planner search --model {model_ref} --gpus {gpus}: best of {result.valid} valid plans "
        f"by {result.objective}",
    )
