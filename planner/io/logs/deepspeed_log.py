"""DeepSpeed logs: the ThroughputTimer's samples/s lines, the pipeline engine's step lines, and the config
DeepSpeed prints at start-up."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from planner.io.logs.log_text import LogFacts, Memory, Step, clean_lines, events_in
from planner.io.logs.log_values import timestamp_s
from planner.units import GiB

FLOAT = r"([0-9.]+(?:[eE][-+]?[0-9]+)?)"
# deepspeed/utils/timer.py ThroughputTimer.stop, three generations of the same line:
#   "epoch=0/micro_step=34/global_step=34, RunningAvgSamplesPerSec=7.86, CurrSamplesPerSec=8.0, MemAllocated=59.65GB,
#    MaxMemAllocated=63.31GB"                                                     (2023-)
#   "0/17, RunningAvgSamplesPerSec=158.3, CurrSamplesPerSec=159.6, MemAllocated=1.75GB, MaxMemAllocated=2.6GB" (2022)
#   "0/40, SamplesPerSec=83.48, MemAllocated=0.26GB, MaxMemAllocated=9.02GB", or without the memory  (2020-21)
# The samples are train_batch_size per step (deepspeed/runtime/engine.py: ThroughputTimer(batch_size=
# self.train_batch_size())); "GB" is bytes / 1024**3.
THROUGHPUT = re.compile(
    r"(?:epoch=\d+/micro_step=\d+/global_step=|\b\d+/)(\d+), "
    rf"(?:RunningAvgSamplesPerSec={FLOAT}, CurrSamplesPerSec={FLOAT}|SamplesPerSec={FLOAT})"
    rf"(?:, MemAllocated={FLOAT}GB, MaxMemAllocated={FLOAT}GB)?"
)
# "steps: 100 loss: 2.5 iter time (s): 0.512 samples/sec: 250.0" (deepspeed/runtime/pipe/engine.py train_batch).
PIPE = re.compile(rf"\bsteps: (\d+) loss: {FLOAT}.*?iter time \(s\): {FLOAT} samples/sec: {FLOAT}")
# "step=40, skipped=2, lr=[...]" (deepspeed/runtime/engine.py _report_progress): skipped counts overflow steps.
PROGRESS = re.compile(r"\bstep=(\d+), skipped=(\d+)")
# The dump of "DeepSpeedEngine configuration:" ("DeepSpeedLight configuration:" before 2020-05):
# '  {} {} {}'.format(arg, '.' * (29 - len(arg)), value) (deepspeed/runtime/config.py DeepSpeedConfig.print).
CONFIG_START = re.compile(r"DeepSpeed(?:Engine|Light) configuration:")
CONFIG_ITEM = re.compile(
    r"\s(zero_optimization_stage|zero_enabled|train_batch_size|train_micro_batch_size_per_gpu|bfloat16_enabled"
    r"|fp16_enabled|world_size|gradient_accumulation_steps) \.*\s*(\S+)\s*$"
)


def deepspeed_config(rows: Iterable[tuple[int, int | None, str]]) -> dict[str, Any]:
    """zero, micro_batch, global_batch, bf16, fp16 and dp from the printed DeepSpeed config (empty if none)."""
    items: dict[str, str] = {}
    inside = False
    for _, _, line in rows:
        if CONFIG_START.search(line):
            inside = True
        elif inside and "json = {" in line:
            break
        elif inside and (m := CONFIG_ITEM.search(line)):
            items[m.group(1)] = m.group(2)
    if not items:
        return {}
    stage = items.get("zero_optimization_stage")
    enabled = items.get("zero_enabled") == "True"
    config: dict[str, Any] = {
        "zero": int(stage) if stage is not None and stage.isdigit() else (None if enabled else 0),
        "bf16": items.get("bfloat16_enabled") == "True",
        "fp16": items.get("fp16_enabled") == "True",
    }
    for key, name in (("train_batch_size", "global_batch"), ("train_micro_batch_size_per_gpu", "micro_batch")):
        if items.get(key, "").isdigit():
            config[name] = int(items[key])
    if items.get("world_size", "").isdigit():
        config["dp"] = int(items["world_size"])  # DeepSpeed's world_size is the data-parallel size
    return config


def timer_memory(line: str, rank: int | None, m: re.Match[str] | None = None) -> Memory | None:
    """The peak a ThroughputTimer line prints: MaxMemAllocated, torch's max_memory_allocated in GiB (timer.py l.266-273
    @edaa7221: round(get_accelerator().max_memory_allocated() / 1024**3, 2), printed "GB"); Megatron-DeepSpeed's
    logs print the line between their iteration lines. `m`: the line's THROUGHPUT match where the caller has it; a
    line without "MaxMemAllocated=" prints none, and is not searched."""
    if m is None:
        m = THROUGHPUT.search(line) if "MaxMemAllocated=" in line else None
    return Memory(float(m.group(6)) * GiB, "max_allocated", rank) if m and m.group(6) else None


def _throughput(number_: int, rank: int | None, line: str, m: re.Match[str]) -> Step:
    current = m.group(3) or m.group(4)  # CurrSamplesPerSec, or the running average of the oldest format
    return Step(step=int(m.group(1)), line=number_, rank=rank, samples_per_s=float(current), time_s=timestamp_s(line))


PIPED = (
    "cp, ep: 1; tp and pp not stated: a PipelineEngine log (DeepSpeed's pipeline, under Megatron-DeepSpeed with its "
    "tensor parallelism) prints neither"
)


def _config(rows: list[tuple[int, int | None, str]], *, piped: bool) -> dict[str, Any]:
    """The plan the DeepSpeed configuration states. `piped`: PipelineEngine's step lines ("steps: N loss: ... iter
    time (s)", runtime/pipe/engine.py), whose pipeline degree the log does not print: pp, and so the GPUs, unstated."""
    ds = deepspeed_config(rows)
    precision = "bf16" if ds.get("bf16") else "fp16" if ds.get("fp16") else ("fp32" if ds else None)
    dp = ds.get("dp")
    plan = {
        "dp": dp,
        "tp": None if piped else 1,
        "pp": None if piped else 1,
        "cp": 1,
        "ep": 1,
        "vpp": 1,
        "sp": False,
        "zero": ds.get("zero"),
        "recompute": None,
        "micro_batch": ds.get("micro_batch"),
        "global_batch": ds.get("global_batch"),
        "seq_len": None,
        "precision": precision,
        "schedule": "1f1b",
    }
    return {
        "plan": plan,
        "gpus": None if piped else dp,
        "model": None,
        "model_missing": [],
        "software": {},
        "read_from": "DeepSpeed configuration" if ds else None,
        "assumed": [
            PIPED
            if piped
            else "tp, pp, cp, ep: 1 (DeepSpeed without Megatron has no model parallelism; AutoTP is not read)"
        ],
    }


