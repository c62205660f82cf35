"""Megatron-LM, NeMo, Megatron-Bridge and Megatron-DeepSpeed logs: iteration lines, memory reports (read in
megatron_memory), the argument dump (or Megatron-Bridge's printed configuration) and, for Megatron-DeepSpeed,
DeepSpeed's config."""

from __future__ import annotations

import bisect
import re
from dataclasses import replace
from typing import Any

from planner.io.logs.deepspeed_log import deepspeed_config
from planner.io.logs.log_text import LogFacts, Step, clean_lines, events_in
from planner.io.logs.log_values import number, timestamp_s
from planner.io.logs.megatron_args import config_from_args
from planner.io.logs.megatron_lines import group_settings, line_settings, setup_line
from planner.io.logs.megatron_memory import line_memory, read_memory
from planner.io.logs.nemo_lines import nemo_step

# " iteration      10/    1000 | consumed samples: ... | elapsed time per iteration (ms): 3171.3 | ..." from
# megatron/training/training.py training_log (Megatron-LM), src/megatron/bridge/training/utils/train_utils.py
# (Megatron-Bridge) and megatron/training.py of Megatron-DeepSpeed (which may print "(s)" instead of "(ms)").
ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|(.*)")
# Tokens/s per GPU and TFLOP/s per GPU as each engine names them: Megatron-DeepSpeed "tokens per gpu per second
# (tgs)" and "TFLOPs" (megatron/training.py training_log), Megatron-LM "throughput per GPU (TFLOP/s/GPU)", AMD
# Primus "tokens per GPU (tokens/s/GPU)" (primus/modules/trainer/megatron/trainer.py training_log @077c0ff0) and,
# since 2026, "tokens/s/GPU inst/harmonic mean" and "compute per GPU (TFLOP/s/GPU)" (primus/backends/megatron/
# patches/training_log/print_rank_last_patches.py @fd1eeabb).
TOKENS_FIELDS = (
    "tokens per gpu per second (tgs)", "tokens/sec/gpu", "tokens per GPU (tokens/s/GPU)",
    "tokens/s/GPU inst/harmonic mean",
)  # fmt: skip
TFLOPS_FIELDS = ("throughput per GPU (TFLOP/s/GPU)", "TFLOPs", "compute per GPU (TFLOP/s/GPU)")
# Primus prints these as "this step/running mean" ("elapsed time per iteration (ms): 13100.0/13240.9", trainer.py
# l.2471-2513 @077c0ff0: the interval's value, then statistics.mean of the recent ones), the newer TFLOP/s as
# "496.3 (avg 496.1)": the step's own value, the first, is read.
PRIMUS_PAIRED = {
    "elapsed time per iteration (ms)", "throughput per GPU (TFLOP/s/GPU)", "tokens per GPU (tokens/s/GPU)",
    "tokens/s/GPU inst/harmonic mean", "compute per GPU (TFLOP/s/GPU)",
}  # fmt: skip
PRIMUS_PAIR = re.compile(r"^\s*([^/(\s]+)\s*(?:/\s*\S+|\(avg [^)]*\))\s*$")
# AMD Primus's loguru prefix "[20251202 06:56:28][rank-7/8][INFO ]": the rank and the world size
# ("[rank-{extra[rank]}/{extra[world_size]}]", primus/core/utils/logger.py @077c0ff0; world_size is the job's,
# primus/modules/base_module.py). Its master process prints "[node-R/N]", nodes: not read.
PRIMUS_RANK = re.compile(r"\]\[rank-(\d+)/(\d+)\]")
# "using world size: 16, data-parallel size: 1, context-parallel size: 1, [hierarchical context-parallel sizes: None,]
# tensor-model-parallel size: 8, pipeline-model-parallel size: 2" (megatron/training/arguments.py l.567 @d98e8a64;
# 2021's "data-parallel-size: 1", no context-parallel): the sizes the argument dump states, where it does not.
WORLD_LINE = re.compile(r"^using world size: (\d+)")
# "using torch.bfloat16 for parameters ..." (arguments.py l.1252 @d98e8a64: args.params_dtype, bf16 with --bf16, half
# with --fp16, else float32), printed by rank 0 before the argument dump
PARAMS_LINE = re.compile(r"^using torch\.(\w+) for parameters")
WORLD_SIZES = re.compile(r"\b(data|context|tensor-model|pipeline-model)-parallel[ -]size: (\d+)")
# "------------------------ arguments ------------------------" then "  name ........ value", sorted, then
# "-------------------- end of arguments ---------------------" (megatron/training/arguments.py _print_args:
# '  {} {} {}'.format(arg, '.' * (48 - len(arg)), value)).
ARGS_START = re.compile(r"^-{3,} arguments -{3,}\s*$")
ARGS_END = re.compile(r"^-{3,} end of arguments -{3,}\s*$")
ARG_LINE = re.compile(r"^\s+(\w+) \.*\s?(.*?)\s*$")
# What shows a run's start besides its argument dump (megatron/training/training.py): pretrain's "training ..."
# and train()'s "[before the start of training step] datetime: ..." (print_datetime), just before the first step.
START_LINE = re.compile(r"^training \.\.\.\s*$|\[before the start of training step\]")
# Megatron-Bridge prints its ConfigContainer as YAML after "------- Task Configuration -------" (sections model:,
# train:, dataset:, ddp:, optimizer:, mixed_precision:, field names of src/megatron/bridge/training/config.py).
BRIDGE_START = re.compile(r"^-{3,} Task Configuration -{3,}\s*$")
YAML_LINE = re.compile(r"^( *)([A-Za-z_][\w]*): ?(.*)$")
# " > padded vocab (size: 50257) with 431 dummy tokens (new size: 50688)" (megatron/training/vocab_utils.py).
PADDED_VOCAB = re.compile(r"padded vocab \(size: (\d+)\) with (\d+) dummy tokens \(new size: (\d+)\)")
# Megatron-DeepSpeed tells itself apart by what it adds: DeepSpeed's config dump, its tokens and TFLOPs fields.
DEEPSPEED_MARKERS = re.compile(
    r"DeepSpeedEngine configuration|DeepSpeedLight configuration|tokens per gpu per second|samples per second:"
    r"|\| TFLOPs: |elapsed time per iteration \(s\)|\[deepscale\]|deepspeed_config"
)


