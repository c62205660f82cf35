"""`planner search`: the ranked table, the rejection counts, the closest misses, `--explain`, and the JSON
document of DESIGN.md. The table and the JSON come from the same SearchResult."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from planner.cost.schedule import StepTime
from planner.engine.settings import given_settings, said
from planner.explore.explain import Explanation
from planner.explore.placement import crossing_tiers
from planner.explore.results import Ranked, SearchResult
from planner.explore.space import DEFAULT_MAX_CP_DENSE, LONG_SEQ, cp_left_out
from planner.render.breakdown import batch_text, variant_line
from planner.render.console import escape, natural_width, print_hanging, print_unlimited, rich_console
from planner.render.trust import may_not_fit_lines, trust_lines
from planner.units import fmt_count, fmt_rate, fmt_seconds

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


def time_terms(t: StepTime, n: int = 3) -> list[tuple[str, float]]:
    """The largest terms of the step: compute, recompute, bubble, exposed tp/cp/ep/pp/dp, optimizer."""
    terms = {"compute": t.compute_s, "recompute": t.recompute_s, "bubble": t.bubble_s, "optimizer": t.optimizer_s}
    terms.update({f"{d}": v for d, v in t.exposed_comm_s.items()})
    return sorted(((k, v) for k, v in terms.items() if v > 0.005 * t.step_s), key=lambda kv: -kv[1])[:n]


def _named(engine: Any, precision: str | None) -> str:
    """An engine as the header names it: with the per-run settings it was priced with, but for a --recipe-options
    variant, whose name says its own (memory and estimate say them the same way, render/breakdown.py); `precision`:
    the one searched (None: several)."""
    given = {} if engine.variant_of else given_settings(engine, precision)
    return engine.name + (f" ({said(given)})" if given else "")


def merged_rejections(result: SearchResult) -> list[tuple[str, int, str]]:
    """(reason, count, example) of the rejections, most first, where a --recipe-options variant's reason that its
    base engine's or another variant's says with only the name changed is one line: 'megatron (and 4 variants) has
    no zero 2' for five (--json keeps each)."""
    base_of = {e.name: e.variant_of for e in result.engines if e.variant_of}
    groups: dict[str, list[tuple[str, int]]] = {}
    for reason, n in result.rejected.most_common():
        name = next((v for v in sorted(base_of, key=len, reverse=True) if reason.startswith(v)), None)
        key = base_of[name] + reason[len(name) :] if name else reason
        groups.setdefault(key, []).append((reason, n))
    out = []
    for key, members in groups.items():
        first, n = members[0][0], sum(m for _r, m in members)
        reason = first if len(members) == 1 else _several(key, [r for r, _m in members], base_of)
        out.append((reason, n, result.examples.get(first, "")))
    return sorted(out, key=lambda t: -t[1])


def _several(key: str, reasons: list[str], base_of: dict[str, str]) -> str:
    """The shared reason said once, naming the base engine and how many of its variants share it."""
    base = next(iter(set(base_of.values())))
    for b in set(base_of.values()):
        if key.startswith(b):
            base = b
    variants = sum(1 for r in reasons if any(r.startswith(v) for v in base_of))
    with_base = len(reasons) > variants
    label = f"{base} (and {variants} variants)" if with_base else f"{variants} variants of {base}"
    return label + key[len(base) :]


def _gib(b: float) -> str:
    return f"{b / 2**30:.1f} GiB"


def print_result(
    console: Console, result: SearchResult, *, save: str | None = None, plot: str | None = None, wide: bool = False
) -> None:
    s, m, hw = result.space, result.model, result.hardware
    precision = None if len(result.precisions) > 1 else s.precision
    engines = escape(", ".join(_named(e, precision) for e in (result.engines or [result.engine])))
    console.print(
        f"[bold]{escape(m.name)}[/] ({fmt_count(m.num_params)} params) on {s.gpus} x [bold]{escape(hw.name)}[/] "
        f"({fmt_bytes_short(hw.gpu.hbm_bytes)} each) with {engines}, "
        f"{batch_text(s.global_batch, s.seq_len, m, result.defaulted)}, {', '.join(result.precisions) or s.precision}, "
        f"ranked by {result.objective}"
    )
    pruned = ", ".join(f"{n} {why}" for why, n in result.pruned.items() if n)
    console.print(
        f"evaluated {result.evaluated} candidate plans in {result.seconds:.2f} s: "
        f"[green]{result.valid} valid[/] ({result.timed} with a full step-time estimate"
        + (f"; not timed: {pruned}" if pruned else "")
        + f"), "
        f"[red]{sum(result.rejected.values())} rejected[/]"
    )
    if cp_left_out(m, s):
        console.print(
            f"[dim]cp not searched: an MoE search takes cp from {LONG_SEQ:,} tokens; --max-cp {DEFAULT_MAX_CP_DENSE} "
            "adds it[/]"
        )
    for reason, n, example in merged_rejections(result):
        print_hanging(
            console, f"  {n:>7}  ", escape(reason) + (f"  [dim](e.g. {escape(example)})[/]" if example else "")
        )
    if not result.top:
        print_misses(console, result)
        return
    _print_table(console, result, wide=wide)
    _print_best(console, result)
    if save:
        console.print(f"saved the best plan to {escape(save)} (use it with `planner estimate --plan {escape(save)}`)")
    if plot:
        console.print(f"plotted {len(result.all_timed)} valid plans to {escape(plot)}")


