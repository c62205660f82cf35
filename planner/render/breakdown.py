"""Rendering: rich tables with bars, and the JSON documents of DESIGN.md. The table and the JSON
come from the same result objects."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from planner.cost.estimate import CEILING_SEQ_LEN
from planner.cost.flops import executed_share
from planner.cost.memory import MemoryReport
from planner.cost.uncertainty import Uncertainty
from planner.engine import Engine
from planner.engine.settings import given_settings, said
from planner.hardware import HardwareProfile
from planner.plan import DEFAULT_SEQ_LEN_CAP, DERIVABLE, Plan, nondefault_microbatch_group
from planner.render.console import escape
from planner.render.training import train_lines
from planner.render.trust import may_not_fit_lines, trust_lines
from planner.specs import ModelSpec
from planner.units import GiB, fmt_bytes, fmt_count

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from planner.explore.results import Miss, Variant

BAR_WIDTH = 24


def bar(fraction: float, width: int = BAR_WIDTH) -> str:
    fraction = max(0.0, min(1.0, fraction))
    full = int(fraction * width)
    part = "▏▎▍▌▋▊▉"[int((fraction * width - full) * 7)] if full < width and fraction * width - full > 1 / 7 else ""
    return "█" * full + part


def batch_text(
    global_batch: int, seq_len: int, model: ModelSpec, defaulted: frozenset[str] = frozenset(), label: str = ""
) -> str:
    """ "global batch G x S tokens", saying which of the two the defaults gave and how (every command's header);
    `label` in place of G where a rule chose it (scale's `auto`)."""
    gb = label or f"{global_batch}"
    if "global_batch" in defaulted and not label:
        gb += f" (default: about 4M tokens, here {fmt_count(global_batch * seq_len)}; --global-batch to change)"
    seq = f"{seq_len} tokens"
    if "seq_len" in defaulted:
        context = (
            "the model's context"
            if seq_len >= model.max_seq_len
            else f"at most {DEFAULT_SEQ_LEN_CAP} of the model's {model.max_seq_len}"
        )
        seq += f" (default: {context}; --seq-len to change)"
    elif seq_len > model.max_seq_len:  # context extension is planned this way; the user should know it is one
        seq += f" (beyond {model.name}'s {model.max_seq_len}-token context)"
    return f"global batch {gb} x {seq}"


def _at_ceiling_length(est: Any) -> str:
    """What the MFU set against the ceiling is, where it is not the MFU printed (sequences past the ceilings')."""
    return f" (attention counted as at {CEILING_SEQ_LEN:,} tokens)" if est.plan.seq_len > CEILING_SEQ_LEN else ""


def plan_line(
    model: ModelSpec,
    hw: HardwareProfile,
    plan: Plan,
    engine: Engine | None = None,
    defaulted: frozenset[str] = frozenset(),
) -> str:
    run_by = f" with {escape(engine.name)}" if engine is not None else ""
    given = given_settings(engine, plan) if engine is not None else {}
    if given:  # the per-run settings that differ from the profile's: what the numbers assume
        run_by += f" ({escape(said(given))})"
    return (
        f"[bold]{escape(model.name)}[/] ({fmt_count(model.num_params)} params) on {plan.gpus} x {escape(hw.name)}"
        f"{run_by}: {plan.summary()}{_derived_text(plan, defaulted)}, {plan.precision}, {plan.schedule}, "
        f"{batch_text(plan.global_batch, plan.seq_len, model, defaulted)}, {plan.num_microbatches} "
        f"micro-batch{'es' if plan.num_microbatches != 1 else ''} per step{_group_text(plan)}"
    )


def _derived_text(plan: Plan, defaulted: frozenset[str]) -> str:
    """The degree --gpus made up where dp was given (plan.py derive_plan: the one degree left out)."""
    made = [d for d in DERIVABLE if d in defaulted]
    return "".join(f" ({d} {getattr(plan, d)} derived: --gpus {plan.gpus} over the degrees given)" for d in made)


def _group_text(plan: Plan) -> str:
    """Interleaved with micro-batches pp does not divide: the group each virtual stage takes at a time, which the
    memory was priced with (Megatron's emitted files state it, --microbatch-group-size-per-virtual-pipeline-stage;
    torch's looped schedule takes it by itself)."""
    group = nondefault_microbatch_group(plan)
    return "" if group is None else f" (each virtual stage takes them {group} at a time)"


def share_table(title: str, unit: str, rows: list[tuple[str, str, float]], color: str, total: tuple[str, str]) -> Table:
    """Terms with their values, shares and bars, then the total (memory per GPU and the step's time)."""
    from rich.table import Table

    table = Table(title=title, title_justify="left", show_edge=False)
    table.add_column("term")
    table.add_column(unit, justify="right")
    table.add_column("share", justify="right")
    table.add_column("", no_wrap=True)
    for name, value, share in rows:
        table.add_row(name, value, f"{share:5.1%}", f"[{color}]{bar(share)}[/]")
    table.add_section()
    table.add_row(f"[bold]{total[0]}[/]", f"[bold]{total[1]}[/]", "", "")
    return table


def memory_table(report: MemoryReport, title: str) -> Table:
    total = report.peak.total_bytes
    rows = [
        (term, fmt_bytes(value), value / total if total else 0.0)
        for term, value in report.peak.breakdown.as_dict().items()
    ]
    table = share_table(title, "per GPU", rows, "cyan", ("total", fmt_bytes(total)))
    table.add_row("capacity", fmt_bytes(report.capacity_bytes), "", f"[dim]{bar(total / report.capacity_bytes)}[/]")
    return table


def stages_table(report: MemoryReport) -> Table:
    from rich import box
    from rich.table import Table

    table = Table(
        title="per pipeline stage, GiB (* = most loaded)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
    )
    # "mbs" = micro-batches whose activations the stage holds at its peak
    for col in ("stage", "layers", "mbs", "weights", "grads", "optim", "activ", "buffers", "rsrvd", "total"):
        table.add_column(col, justify="right", min_width=len(col))
    for s in report.stages:
        mark = "*" if s is report.peak else ""
        table.add_row(
            f"{s.stage}{mark}",
            str(s.layers),
            f"{round(s.in_flight_microbatches, 2):g}",  # interleaved: chunk passes over v (61/3 = 20.33)
            *(f"{v / GiB:.2f}" for v in s.breakdown.as_dict().values()),
            f"{s.total_bytes / GiB:.2f}",
        )
    return table


def fits_line(report: MemoryReport) -> str:
    if report.fits:
        return (
            f"[green]fits[/]: {fmt_bytes(report.total_bytes)} of {fmt_bytes(report.capacity_bytes)} on the "
            f"most loaded stage ({report.peak.stage}), headroom {fmt_bytes(report.headroom_bytes)}"
        )
    return (
        f"[red]does not fit[/]: {fmt_bytes(report.total_bytes)} needed on stage {report.peak.stage}, "
        f"{fmt_bytes(report.capacity_bytes)} available ({fmt_bytes(-report.headroom_bytes)} over)"
    )


def print_memory(
    console: Console,
    model: ModelSpec,
    hw: HardwareProfile,
    plan: Plan,
    report: MemoryReport,
    *,
    per_stage: bool,
    engine: Engine | None = None,
    defaulted: frozenset[str] = frozenset(),
    miss: Miss | None = None,
    trust: Uncertainty | None = None,  # the 80% interval of its memory (Coster.memory_trust)
) -> None:
    console.print(plan_line(model, hw, plan, engine, defaulted))
    console.print(memory_table(report, f"memory per GPU, stage {report.peak.stage} (most loaded)"))
    if per_stage:
        console.print(stages_table(report))
    for note in report.notes:
        console.print(f"[dim]note: {escape(note)}[/]")
    if trust is not None:
        console.print(f"interval: {escape(trust.describe_memory())}")
    console.print(fits_line(report))
    for line in would_fit_lines(miss) + may_not_fit_lines(trust, report):
        console.print(line)


def variant_line(v: Variant) -> str:
    """A change tried on a plan that does not fit (explore/misses.py), as memory and search's misses say it."""
    verdict = "[green]fits[/]" if v.fits else "[red]still over[/]"
    if v.may_not_fit:
        verdict = "[yellow]fits; its 80% interval of memory passes the GPU[/]"
    return f"      with {escape(v.change)}: {fmt_bytes(v.nbytes)} — {verdict}"


def would_fit_lines(miss: Miss | None) -> list[str]:
    """The changes tried on one plan that does not fit, and a line where none of them fits."""
    if miss is None:
        return []
    lines = [variant_line(v) for v in miss.variants]
    if not any(v.fits for v in miss.variants):
        lines.append(
            "      nothing tried makes it fit, more GPUs neither: more model parallelism, or larger-memory GPUs"
        )
    return lines


# ---- estimate --------------------------------------------------------------------------------------
def time_rows(t: Any) -> list[tuple[str, float]]:
    rows = [("compute", t.compute_s), ("recompute", t.recompute_s), ("pipeline bubble", t.bubble_s)]
    # "ep" is the MoE layers' token dispatch and combine, over the expert grid of ep x etp ranks: at ep 1 it is the
    # etp group's (comm.plan_groups), which "ep comm" misnamed
    named = {"ep": "ep/etp"}
    rows += [(f"exposed {named.get(dim, dim)} comm", s) for dim, s in t.exposed_comm_s.items() if s > 0]
    rows += [("optimizer step", t.optimizer_s), ("overhead", t.overhead_s)]
    return [(name, s) for name, s in rows if s > 0 or name == "compute"]


def print_estimate(
    console: Console, est: Any, defaulted: frozenset[str] = frozenset(), miss: Miss | None = None
) -> None:
    console.print(plan_line(est.model, est.hardware, est.plan, est.engine, defaulted))
    console.print(time_table(est.time))
    crossing_line(console, est.hardware, est.plan)
    for line in estimate_lines(est, miss):
        console.print(line)


def crossing_line(console: Console, hw: HardwareProfile, plan: Plan) -> None:
    """One line naming the tp/cp/ep groups that leave the NVLink domain and the tier they are costed on."""
    from planner.cluster.domains import straddles
    from planner.cost.comm import plan_groups
    from planner.explore.placement import PLACED, crossing_tiers

    crossing, sizes = crossing_tiers(hw, plan, PLACED), plan_groups(plan)
    if crossing:
        across = {d for d in crossing if straddles(hw, n=sizes[d][0], stride=sizes[d][1], gpus=plan.gpus)}
        groups = ", ".join(
            f"{dim} (on the {tier} tier{'; some of its groups straddle two domains' if dim in across else ''})"
            for dim, tier in crossing.items()
        )
        console.print(f"[yellow]leaves the {hw.nvlink_domain}-GPU NVLink domain:[/] {escape(groups)}")


def time_table(t: Any) -> Table:
    """The step's terms in seconds, with their shares and bars."""
    rows = [(name, f"{seconds:.4f}", seconds / t.step_s if t.step_s else 0.0) for name, seconds in time_rows(t)]
    tail = t.tail_stage
    title = f"step time (bottleneck stage {t.stage})"  # with the rank whose dp and optimizer step end the step:
    title = title if tail == t.stage else f"step time (stage {t.stage} paces, stage {tail} ends)"
    return share_table(title, "seconds", rows, "magenta", ("step", f"{t.step_s:.4f}"))


def _executed(est: Any) -> str:
    """Beyond the ceilings' length, what the kernels run of peak: MFU counts the whole s x s attention, which causal
    kernels run half of (79.9% MFU at 1M tokens read as implausible, unmarked)."""
    if est.plan.seq_len <= CEILING_SEQ_LEN:
        return ""
    run = est.time.mfu * executed_share(est.model, est.plan.seq_len)
    return f" ({run:.1%} of peak executed: MFU counts all of causal attention, the kernels run half)"


def estimate_lines(est: Any, miss: Miss | None = None) -> list[str]:
    """Throughput and its trust, the memory summary (and what would make a plan that does not fit fit: `miss`),
    and the time to train and goodput when asked for."""
    t, u, pl, mem = est.time, est.uncertainty, est.plausibility, est.memory
    lines = [
        f"throughput: {t.tokens_per_s:,.0f} tokens/s {u.describe()}, {t.tokens_per_s_per_gpu:,.1f} per GPU, "
        f"{t.tflops_per_gpu:.1f} model TFLOP/s per GPU, MFU {t.mfu:.1%}, HFU {t.hfu:.1%}" + _executed(est)
    ]
    lines += trust_lines(est.engine.name, est.hardware.name, calibrated=u.calibrated, precision=est.plan.precision)
    if not pl.ok:
        lines.append(
            f"[yellow]implausible:[/] predicted MFU {pl.mfu:.1%}{_at_ceiling_length(est)} is above the best "
            "published for this hardware, "
            f"{pl.mfu_ceiling:.1%} ({pl.source}); the prediction is likely optimistic"
        )
    lines.append(
        f"memory: {fmt_bytes(mem.total_bytes)} (80% {u.memory_text()}) per GPU on stage {mem.peak.stage} "
        f"(weights {fmt_bytes(mem.peak.breakdown.weights_bytes)}, activations "
        f"{fmt_bytes(mem.peak.breakdown.activations_bytes)}); " + fits_line(mem)
    )
    return lines + would_fit_lines(miss) + may_not_fit_lines(u, mem) + train_lines(est)
