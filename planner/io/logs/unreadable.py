"""What a text with no step line planner reads is, said by name where it is something known: a Megatron argument
dump or a DeepSpeed engine configuration with nothing after it (a run that ended, or a paste cut, before its first
logged step), or a Lightning progress bar (NeMo 1) without NeMo's step timing, whose one rate is no step time."""

from __future__ import annotations

import re
from collections.abc import Mapping

from planner.io.logs.megatron_log import ARGS_START

# DeepSpeedConfig.print (deepspeed/runtime/config.py): "DeepSpeedEngine configuration:" then the fields;
# "DeepSpeedLight configuration:" before the engine was renamed (tests/data/logs/deepspeed_cifar10_tutorial.log)
DEEPSPEED_CONFIG = re.compile(r"DeepSpeed(?:Engine|Light) configuration:")
# tqdm's meter "795/77225 [9:07:58<878:01:48, 41.36s/it" (tqdm/std.py format_meter). Lightning draws its training bar
# with smoothing=0 (lightning/pytorch/callbacks/progress/tqdm_progress.py init_train_tqdm): the rate is the elapsed
# time over the steps since the epoch's start, its warm-up, validation and checkpoints included.
PROGRESS_BAR = re.compile(r"\d+/\d+ \[[\d:]+<[\d:?]+, *[\d.]+ ?(?:s/it|it/s)")


def why_unreadable(text: str, source: str, expected: Mapping[str, str]) -> str:
    """The one line refusing `text` (uncoloured), which holds no step line of any family; `expected`: the lines
    planner reads, by family."""
    lines = text.splitlines()
    if any(ARGS_START.match(line) for line in lines):
        return (
            f"{source}: a Megatron argument dump and no step line after it (expected {expected['megatron']}): the log "
            "ends before the first logged iteration"
        )
    if DEEPSPEED_CONFIG.search(text):
        return (
            f"{source}: a DeepSpeed engine configuration and no step line after it (expected {expected['deepspeed']}): "
            "the log ends before the first logged step (a run that stopped at start-up, or an excerpt of its set-up)"
        )
    bar = PROGRESS_BAR.search(text)
    if bar:
        return (
            f"{source}: a progress bar ('{bar.group(0)}') and no step timing: Lightning's bar rate is the average "
            "since the epoch's start, warm-up and evaluation included, not a step time; NeMo prints one in the bar as "
            "'train_step_timing in s=' (its TimingCallback), which planner reads"
        )
    every = "; ".join(v for k, v in expected.items() if k != "megatron-deepspeed")
    return f"{source}: not a training log planner can read (expected {every})"
