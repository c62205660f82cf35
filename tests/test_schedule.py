"""Pipeline schedule and step time (planner.schedule) and run-level timing (planner.timing)."""

from __future__ import annotations

import itertools
import math

import pytest
from helpers import make_engine, make_hw
from hypothesis import example, given, settings
from hypothesis import strategies as st

from planner.cost.schedule import bubble_fraction, step_overhead_s, step_time
from planner.cost.timing import checkpoint_plan, daly_interval_s, time_to_train, young_interval_s
from planner.plan import Plan
from planner.specs import ModelSpec

GPT3 = ModelSpec(
    name="gpt3-175b",
    num_layers=96,
    hidden_size=12288,
    num_attention_heads=96,
    ffn_hidden_size=4 * 12288,
    vocab_size=51200,
    max_seq_len=2048,
)


def _slot_work(t) -> float:
    """What runs inside the micro-batch slots: everything the bubble is a fraction of."""
    e = t.exposed_comm_s
    return t.compute_s + t.recompute_s + e["tp"] + e["cp"] + e["ep"] + e["pp"]


def test_1f1b_bubble_is_p_minus_1_over_m():
    """Narayanan et al. 2021, Sec. 2.2.1: bubble / ideal = (p − 1)/m."""
    plan = Plan(tp=8, pp=16, dp=8, micro_batch=1, global_batch=1536, recompute="full")
    t = step_time(GPT3, make_hw(), plan, make_engine())
    m = plan.num_microbatches
    assert m == 192
    assert t.bubble_s / _slot_work(t) == pytest.approx(15 / m)


def test_interleaved_bubble_divides_by_vpp():
    """Narayanan et al. 2021, Sec. 2.2.2: (p − 1)/(v·m)."""
    plan = Plan(tp=8, pp=8, vpp=3, dp=1, micro_batch=1, global_batch=64, recompute="full")
    assert plan.schedule == "interleaved"
    t = step_time(GPT3, make_hw(), plan, make_engine())
    assert t.bubble_s / _slot_work(t) == pytest.approx(7 / (3 * 64))
    assert bubble_fraction(pp=8, vpp=3, num_microbatches=64, schedule="1f1b") == pytest.approx(7 / 64)


@settings(max_examples=20, deadline=None)
@given(m=st.integers(1, 64), pp=st.sampled_from([2, 4, 8]))
def test_more_microbatches_lower_the_bubble_fraction(m, pp):
    hw, tr = make_hw(), make_engine()
    a = step_time(GPT3, hw, Plan(tp=8, pp=pp, micro_batch=1, global_batch=m), tr)
    b = step_time(GPT3, hw, Plan(tp=8, pp=pp, micro_batch=1, global_batch=2 * m), tr)
    assert b.bubble_s / b.step_s < a.bubble_s / a.step_s
    assert b.tokens_per_s > a.tokens_per_s


