"""Collectives, tier selection (cost.comm) and per-dimension communication and overlap (cost.traffic, cost.overlap)."""

from __future__ import annotations

import pytest
from helpers import make_engine, make_hw
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from planner.cost.comm import Link, collective_bytes, collective_s, group_link
from planner.cost.compute import layer_time, stage_compute
from planner.cost.overlap import dp_comm, layer_comm
from planner.cost.params import rank_params
from planner.cost.schedule import bottleneck_stage
from planner.cost.stages import layer_layout
from planner.plan import Plan
from planner.specs import ModelSpec


def comm_times(model, hw, plan, engine):
    return bottleneck_stage(model, hw, plan, engine).comm


GPT = ModelSpec(
    name="gpt-22b",
    num_layers=48,
    hidden_size=6144,
    num_attention_heads=64,
    ffn_hidden_size=24576,
    vocab_size=51200,
    max_seq_len=2048,
)


def test_ring_bytes():
    """Ring all-reduce sends 2(n−1)/n of the buffer, reduce-scatter and all-gather (n−1)/n each."""
    assert collective_bytes("all_reduce", 8e9, 8) == pytest.approx(2 * 7 / 8 * 8e9)
    assert collective_bytes("reduce_scatter", 8e9, 8) == pytest.approx(7 / 8 * 8e9)
    assert collective_bytes("all_gather", 8e9, 8) + collective_bytes("reduce_scatter", 8e9, 8) == pytest.approx(
        collective_bytes("all_reduce", 8e9, 8)
    )
    assert collective_bytes("all_reduce", 8e9, 1) == 0


def test_alpha_beta_by_hand():
    link = Link(bandwidth_bytes_per_s=100e9, latency_s=5e-6, intra_node=True)
    # 4 ranks, 1 GB: 2·3 steps of latency + 1.5 GB / 100 GB/s.
    assert collective_s("all_reduce", 1e9, 4, link) == pytest.approx(6 * 5e-6 + 1.5e9 / 100e9)
    assert collective_s("p2p", 1e6, 2, link) == pytest.approx(5e-6 + 1e6 / 100e9)
    with pytest.raises(ValueError):
        collective_s("broadcast", 1.0, 2, link)


def test_tier_selection():
    hw = make_hw(gpus_per_node=8)
    assert group_link(hw, n=8, stride=1).intra_node  # tp = 8 on an 8-GPU node
    assert not group_link(hw, n=16, stride=1).intra_node  # tp = 16 crosses nodes
    assert not group_link(hw, n=2, stride=8).intra_node  # dp = 2 over tp = 8 crosses nodes
    assert group_link(hw, n=2, stride=4).intra_node  # dp = 2 over tp = 4 fits in a node
    inter = group_link(hw, n=4, stride=8)
    assert inter.bandwidth_bytes_per_s == pytest.approx(25e9 * 0.8)  # one rank per node: one NIC
    assert inter.latency_s == 8e-6
    # dp = 64 with stride 1: 8 ranks per node drive 8 NICs (200 GB/s), capped by NVLink's 240 GB/s.
    assert group_link(hw, n=64, stride=1).bandwidth_bytes_per_s == pytest.approx(8 * 25e9 * 0.8)
    assert group_link(hw, n=64, stride=4).bandwidth_bytes_per_s == pytest.approx(2 * 25e9 * 0.8)


def test_sequence_parallel_does_not_change_tp_time():
    """SP turns each all-reduce into reduce-scatter + all-gather of the same bytes (Korthikanti 2022)."""
    hw, tr = make_hw(), make_engine()
    a, b = (Plan(tp=8, sp=sp, micro_batch=4, global_batch=4) for sp in (False, True))
    ka = layer_comm(GPT, hw, a, tr, moe=False, layer=layer_time(GPT, hw, a, tr))
    kb = layer_comm(GPT, hw, b, tr, moe=False, layer=layer_time(GPT, hw, b, tr))
    assert ka.tp_s == pytest.approx(kb.tp_s)
    # 4 all-reduces of b·s·h·2 bytes on NVLink.
    link = group_link(hw, n=8, stride=1)
    assert ka.tp_s == pytest.approx(4 * collective_s("all_reduce", 4 * 2048 * 6144 * 2, 8, link))


