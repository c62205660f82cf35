"""`planner search`: the typer command and its rendering (the library is planner/search.py).

Registered at the end of cli.py. Nothing here imports matplotlib unless --plot is given.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Annotated, Any, Optional

import typer
from rich.console import Console

from planner.errors import PlannerError
from planner.cli.options import (CpOpt, DpOpt, EpOpt, GlobalBatchOpt, GpusOpt, HardwareOpt, JsonOpt, MicroBatchOpt, ModelOpt,
                      NoFlashOpt, OptimizerOpt, PpOpt, PrecisionOpt, SelectivePolicyOpt, SeqLenOpt, SpOpt, TpOpt,
                      VppOpt)

ZeroListOpt = Annotated[Optional[str], typer.Option("--zero", help="ZeRO stages to search, comma list (e.g. 1,3)")]
RecomputeListOpt = Annotated[Optional[str], typer.Option(
    "--recompute", help="recompute levels to search, comma list: none,selective,full")]
ScheduleListOpt = Annotated[Optional[str], typer.Option(
    "--schedule", help="schedules to search, comma list: 1f1b,interleaved (gpipe only when named)")]
MicroBatchesOpt = Annotated[Optional[str], typer.Option(
    "--micro-batches", help="micro-batch sizes to search, comma list (default: powers of 2 up to 16)")]
MaxTpOpt = Annotated[Optional[int], typer.Option("--max-tp", min=1, help="largest tp (default 2 nodes' GPUs)")]
MaxPpOpt = Annotated[Optional[int], typer.Option("--max-pp", min=1, help="largest pp (default num_layers)")]
MaxCpOpt = Annotated[Optional[int], typer.Option(
    "--max-cp", min=1, help="largest cp (default 1, or 16 when seq_len >= 32768)")]
MaxEpOpt = Annotated[Optional[int], typer.Option("--max-ep", min=1, help="largest ep (MoE models)")]
MaxVppOpt = Annotated[int, typer.Option("--max-vpp", min=1, help="largest vpp for the interleaved schedule")]
ObjectiveOpt = Annotated[str, typer.Option("--objective", help="throughput | memory | goodput")]
TopOpt = Annotated[int, typer.Option("--top", min=1, help="how many plans to show")]
SaveOpt = Annotated[Optional[str], typer.Option("--save", help="write the best plan to FILE.yaml")]
PlotOpt = Annotated[Optional[str], typer.Option(
    "--plot", help="FILE.svg|png: throughput vs memory of every valid plan (needs planner[plot])")]
ExplainOpt = Annotated[Optional[str], typer.Option("--explain", "--why", help="FIELD=VALUE, e.g. tp=16: why such plans lost")]
ExhaustiveOpt = Annotated[bool, typer.Option("--exhaustive", help="time every valid plan (no pruning)")]
MtbfOpt = Annotated[Optional[float], typer.Option("--mtbf-hours", min=0.0, help="mean time between failures, hours")]
MtbfPerOpt = Annotated[str, typer.Option("--mtbf-per", help="gpu | node: what --mtbf-hours is per")]
CkptBwOpt = Annotated[Optional[float], typer.Option(
    "--checkpoint-bandwidth", min=0.0, help="checkpoint write bandwidth, bytes/s (default: profile x nodes)")]

PROGRESS_DELAY_S = 0.5


def _ints(name: str, text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise PlannerError(f"--{name} {text!r}: expected integers separated by commas, e.g. 1,2,4") from None


def _words(text: str | None) -> tuple[str, ...] | None:
    return None if text is None else tuple(x.strip() for x in text.split(",") if x.strip())


class _DelayedProgress:
    """A rich progress bar on stderr that appears only once the search has run PROGRESS_DELAY_S."""

    def __init__(self, enabled: bool) -> None:
        self.enabled, self.start, self.bar, self.task = enabled, time.perf_counter(), None, None

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            if time.perf_counter() - self.start < PROGRESS_DELAY_S:
                return
            from rich.progress import Progress

            self.bar = Progress(console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task("searching", total=total)
        self.bar.update(self.task, completed=done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def search(
    model: ModelOpt = None,  # type: ignore[assignment]
    hardware: HardwareOpt = "h100-sxm",
    gpus: GpusOpt = None, tp: TpOpt = None, pp: PpOpt = None, dp: DpOpt = None, cp: CpOpt = None,
    ep: EpOpt = None, vpp: VppOpt = None, sp: SpOpt = None, zero: ZeroListOpt = None,
    recompute: RecomputeListOpt = None, micro_batch: MicroBatchOpt = None, micro_batches: MicroBatchesOpt = None,
    global_batch: GlobalBatchOpt = None, seq_len: SeqLenOpt = None, precision: PrecisionOpt = None,
    schedule: ScheduleListOpt = None,
    max_tp: MaxTpOpt = None, max_pp: MaxPpOpt = None, max_cp: MaxCpOpt = None, max_ep: MaxEpOpt = None,
    max_vpp: MaxVppOpt = 4,
    objective: ObjectiveOpt = "throughput", top: TopOpt = 10,
    mtbf_hours: MtbfOpt = None, mtbf_per: MtbfPerOpt = "gpu", checkpoint_bandwidth: CkptBwOpt = None,
    optimizer: OptimizerOpt = "adamw", selective_policy: SelectivePolicyOpt = "op", no_flash: NoFlashOpt = False,
    save: SaveOpt = None, plot: PlotOpt = None, explain: ExplainOpt = None, exhaustive: ExhaustiveOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Every valid plan for N GPUs, ranked by throughput (or memory, goodput); why the rest were rejected."""
    from planner.io.catalog import load_hardware, load_model
    from planner.cli import _training
    from planner.search import pipeline as lib

    if model is None:
        raise PlannerError("no model given: pass --model NAME|PATH (see `planner models`)")
    if gpus is None:
        raise PlannerError("no GPU count given: pass --gpus N")
    if objective not in lib.OBJECTIVES:
        raise PlannerError(f"--objective {objective!r} is not valid; choose one of {', '.join(lib.OBJECTIVES)}")
    if precision is not None and precision not in ("fp32", "bf16", "fp16", "fp8"):
        raise PlannerError(f"--precision {precision!r} is not valid; choose one of fp32, bf16, fp16, fp8")
    if micro_batch is not None and micro_batches is not None:
        raise PlannerError("give --micro-batch B or --micro-batches LIST, not both")
    explain_field = lib.parse_explain(explain) if explain else None
    if plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise PlannerError("--plot needs matplotlib: pip install 'planner[plot]'") from None
        if not plot.lower().endswith((".svg", ".png", ".pdf")):
            raise PlannerError(f"--plot {plot!r}: the file name must end in .svg, .png or .pdf")
    training = _training(optimizer, selective_policy, no_flash)
    spec = load_model(model)
    hw = load_hardware(hardware)
    gb_default = global_batch is None
    space = lib.Space(
        gpus=gpus, global_batch=global_batch or lib.default_global_batch(gpus),
        seq_len=seq_len or spec.max_seq_len, precision=precision or "bf16",
        tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, vpp=vpp, sp=sp,
        max_tp=max_tp, max_pp=max_pp, max_cp=max_cp, max_ep=max_ep, max_vpp=max_vpp,
        zero=_ints("zero", zero) or (0, 1, 2, 3), recompute=_words(recompute) or lib.RECOMPUTES,
        micro_batches=(micro_batch,) if micro_batch is not None else _ints("micro-batches", micro_batches),
        schedules=_words(schedule),
    )
    progress = _DelayedProgress(enabled=sys.stderr.isatty())
    try:
        result = lib.search(spec, hw, space, training, objective=objective, top=top, exhaustive=exhaustive or bool(plot),
                            mtbf_hours=mtbf_hours, mtbf_per=mtbf_per, checkpoint_bandwidth=checkpoint_bandwidth,
                            progress=progress, keep_rejections=explain_field is not None)
    finally:
        progress.close()
    if save:
        if result.best is None:
            raise PlannerError(f"nothing fits, so there is no plan to --save to {save!r}")
        from planner.io.planfile import write_plan_file

        b = result.best
        write_plan_file(save, plan=b.plan, model=model, hardware=hw.name, gpus=gpus,
                        predicted={"tokens_per_s": float(b.time.tokens_per_s), "step_s": float(b.time.step_s),
                                   "mfu": float(b.time.mfu), "peak_memory_bytes": int(b.estimate.memory.total_bytes)},
                        header=f"planner search --model {model} --gpus {gpus}: best of {result.valid} valid plans "
                               f"by {objective}")
    if plot:
        from planner.render.plot import plot_search

        plot_search(result, plot)
    if as_json:
        sys.stdout.write(json.dumps(result_json(result, gb_default), indent=2) + "\n")
        return
    from planner.cli import out

    print_result(out, result, global_batch_default=gb_default, save=save, plot=plot)
    if explain_field is not None:
        print_explain(out, result, *explain_field)