# GPT-NeoX (EleutherAI/gpt-neox: Megatron's training_log, grown on DeepSpeed) begins its iteration line with
# " samples/sec: 7.799 |" and prints "approx flops per GPU: 112.9TFLOPS" (megatron/logging.py training_log l.436,
# l.495 @ea7aefd8): a log of an engine the planner does not model, told apart so it is not read as Megatron's.
GPT_NEOX = re.compile(r"samples/sec: [\d.]+ \| iteration\s+\d+\s*/|\| approx flops per GPU: [\d.]+\w?FLOPS")


def _fields(rest: str) -> dict[str, str]:
    out = {}
    for part in rest.split("|"):
        key, sep, value = part.rpartition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


# GPT-NeoX's two, where `ingest --engine` reads its log as Megatron's: the job's samples/sec (train_batch_size /
# iteration time) before "iteration", and FLOP/s in human_readable_flops's units, powers of 1000 since 799c6e6e
# (2021-04-25), "" for FLOP/s up to ZFLOPS (megatron/logging.py l.433-436, l.495 @ea7aefd8: "112.9TFLOPS").
NEOX_SAMPLES = "samples/sec"
NEOX_SAMPLES_BEFORE = re.compile(r"samples/sec:\s*(\S+)\s*\|\s*$")
NEOX_FLOPS = "approx flops per GPU"
FLOPS_VALUE = re.compile(r"^([\d.]+)([KMGTPEZ]FLOPS)?$")
TFLOPS_PER_UNIT = {
    "": 1e-12, "KFLOPS": 1e-9, "MFLOPS": 1e-6, "GFLOPS": 1e-3, "TFLOPS": 1.0, "PFLOPS": 1e3, "EFLOPS": 1e6,
    "ZFLOPS": 1e9,
}  # fmt: skip


def _neox_tflops(f: dict[str, str], line: int) -> float | None:
    if NEOX_FLOPS not in f:
        return None
    m = FLOPS_VALUE.match(f[NEOX_FLOPS])
    if m is None:  # "1.2Yi" past ZFLOPS, or no number: refused, naming the field
        return number(f[NEOX_FLOPS], field=NEOX_FLOPS, line=line)
    return number(m[1], field=NEOX_FLOPS, line=line) * TFLOPS_PER_UNIT[m[2] or ""]