def test_tp_overlap_hides_tp():
    hw = make_hw()
    plan = Plan(tp=8, sp=True, micro_batch=4, global_batch=4)
    plain = comm_times(GPT, hw, plan, make_engine())
    overlapped = comm_times(GPT, hw, plan, make_engine(tp_overlap=True))
    assert overlapped.tp_s == plain.tp_s
    assert overlapped.tp_exposed_s < plain.tp_exposed_s


def test_zero3_moves_one_and_a_half_times_zero0_bytes():
    """ZeRO-3: 2 all-gathers + 1 reduce-scatter = 3(n−1)/n·Ψ vs 2(n−1)/n·Ψ for DDP (ZeRO paper Sec. 7, which
    DeepSpeed implements: 16-bit gradients and weights on the wire). Latencies set to 0: bytes only."""
    hw, tr = make_hw(), make_engine("deepspeed")
    tr = tr.model_copy(update={"comm": tr.comm.model_copy(update={"collective_launch_s": 0.0})})
    hw = hw.model_copy(
        update={
            "intra_node": hw.intra_node.model_copy(update={"latency_s": 0.0}),
            "inter_node": hw.inter_node.model_copy(update={"latency_s": 0.0}),
        }
    )
    # fp16, the paper's: in bf16 DeepSpeed without ZeRO runs BF16_Optimizer, which all-gathers the weights too
    plans = [Plan(dp=16, zero=z, micro_batch=1, global_batch=16, seq_len=2048, precision="fp16") for z in (0, 3)]
    totals = []
    for p in plans:
        totals.append(dp_comm(GPT, hw, p, tr, stage=0, compute=stage_compute(GPT, hw, p, tr, 0))[0])
    dense = rank_params(GPT, layer_layout(GPT.num_layers, 1, 1), tp=1, ep=1, rank=0).dense
    link = group_link(hw, n=16, stride=1)
    assert totals[0] == pytest.approx(2 * 15 / 16 * dense * 2 / link.bandwidth_bytes_per_s)
    assert totals[1] == pytest.approx(1.5 * totals[0])


def test_small_messages_reach_less_bandwidth_and_pay_per_call():
    """NCCL's protocol ramp (half the bandwidth at efficiency.half_bandwidth_bytes) and base cost per call."""
    link = Link(bandwidth_bytes_per_s=100e9, latency_s=0.0, intra_node=True, base_s=10e-6, half_bytes=20e6)
    one = collective_s("all_gather", 1e9, 8, link)
    chunked = collective_s("all_gather", 1e9, 8, link, chunk_bytes=20e6)
    assert one == pytest.approx(10e-6 + 7 / 8 * 1e9 / (100e9 * 1e9 / (1e9 + 20e6)))
    assert chunked == pytest.approx(50 * 10e-6 + 7 / 8 * 1e9 / (100e9 * 0.5))
    assert chunked > 1.9 * one


@settings(max_examples=50, deadline=None)
@given(n=st.integers(2, 1024), nbytes=st.floats(1.0, 1e11))
def test_collective_properties(n, nbytes):
    link = Link(bandwidth_bytes_per_s=50e9, latency_s=1e-5, intra_node=False)
    ar = collective_s("all_reduce", nbytes, n, link)
    rs = collective_s("reduce_scatter", nbytes, n, link)
    assert ar == pytest.approx(2 * rs)
    assert collective_s("all_reduce", 2 * nbytes, n, link) >= ar
    assert collective_bytes("all_reduce", nbytes, n) < 2 * nbytes


@settings(max_examples=25, deadline=None)
@given(dp=st.sampled_from([2, 4, 8, 16, 64]), zero=st.integers(0, 3))
def test_exposed_never_exceeds_total_plus_a_bucket(dp, zero):
    hw, tr = make_hw(), make_engine()
    assume(zero in tr.rules.zero)
    plan = Plan(dp=dp, tp=2, zero=zero, micro_batch=1, global_batch=dp * 2, seq_len=2048)
    k = comm_times(GPT, hw, plan, tr)
    for d in ("tp", "cp", "ep", "pp"):
        assert 0 <= k.exposed_by_dim[d] <= k.total_by_dim[d] + 1e-12
    assert 0 <= k.dp_exposed_s <= k.dp_s * (1 + 1 / GPT.num_layers) + 1e-12
