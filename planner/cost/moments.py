"""The moments of an interleaved pipeline rank's step that can hold its peak memory, where a stage's gradients and
gathered weights live only from its first pass to its own last backward.

torch.distributed.pipelining reduces a stage's gradients and reshards its FSDP weights right after that stage's
last backward of the step, not at the end of the step: torch 2.6 `stage.py` `backward_maybe_with_nosync` runs
FSDP's `post_backward` on `last_backward`, counted per stage by `PipelineScheduleMulti` (`backward_counter[stage]
== n_microbatches`); torch 2.13 `schedules.py` `_add_reduce_grad` puts a REDUCE_GRAD action "just after the last
backward-like" action of each stage (`stage.py` `perform_reduce_grad`). Under FSDP with gradient sync off, a
stage's unsharded gradients exist from its first backward (`FSDPParam.to_accumulated_grad_if_needed`) and, with
`reshard_after_forward=False`, its unsharded weights from its first forward, until then.

An interleaved 1F1B runs a rank's v chunks in groups of N micro-batches (plan.microbatch_group), the backward
from the last chunk down: where the step is one group (m < 2N, as torchtitan's Dec 2024 default of m = pp was), the
rank's last chunk ends its backwards before the chunk before it begins, so their gradients never coexist and the
peak is not the sum of all the rank's states and its most activations. Chunks count as equal shares of the rank's
layers, as the in-flight count does (cost.memory.in_flight_microbatches)."""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from planner.cost.stages import warmup_chunks
from planner.plan import microbatch_group


class Moment(NamedTuple):
    """What a rank holds at the start of one of its backwards, each as a share of what the additive peak counts."""

    held: float  # micro-batches of activations in flight, in units of the rank's whole layer set
    grads: float  # share of the rank's accumulated unsharded gradients alive (chunks alive / v)
    weights: float  # share of the rank's gathered weights alive (chunks alive / v)


def chunk_order(pp: int, vpp: int, num_microbatches: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The chunk of each forward and of each backward a rank runs, in order: groups of N micro-batches
    (plan.microbatch_group; the last group m mod N long), each through chunk 0 .. v − 1 forward and v − 1 .. 0
    backward (megatron/core/pipeline_parallel/schedules.py get_schedule_table; torch's ScheduleInterleaved1F1B
    forward_stage_index / backward_stage_index with microbatches_per_round)."""
    m = num_microbatches
    n = microbatch_group(m, pp)
    groups = [n] * (m // n) + ([m % n] if m % n else [])
    forwards = tuple(c for g in groups for c in range(vpp) for _ in range(g))
    backwards = tuple(vpp - 1 - c for g in groups for c in range(vpp) for _ in range(g))
    return forwards, backwards


def rank_ops(pp: int, vpp: int, num_microbatches: int, rank: int) -> tuple[tuple[bool, int], ...]:
    """The (is_forward, chunk) of each pass rank `rank` runs in order: its warm-up forwards (stages.warmup_chunks),
    then one forward and one backward at a time, then the remaining backwards (Megatron's and torch's steady 1F1B)."""
    forwards, backwards = chunk_order(pp, vpp, num_microbatches)
    warm = warmup_chunks(pp, vpp, num_microbatches, rank)
    ops: list[tuple[bool, int]] = [(True, c) for c in forwards[:warm]]
    for k, c in enumerate(forwards[warm:]):
        ops += [(True, c), (False, backwards[k])]
    ops += [(False, c) for c in backwards[len(forwards) - warm :]]
    return tuple(ops)


@lru_cache(maxsize=4096)
def interleaved_moments(pp: int, vpp: int, num_microbatches: int, rank: int) -> tuple[Moment, ...]:
    """The moments that can hold the rank's peak (no other holds as much of all three), the most activations first:
    at the start of each backward, the chunk passes held and the chunks whose gradients (first backward .. last
    backward) and gathered weights (first forward .. last backward) are alive."""
    ops = rank_ops(pp, vpp, num_microbatches, rank)
    first_f = {c: min(i for i, (f, d) in enumerate(ops) if f and d == c) for c in range(vpp)}
    first_b = {c: min(i for i, (f, d) in enumerate(ops) if not f and d == c) for c in range(vpp)}
    last_b = {c: max(i for i, (f, d) in enumerate(ops) if not f and d == c) for c in range(vpp)}
    seen: set[tuple[int, int, int]] = set()
    done_f = done_b = 0
    for i, (forward, _c) in enumerate(ops):
        if forward:
            done_f += 1
            continue
        grads = sum(first_b[c] <= i <= last_b[c] for c in range(vpp))
        weights = sum(first_f[c] <= i <= last_b[c] for c in range(vpp))
        seen.add((done_f - done_b, grads, weights))
        done_b += 1
    top = [s for s in seen if not any(o != s and all(a >= b for a, b in zip(o, s)) for o in seen)]
    return tuple(Moment(h / vpp, g / vpp, w / vpp) for h, g, w in sorted(top, reverse=True))