# ---- rendering -------------------------------------------------------------------------------------
def result_json(result: Any, global_batch_default: bool = False) -> dict[str, Any]:
    from planner.search.pipeline import plan_row

    s = result.space
    doc: dict[str, Any] = {
        "evaluated": result.evaluated,
        "valid": result.valid,
        "rejected": dict(result.rejected),
        "timed": result.timed,
        "pruned": dict(result.pruned),
        "seconds": result.seconds,
        "model": result.model.name,
        "hardware": result.hardware.name,
        "gpus": s.gpus,
        "global_batch": s.global_batch,
        "global_batch_default": global_batch_default,
        "seq_len": s.seq_len,
        "objective": result.objective,
        "plans": [plan_row(r) for r in result.top],
    }
    if result.misses:
        doc["closest_misses"] = [
            {"plan": m.plan.model_dump(), "total_bytes": int(m.bytes), "over_bytes": int(m.over_bytes),
             "variants": [{"change": what, "plan": q.model_dump(), "total_bytes": int(b), "fits": ok}
                          for what, q, b, ok in m.variants],
             "gpus_needed": m.gpus_needed}
            for m in result.misses]
    return doc


def _gib(b: float) -> str:
    return f"{b / 2**30:.1f} GiB"


def print_result(console: Console, result: Any, *, global_batch_default: bool, save: str | None = None,
                 plot: str | None = None) -> None:
    from rich import box
    from rich.table import Table

    from planner.search.pipeline import NOT_FIT, time_terms
    from planner.units import fmt_count, fmt_seconds

    s, m, hw = result.space, result.model, result.hardware
    gb = f"{s.global_batch}" + (" (default: max(1024, gpus); --global-batch to change)" if global_batch_default else "")
    console.print(f"[bold]{m.name}[/] ({fmt_count(m.num_params)} params) on {s.gpus} x [bold]{hw.name}[/] "
                  f"({fmt_bytes_short(hw.gpu.hbm_bytes)} each), global batch {gb} x {s.seq_len} tokens, "
                  f"{s.precision}, ranked by {result.objective}")
    pruned = ", ".join(f"{n} {why}" for why, n in result.pruned.items() if n)
    console.print(f"evaluated {result.evaluated} candidate plans in {result.seconds:.2f} s: "
                  f"[green]{result.valid} valid[/] ({result.timed} with a full step-time estimate"
                  + (f"; not timed: {pruned}" if pruned else "") + f"), "
                  f"[red]{sum(result.rejected.values())} rejected[/]")
    for reason, n in result.rejected.most_common():
        example = result.examples.get(reason, "")
        console.print(f"  {n:>7}  {reason}" + (f"  [dim](e.g. {example})[/]" if example else ""), soft_wrap=True)
    if not result.top:
        print_misses(console, result)
        return
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    cols = ("#", "plan", "mem/GPU", "step", "tokens/s", "per GPU", "MFU", "where the time goes")
    table.caption = ("schedule 1f1b, interleaved when vpp is shown; where the time goes: largest shares of the "
                     "step (tp/cp/ep/pp/dp = exposed communication)")
    for c in cols:
        table.add_column(c, justify="left" if c in ("plan", "where the time goes") else "right",
                         no_wrap=True)
    goodput = any(r.estimate.checkpoint is not None for r in result.top)
    if goodput:
        table.add_column("goodput", justify="right")
    for i, r in enumerate(result.top, 1):
        t, p = r.time, r.plan
        terms = " ".join(f"{k} {v / t.step_s:.0%}" for k, v in time_terms(t))
        row = [str(i), _plan_text(p), _gib(r.estimate.memory.total_bytes), fmt_seconds(t.step_s),
               f"{t.tokens_per_s:,.0f}", f"{t.tokens_per_s_per_gpu:,.0f}", f"{t.mfu:.1%}", terms]
        if goodput:
            row.append(f"{r.estimate.checkpoint.goodput:.1%}")
        table.add_row(*row)
    console.print(table)
    best = result.top[0]
    console.print(f"best: {best.plan.summary()} {best.plan.schedule} — {best.time.tokens_per_s:,.0f} tokens/s, "
                  f"MFU {best.time.mfu:.1%}, {_gib(best.estimate.memory.total_bytes)} of "
                  f"{_gib(best.estimate.memory.capacity_bytes)} per GPU")
    if NOT_FIT in result.rejected and result.objective != "memory":
        pass
    if save:
        console.print(f"saved the best plan to {save} (use it with `planner estimate --plan {save}`)")
    if plot:
        console.print(f"plotted {len(result.all_timed)} valid plans to {plot}")


