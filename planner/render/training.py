"""The time to train (failure-free, and expected with failures priced) and the failures line of an estimate."""

from __future__ import annotations

from typing import Any

from planner.units import fmt_count, fmt_duration, fmt_hours, fmt_seconds, fmt_seconds_range, fmt_steps


def _train_time(est: Any, seconds: float) -> str:
    """'201.4 d (80% 178.2–227.1 d)': a time to train with the interval the throughput's gives it."""
    interval = est.uncertainty.duration_interval(seconds, est.time.tokens_per_s)
    return fmt_seconds(seconds) + (f" (80% {fmt_seconds_range(*interval)})" if interval else "")


def train_lines(est: Any) -> list[str]:
    """The time to train (failure-free, and expected with failures priced) and the failures line."""
    lines = []
    if est.train:
        tr, ex = est.train, est.expected_train
        lines.append(
            f"to train {fmt_count(tr.steps * est.plan.tokens_per_step)} tokens: {tr.steps:,.0f} "
            f"step{'s' if tr.steps != 1 else ''}, {_train_time(est, tr.seconds)} {fmt_hours(tr.gpu_hours)} GPU-hours"
            + ("" if est.checkpoint is None else " without failures")
            + (
                ""
                if ex is None
                else f"; {_train_time(est, ex.seconds)} {fmt_hours(ex.gpu_hours)} GPU-hours expected with them"
            )
        )
    if est.checkpoint:
        c = est.checkpoint
        kept = (
            f"{c.wasted_fraction:.1%}, goodput {c.goodput:.1%} = {est.goodput_tokens_per_s:,.0f} tokens/s"
            if not c.stalled
            else f"100%, goodput under a millionth: {c.stall_note()}"
        )
        rate = f"{c.checkpoint_bytes / 1e12:.3g} TB at {c.write_bytes_per_s / 1e12:.3g} TB/s"
        written = f"{fmt_seconds(c.checkpoint_s)} ({rate}{': ' + c.bandwidth_from if c.bandwidth_from else ''})"
        lines.append(
            f"failures: system MTBF {fmt_duration(c.mtbf_s)}, checkpoint write {written}, "
            f"checkpoint every {fmt_steps(c.interval_s, est.time.step_s)} (Young/Daly), restart {c.restart_s / 60:g} "
            f"min per failure, expected loss {kept}"
        )
    return lines