def _print_table(console: Console, result: SearchResult, *, wide: bool) -> None:
    """The ranked plans within the console's width, no number cut: with the two largest time terms when they
    fit, else without that column (--wide brings it back), and the plan and engine wrapped at spaces as a last
    resort. --wide: every column, at the table's own width."""
    if wide:
        print_unlimited(console, _table(result, wide=True, terms=3))
        return
    table = _table(result, wide=False, terms=2)
    if natural_width(console, table) > rich_console(console).width:
        table = _table(result, wide=False, terms=0)
    console.print(table)


CAPTION = "interleaved when vpp is shown; {terms}? = MFU above the best published for this GPU"
TERMS_CAPTION = "time goes to: largest shares of the step (tp/cp/ep/pp/dp = exposed communication); "


def _table(result: SearchResult, *, wide: bool, terms: int) -> Table:
    """The ranked plans (--wide adds per-GPU throughput, a third time term and goodput, which a goodput ranking
    shows anyway). tokens/s carries its error bar; MFU a '?' when above the best published for the hardware; the
    caption names the plans whose memory's 80% interval passes the GPU; `terms` time terms (0: no column)."""
    from rich import box
    from rich.table import Table

    several = len(result.engines) > 1
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    cols = [
        "#",
        *(["engine"] if several else []),
        "plan",
        "mem",
        "step",
        "tokens/s",
        *(["per GPU"] if wide else []),
        "MFU",
        *(["time goes to"] if terms else []),
    ]
    table.caption = CAPTION.format(terms=TERMS_CAPTION if terms else "--wide: where the time goes; ")
    if len(result.precisions) > 1:  # an fp8 plan's MFU is of the fp8 peak: rows of two precisions do not compare
        table.caption += "; MFU is of each plan's own precision's peak: compare tokens/s across precisions"
    for c in cols:
        wraps = c in ("plan", "engine")  # words, never a number: wrapped at spaces only when nothing else fits
        left = c in ("plan", "engine", "time goes to")
        table.add_column(c, justify="left" if left else "right", no_wrap=not wraps, overflow="fold")
    risky = [f"#{i}" for i, r in enumerate(result.top, 1) if r.estimate.may_not_fit]  # said below: no wider table
    if risky:
        table.caption += f"; may not fit (the 80% interval of its memory passes the GPU): {' '.join(risky)}"
    # goodput: with --wide, or where the plans are ranked by it
    goodput = (wide or result.objective == "goodput") and any(r.estimate.checkpoint is not None for r in result.top)
    if goodput:
        table.add_column("goodput", justify="right", no_wrap=True)
    for i, r in enumerate(result.top, 1):
        crossing = crossing_tiers(result.hardware, r.plan)  # tp/cp/ep groups that leave the NVLink domain: their tier
        row = _row(i, r, several=several, wide=wide, terms=terms, goodput=goodput, crossing=crossing)
        if len(result.precisions) > 1:  # several precisions searched: each plan says its own
            row[cols.index("plan")] += f" {r.plan.precision}"
        table.add_row(*row)
    return table


def _row(
    i: int, r: Ranked, *, several: bool, wide: bool, terms: int, goodput: bool, crossing: dict[str, str]
) -> list[str]:
    t, p, e = r.time, r.plan, r.estimate
    shares = " ".join(
        f"{k} {v / t.step_s:.0%}" + (f" ({crossing[k].replace('network', 'net')})" if k in crossing else "")
        for k, v in time_terms(t, terms)
    )
    row = [
        str(i),
        *([escape(e.engine.name)] if several else []),
        _plan_text(p),
        _gib(e.memory.total_bytes),
        fmt_seconds(t.step_s),
        f"{fmt_rate(t.tokens_per_s)} {e.uncertainty.tokens_text()}",
        *([f"{t.tokens_per_s_per_gpu:,.0f}"] if wide else []),
        f"{t.mfu:.0%}" + ("?" if not e.plausibility.ok else ""),
        *([shares] if terms else []),
    ]
    if goodput:
        ck = e.checkpoint
        row.append(f"{ck.goodput:.1%}" if ck else "")
    return row


