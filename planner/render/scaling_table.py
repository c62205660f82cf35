"""`planner scale`: the table of the best plan per GPU count, and its plot (tokens/s and MFU against GPUs, the time to
train against GPUs). matplotlib is the optional extra `plot`, imported only for --plot."""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.errors import PlannerError
from planner.render.console import escape, print_fitted
from planner.units import fmt_count, fmt_hours, fmt_rate, fmt_seconds

if TYPE_CHECKING:
    from rich.console import Console

    from planner.api.scaling import Scaling


PLAN_MIN = len("rc=selective")  # the plan column's narrowest: its longest word


def print_scaling(console: Console, s: Scaling) -> None:
    from rich.table import Table

    engines = list(dict.fromkeys(p.engine for p in s.points if p.plan is not None and p.engine))
    several = len(engines) > 1  # the best plan's engine differs between counts: a column says which
    precision = next((p.plan.precision for p in s.points if p.plan is not None), None)  # one for the curve
    console.print(
        f"[bold]{escape(s.model)}[/] on [bold]{escape(s.hardware)}[/]"
        + (f" in [bold]{escape(s.cluster)}[/]" if s.cluster else "")
        + (f" with {escape(engines[0])}{_best_of(s)}" if len(engines) == 1 else "")
        + (f", {s.batch}" if s.batch else "")
        + (f", {precision}" if precision else "")
        + f", {fmt_count(s.tokens)} tokens to train: the best plan at each GPU count"
    )
    table = Table(show_edge=False, box=None, header_style="bold")
    priced = s.failures is not None  # the times are expected ones, failures priced: the goodput says how much
    columns = ("GPUs", *(("engine",) if several else ()), "plan", "batch", "tokens/s", "per GPU", "MFU", "step")
    for col in (*columns, *(("goodput",) if priced else ()), "to train", "GPU-hours"):
        # the plan wraps between its degrees to fit the terminal (100 columns piped); the numbers never do
        table.add_column(
            col,
            justify="left" if col in ("plan", "engine") else "right",
            no_wrap=col != "plan",
            min_width=PLAN_MIN if col == "plan" else None,
        )
    best_per_gpu = max((p.tokens_per_s_per_gpu for p in s.points if p.plan is not None), default=0.0)
    for p in s.points:
        if p.plan is None:
            blank = [""] if several else []
            table.add_row(
                str(p.gpus), *blank, f"[red]{escape(_short(p.note or 'nothing fits'))}[/]", *[""] * (8 if priced else 7)
            )
            continue
        share = p.tokens_per_s_per_gpu / best_per_gpu if best_per_gpu else 0.0
        table.add_row(
            str(p.gpus),
            *([escape(p.engine or "")] if several else []),
            escape(p.plan.summary()),
            str(p.plan.global_batch),
            fmt_rate(p.tokens_per_s) + (f"\n{p.uncertainty.tokens_text()}" if p.uncertainty else ""),
            f"{p.tokens_per_s_per_gpu:,.0f} ({share:.0%})",
            f"{p.mfu:.1%}" + ("?" if p.plausibility is not None and not p.plausibility.ok else ""),
            fmt_seconds(p.step_s),
            *([f"{p.goodput:.1%}" if p.goodput is not None else ""] if priced else []),
            "[red]never[/]" if p.stalled else fmt_seconds(p.priced_train_s),
            "-" if p.stalled else fmt_hours(p.priced_gpu_hours),
        )
    print_fitted(console, table)
    _footer(console, s)


def _best_of(s: Scaling) -> str:
    """Where --engine named several, the one engine shown is the best of them at every count."""
    return f" (the best of --engine {escape(s.engines_searched)} at every count)" if s.engines_searched else ""


def _footer(console: Console, s: Scaling) -> None:
    """What the columns mean, the failure rate the times are priced at, and the whole reason where a row cut it."""
    free = "; failure-free: the goodput column is the share failures leave" if s.failures is not None else ""
    console.print(
        f"tokens/s: the prediction, its 80% interval below; per GPU: tokens/s per GPU (share of the best count's{free})"
    )
    above = next((p.plausibility for p in s.points if p.plausibility is not None and not p.plausibility.ok), None)
    if above is not None:
        ceiling = f"{above.mfu_ceiling:.1%}" if above.mfu_ceiling is not None else "?"
        console.print(f"? = MFU above the best published for this GPU, {ceiling} ({escape(above.source)})")
    if risky := [f"{p.gpus:,}" for p in s.points if p.plan is not None and p.may_not_fit]:
        console.print(
            f"[yellow]may not fit[/] (the 80% interval of its memory passes the GPU): the plan at {', '.join(risky)} "
            "GPUs; planner search --risk ranks only plans whose interval fits"
        )
    if s.failures is not None:
        console.print(
            f"goodput: the share of wall time that trains with a checkpoint every Young/Daly interval; to train and "
            f"GPU-hours include checkpoint writes{_writes(s)}, lost work and a restart of "
            f"{s.restart_s / 60:g} min per failure: a GPU fails every {s.failures.gpu_mtbf_hours:,.0f} h "
            f"({escape(s.failures.source)})"
        )
    else:
        console.print(
            "[dim]failure-free times: --mtbf-hours H (or --cluster) prices checkpoints, lost work and restarts[/]"
        )
    _underfed(console, s)
    if slower := s.slower_than_fewer():
        said = "; ".join(f"{g:,} GPUs train longer than {f:,}" for g, f in slower.items())
        failures = ", more frequent failures" if s.failures is not None else ""
        defaulted = [p for p in s.points if p.gpus in slower and "global_batch" in p.defaulted]
        hint = "use fewer GPUs, or --global-batch auto" if defaulted else "use fewer GPUs"
        console.print(
            f"[yellow]slower with more GPUs:[/] {said}, whose extra GPUs cost more time than they take off (as a "
            f"smaller share of the batch each, a deeper pipeline{failures} can): {hint}"
        )
    if s.note:
        console.print(f"[yellow]note:[/] {escape(s.note)}")
    for p in s.points:  # the whole reason where the row cut it, and why a plan that fits never trains
        if p.stalled and p.note:
            console.print(f"[red]{p.gpus} GPUs stall:[/] {escape(p.note)} (failure-free figures in the row)")
        elif p.plan is None and p.note and _short(p.note) != p.note:
            console.print(f"{p.gpus} GPUs: {escape(p.note)}")


