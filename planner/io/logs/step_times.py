"""The steady state of a read log and what it measured: the steps the median is taken over (warm-up, skipped
iterations, a batch ramp-up, events and a cut-off last line left out), the step time (printed, or derived from
what the log does print), tokens/s per GPU and the peak memory."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from planner.io.logs.level_shift import latest_level, latest_run
from planner.io.logs.log_text import LogFacts, Selection, mark_events, median, merge_ranks, steady, timestamp_step_s
from planner.io.logs.restarts import split_restarts

# The most a step time from the lines' timestamps may differ from the one the printed throughput gives (torchtitan
# rounds tokens/s to an integer: far less than this) before the throughput's is taken.
STAMP_RATE_TOLERANCE = 0.1
# Significant digits a measured value keeps: a logged time prints at most 7 (Megatron's ms to one decimal,
# 126995.3), a median of two lines one more.
LOGGED_DIGITS = 8
BEFORE_CHANGE = "before a change in step time"  # steps_left_out: the level the log left (io/logs/level_shift.py)
ANOTHER_RUN = "an earlier run at another speed"  # steps_left_out: runs before the last, at another level


def derive_step_s(sel: Selection, facts: LogFacts, plan: dict[str, Any], gpus: int | None) -> tuple[Any, str]:
    """The step time when the lines print none, from the most precise source the log has: samples/s (printed
    to full precision) and the batch; the lines' timestamps (ms); tokens/s per GPU (torchtitan rounds it to
    an integer) with batch, sequence and GPUs; batches/s (Composer prints 4 decimals)."""
    gb, seq, used = plan.get("global_batch"), plan.get("seq_len"), sel.used
    if gb and any(s.samples_per_s for s in used):
        value = median(gb / s.samples_per_s for s in used if s.samples_per_s)
        return value, f"step_s = global batch {gb} / samples per second (median over the steps used)"
    stamped = timestamp_step_s(facts.steps, used)
    rate = None
    if gb and seq and gpus and any(s.tokens_per_s_per_gpu for s in used):
        rate = median(gb * seq / (s.tokens_per_s_per_gpu * gpus) for s in used if s.tokens_per_s_per_gpu)
    by_rate = f"step_s = global batch {gb} x seq_len {seq} / (tokens/s per GPU x {gpus} GPUs)"
    # the time between lines holds more than the steps (evaluation, checkpoints, logging): the rate is the step's,
    # unless the lines are the warm-up's (a short log's fallback), whose rates average their compile and set-up
    disagree = stamped is not None and rate is not None and abs(stamped / rate - 1) > STAMP_RATE_TOLERANCE
    if disagree and rate is not None and not sel.warmup_fallback:
        return rate, f"{by_rate}; the lines' timestamps give {stamped:.3g} s a step, which is not what it printed"
    if stamped is not None:
        return stamped, "step_s from the lines' timestamps: time between step lines / steps between them (median)"
    if rate is not None:
        return rate, by_rate
    if any(s.batches_per_s for s in used):
        value = median(1 / s.batches_per_s for s in used if s.batches_per_s)
        return value, "step_s = 1 / batches per second (median over the steps used)"
    if any(s.samples_per_s for s in used):  # read, but nothing to divide: said with the rate (audit)
        rate_read = median(s.samples_per_s for s in used)
        return None, (
            f"step_s: samples/s read ({rate_read:.4g}, median), but no global batch to turn it into a step time: "
            "give --plan with global_batch"
        )
    return None, "step_s: the log prints no step time, and neither a batch to divide its throughput by nor timestamps"


def step_measurements(
    sel: Selection, facts: LogFacts, plan: dict[str, Any], gpus: int | None
) -> tuple[dict, list[str]]:
    derived: list[str] = []
    step_s = median(s.step_s for s in sel.used)
    if step_s is None:
        step_s, how = derive_step_s(sel, facts, plan, gpus)
        derived.append(how)
    tokens = median(s.tokens_per_s_per_gpu for s in sel.used)
    gb, seq = plan.get("global_batch"), plan.get("seq_len")
    if tokens is None and step_s and gb and seq and gpus:
        tokens = gb * seq / (step_s * gpus)
        derived.append(f"tokens_per_s_per_gpu = global batch {gb} x seq_len {seq} / (step_s x {gpus} GPUs)")
    elif tokens is None and seq and gpus and any(s.samples_per_s for s in sel.used):  # the whole job's samples/s
        tokens = median(s.samples_per_s for s in sel.used if s.samples_per_s) * seq / gpus
        derived.append(f"tokens_per_s_per_gpu = samples per second x seq_len {seq} / {gpus} GPUs (median)")
    peak = max(facts.memory, key=lambda m: m.peak_bytes, default=None)
    measured = {
        "step_s": _as_logged(step_s),
        "tokens_per_s_per_gpu": _as_logged(tokens),
        "peak_memory_bytes": round(peak.peak_bytes) if peak else None,
        "peak_memory_kind": peak.kind if peak else None,
        "mfu": median(s.mfu for s in sel.used),
        "tflops_per_gpu": median(s.tflops_per_gpu for s in sel.used),
    }
    if sel.warmup_fallback:  # validate and calibrate leave the run out (fit/runs.py FROM_WARMUP)
        measured["from_warmup"] = True
    if peak and peak.kind is None:
        derived.append(
            "peak_memory_bytes: the largest device memory in use a line prints (total - free, every process on the "
            "device and its runtime, as nvidia-smi counts it), not an allocator peak: peak_memory_kind null"
        )
    if peak and peak.allocated_bytes:
        measured["peak_allocated_bytes"] = round(max(m.allocated_bytes or 0 for m in facts.memory))
    return measured, derived


def _as_logged(value: float | None) -> float | None:
    """`value` to LOGGED_DIGITS significant digits: the digits the log printed, without the float noise a median or
    a unit's conversion adds (14414.45 ms was written 14.414449999999999 s)."""
    return None if value is None else float(f"{value:.{LOGGED_DIGITS}g}")