def _iteration(number_: int, rank: int | None, line: str, m: re.Match[str]) -> tuple[Step, dict[str, str]]:
    f = _fields(m.group(3))
    if samples := NEOX_SAMPLES_BEFORE.search(line[: m.start()]):  # after any prefix (a host's, a timestamp)
        f[NEOX_SAMPLES] = samples[1]

    def read(*keys: str) -> float | None:  # the first of the keys the line prints, as a number
        key = next((k for k in keys if f.get(k)), None)
        if key is None:
            return None
        value = PRIMUS_PAIR.sub(r"\1", f[key]) if key in PRIMUS_PAIRED else f[key]
        return number(value, field=key, line=number_)

    ms, s = read("elapsed time per iteration (ms)"), read("elapsed time per iteration (s)")
    step = Step(
        step=int(m.group(1)),
        line=number_,
        rank=rank,
        step_s=ms / 1e3 if ms is not None else s,
        tokens_per_s_per_gpu=read(*TOKENS_FIELDS),
        samples_per_s=read("samples per second", NEOX_SAMPLES),
        tflops_per_gpu=read(*TFLOPS_FIELDS) or _neox_tflops(f, number_),
        skipped=int(read("number of skipped iterations") or 0),
        time_s=timestamp_s(line),
        global_batch=int(batch) if (batch := read("global batch size")) is not None else None,
    )
    return step, f


def _setup_line(line: str, rank: int | None, logged: dict[str, str]) -> int | None:
    """The rank a Primus prefix names (where the launcher's does not); the world size and parallel sizes it and
    Megatron's "using world size" line state, and the parameters' dtype, into `logged`."""
    # each pattern searched only where its fixed text is in the line: a 200k-step log spent most of its 30 s here
    if "][rank-" in line and (primus := PRIMUS_RANK.search(line)):
        logged["logged_world_size"] = primus[2]
        rank = int(primus[1]) if rank is None else rank
    if line.startswith("using ") and (params := PARAMS_LINE.search(line)):  # both patterns begin with ^using
        logged["logged_params_dtype"] = params[1]
    if line.startswith("using ") and (world := WORLD_LINE.search(line)):
        logged["logged_world_size"] = world[1]
        for kind, size in WORLD_SIZES.findall(line):  # data -> data_parallel_size, tensor-model -> tensor_model_...
            logged[f"logged_{kind.replace('-', '_')}_parallel_size"] = size
    setup_line(line, logged)
    return rank


def _bridge_yaml(lines: list[str], start: int) -> dict[str, str]:
    """The keys of Megatron-Bridge's printed configuration down to three levels, as "section.key" (and
    "section.key.sub", e.g. model.activation_func._target_) -> value."""
    out: dict[str, str] = {}
    path = ["", "", ""]
    for line in lines[start + 1 :]:
        m = YAML_LINE.match(line)
        if not m and not line.startswith(("  ", "- ")):
            break
        if not m:  # an enum's value: "  attention_backend:" / "    _args_:" / "    - 5" (the first item kept)
            if line.startswith("    - ") and path[2]:
                out.setdefault(".".join(path), line[6:].strip())
            continue
        indent, key, value = len(m.group(1)), m.group(2), m.group(3)
        if indent == 0:
            path = [key, "", ""]
        elif indent == 2:
            path[1:] = [key, ""]
            out[f"{path[0]}.{key}"] = value  # empty for a nested value: the field is there
        elif indent == 4:
            path[2] = key
            if value:
                out[f"{path[0]}.{path[1]}.{key}"] = value
    return out


