"""What Megatron-family iteration lines state about the run beyond each step's numbers: fp16 (a loss scale other
than 1.0), Megatron-DeepSpeed's sequence length ("actual seqlen") and the world size its throughput fields imply;
and what NeMo's set-up lines state: its parallel groups and micro-batches per step. Pure: the lines' fields in, the
arguments they state (as `logged_<argument>`, megatron_args.LOGGED) and notes out."""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field

from planner.io.logs.log_values import number

# Megatron-DeepSpeed's training_log (megatron/training.py l.1109-1121, l.1177-1183 @4efb479d): "actual seqlen" is
# args.actual_seq_length where set (the curriculum's current length), else args.seq_length; "samples per second" is
# the job's; "tokens per gpu per second (tgs)" = samples/s x seq_len / args.world_size.
SEQLEN = "actual seqlen"
SAMPLES = "samples per second"
TGS = "tokens per gpu per second (tgs)"
# How far samples/s x seqlen / tgs may lie from a whole number of GPUs (a fraction of one GPU) to be read as the
# world size: the fields print 3 decimals, which moves the ratio by far less at the sizes such logs come from.
WHOLE_GPU_TOLERANCE = 0.02
# "loss scale: 262144.0" (megatron/training/training.py training_log l.3631 @d98e8a64: optimizer.get_loss_scale()):
# 1.0 unless the optimizer has a grad scaler, which get_megatron_optimizer (megatron/core/optimizer/__init__.py
# l.638-656) builds dynamic for fp16 only, constant for --loss-scale ("Static loss scaling ... can improve fp16
# convergence", arguments.py); bf16 and fp32 print 1.0. Megatron-DeepSpeed prints the DeepSpeed optimizer's cur_scale
# (megatron/training.py l.1301-1305 @4efb479d), absent from the bf16 optimizer, 1.0 for ZeRO's bf16.
LOSS_SCALE = "loss scale"
# NeMo 2 prints each rank's groups as it builds them: "Rank 0 has data parallel group : [0, 8, 16, 24]", "... has
# context parallel group: [0]", "... has tensor model parallel group: [0, 1]", "... has pipeline model parallel
# group: [0, 2, 4, 6]" (NVIDIA/NeMo nemo/lightning/megatron_init.py fake_initialize_model_parallel @36644c86; its
# data parallel group is without cp, as Megatron's data_parallel_size): a group's size is its degree.
NEMO_GROUP = re.compile(
    r"\bRank \d+ has (data|context|tensor model|pipeline model) parallel group\s*:\s*\[([\d,\s]*)\]"
)
GROUPS = ("data", "context", "tensor_model", "pipeline_model")
# "setting number of microbatches to constant 32" (megatron/core/num_microbatches_calculator.py
# ConstantNumMicroBatchesCalculator: global_batch_size // (micro_batch_size x data_parallel_size)), NeMo's too.
MICROBATCHES = re.compile(r"setting number of microbatches to constant (\d+)")


def setup_line(line: str, logged: dict[str, str]) -> None:
    """A NeMo group's size, or the micro-batches per step, into `logged`."""
    if "parallel group" in line and (group := NEMO_GROUP.search(line)):
        logged[f"logged_{group[1].replace(' ', '_')}_parallel_size"] = str(len(group[2].split(",")))
    elif "microbatches" in line and (m := MICROBATCHES.search(line)):
        logged["logged_num_microbatches"] = m[1]