def _print_best(console: Console, result: SearchResult) -> None:
    best = result.top[0]
    e = best.estimate
    console.print(
        f"best: {best.plan.summary()} {best.plan.schedule}{f' {best.plan.precision}' if result.precisions else ''} "
        f"on {e.engine.name} — {best.time.tokens_per_s:,.0f} "
        f"tokens/s {e.uncertainty.describe()}, MFU {best.time.mfu:.1%}, {_gib(e.memory.total_bytes)} of "
        f"{_gib(e.memory.capacity_bytes)} per GPU"
    )
    calibrated, precision = e.uncertainty.calibrated, best.plan.precision
    for line in trust_lines(e.engine.name, result.hardware.name, calibrated=calibrated, precision=precision):
        console.print(line)
    hint = "" if result.objective == "risk" else "; --risk ranks only plans whose interval fits"
    for line in may_not_fit_lines(e.uncertainty, e.memory, hint):
        console.print(line)
    pl = e.plausibility
    if not pl.ok:
        console.print(
            f"[yellow]the top plan is implausible:[/] its predicted MFU {pl.mfu:.1%} is above the best published "
            f"for this hardware, {pl.mfu_ceiling:.1%} ({pl.source}); treat its rank with suspicion"
        )


def _plan_text(p: Any) -> str:
    if p.schedule == "dualpipev":  # its two chunks per rank are the V: the schedule's name says vpp 2
        return p.summary().replace(f" vpp{p.vpp} ", " dualpipev ", 1)
    return p.summary() + (" gpipe" if p.schedule == "gpipe" else "")


def fmt_bytes_short(b: float) -> str:
    return f"{b / 2**30:.0f} GiB"


def print_misses(console: Console, result: SearchResult) -> None:
    if not result.misses:  # memory never came into it (the search command refuses this case: cli/search.py)
        console.print(f"[red]{escape(result.none_reason())}[/]")
        return
    console.print(f"[red]no plan fits[/] in {_gib(result.hardware.gpu.hbm_bytes)} per GPU. Closest misses:")
    for mi in result.misses:
        precision = f" {mi.plan.precision}" if result.precisions else ""
        console.print(
            f"  {mi.plan.summary()} {mi.plan.schedule}{precision}: {_gib(mi.bytes)} needed, {_gib(mi.over_bytes)} over"
        )
        for v in mi.variants:
            console.print(variant_line(v))
        if mi.gpus_needed is None:
            grow = "dp and ep" if result.model.moe is not None else "dp"
            console.print(f"      more GPUs ({grow} up to x16384) would not make it fit: {_remedy(result)}")


def _remedy(result: SearchResult) -> str:
    """What is left to a plan more GPUs do not make fit: tp or pp where a searched engine runs them."""
    engines = result.engines or [result.engine]
    offered = [d for d, on in (("tp", "tensor_parallel"), ("pp", "pipeline_parallel"))
               if any(getattr(e.rules, on) for e in engines)]  # fmt: skip
    if offered:
        return f"add {'/'.join(offered)}, or larger-memory GPUs"
    return f"use larger-memory GPUs ({', '.join(e.name for e in engines)} runs neither tp nor pp)"


def print_explain(console: Console, result: SearchResult, why: Explanation, field_name: str, value: Any) -> None:
    """--explain: from the search pinned to field == value (explore/explain.py): its rejections by reason, and its
    best valid plan against the winner."""
    console.print(f"\nwhy not {field_name}={value}?")
    if why.outside is not None:
        console.print(f"  no candidate had {field_name}={value}: {escape(why.outside)}")
    if why.pinned_error is not None:  # said once: the space's reason where it has one, else the search's
        if why.outside is None:
            console.print(f"  pinned to it, the search refuses: {escape(why.pinned_error)}")
        return
    if why.in_top:
        console.print(f"  {why.in_top} of the top {len(result.top)} plans have {field_name}={value}")
    console.print(
        f"  searched with {field_name}={value} pinned: {why.rejected + why.valid} candidates, {why.rejected} "
        f"rejected, {why.valid} valid"
    )
    for reason, n in why.by_reason.most_common():
        print_hanging(console, f"  {n:>7}  ", f"{escape(reason)}  [dim](e.g. {escape(why.examples[reason])})[/]")
    share, best = why.best_share, why.best
    on = f" on {best.estimate.engine.name}" if best is not None and len(result.engines) > 1 else ""
    winner = result.best
    if (
        best is not None
        and winner is not None
        and (best.plan, best.estimate.engine) == (winner.plan, winner.estimate.engine)
    ):
        console.print(f"  the best of them is the winner, {_plan_text(best.plan)}{on}")
    elif best is not None and share is not None:  # with several engines, the engine each runs on
        than = f"{abs(share - 1):.1%} {'above' if share > 1 else 'below'} the winner's"
        console.print(
            f"  the best of them, {_plan_text(best.plan)}{on}, runs {best.time.tokens_per_s:,.0f} tokens/s, {than}"
        )
