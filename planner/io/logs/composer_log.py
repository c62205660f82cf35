"""llm-foundry / Composer logs: the console logger's blocks of "Train <metric>: <value>" lines after each
"[batch=N/M]:" header, the Config block Composer prints, and the YAML config llm-foundry's train.py prints."""

from __future__ import annotations

import re
from typing import Any

from planner.io.logs.log_text import LogFacts, Memory, Step, clean_lines, events_in
from planner.io.logs.log_values import number
from planner.units import GB

# "[epoch=1][batch=5/5]:" or "[batch=10/100]:" (composer/loggers/console_logger.py _get_progress_string), then
# one "\t Train <name>: <value>" line per metric (log_to_console), values formatted to 4 decimals.
HEADER = re.compile(r"^\s*(?:\[epoch=(\d+)\])?\[batch=(\d+)(?:/(\d+))?\]:?")
METRIC = re.compile(r"\bTrain ([\w/\-.]+): ([-\d.eE+]+)\b")
# The speed monitor (composer/callbacks/speed_monitor.py) averages over a window of batches:
# throughput/batches_per_sec, throughput/samples_per_sec (whole job), throughput/device/tokens_per_sec (per GPU),
# throughput/device/mfu. The memory monitor (composer/callbacks/memory_monitor.py) reports
# memory/peak_reserved_mem in gigabytes (bytes / 1.0e9).
# "num_gpus_per_node: 8" and "num_nodes: 2" in the Config block Composer prints (composer/trainer/trainer.py);
# llm-foundry's train.py prints its YAML: max_seq_len, global_train_batch_size, device_train_microbatch_size,
# precision, fsdp_config.sharding_strategy and activation_checkpointing (scripts/train/yamls).
YAML = re.compile(
    r"^(\s*)(num_gpus_per_node|num_nodes|max_seq_len|global_train_batch_size|"
    r"device_train_microbatch_size|precision|sharding_strategy|activation_checkpointing): (\S+)\s*$"
)
PRECISION = {"amp_bf16": "bf16", "amp_fp16": "fp16", "amp_fp8": "fp8", "fp32": "fp32"}
# What Composer's trainer logs as it starts (composer/trainer/trainer.py: "Using precision Precision.AMP_FP16") and
# llm-foundry's train.py before its first batch ("Starting training..."): the run's precision and its start, where
# no YAML is printed; and the micro-batch its console logger reports every batch (trainer/device_train_microbatch_size).
PRECISION_LINE = re.compile(r"Using precision Precision\.(\w+)")
START_LINE = "Starting training..."
MICRO_BATCH_METRIC = "trainer/device_train_microbatch_size"
SHARDING = {"FULL_SHARD": 3, "SHARD_GRAD_OP": 2, "NO_SHARD": 0, "HYBRID_SHARD": 3, "_HYBRID_SHARD_ZERO2": 2}


def _step(batch: int, line: int, metrics: dict[str, float]) -> Step:
    return Step(
        step=batch,
        line=line,
        batches_per_s=metrics.get("throughput/batches_per_sec"),
        samples_per_s=metrics.get("throughput/samples_per_sec"),
        tokens_per_s_per_gpu=metrics.get("throughput/device/tokens_per_sec"),
        mfu=metrics.get("throughput/device/mfu"),
    )


def _config(yaml: dict[str, str], samples_per_batch: int | None) -> dict[str, Any]:
    """The plan as the printed configuration states it (the YAML first, then the trainer's own lines, which
    read_composer keeps under the YAML's names where the YAML does not say)."""

    def integer(key: str) -> int | None:
        return int(yaml[key]) if yaml.get(key, "").isdigit() else None

    nodes, per_node = integer("num_nodes"), integer("num_gpus_per_node")
    gpus = nodes * per_node if nodes and per_node else None
    checkpointing = yaml.get("activation_checkpointing")
    plan = {
        "dp": gpus,
        "tp": 1,
        "pp": 1,
        "cp": 1,
        "ep": 1,
        "vpp": 1,
        "sp": False,
        "zero": SHARDING.get(yaml.get("sharding_strategy", "")),
        "recompute": {"true": "full", "True": "full", "false": "none", "False": "none"}.get(checkpointing or ""),
        "micro_batch": integer("device_train_microbatch_size"),
        "global_batch": integer("global_train_batch_size") or samples_per_batch,
        "seq_len": integer("max_seq_len"),
        "precision": PRECISION.get(yaml.get("precision", "")),
        "schedule": "1f1b",
    }
    return {
        "plan": plan,
        "gpus": gpus,
        "model": None,
        "model_missing": [],
        "software": {},
        "read_from": "printed configuration" if yaml else None,
        "assumed": ["tp, pp, cp, ep: 1 (llm-foundry trains with FSDP data parallelism only)"],
    }


def _trainer_lines(line: str, number_: int, metrics: dict[str, float], yaml: dict[str, str], facts: LogFacts) -> None:
    """What Composer itself says beside llm-foundry's YAML: the precision, the micro-batch and the run's start,
    each under the YAML's name, which wins where the YAML was printed first (it is the run's config)."""
    if m := PRECISION_LINE.search(line):
        yaml.setdefault("precision", m.group(1).lower())
    if MICRO_BATCH_METRIC in metrics and not yaml.get("device_train_microbatch_size", "").isdigit():  # or "auto"
        yaml["device_train_microbatch_size"] = str(int(metrics[MICRO_BATCH_METRIC]))  # what auto settled on
    if START_LINE in line:
        facts.starts.append((number_, "'Starting training...' line"))


def read_composer(text: str) -> LogFacts:
    rows = list(clean_lines(text))
    facts = LogFacts(engine="llm-foundry", time_basis="throughput/batches_per_sec")
    yaml: dict[str, str] = {}
    batch: int | None = None
    header_line, metrics = 0, dict[str, float]()
    samples_per_batch: int | None = None

    def close() -> None:
        if batch is not None and metrics:  # the run's batch count (time/batch), not the epoch's (it starts again)
            facts.steps.append(_step(int(metrics.get("time/batch") or batch), header_line, metrics))
            if "memory/peak_reserved_mem" in metrics:
                facts.memory.append(Memory(metrics["memory/peak_reserved_mem"] * GB, "max_reserved"))

    for number_, _, line in rows:
        if h := HEADER.match(line):
            close()
            epoch, per_epoch = int(h.group(1) or 0), int(h.group(3) or 0)
            batch, header_line, metrics = epoch * per_epoch + int(h.group(2)), number_, {}
        for name, value in METRIC.findall(line):
            metrics[name] = number(value, field=name, line=number_)
        if y := YAML.match(line):
            yaml.setdefault(y.group(2), y.group(3))
        _trainer_lines(line, number_, metrics, yaml, facts)
        if metrics.get("time/batch") and metrics.get("time/sample"):
            samples_per_batch = int(metrics["time/sample"] // metrics["time/batch"])
    close()
    facts.steps = [s for s in facts.steps if s.batches_per_s or s.samples_per_s or s.tokens_per_s_per_gpu]
    facts.events = events_in(rows)
    facts.config = _config(yaml, samples_per_batch)
    return facts