def group_settings(logged: dict[str, str], dump: dict[str, str]) -> list[str]:
    """The world size of NeMo's four groups and the micro-batch its micro-batches per step give, into `logged` where
    nothing states them (no line, no argument dump: Megatron-LM prints the micro-batches line beside a dump that
    states micro_batch_size); the notes saying how."""
    notes = []
    # the four sizes without a world size: NeMo's groups (Megatron's "using world size" line states both)
    size = {g: int(logged[f"logged_{g}_parallel_size"]) for g in GROUPS if f"logged_{g}_parallel_size" in logged}
    stated = {k.rsplit(".", 1)[-1] for k in dump}  # a Megatron-Bridge config's keys carry their section
    if len(size) == len(GROUPS) and "logged_world_size" not in logged and "world_size" not in stated:
        logged["logged_world_size"] = str(math.prod(size.values()))
        notes.append(
            f"gpus = {logged['logged_world_size']}: dp {size['data']} x cp {size['context']} x tp "
            f"{size['tensor_model']} x pp {size['pipeline_model']}, the sizes of NeMo's parallel groups (megatron_init)"
        )
    n, dp, gb = (logged.get(f"logged_{k}") for k in ("num_microbatches", "data_parallel_size", "global_batch"))
    if n and dp and gb and int(gb) % (int(n) * int(dp)) == 0 and "micro_batch_size" not in stated:
        logged["logged_micro_batch_size"] = str(int(gb) // (int(n) * int(dp)))
        notes.append(
            f"micro_batch {logged['logged_micro_batch_size']}: global batch {gb} / ({n} micro-batches per step x "
            f"dp {dp}) ('setting number of microbatches to constant {n}')"
        )
    return notes


@dataclass
class LineSettings:
    """What the iteration lines state: arguments (`logged_<name>` -> printed value) and the notes saying how."""

    logged: dict[str, str] = field(default_factory=dict)
    assumed: list[str] = field(default_factory=list)
    derived: list[str] = field(default_factory=list)


def line_settings(lines: list[dict[str, str]]) -> LineSettings:
    """fp16, where the loss scale says so; the sequence length and world size a Megatron-DeepSpeed log's iteration
    lines state."""
    out = LineSettings()
    scales = sorted({number(f[LOSS_SCALE], field=LOSS_SCALE) for f in lines if f.get(LOSS_SCALE)})
    if scales and scales != [1.0]:
        out.logged["logged_fp16"] = "True"
        out.logged["logged_fp16_loss_scale"] = f"{scales[0]:.0f}" + (f" to {scales[-1]:.0f}" if len(scales) > 1 else "")
    seqlens = sorted({int(number(f[SEQLEN], field=SEQLEN)) for f in lines if f.get(SEQLEN)})
    if len(seqlens) > 1:
        out.assumed.append(
            f"seq_len: the lines' actual seqlen runs from {seqlens[0]} to {seqlens[-1]} (a sequence-length "
            "curriculum): not read as the run's"
        )
    if len(seqlens) != 1:
        return out
    out.logged["logged_seq_length"] = str(seqlens[0])
    out.derived.append(f"seq_len {seqlens[0]}: the iteration lines' actual seqlen, where no argument dump states it")
    ratios = [
        number(f[SAMPLES], field=SAMPLES) * seqlens[0] / tgs
        for f in lines
        if f.get(SAMPLES) and f.get(TGS) and (tgs := number(f[TGS], field=TGS)) > 0
    ]
    if ratios:
        _world_size(statistics.median(ratios), out)
    return out


def _world_size(ratio: float, out: LineSettings) -> None:
    """The GPU count samples/s x seqlen / tgs gives, where it is a whole number of GPUs."""
    how = f"samples per second x actual seqlen / tokens per gpu per second (tgs) = {ratio:.3f} (median over the lines)"
    gpus = round(ratio)
    if gpus >= 1 and abs(ratio - gpus) <= WHOLE_GPU_TOLERANCE:
        out.logged["logged_world_size"] = str(gpus)
        out.derived.append(
            f"gpus = {gpus}: {how}, within {WHOLE_GPU_TOLERANCE:.0%} of a GPU of {gpus} (Megatron-DeepSpeed's tgs is "
            "the job's tokens/s over its world size, megatron/training.py training_log)"
        )
    else:
        out.assumed.append(f"gpus: {how}, not a whole number of GPUs: not read")