def _underfed(console: Console, s: Scaling) -> None:
    """Where the default batch leaves a count's GPUs underfed (below WELL of the best count's per-GPU rate, what the
    goodput keeps where failures are priced, as --global-batch auto measures it), the option that chooses a batch
    per count."""
    from planner.explore.advice import WELL

    ran = [p for p in s.points if p.plan is not None and not p.stalled]  # a stall is the failures', not the batch's
    kept = {p.gpus: p.tokens_per_s_per_gpu * (1.0 if p.goodput is None else p.goodput) for p in ran}  # 0.0 was 1
    best = max(kept.values(), default=0.0)
    low = [p.gpus for p in ran if "global_batch" in p.defaulted and kept[p.gpus] < WELL * best]
    if low:
        console.print(
            f"[yellow]note:[/] the default batch keeps {', '.join(map(str, low))} GPUs below {WELL:.0%} of the best "
            "per-GPU rate: --global-batch auto chooses a batch for each count (within --max-tokens-per-step)"
        )


def _writes(s: Scaling) -> str:
    """' (69.4 ms–554.9 ms each at the job's storage bandwidth)': how long the counts' checkpoints take to write
    (the GPU profile's per node, a cluster's storage, or --checkpoint-bandwidth)."""
    writes = sorted(p.checkpoint.checkpoint_s for p in s.points if p.checkpoint is not None)
    if not writes:
        return ""
    span = "–".join(dict.fromkeys(fmt_seconds(w) for w in (writes[0], writes[-1])))
    return f" ({span} each at the job's storage bandwidth)"


def _short(note: str, width: int = 60) -> str:
    return note if len(note) <= width else note[: width - 1] + "…"


def plot_scaling(s: Scaling, path: str) -> None:
    from planner.render.plot import pyplot, save_figure

    plt = pyplot()

    pts = [p for p in s.points if p.plan is not None]
    if not pts:  # a log axis of no points raised a traceback (audit)
        raise PlannerError(
            f"--plot {path}: no GPU count has a plan that fits, nothing to draw (without --plot the table says why)"
        )
    gpus = [p.gpus for p in pts]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    top.plot(gpus, [p.tokens_per_s for p in pts], "-o", color="tab:blue", label="tokens/s")
    top.set_ylabel("tokens/s (best plan)")
    mfu = top.twinx()
    mfu.plot(gpus, [100 * p.mfu for p in pts], "--s", color="tab:orange", label="MFU")
    mfu.set_ylabel("MFU (%)")
    failures = f", with failures (restart {s.restart_s / 60:g} min)" if s.failures else ", failure-free"
    top.set_title(f"{s.model} on {s.hardware}: {fmt_count(s.tokens)} tokens{failures}")
    top.grid(alpha=0.3)
    trains = [p for p in pts if not p.stalled]  # a count that stalls never trains: no time to draw
    days = [p.priced_train_s / 86400 for p in trains]
    bottom.plot([p.gpus for p in trains], days, "-o", color="tab:green", label="days to train")
    bottom.set_ylabel("days to train")
    hours = bottom.twinx()
    hours.plot(
        [p.gpus for p in trains], [p.priced_gpu_hours / 1e6 for p in trains], "--s", color="tab:red", label="GPU-hours"
    )
    hours.set_ylabel("GPU-hours (millions)")
    bottom.set_xscale("log", base=2)
    bottom.set_xlabel("GPUs")
    bottom.grid(alpha=0.3)
    for ax_pair in ((top, mfu), (bottom, hours)):
        lines = [ln for ax in ax_pair for ln in ax.get_lines()]
        ax_pair[0].legend(lines, [str(ln.get_label()) for ln in lines], fontsize=8, loc="upper left")
    save_figure(fig, path)
