"""NeMo's training lines: NeMo 2's progress printer and NeMo 1's progress bar, with the step time, the global batch
and, where its callbacks add them, the peak memory and TFLOP/s."""

from __future__ import annotations

import re

from planner.io.logs.log_text import Memory, Step
from planner.io.logs.log_values import peak_memory

# NeMo 2: "Training epoch 0, iteration 3/19 | ... | global_step: 3 | ... | train_step_timing in s: 7.561"
# (nemo/lightning/pytorch/callbacks/progress_printer.py, the timer from nemo/utils/exp_manager.py TimingCallback);
# NeMo 1's progress bar prints "global_step=9.000, ... train_step_timing in s=2.05".
NEMO_TIMING = re.compile(r"train_step_timing in s\s*[:=]\s*([\d.]+(?:[eE][-+]?\d+)?)")
NEMO_STEP = re.compile(r"global_step\s*[:=]\s*([\d.]+)")
NEMO_BATCH = re.compile(r"global_batch_size\s*[:=]\s*([\d.]+)")
# What NeMo 2's callbacks add to the same line: "max_memory_reserved: 57466159104 | max_memory_allocated: 53930270720"
# (torch.cuda.max_memory_reserved() / max_memory_allocated() in bytes) and "TFLOPS_per_GPU: 85.8" (the FLOPs
# measurement callback), as in the Qwen3-30B-A3B log pasted in NVIDIA-NeMo issue 14850.
NEMO_RESERVED = re.compile(r"max_memory_reserved\s*[:=]\s*(\d+)")
NEMO_ALLOCATED = re.compile(r"max_memory_allocated\s*[:=]\s*(\d+)")
NEMO_TFLOPS = re.compile(r"TFLOPS_per_GPU\s*[:=]\s*([\d.]+(?:[eE][-+]?\d+)?)")


def nemo_step(number_: int, rank: int | None, line: str) -> tuple[Step, list[Memory]] | None:
    """The step a NeMo training line closes and the peak memory it prints (None: not such a line)."""
    if "train_step_timing" not in line:
        return None
    t, s = NEMO_TIMING.search(line), NEMO_STEP.search(line)
    if not t or not s:
        return None
    b, flops = NEMO_BATCH.search(line), NEMO_TFLOPS.search(line)
    # global_step counts from 0: the line of global_step N closes iteration N + 1.
    step = Step(
        step=int(float(s.group(1))) + 1,
        line=number_,
        rank=rank,
        step_s=float(t.group(1)),
        global_batch=int(float(b.group(1))) if b else None,
        tflops_per_gpu=float(flops.group(1)) if flops else None,
    )
    reserved, allocated = (
        float(m.group(1)) if (m := r.search(line)) else None for r in (NEMO_RESERVED, NEMO_ALLOCATED)
    )
    peak = peak_memory(reserved, allocated, rank)
    return step, [peak] if peak else []