def _plan_text(p: Any) -> str:
    return p.summary() + (" gpipe" if p.schedule == "gpipe" else "")


def fmt_bytes_short(b: float) -> str:
    return f"{b / 2**30:.0f} GiB"


def print_misses(console: Console, result: Any) -> None:
    console.print(f"[red]no plan fits[/] in {_gib(result.hardware.gpu.hbm_bytes)} per GPU. Closest misses:")
    if not result.misses:
        console.print("  (no plan passed the structural checks; see the reasons above)")
        return
    for mi in result.misses:
        console.print(f"  {mi.plan.summary()} {mi.plan.schedule}: {_gib(mi.bytes)} needed, "
                      f"{_gib(mi.over_bytes)} over")
        for what, _q, b, ok in mi.variants:
            verdict = "[green]fits[/]" if ok else "[red]still over[/]"
            console.print(f"      with {what}: {_gib(b)} — {verdict}")
        if mi.gpus_needed is None:
            console.print("      more GPUs (dp up to x16384) would not make it fit: add tp/pp, or larger-memory GPUs")


def print_explain(console: Console, result: Any, field_name: str, value: Any) -> None:
    from planner.search.pipeline import explain

    total, counts, details, in_top = explain(result, field_name, value)
    console.print(f"\nwhy not {field_name}={value}?")
    if not total and not in_top:
        if not result.considered(field_name, value):
            console.print(f"  no candidate had {field_name}={value}: it is outside the search space "
                          f"(fix it with --{field_name.replace('_', '-')} {value}, or raise --max-{field_name})")
            return
    if in_top:
        console.print(f"  {in_top} of the top {len(result.top)} plans have {field_name}={value}")
    console.print(f"  {total} candidate plans with {field_name}={value} were rejected:")
    for reason, n in counts.most_common():
        console.print(f"  {n:>7}  {reason}  [dim](e.g. {details[reason]})[/]", soft_wrap=True)
    if not total and not in_top:
        console.print(f"  the valid ones were slower than the top {len(result.top)}")
