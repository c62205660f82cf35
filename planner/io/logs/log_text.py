"""What every log family shares: cleaning the text, the records a parser returns, and the steady state.

A parser (one module per family) turns a log's text into `LogFacts`: the step lines it found (`Step`), the
memory readings, the configuration the log printed, and the events (checkpoint saves, evaluations) that
inflate the next step's time. `steady` then leaves out the warm-up, skipped iterations and the steps an event
preceded, and merges the lines that several ranks printed for the same step.
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

# The default warm-up, in iterations: DeepSpeed's ThroughputTimer leaves out its first 2 steps
# (deepspeed/utils/timer.py, `start_step=2`) and Megatron-Core warms CUDA graphs for 3
# (megatron/core/transformer/transformer_config.py, `cuda_graph_warmup_steps: int = 3`); the first iteration
# also carries NCCL set-up and kernel autotuning, the first optimizer step allocates the optimizer states
# (Megatron reports memory after iteration 2 for that reason, megatron/training/training.py). 3 covers both.
DEFAULT_WARMUP = 3

# Colour codes: ESC [ ... m (torchtitan's metrics line is coloured, torchtitan/components/metrics.py), and the
# same codes whose ESC byte was lost when the log was pasted into an issue ("[31mstep: 1").
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\[[0-9]{1,3}(?:;[0-9]{1,3})*m")
# Launcher prefixes that name the rank: torchrun --tee / --local-ranks-filter writes "[rank3]:" or "[default3]:"
# (torch/distributed/elastic/multiprocessing, log_line_prefix "[{role}{rank}]:"), srun --label writes "3: ".
RANK_PREFIX = re.compile(r"^(?:\S+ )?\[(?:rank|default)(\d+)\]:\s?|^(\d{1,5}): ")
# Events after which the next step's time includes more than training. Checkpoints: "saving checkpoint at
# iteration" (megatron/training/checkpointing.py, Megatron-DeepSpeed megatron/checkpointing.py), "Saving the
# checkpoint." (torchtitan/components/checkpointer/dcp.py), "Scheduled async checkpoint save" (NeMo
# lightning model_checkpoint.py), "Saving model checkpoint" (deepspeed/runtime/engine.py).
CHECKPOINT = re.compile(r"(?i)\bsav(?:e|ing)\b[^|]{0,20}\bcheckpoint|checkpoint save|save-checkpoint")
# Evaluations: "validation loss at" (megatron/training/training.py evaluate_and_print_results), "Validation:
# iteration" (nemo/lightning/pytorch/callbacks/progress_printer.py), "validate step:" (torchtitan
# components/metrics.py log_validation), "[Eval batch=" (composer/loggers/console_logger.py).
EVALUATION = re.compile(r"validation loss at|Validation: iteration|validate step:|\[Eval batch=")


@dataclass(frozen=True)
class Step:
    """One step line (or the lines one rank printed for one step): what it says, SI units, null if not said.

    `step` is the last iteration the line covers (Megatron and torchtitan average over the iterations since
    the previous line); `samples_per_s` is for the whole job; `after` names an event between the previous
    step line and this one."""

    step: int
    line: int
    rank: int | None = None
    step_s: float | None = None
    tokens_per_s_per_gpu: float | None = None
    samples_per_s: float | None = None
    batches_per_s: float | None = None
    tflops_per_gpu: float | None = None
    mfu: float | None = None
    skipped: int = 0
    time_s: float | None = None
    after: str | None = None
    global_batch: int | None = None  # the batch the line says the step ran at (Megatron, NeMo print it)
    run: int = 0  # which of the runs appended to one log (a requeued job) the line is from, in order


@dataclass(frozen=True)
class Memory:
    """A peak-memory reading in bytes, and what kind of peak it is (max_allocated, max_reserved; None: the whole
    device's memory in use, as nvidia-smi counts it, fit/memory_kind.py)."""

    peak_bytes: float
    kind: str | None
    rank: int | None = None
    allocated_bytes: float | None = None
    after_iterations: int | None = None  # the iterations a report follows (Megatron's "after N iterations")


@dataclass
class LogFacts:
    """What a parser read from one log."""

    engine: str
    steps: list[Step] = field(default_factory=list)
    memory: list[Memory] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    events: list[tuple[int, str]] = field(default_factory=list)
    time_basis: str = ""  # how a step line states its time, e.g. "elapsed time per iteration (ms)"
    notes: list[str] = field(default_factory=list)  # readings left out and why: said in the run's `assumed`
    cut_off: int = 0  # steps left out because the log's last line was still being written
    starts: list[tuple[int, str]] = field(default_factory=list)  # lines that show a run's start, and what they are
    printed_from: int = 1  # what the log calls its first iteration (NeMo prints global_step, from 0; Step.step from 1)

    def printed(self, sel: Selection) -> tuple[int, int] | None:
        """The first and last iteration used, as the log numbers them."""
        shift = self.printed_from - 1
        return (sel.used[0].step + shift, sel.used[-1].step + shift) if sel.used else None


@dataclass(frozen=True)
class Selection:
    """The steps the median is taken over, one per step number, and how many were left out, by reason."""

    used: list[Step]
    left_out: dict[str, int]
    warmup_fallback: bool = False


def clean_lines(text: str) -> Iterator[tuple[int, int | None, str]]:
    """(line number, rank or None, text without colour codes or the launcher's rank prefix), CR and CRLF
    both ending a line (progress bars redraw with a bare CR)."""
    for number, line in enumerate(re.split(r"\r\n|\r|\n", ANSI.sub("", text)), start=1):  # no code spans a line
        m = RANK_PREFIX.match(line)
        rank = None
        if m:
            rank = int(m.group(1) or m.group(2))
            line = line[m.end() :]
        yield number, rank, line


def read_complete(read: Callable[[str], LogFacts], text: str) -> LogFacts:
    """What `read` finds in the text's complete lines. A log still being written ends in a line cut off mid-way
    (no newline: "... elapsed time per iteration (ms): 55", "tps: 7,3"), whose numbers are not the step's; the step
    that line would change (its own, or the block it ends, for Composer's multi-line blocks) is left out, and
    counted in `cut_off`. Read twice only when the text lacks a final line end."""
    end = max(text.rfind("\n"), text.rfind("\r")) + 1
    if end == len(text) or not text[end:].strip():
        return read(text)
    facts, whole = read(text[:end]), read(text)
    if whole.steps != facts.steps:  # the cut line is (or ends) a step
        last = whole.steps[-1]
        facts.steps = [s for s in facts.steps if (s.run, s.step, s.rank) != (last.run, last.step, last.rank)]
        facts.cut_off = 1
    if len(whole.memory) > len(facts.memory):  # a memory report on the cut line: left out, and said (audit)
        facts.notes.append(
            "a memory reading on the log's last line, which has no line end (still being written?), is left out: its "
            "numbers may be cut off; end the line if it is whole"
        )
    return facts


def events_in(lines: Iterable[tuple[int, int | None, str]]) -> list[tuple[int, str]]:
    """Line numbers of checkpoint saves and evaluations."""
    found = []
    for number_, _, line in lines:  # each pattern searched only where its fixed text is in the line
        if "checkpoint" in line.lower() and CHECKPOINT.search(line):
            found.append((number_, "checkpoint"))
        elif ("alidat" in line or "Eval batch" in line) and EVALUATION.search(line):
            found.append((number_, "evaluation"))
    return found


def mark_events(steps: list[Step], events: list[tuple[int, str]]) -> list[Step]:
    """Each step with `after` set when an event line lies between the previous step line and its own."""
    ordered = sorted(steps, key=lambda s: s.line)
    out, pending, i = [], sorted(events), 0
    previous_line = ordered[0].line if ordered else 0  # events before the first step (set-up) flag nothing
    for s in ordered:  # both in line order: the first event past the previous step, if before this one
        while i < len(pending) and pending[i][0] <= previous_line:
            i += 1
        hit = pending[i][1] if i < len(pending) and pending[i][0] < s.line else None
        out.append(replace(s, after=hit) if hit else s)
        previous_line = s.line
    return out


def _merge(group: list[Step]) -> Step:
    """The lines several ranks printed for one step: the slowest rank's time (a synchronous step ends when
    the last rank does), the lowest throughput, any skip or event."""
    if len(group) == 1:  # one rank's line is its own merge (the common case: a long log's every step)
        return group[0]

    def worst(values: list[float | None], pick: Any) -> float | None:
        present = [v for v in values if v is not None]
        return pick(present) if present else None

    return replace(
        group[0],
        rank=None if len(group) > 1 else group[0].rank,
        step_s=worst([s.step_s for s in group], max),
        tokens_per_s_per_gpu=worst([s.tokens_per_s_per_gpu for s in group], min),
        samples_per_s=worst([s.samples_per_s for s in group], min),
        batches_per_s=worst([s.batches_per_s for s in group], min),
        tflops_per_gpu=worst([s.tflops_per_gpu for s in group], min),
        mfu=worst([s.mfu for s in group], min),
        skipped=max(s.skipped for s in group),
        time_s=worst([s.time_s for s in group], max),
        after=next((s.after for s in group if s.after), None),
    )


def merge_ranks(steps: list[Step]) -> list[Step]:
    """One step per step number of each run, in run and step order."""
    groups: dict[tuple[int, int], list[Step]] = {}
    for s in steps:
        groups.setdefault((s.run, s.step), []).append(s)
    return [_merge(groups[k]) for k in sorted(groups)]


def ramping(steps: list[Step], global_batch: int | None) -> set[int]:
    """The step numbers of lines that ran (some of) their iterations at a batch other than the run's final one
    (a --rampup-batch-size ramp-up): the line's own batch differs, or the previous line's did and this one covers
    more iterations than its own (Megatron prints the batch of the line's last iteration, training.py
    training_log l.3598 @d98e8a64, and averages the time over the iterations since the previous line)."""
    out, previous, before = set(), None, None
    for s in steps:
        if global_batch is not None and s.global_batch is not None:
            off = s.global_batch != global_batch
            if off or (before is not None and before != global_batch and s.step - (previous or 0) > 1):
                out.add(s.step)
            before = s.global_batch
        previous = s.step
    return out


def steady(steps: list[Step], *, warmup: int, global_batch: int | None = None, shown: bool = True) -> Selection:
    """The steady-state steps: a line is left out when it counts skipped iterations, when it ran at a batch other
    than `global_batch` (a ramp-up), when a checkpoint save or an evaluation came before it, or when the iterations
    it covers reach into the warm-up.

    The warm-up is the first `warmup` iterations of a run whose start the log shows (`shown`: an argument dump, a
    start line; each restart appended to the log shows its own, and their steady steps are pooled), the run's
    first iteration being the one the first line's interval begins with; in an excerpt that does not show its
    start, the iterations numbered 1 to `warmup`, the numbers printed being the run's own (Megatron continues
    from a checkpoint's iteration: training.py train(), `iteration = args.iteration`).

    A line's numbers average the iterations since the previous line: Megatron divides its interval timer by the
    iterations since the last log (training.py training_log), torchtitan's tps is the tokens since the last logged
    step over the time since it, and it logs step 1, then every log_freq (torchtitan v0.2.0
    components/metrics.py MetricsProcessor.should_log and .log). So a line is steady only when its whole interval
    lies past the warm-up: torchtitan's step 10 still averages steps 2-10. When no line is (a short log), each
    run's last warm-up line is used, the one whose average holds the fewest warm-up iterations (it may reach past
    them): `warmup_fallback` says so. Never the mean of the compile step and a steady one."""
    merged = merge_ranks(steps)
    left_out = {"warm-up": 0, "skipped": 0, "ramp-up": 0, "checkpoint": 0, "evaluation": 0, NO_TIME: 0}
    used: list[Step] = []
    rest: list[Step] = []
    for run in sorted({s.run for s in merged}):
        lines = [s for s in merged if s.run == run]
        _sort_run(lines, warmup, global_batch, shown or run > 0, used, rest, left_out)
    counts = {k: v for k, v in left_out.items() if v}
    if used or not rest:
        return Selection(used, counts)
    counts["warm-up"] -= len(rest)
    return Selection(rest, {k: v for k, v in counts.items() if v}, warmup_fallback=True)


# A step line whose time is zero or negative (a clock that went back, a timer never started) times no step: left out
# and counted, not left for the median to hide.
NO_TIME = "time <= 0"


def _sort_run(
    merged: list[Step], warmup: int, global_batch: int | None, shown: bool, used: list[Step], rest: list[Step],
    left_out: dict,
) -> None:  # fmt: skip
    """One run's steps into `used`, a count of `left_out` by reason, and `rest`: the warm-up lines a short log
    falls back on (the last)."""
    # one line: from the run's start where the log shows it, else its own iteration (an excerpt from mid-run)
    gap = merged[1].step - merged[0].step if len(merged) > 1 else merged[0].step if shown else 1
    previous = max(merged[0].step - gap, 0)  # the first line's interval begins after it
    end = (previous if shown else 0) + warmup  # the last warm-up iteration
    ramp = ramping(merged, global_batch)
    warm: list[Step] = []
    for s in merged:
        untimed = s.step_s is not None and s.step_s <= 0
        reason = "skipped" if s.skipped else NO_TIME if untimed else "ramp-up" if s.step in ramp else s.after
        if reason:
            left_out[reason] += 1
        elif previous < end:
            left_out["warm-up"] += 1
            warm.append(s)
        else:
            used.append(s)
        previous = s.step
    rest.extend(warm[-1:])


def median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


# The finest a log's date-time prints (Megatron's microseconds): the seconds since the epoch hold ~2e-7 s of float
# noise (1.7e9 in a double), which a difference of two would carry into the step time (0.04900002479553223 s).
STAMP_DECIMALS = 6


def timestamp_step_s(steps: list[Step], used: list[Step]) -> float | None:
    """From the lines' timestamps: (time since the previous step line) / (steps since it), for each used step
    (so an interval never spans a step that was left out), and the median of those."""
    merged = merge_ranks(steps)
    wanted = {(s.run, s.step) for s in used}
    per_step = [
        round(b.time_s - a.time_s, STAMP_DECIMALS) / (b.step - a.step)
        for a, b in itertools.pairwise(merged)
        if (b.run, b.step) in wanted and a.run == b.run and b.step > a.step
        and a.time_s is not None and b.time_s is not None and b.time_s > a.time_s
    ]  # fmt: skip
    return statistics.median(per_step) if per_step else None