def read_megatron(text: str) -> LogFacts:
    """Every Megatron-family fact the log states; the engine is megatron-deepspeed when DeepSpeed shows."""
    rows = list(clean_lines(text))
    lines = [line for _, _, line in rows]
    facts = LogFacts(engine="megatron-deepspeed" if DEEPSPEED_MARKERS.search(text) else "megatron")
    dumps: list[tuple[int, dict[str, str]]] = []  # (line, arguments) of each dump: a requeued job prints another
    logged: dict[str, str] = {}  # what step and set-up lines state
    iterations: list[dict[str, str]] = []  # each iteration line's fields
    ended: set[int] = set()  # the dumps whose end line the log shows
    in_args = False
    for i, (number_, rank, line) in enumerate(rows):
        rank = _setup_line(line, rank, logged)
        if ARGS_START.match(line):
            in_args = True
            dumps.append((number_, {}))
            facts.starts.append((number_, "argument dump"))
        elif ARGS_END.match(line) and in_args:
            in_args = False
            ended.add(len(dumps) - 1)
        elif in_args and (a := ARG_LINE.match(line)):
            dumps[-1][1][a.group(1)] = a.group(2)
        elif BRIDGE_START.match(line):
            dumps.append((number_, _bridge_yaml(lines, i)))
            ended.add(len(dumps) - 1)  # a printed configuration: as far as the YAML goes
            facts.starts.append((number_, "printed configuration"))
        elif "training" in line and START_LINE.search(line):
            facts.starts.append((number_, f"'{line.strip()[:40]}' line"))
        elif found := nemo_step(number_, rank, line):  # before ITERATION: NeMo's line also says "iteration 3/19 |"
            facts.steps.append(nemo := found[0])
            facts.memory += found[1]
            facts.time_basis, facts.printed_from = "train_step_timing in s", 0
            if nemo.global_batch:  # the last logged batch: the run's after any ramp-up
                logged["logged_global_batch"] = str(nemo.global_batch)
        elif m := ITERATION.search(line):
            step, seen = _iteration(number_, rank, line, m)
            facts.steps.append(step)
            iterations.append(seen)
            if step.global_batch:
                logged["logged_global_batch"] = str(step.global_batch)
            facts.memory += line_memory(seen, number_, rank)
        elif "padded vocab" in line and (p := PADDED_VOCAB.search(line)):
            logged["logged_padded_vocab"] = p.group(3)
        read_memory(facts, line, number_, rank)
    facts.events = events_in(rows)
    # the last iteration line's elapsed-time key, else what a NeMo line set
    facts.time_basis = next(
        (k for f in reversed(iterations) for k in f if k.startswith("elapsed time")), facts.time_basis
    )
    _configure(facts, rows, [(n, args, i in ended) for i, (n, args) in enumerate(dumps)], logged, iterations)
    return facts


def _configure(
    facts: LogFacts, rows: list[tuple[int, int | None, str]], dumps: list[tuple[int, dict[str, str], bool]],
    logged: dict[str, str], iterations: list[dict[str, str]],
) -> None:  # fmt: skip
    """The configuration of each argument dump (with what the lines state and DeepSpeed's config), the first's as
    the run's, what later ones say otherwise, and each step's run."""
    deepspeed = deepspeed_config(rows)
    stated = line_settings(iterations)
    logged = stated.logged | logged  # a line's world size over the one the throughput implies
    stated.derived += group_settings(logged, dumps[0][1] if dumps else {})
    configs = [
        config_from_args(
            args | logged, deepspeed=deepspeed, cut_after=None if ended else max(args, key=str.lower, default=None)
        )
        for _, args, ended in dumps or [(0, {}, True)]
    ]
    facts.config = configs[0] | {"conflicts": _disagreement(configs), "derived": stated.derived}
    facts.config["assumed"] = facts.config["assumed"] + stated.assumed
    if len(dumps) > 1:  # the steps after each dump are that run's
        starts = [line for line, _, _ in dumps]
        facts.steps = [replace(s, run=max(bisect.bisect(starts, s.line) - 1, 0)) for s in facts.steps]


def _disagreement(configs: list[dict[str, Any]]) -> list[str]:
    """What a later argument dump (a job requeued into the same log) states otherwise than the first, in what the
    run is read as (its plan, GPUs, model and software): "tp 4, then 2"."""

    def flat(config: dict[str, Any]) -> dict[str, Any]:
        out = {"gpus": config.get("gpus")}
        for part in ("plan", "model", "software"):
            out |= config.get(part) or {}
        return out

    first = flat(configs[0])
    for later in configs[1:]:
        other = flat(later)
        differ = [
            f"{k} {first.get(k)}, then {other.get(k)}" for k in {**first, **other} if first.get(k) != other.get(k)
        ]
        if differ:
            return [
                f"its argument dumps disagree (a job requeued into the same log?): {'; '.join(differ)}; read each "
                "run's part of the log apart"
            ]
    return []
