"""Pipeline sends overlapped with compute (cost/pipeline_p2p.py): Megatron's interleaved 1F1B with
overlap_p2p_comm hides the steady-state sends behind the other direction's chunk and leaves the warm-up and
cool-down ones exposed (megatron/core/pipeline_parallel/schedules.py forward_backward_pipelining_with_interleaving)."""

from __future__ import annotations

import pytest
from helpers import make_hw
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.cost.compute import StageCompute
from planner.cost.pipeline_p2p import first_rank_warmup, p2p_overlapped, pp_exposed_s
from planner.cost.schedule import step_time
from planner.errors import PlannerError
from planner.fit.runs import run_engine
from planner.io.catalog import load_engine, load_model
from planner.launch.emit.megatron_bridge import bridge_overrides
from planner.plan import Plan

MEGATRON = load_engine("megatron")
LLAMA = load_model("llama3-70b")


def _compute(forward_s: float, backward_s: float, recompute_s: float = 0.0) -> StageCompute:
    return StageCompute(
        mix=(),
        layers_forward_s=forward_s,
        layers_backward_s=backward_s,
        head_forward_s=0.0,
        head_backward_s=0.0,
        recompute_s=recompute_s,
        attention_core_forward_s=0.0,
    )


def test_hand_computed_exposure_of_a_small_interleaved_plan():
    """p 4, v 2, m 8: warm-up W = min(2·3 + 1·4, 16) = 10 chunks, 6 steady. One chunk's transfer one way
    t = 0.8 s / (2·2) = 0.2 s; a chunk's forward 0.2 / 2 = 0.1 s, backward 0.4 / 2 = 0.2 s. Exposed:
    2·10·0.2 (warm-up forwards, cool-down backwards) + 6·(max(0, 0.2 − 0.2) + max(0, 0.2 − 0.1)) = 4.6 s,
    against 8 · 0.8 = 6.4 s with every transfer waited on."""
    plan = Plan(pp=4, vpp=2, micro_batch=1, global_batch=8)
    assert plan.schedule == "interleaved" and plan.num_microbatches == 8
    assert first_rank_warmup(plan) == 10
    c = _compute(0.2, 0.4)
    assert pp_exposed_s(plan, MEGATRON, c, 0.8) == pytest.approx(4.6)
    off = MEGATRON.configured(p2p_overlap=False)
    assert pp_exposed_s(plan, off, c, 0.8) == pytest.approx(6.4)
    # recompute re-runs the forward inside the backward's slot: backward 0.2 + recompute 0.2 hides as 0.4 did
    assert pp_exposed_s(plan, MEGATRON, _compute(0.2, 0.2, recompute_s=0.2), 0.8) == pytest.approx(4.6)
    # compute long enough to cover every steady transfer: only the warm-up and cool-down stay
    assert pp_exposed_s(plan, MEGATRON, _compute(2.0, 4.0), 0.8) == pytest.approx(4.0)


def test_all_microbatches_in_warm_up_hide_nothing():
    """m·v ≤ W: Megatron runs every chunk in warm-up and cool-down (are_all_microbatches_in_warmup)."""
    plan = Plan(pp=4, vpp=2, micro_batch=1, global_batch=4)
    assert first_rank_warmup(plan) == 8 == plan.num_microbatches * plan.vpp
    assert pp_exposed_s(plan, MEGATRON, _compute(1.0, 2.0), 0.8) == pytest.approx(4 * 0.8)


def _plans():
    return st.builds(
        lambda pp, vpp, k, mb, tp: Plan(
            tp=tp, pp=pp, vpp=vpp, dp=1, micro_batch=mb, global_batch=pp * k * mb, seq_len=4096, sp=tp > 1
        ),
        pp=st.sampled_from([2, 4, 8]),
        vpp=st.sampled_from([2, 5, 10]),
        k=st.integers(1, 16),
        mb=st.sampled_from([1, 2]),
        tp=st.sampled_from([1, 4, 8]),
    )


@settings(max_examples=25, deadline=None)
@given(plan=_plans())
def test_overlap_never_makes_a_step_slower(plan):
    hw = make_hw()
    on = step_time(LLAMA, hw, plan, MEGATRON)
    off = step_time(LLAMA, hw, plan, MEGATRON.configured(p2p_overlap=False))
    assert on.step_s <= off.step_s * (1 + 1e-12)
    assert on.exposed_comm_s["pp"] <= off.exposed_comm_s["pp"] + 1e-12
    assert on.comm_total_s["pp"] == pytest.approx(off.comm_total_s["pp"])  # the traffic itself is unchanged


def test_overlap_hides_steady_state_sends_of_a_long_interleaved_step():
    plan = Plan(tp=8, pp=4, vpp=5, dp=1, micro_batch=1, global_batch=64, seq_len=8192, sp=True)
    hw = make_hw()
    on = step_time(LLAMA, hw, plan, MEGATRON)
    off = step_time(LLAMA, hw, plan, MEGATRON.configured(p2p_overlap=False))
    assert off.exposed_comm_s["pp"] > 0
    # W = 2·3 + 4·4 = 22 of 320 chunks each way wait; the steady ones hide behind a whole chunk's compute
    assert on.exposed_comm_s["pp"] == pytest.approx(off.exposed_comm_s["pp"] * 22 / 320)
    assert on.step_s < off.step_s


def test_overlap_is_not_applied_where_the_engine_does_not_do_it():
    hw = make_hw()
    one_f_one_b = Plan(tp=8, pp=4, dp=1, micro_batch=1, global_batch=64, seq_len=8192, sp=True)
    assert not p2p_overlapped(one_f_one_b, MEGATRON)  # Megatron overlaps only with virtual stages
    same = [step_time(LLAMA, hw, one_f_one_b, MEGATRON.configured(p2p_overlap=v)).step_s for v in (True, False)]
    assert same[0] == same[1]
    ds = load_engine("deepspeed")
    assert not ds.comm.p2p_overlap and not ds.comm.p2p_overlap_schedules  # blocking p2p.send / p2p.recv
    t = step_time(LLAMA, hw, one_f_one_b, ds)
    assert t.exposed_comm_s["pp"] == pytest.approx(t.comm_total_s["pp"])
    with pytest.raises(PlannerError, match="p2p_overlap"):
        ds.configured(p2p_overlap=True)


def test_a_runs_file_states_the_overlap():
    raw = {"id": "r", "software": {"engine": "megatron", "p2p_overlap": False}}
    assert not run_engine(raw).comm.p2p_overlap and run_engine({"id": "r"}).comm.p2p_overlap
    with pytest.raises(PlannerError, match=r"software\.p2p_overlap"):
        run_engine({"id": "r", "software": {"p2p_overlap": "yes"}})


def test_megatron_bridge_overrides_turn_the_overlap_on_with_virtual_stages():
    """Bridge leaves megatron-core's default (off) when comm_overlap is null; the plan was priced with it on."""
    o = dict(x.split("=", 1) for x in bridge_overrides(LLAMA, Plan(pp=4, vpp=5, micro_batch=1, global_batch=64))[0])
    assert o["model.overlap_p2p_comm"] == "true" and o["model.batch_p2p_comm"] == "false"
    plain = dict(x.split("=", 1) for x in bridge_overrides(LLAMA, Plan(pp=4, micro_batch=1, global_batch=64))[0])
    assert "model.overlap_p2p_comm" not in plain