def read_deepspeed(text: str) -> LogFacts:
    rows = list(clean_lines(text))
    facts = LogFacts(engine="deepspeed")
    skipped_at: dict[int, int] = {}
    running_only = True
    for number_, rank, line in rows:
        if m := THROUGHPUT.search(line):
            running_only = running_only and m.group(4) is not None
            facts.steps.append(_throughput(number_, rank, line, m))
            facts.memory.extend([memory] if (memory := timer_memory(line, rank, m)) else [])
        elif p := PIPE.search(line):
            facts.steps.append(Step(step=int(p.group(1)), line=number_, rank=rank, step_s=float(p.group(3))))
            running_only = False
        elif g := PROGRESS.search(line):
            skipped_at[int(g.group(1))] = int(g.group(2))
        elif "memory (MB)" in line or "memory (GB)" in line:  # Megatron-DeepSpeed's report_memory between steps,
            from planner.io.logs.megatron_memory import read_memory  # skipped by DeepSpeed's "step=N, skipped=K"

            read_memory(facts, line, number_, rank, skipped=lambda n: skipped_at.get(n, 0) >= n)
        elif CONFIG_START.search(line):
            facts.starts.append((number_, "DeepSpeed configuration"))
    piped = any(s.step_s for s in facts.steps)  # PipelineEngine's "iter time (s)" lines
    facts.time_basis = "iter time (s)" if piped else "samples/s"
    facts.events = events_in(rows)
    facts.config = _config(rows, piped=piped)
    facts.config["cumulative"] = running_only and bool(facts.steps)
    facts.config["overflow_skipped"] = max(skipped_at.values(), default=0)
    return facts