def test_step_is_the_sum_of_its_parts_and_rates_agree():
    hw = make_hw(overhead_s=0.25)
    plan = Plan(tp=4, pp=2, dp=4, zero=1, micro_batch=2, global_batch=64, recompute="selective", sp=True)
    engine = make_engine(selective_recompute="attention")
    t = step_time(GPT3, hw, plan, engine)
    parts = t.compute_s + t.recompute_s + t.bubble_s + t.optimizer_s + t.overhead_s + sum(t.exposed_comm_s.values())
    assert t.step_s == pytest.approx(parts)
    assert set(t.exposed_comm_s) == {"tp", "cp", "ep", "pp", "dp"}
    # the hardware's fixed cost plus the engine's host time (its behaviour: per step, micro-batch and layer)
    host = step_overhead_s(make_hw(), engine, plan, layers=GPT3.num_layers // 2)
    assert t.overhead_s == pytest.approx(0.25 + host) and host > 0
    assert t.tokens_per_s == pytest.approx(64 * 2048 / t.step_s)
    assert t.tokens_per_s_per_gpu == pytest.approx(t.tokens_per_s / 32)
    assert 0 < t.mfu < t.hfu < 1
    assert t.tflops_per_gpu == pytest.approx(t.mfu * 300)


def test_time_to_train():
    tt = time_to_train(step_s=2.0, tokens_per_step=1000, tokens=10_500, gpus=8)
    assert tt.steps == 11 and tt.seconds == 22.0
    assert tt.gpu_hours == pytest.approx(22 * 8 / 3600)


def test_young_and_daly_intervals():
    """Young 1974: sqrt(2δM); Daly 2006 is within a few % of it when δ ≪ M, and M when δ ≥ 2M."""
    assert young_interval_s(checkpoint_s=60, mtbf_s=3600 * 3) == pytest.approx(math.sqrt(2 * 60 * 10800))
    y = young_interval_s(checkpoint_s=60, mtbf_s=86400)
    assert daly_interval_s(checkpoint_s=60, mtbf_s=86400) == pytest.approx(y, rel=0.05)
    assert daly_interval_s(checkpoint_s=500, mtbf_s=200) == 200


def test_checkpoint_plan_goodput_falls_with_scale():
    small = checkpoint_plan(checkpoint_bytes=2e12, write_bytes_per_s=100e9, mtbf_per_gpu_s=5e7, gpus=1024)
    big = checkpoint_plan(checkpoint_bytes=2e12, write_bytes_per_s=100e9, mtbf_per_gpu_s=5e7, gpus=16384)
    assert small.checkpoint_s == 20.0
    assert small.mtbf_s == pytest.approx(5e7 / 1024)
    assert 0 < big.goodput < small.goodput < 1


def test_restarts_make_goodput_fall_with_scale_where_checkpoints_keep_up():
    """Storage that grows with the nodes keeps δ/M, and so the write and lost-work waste, the same at every size;
    the restart each failure costs does not shrink, so goodput falls as the system MTBF does. At Llama 3's failure
    rate a 131,072-GPU job keeps about two thirds of its time (Meta's FT-HSDP measures 44% at O(100K) GPUs)."""
    from planner.cluster.failures import LLAMA3_GPU_MTBF_HOURS
    from planner.cost.timing import RESTART_S

    def at(gpus: int, **kw):
        bandwidth = 100e9 * gpus / 1024
        return checkpoint_plan(
            checkpoint_bytes=2e12,
            write_bytes_per_s=bandwidth,
            mtbf_per_gpu_s=LLAMA3_GPU_MTBF_HOURS * 3600,
            gpus=gpus,
            **kw,
        )

    sizes = (1024, 16384, 131072)
    without = [at(g, restart_s=0).goodput for g in sizes]
    assert without == pytest.approx([without[0]] * 3, rel=1e-9)
    kept = [at(g).goodput for g in sizes]
    assert kept[0] > kept[1] > kept[2] and 0.5 < kept[2] < 0.75
    small = at(1024)
    assert small.restart_s == RESTART_S == 600
    first_order = small.checkpoint_s / small.interval_s + (small.interval_s + small.checkpoint_s) / (2 * small.mtbf_s)
    assert small.wasted_fraction == pytest.approx(first_order + RESTART_S / small.mtbf_s, rel=0.02)  # Young 1974
    hopeless = checkpoint_plan(checkpoint_bytes=1e15, write_bytes_per_s=1e6, mtbf_per_gpu_s=3600, gpus=131072)
    assert hopeless.goodput == 0 and hopeless.wasted_fraction == 1


def test_a_checkpoint_interval_is_whole_steps_and_at_least_one():
    """A job checkpoints between steps: Daly's interval rounded to whole steps, never less than one, however
    often a large job fails."""
    kw = {"checkpoint_bytes": 1e12, "write_bytes_per_s": 1e13, "mtbf_per_gpu_s": 5e4 * 3600, "gpus": 131072}
    # δ = 0.1 s, M = 1373.3 s: Daly's τ = sqrt(2δM)(1 + sqrt(δ/2M)/3 + δ/18M) − δ = 16.50 s
    assert checkpoint_plan(**kw).interval_s == pytest.approx(16.50, abs=0.01)
    assert checkpoint_plan(**kw, step_s=30).interval_s == 30  # one step, not none
    assert checkpoint_plan(**kw, step_s=3).interval_s == 18  # 5.5 steps: 6 of them (5 would be 15 s)
    assert checkpoint_plan(**kw, step_s=4).interval_s == 16  # 4.1 steps: 4


def test_goodput_of_a_job_that_barely_progresses_is_small_not_zero():
    """Failures every few minutes against a 50-minute restart: a sliver of the time trains, which the goodput
    says (taken in logarithms, not as one minus a waste that rounds to one)."""
    p = checkpoint_plan(checkpoint_bytes=1e11, write_bytes_per_s=1e10, mtbf_per_gpu_s=3600.0, gpus=16, restart_s=3000.0)
    assert 0 < p.goodput < 1e-3 and p.wasted_fraction < 1


def _interleaved_ops(p: int, v: int, m: int, group: int, rank: int) -> list[tuple[str, int, int]]:
    """Rank `rank`'s forward (F) and backward (B) chunk passes in Megatron-Core's interleaved 1F1B: the
    micro-batches in groups of `group`, each group through every virtual stage in turn (schedules.py
    get_schedule_table; backward over the chunks in reverse), the warm-up forwards first, then one forward and one
    backward at a time, then the remaining backwards (forward_backward_pipelining_with_interleaving)."""
    table = [(mb, c) for g in range(0, m, group) for c in range(v) for mb in range(g, min(g + group, m))]
    fwd = [("F", mb, c) for mb, c in table]
    bwd = [("B", mb, v - 1 - c) for mb, c in table]
    warm = min(2 * (p - rank - 1) + (v - 1) * group, m * v)
    ops = fwd[:warm]
    for i in range(m * v - warm):
        ops += [fwd[warm + i], bwd[i]]
    return ops + bwd[m * v - warm :]


def _simulate(p: int, v: int, m: int, group: int) -> tuple[float, list[int]]:
    """(makespan, peak chunk passes held per rank) with a forward chunk 1/v and a backward 2/v long, each pass
    waiting for the one before it on the pipeline."""
    ops = [_interleaved_ops(p, v, m, group, r) for r in range(p)]
    done: dict[tuple, float] = {}
    clock, pos = [0.0] * p, [0] * p
    while any(pos[r] < len(ops[r]) for r in range(p)):
        moved = False
        for r in range(p):
            while pos[r] < len(ops[r]):
                kind, mb, c = ops[r][pos[r]]
                if kind == "F":
                    dep = ("F", mb, c, r - 1) if r else (("F", mb, c - 1, p - 1) if c else None)
                else:
                    dep = ("B", mb, c, r + 1) if r < p - 1 else (("B", mb, c + 1, 0) if c < v - 1 else ("F", mb, c, r))
                if dep is not None and dep not in done:
                    break
                clock[r] = max(clock[r], done[dep] if dep else 0.0) + (1 if kind == "F" else 2) / v
                done[(kind, mb, c, r)] = clock[r]
                pos[r], moved = pos[r] + 1, True
        assert moved, "the schedule deadlocked"
    held = [max(itertools.accumulate(1 if k == "F" else -1 for k, _, _ in rank_ops)) for rank_ops in ops]
    return max(clock), held


@settings(max_examples=60, deadline=None)
@given(p=st.integers(2, 6), v=st.integers(2, 4), m=st.integers(2, 24))
def test_grouped_interleaving_keeps_the_bubble_and_holds_what_memory_counts(p, v, m):
    """With m micro-batches in groups of microbatch_group(m, p) per virtual stage (a group of m where p does not
    divide m, or where m < p as torch runs it), a simulation of Megatron-Core's op order finishes in the ideal time
    plus the interleaved bubble ((p − 1)/(v·m) from m = p on; with m < p it had been priced so too, short by
    (v − 1)(p − m) chunk passes), and each rank's peak of chunk passes held is in_flight_microbatches × v."""
    from planner.cost.memory import in_flight_microbatches
    from planner.plan import microbatch_group

    group = microbatch_group(m, p)
    if m >= p:  # Megatron-Core's rule; fewer micro-batches than stages only torch runs, in one round of m
        assert p <= group <= m and (m % group == 0 or m % group >= p) and (group == p) == (m % p == 0)
    else:
        assert group == m
    makespan, held = _simulate(p, v, m, group)
    ideal = 3 * m  # m micro-batches of forward 1 + backward 2
    bubble = bubble_fraction(pp=p, vpp=v, num_microbatches=m, schedule="interleaved")
    assert makespan - ideal == pytest.approx(bubble * ideal)
    plan = Plan(pp=p, vpp=v, dp=1, micro_batch=1, global_batch=m, schedule="interleaved")
    assert held == [round(in_flight_microbatches(plan, r) * v) for r in range(p)]


@settings(max_examples=80, deadline=None)
@given(
    p=st.integers(2, 6),
    v=st.integers(2, 4),
    m=st.integers(2, 24),
    rank=st.integers(0, 5),
    act=st.floats(0, 10),
    grad=st.lists(st.floats(0, 10), min_size=4, max_size=4),
    weight=st.lists(st.floats(0, 10), min_size=4, max_size=4),
)
@example(p=2, v=4, m=5, rank=0, act=1.0, grad=[10.0, 0.0, 0.0, 0.0], weight=[0.0] * 4)  # two moments, uneven groups
@example(p=4, v=2, m=4, rank=0, act=0.1, grad=[10.0, 1.0, 0, 0], weight=[0.0] * 4)  # the embedding chunk's moment
def test_the_moments_hold_every_backwards_peak(p, v, m, rank, act, grad, weight):
    """Where a stage's gradients live from its first to its own last backward and its gathered weights from its first
    forward (torch pipelining with FSDP: cost.moments), the most any backward of the simulated op order holds, for any
    bytes per chunk pass and any bytes of each chunk's gradients and weights, is the most one of the moments holds;
    the first moment holds the micro-batches in flight memory has always counted; and each moment of a later rank has
    one of every earlier rank that holds as much (the search's screen drops dominated ranks: cost/peaks.py)."""
    from planner.cost.memory import in_flight_microbatches
    from planner.cost.moments import interleaved_moments
    from planner.plan import microbatch_group

    rank %= p
    ops = _interleaved_ops(p, v, m, microbatch_group(m, p), rank)
    at = {(k, c): [i for i, (kind, _mb, d) in enumerate(ops) if (kind, d) == (k, c)] for k in "FB" for c in range(v)}
    brute, held = 0.0, 0
    for i, (kind, _mb, _c) in enumerate(ops):
        if kind == "F":
            held += 1
            continue
        grads = sum(grad[c] for c in range(v) if at["B", c][0] <= i <= at["B", c][-1])
        gathered = sum(weight[c] for c in range(v) if at["F", c][0] <= i <= at["B", c][-1])
        brute = max(brute, act * held + grads + gathered)
        held -= 1
    moments = interleaved_moments(p, v, m, rank)
    best = max(
        v * act * mo.held + sum(grad[c] for c in mo.grads) + sum(weight[c] for c in mo.weights) for mo in moments
    )
    assert best == pytest.approx(brute, abs=1e-9)
    plan = Plan(pp=p, vpp=v, dp=1, micro_batch=1, global_batch=m, schedule="interleaved")
    assert moments[0].held == in_flight_microbatches(plan, rank)
    for later in range(rank + 1, p):
        for mo in interleaved_moments(p, v, m, later):
            assert any(
                e.held >= mo.held and set(e.grads) >= set(mo.grads) and set(e.weights) >= set(mo.weights)
                for e in moments
            ), (later, mo)


@given(p=st.integers(2, 16), m=st.integers(1, 200))
def test_the_microbatch_group_is_torchs_round_wherever_torch_runs_the_count(p, m):
    """torch.distributed.pipelining's ScheduleInterleaved1F1B runs m % max(1, m // p) == 0 micro-batches in rounds
    of m / max(1, m // p) (its microbatches_per_round): the same group, so one warm-up count serves both engines."""
    from planner.plan import microbatch_group

    rounds = max(1, m // p)
    if m % rounds == 0:
        assert microbatch_group(m, p) == m // rounds
