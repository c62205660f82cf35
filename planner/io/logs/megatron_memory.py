"""The memory a Megatron-family log prints: the report after the first logged iterations (Megatron-LM's "memory (MB)",
Megatron-Bridge's "memory (GB)"), DeepSpeed's timer line in Megatron-DeepSpeed's, and on the iteration line
Megatron-SWIFT's peak and Primus's device memory."""

from __future__ import annotations

import re
from collections.abc import Callable

from planner.io.logs.deepspeed_log import timer_memory
from planner.io.logs.log_text import LogFacts, Memory, Step
from planner.io.logs.log_values import number, peak_memory
from planner.units import GB, GiB, MiB

# "[Rank 0] (after 10 iterations) memory (MB) | allocated: ... | max allocated: ... | reserved: ... | max
# reserved: ..." (megatron/training/utils/common_utils.py report_memory; MB there is 1024 * 1024 bytes), in 2020-21
# "after 5 iterations memory (MB) | ..." (megatron/training.py training_log): printed once, after the first logged
# iteration line (report_memory_flag, "Report memory after optimizer state has been initialized").
MEMORY = re.compile(
    r"(?:\[Rank (\d+)\][^\[]*?)?(?:after (\d+) iterations\)? )?memory \(MB\) \| allocated: ([\d.]+) \|"
    r" max allocated: ([\d.]+) \| reserved: ([\d.]+) \| max reserved: ([\d.]+)"
)
# Megatron-Bridge since 29236c3c5 (2025-10-10): "[Rank 0] (after 1 iterations) memory (GB) | mem-allocated-gigabytes:
# 51.072 | ... | mem-max-allocated-gigabytes: 194.41 | ... | mem-max-reserved-gigabytes: 216.89 | ...", each
# torch.cuda.memory_stats() bytes value / 1.0e9 to 5 significant digits under its MEMORY_KEYS name, "bytes" made
# "gigabytes" (src/megatron/bridge/training/utils/train_utils.py training_log l.631-635, report_memory l.681-690
# @29236c3c5). The peak reserved is the peak, as in "memory (MB)"; the peak allocated where only it is logged
# (logger_config.memory_keys picks the keys).
BRIDGE_MEMORY = re.compile(r"(?:\[Rank (\d+)\] )?\(after (\d+) iterations\) memory \(GB\)((?: \| [\w-]+: \S+)+)")
BRIDGE_RESERVED, BRIDGE_ALLOCATED = "mem-max-reserved-gigabytes", "mem-max-allocated-gigabytes"
# Megatron-SWIFT (ms-swift on Megatron-Core) adds "| memory(GiB): 21.56 |" to the iteration line:
# round(torch.cuda.max_memory_reserved() / 1024**3, 2) of the rank that prints it (ms-swift
# swift/megatron/trainers/base.py training_log @37ab3502a7e2, 2026-02).
SWIFT_MEMORY = "memory(GiB)"
# Primus's device memory on the iteration line: "hip mem usage/free/total/usage_ratio: 153.81GB/102.17GB/255.98GB/
# 60.09%", used = total - free of torch.cuda.mem_get_info() (the whole device, every process and the runtime),
# "rocm mem usage/..." the same from rocm-smi; "GB" is bytes / 1024**3 (trainer.py l.2484-2499 @077c0ff0).
DEVICE_MEMORY = ("hip mem usage/free/total/usage_ratio", "rocm mem usage/free/total/usage_ratio")


def line_memory(f: dict[str, str], number_: int, rank: int | None) -> list[Memory]:
    """The memory an iteration line prints: Megatron-SWIFT's peak reserved, Primus's device memory in use."""
    out = []
    if f.get(SWIFT_MEMORY):
        out.append(Memory(number(f[SWIFT_MEMORY], field=SWIFT_MEMORY, line=number_) * GiB, "max_reserved", rank))
    for key in DEVICE_MEMORY:
        if f.get(key):
            used = f[key].split("/")[0].removesuffix("GB")
            out.append(Memory(number(used, field=key, line=number_) * GiB, None, rank))
    return out


def _bridge_memory(m: re.Match[str], number_: int, rank: int | None) -> Memory | None:
    fields = {k.strip(): v.strip() for k, _, v in (part.partition(":") for part in m.group(3).split("|")) if v}
    reserved, allocated = (
        number(fields[key], field=key, line=number_) * GB if key in fields else None
        for key in (BRIDGE_RESERVED, BRIDGE_ALLOCATED)
    )
    return peak_memory(reserved, allocated, int(m.group(1)) if m.group(1) else rank, int(m.group(2)))


def report_memory(line: str, number_: int, rank: int | None) -> list[Memory]:
    """The memory reports on a line: the peak reserved, with the peak allocated beside it; DeepSpeed's timer line's
    peak allocated."""
    if "memory (" not in line:  # MEMORY's and BRIDGE_MEMORY's "memory (MB)" / "memory (GB)", searched only there
        return [timer] if (timer := timer_memory(line, rank)) else []
    out = [
        Memory(
            peak_bytes=float(m.group(6)) * MiB,
            kind="max_reserved",
            rank=int(m.group(1)) if m.group(1) else rank,
            allocated_bytes=float(m.group(4)) * MiB,
            after_iterations=int(m.group(2)) if m.group(2) else None,
        )
        for m in MEMORY.finditer(line)
    ]
    if (bridge := BRIDGE_MEMORY.search(line)) and (found := _bridge_memory(bridge, number_, rank)):
        out.append(found)
    return out + ([timer] if (timer := timer_memory(line, rank)) else [])


def _all_skipped(after: int, steps: list[Step], since_line: int) -> bool:
    """Whether the iteration lines since the run's start count all of its first `after` iterations as skipped
    (each line counts those since the previous one; ranks printing the same line are one)."""
    skipped: dict[int, int] = {}
    for s in steps:
        if s.line > since_line and s.step <= after:
            skipped[s.step] = max(skipped.get(s.step, 0), s.skipped)
    return after > 0 and sum(skipped.values()) >= after


def read_memory(
    facts: LogFacts, line: str, number_: int, rank: int | None, skipped: Callable[[int], bool] | None = None
) -> None:
    """The memory a line reports, into `facts.memory`; but a report after iterations that were all skipped (fp16
    loss-scale overflows) is no peak: the optimizer has not stepped, so it holds no states yet (Megatron-Core's
    MixedPrecisionOptimizer.step returns before the inner optimizer's step when it finds inf/nan,
    megatron/core/optimizer/optimizer.py; torch's Adam makes its states on its first step). Said in `facts.notes`.
    `skipped(n)`: whether the first n iterations were all skipped (else: counted from the iteration lines)."""
    since = max((n for n, _ in facts.starts if n < number_), default=0)
    all_skipped = skipped or (lambda after: _all_skipped(after, facts.steps, since))
    for m in report_memory(line, number_, rank):
        if m.after_iterations and all_skipped(m.after_iterations):
            note = (
                f"memory: the report after {m.after_iterations} iterations is left out: all were skipped (loss-scale "
                "overflow), so the optimizer had not stepped and held no states yet; it is not the run's peak"
            )
            facts.notes += [] if note in facts.notes else [note]
        else:
            facts.memory.append(m)