def _warmup_basis(sel: Selection, warmup: int, shown: str, printed_from: int) -> list[str]:
    """Which iterations were taken as the warm-up (log_text.steady): counted from the run's start where the log
    shows it, else by the iteration numbers printed."""
    if not warmup:
        return []
    if not shown:
        return [
            f"warm-up: iterations {printed_from}-{warmup + printed_from - 1} as numbered, the log not showing the "
            "run's start (a resumed run's first iterations would count as steady)"
        ]
    if sel.left_out.get("warm-up") or sel.warmup_fallback:
        return [f"warm-up: the first {warmup} iterations after the run's start, which its {shown} shows"]
    return []


def steady_steps(facts: LogFacts, warmup: int, global_batch: int | None) -> tuple[Selection, list[str]]:
    steps, restarted = split_restarts(mark_events(facts.steps, facts.events))
    notes = [restarted] if restarted else []
    cut = {"incomplete last line": facts.cut_off} if facts.cut_off else {}
    if facts.config.get("cumulative"):
        last = merge_ranks(steps)[-1]
        notes.append(
            "DeepSpeed's SamplesPerSec is a running average since its start_step=2 (deepspeed/utils/"
            "timer.py): the last one is used, and --warmup does not apply"
        )
        return Selection([last], cut), notes
    first_line = min(s.line for s in steps)
    shown = next((what for line, what in facts.starts if line < first_line), "")
    sel = steady(steps, warmup=warmup, global_batch=global_batch, shown=bool(shown))
    sel = replace(sel, left_out=sel.left_out | cut)
    later, changed = latest_level(sel.used)
    if changed:
        sel = replace(sel, used=later, left_out=sel.left_out | {BEFORE_CHANGE: len(sel.used) - len(later)})
        notes.append(changed)
    final, apart = latest_run(sel.used)
    if apart:
        sel = replace(sel, used=final, left_out=sel.left_out | {ANOTHER_RUN: len(sel.used) - len(final)})
        notes.append(apart)
    notes += _warmup_basis(sel, warmup, shown, facts.printed_from)
    if sel.left_out.get("ramp-up"):
        notes.append(
            f"ramp-up: {sel.left_out['ramp-up']} step lines ran (some of) their iterations at a global batch other "
            f"than the run's final {global_batch} (--rampup-batch-size): left out, the step time is at {global_batch}"
        )
    if sel.warmup_fallback:
        notes.append(
            f"no logged line lies wholly past the warm-up of {warmup} iterations: the last (of each run) is used, "
            "the one averaging the fewest warm-up iterations (measured.from_warmup: calibrate leaves the run out, "
            "validate says its error includes them)"
        )
    runs = len({s.run for s in steps})
    if runs > 1 and not restarted:  # a restart the numbers show is said above
        notes.append(
            f"the log holds {runs} runs with the same arguments (a job restarted into it): each run's warm-up is left "
            "out, and their steps are pooled"
        )
    if len(merge_ranks(steps)) < len(steps):
        notes.append("several lines per step (ranks): each step's slowest time and lowest throughput are used")
    return sel, notes
