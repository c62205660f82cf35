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
from the last chunk down: where all the micro-batches are one group (m < 2·pp as torch runs them, in one round; as
torchtitan's Dec 2024 default of m = pp was), the rank's last chunk ends its backwards before the chunk before it
begins, so their gradients never coexist and the peak is not the sum of all the rank's states and its most
activations. A moment names the chunks alive; cost.memory weighs them by their parameters (params.chunk_shares: the
loss's and the embedding's chunks hold more), and the activations in flight as equal shares of the rank's layers, as
the in-flight count does (cost.memory.in_flight_microbatches). The weights' lifetime is an upper bound: torch 2.13
also releases a stage's weights between its passes when more than three are gathered (schedules.py
_add_unshard_reshard), and a stage resharded after each forward gathers them from its first backward only."""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from planner.cost.stages import warmup_chunks
from planner.plan import microbatch_group


class Moment(NamedTuple):
    """What a rank holds at the start of one of its backwards."""

    held: float  # micro-batches of activations in flight, in units of the rank's whole layer set
    grads: tuple[int, ...] | None = None  # the chunks (rank-local, model order) whose unsharded gradients are alive
    weights: tuple[int, ...] | None = None  # the chunks whose gathered weights are alive; None: every chunk


def _covers(
    a: tuple[int, int, frozenset[int], frozenset[int]], b: tuple[int, int, frozenset[int], frozenset[int]]
) -> bool:
    return a[0] >= b[0] and a[2] >= b[2] and a[3] >= b[3]


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
    """The moments that can hold the rank's peak (no other holds as many activations and a superset of its alive
    chunks), the most activations first, then in step order: at the start of each backward, the chunk passes held
    and the chunks whose gradients (first backward .. last backward) and gathered weights (first forward .. last
    backward) are alive."""
    ops = rank_ops(pp, vpp, num_microbatches, rank)
    first_f = {c: min(i for i, (f, d) in enumerate(ops) if f and d == c) for c in range(vpp)}
    first_b = {c: min(i for i, (f, d) in enumerate(ops) if not f and d == c) for c in range(vpp)}
    last_b = {c: max(i for i, (f, d) in enumerate(ops) if not f and d == c) for c in range(vpp)}
    seen: dict[tuple[int, frozenset[int], frozenset[int]], int] = {}  # each moment's first backward
    done_f = done_b = 0
    for i, (forward, _c) in enumerate(ops):
        if forward:
            done_f += 1
            continue
        grads = frozenset(c for c in range(vpp) if first_b[c] <= i <= last_b[c])
        weights = frozenset(c for c in range(vpp) if first_f[c] <= i <= last_b[c])
        seen.setdefault((done_f - done_b, grads, weights), i)
        done_b += 1
    found = [(h, i, g, w) for (h, g, w), i in seen.items()]
    top = sorted(
        (s for s in found if not any(o is not s and _covers(o, s) for o in found)), key=lambda s: (-s[0], s[1])
    )
    return tuple(Moment(h / vpp, tuple(sorted(g)), tuple(sorted(w))) for h, _i, g, w in top)
