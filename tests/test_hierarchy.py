"""Hierarchical collectives across tiers (cost/comm.py `hierarchy`, `hierarchical_s`), the tier each parallel group
crosses (`group_tiers`) and where the documents and the ranking say so."""

from __future__ import annotations

import dataclasses
import re

import pytest
from helpers import make_hw
from helpers import run_planner as run
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import estimate, search
from planner.cluster import Cluster, Tier, on_cluster
from planner.cost.comm import HIERARCHICAL, collective_s, group_link, group_tiers, hierarchy, ring_steps
from planner.cost.schedule import step_time
from planner.io.catalog import load_engine, load_hardware, load_model
from planner.io.clusters import cluster_hardware, load_cluster
from planner.plan import Plan

GB = 1e9


def _tier(name: str, gpus: int, gbs: float, lat_us: float) -> Tier:
    return Tier(name=name, gpus=gpus, bandwidth_bytes_per_s=gbs * GB, latency_s=lat_us * 1e-6, source="test")


def _full_bisection(name: str) -> Cluster:
    """The shipped cluster with every tier at its leaf's per-GPU share: no oversubscription anywhere."""
    c = load_cluster(name)
    leaf = c.tiers[0].bandwidth_bytes_per_s
    tiers = tuple(t.model_copy(update={"bandwidth_bytes_per_s": leaf}) for t in c.tiers)
    return Cluster.model_validate({**c.model_dump(), "name": f"{name}-full", "tiers": [t.model_dump() for t in tiers]})


def test_levels_follow_the_rank_order():
    """dp 2,048 over tp 8 on the 2:1 tree: 32 of its ranks per leaf (256 GPUs), 1,024 per spine (8,192), all 2,048
    under the core; with tp 2, 4 ranks share each NVLink domain first. Without a cluster: NVLink, then the NIC."""
    fat = cluster_hardware("rail-fat-tree-2to1", None)
    lv = hierarchy(fat, n=2048, stride=8)
    assert [(x.tier, x.below, x.within) for x in lv] == [("leaf", 1, 32), ("spine", 32, 1024), ("core", 1024, 2048)]
    lv = hierarchy(fat, n=1024, stride=2)
    assert [(x.tier, x.below, x.within) for x in lv] == [("nvlink", 1, 4), ("leaf", 4, 128), ("spine", 128, 1024)]
    plain = hierarchy(load_hardware("h100-sxm"), n=64, stride=4)
    assert [(x.tier, x.below, x.within) for x in plain] == [("nvlink", 1, 2), ("network", 2, 64)]
    assert group_link(fat, n=8, stride=1).levels == ()  # inside one domain: NVLink alone, no hierarchy


def test_hierarchical_all_reduce_by_hand():
    """All-reduce of 1 GB over dp 2,048 (stride 8) on the 2:1 tree: reduce-scatter and all-gather each send 31/32
    of it through the leaf at 50 GB/s × 0.94, then 1/32 − 1/1024 and 1/1024 − 1/2048 of it beyond the leaf at the
    oversubscribed 25 GB/s × 0.94, with 31 leaf, 31 spine and 1 core steps of latency each way; the ring charged
    every byte at 25 GB/s × 0.94 and 4,094 steps of the core's latency."""
    hw = cluster_hardware("rail-fat-tree-2to1", None)
    link = group_link(hw, n=2048, stride=8)
    eff = hw.efficiency
    leaf, spine = 50 * GB * eff.inter_node, 25 * GB * eff.inter_node
    wire = 31 / 32 / leaf + (1 / 32 - 1 / 1024) / spine + (1 / 1024 - 1 / 2048) / spine
    steps = 31 * 5.0e-6 + 31 * 5.5e-6 + 1 * 6.0e-6
    ramp = GB / (GB + eff.half_bandwidth_bytes)
    expected = eff.collective_base_s + 2 * steps + 2 * GB * wire / ramp
    assert collective_s("all_reduce", GB, 2048, link) == pytest.approx(expected)
    ring = eff.collective_base_s + 2 * 2047 * 6.0e-6 + 2 * 2047 / 2048 * GB / (spine * ramp)
    assert collective_s("all_reduce", GB, 2048, dataclasses.replace(link, levels=())) == pytest.approx(ring)
    assert expected < 0.6 * ring  # most of the bytes stay under the leaf, at twice the share


def test_spine_oversubscription_only_charges_what_crosses_the_spine():
    """The 2:1 tree against the same tree at full bisection: a dp group inside one leaf (dp 32 over tp 8 = 256
    ranks) costs the same on both; one that crosses the spine (dp 64, 512 ranks) costs more on the 2:1 tree, by
    exactly the 1/32 − 1/64 of the buffer that crosses the spine, at 25 instead of 50 GB/s, both ways."""
    base = load_hardware("h100-sxm")
    fat = on_cluster(base, load_cluster("rail-fat-tree-2to1"))
    full = on_cluster(base, _full_bisection("rail-fat-tree-2to1"))
    nbytes = 4 * GB
    in_leaf = [collective_s("all_reduce", nbytes, 32, group_link(hw, n=32, stride=8)) for hw in (fat, full)]
    assert in_leaf[0] == pytest.approx(in_leaf[1])
    across = [collective_s("all_reduce", nbytes, 64, group_link(hw, n=64, stride=8)) for hw in (fat, full)]
    eff = base.efficiency
    ramp = nbytes / (nbytes + eff.half_bandwidth_bytes)
    extra = 2 * (1 / 32 - 1 / 64) * nbytes * (1 / (25 * GB) - 1 / (50 * GB)) / eff.inter_node / ramp
    assert across[0] - across[1] == pytest.approx(extra)


def test_step_time_changes_only_for_the_group_that_crosses_the_spine():
    """Llama 3 8B, tp 8: dp 32 (one leaf) has the same exposed dp time on the 2:1 tree as at full bisection; dp 64
    (two leaves, through the spine) has more, and nothing else of the step moves."""
    model, engine = load_model("llama3-8b"), load_engine("megatron")
    base = load_hardware("h100-sxm")
    fat = on_cluster(base, load_cluster("rail-fat-tree-2to1"))
    full = on_cluster(base, _full_bisection("rail-fat-tree-2to1"))
    for dp, crosses in ((32, False), (64, True)):
        plan = Plan(dp=dp, tp=8, global_batch=4 * dp, seq_len=8192, zero=1)
        assert group_tiers(fat, plan)["dp"] == ("spine" if crosses else "leaf")
        on_fat, on_full = step_time(model, fat, plan, engine), step_time(model, full, plan, engine)
        assert on_fat.compute_s == pytest.approx(on_full.compute_s)
        assert on_fat.comm_total_s["tp"] == pytest.approx(on_full.comm_total_s["tp"])
        if crosses:
            assert on_fat.comm_total_s["dp"] > 1.01 * on_full.comm_total_s["dp"]
        else:
            assert on_fat.comm_total_s["dp"] == pytest.approx(on_full.comm_total_s["dp"])


@st.composite
def _fabric(draw: st.DrawFn) -> tuple[object, int, int]:
    """A GPU profile with a random NVLink domain on a random nested cluster (bandwidth never rising, latency never
    falling outward), or on none, and a group (n, stride) of powers of two that fits on it."""
    node = 2 ** draw(st.integers(1, 4))
    hw = make_hw(gpus_per_node=node, eff=0.7)
    depth = draw(st.integers(0, 3))
    if depth:
        tiers, gpus, bw, lat = [], node, 50.0, 4.0
        for i in range(depth):
            gpus *= 2 ** draw(st.integers(1, 5))
            bw /= draw(st.sampled_from([1.0, 1.0, 2.0, 7.0]))
            lat += draw(st.floats(0.0, 2.0))
            tiers.append(_tier(f"t{i}", gpus, bw, lat))
        hw = on_cluster(hw, Cluster(name="c", hardware="test-gpu", tiers=tuple(tiers)))
        span_max = gpus
    else:
        span_max = node * 2**12
    stride = 2 ** draw(st.integers(0, 6))
    n = 2 ** draw(st.integers(1, 12))
    if n * stride > span_max:
        n = max(2, span_max // stride)
    if n * stride > span_max:
        stride = span_max // n
    return hw, n, stride


@settings(max_examples=300, deadline=None)
@given(
    _fabric(),
    st.sampled_from(HIERARCHICAL),
    st.floats(1e3, 1e11),
    st.one_of(st.none(), st.floats(1e5, 1e9)),
)
def test_hierarchy_never_beats_the_fastest_tier_nor_loses_to_the_ring(fabric, kind, nbytes, chunk):
    """For any fabric, group and buffer: the collective is never slower than the ring charged entirely at the
    outermost tier crossed (today's conservative charge), and never faster than moving the ring's bytes at the
    fastest tier's per-GPU bandwidth with no latency; the tiers' shares add up to the ring's (n − 1)/n."""
    hw, n, stride = fabric
    link = group_link(hw, n=n, stride=stride)
    t = collective_s(kind, nbytes, n, link, chunk_bytes=chunk)
    ring = collective_s(kind, nbytes, n, dataclasses.replace(link, levels=()), chunk_bytes=chunk)
    assert t <= ring * (1 + 1e-12)
    fastest = max([hw.intra_node.bandwidth_bytes_per_s * hw.efficiency.intra_node, link.bandwidth_bytes_per_s])
    fastest = max([fastest, *(lv.bandwidth_bytes_per_s for lv in link.levels)])
    msg = nbytes if not chunk or chunk >= nbytes else chunk
    calls = max(1.0, nbytes / msg)
    floor = calls * link.base_s + ring_steps(kind, n)[1] * nbytes / (fastest * link.ramp(msg))
    assert t >= floor * (1 - 1e-9)
    if link.levels:
        shares = sum(1 / lv.below - 1 / lv.within for lv in link.levels)
        assert shares == pytest.approx((n - 1) / n)


def test_estimate_json_names_each_groups_tier_with_and_without_a_cluster():
    """`tiers` in estimate's document: inside a node everything is nvlink; across nodes without a cluster dp and pp
    are on the NIC ("network"); on the 2:1 tree the same plan's dp crosses the spine and its pp the core; a group
    of one rank has none."""
    plan = {"tp": 8, "dp": 128, "pp": 16, "global_batch": 2048, "seq_len": 8192}
    plain = estimate("llama3-70b", gpus=16384, plan=plan)
    assert plain.tiers == {"tp": "nvlink", "cp": None, "ep": None, "dp": "network", "pp": "network"}
    assert plain.as_json()["tiers"] == plain.tiers
    fat = estimate("llama3-70b", gpus=16384, plan=plan, hardware=cluster_hardware("rail-fat-tree-2to1", None))
    assert fat.tiers == {"tp": "nvlink", "cp": None, "ep": None, "dp": "spine", "pp": "core"}
    one = estimate("llama3-8b", gpus=8, plan={"tp": 2, "dp": 4, "global_batch": 64})
    assert one.tiers == {"tp": "nvlink", "cp": None, "ep": None, "dp": "nvlink", "pp": None}


def test_search_json_names_each_plans_tiers_and_the_ranking_names_dp_beyond_the_domain():
    """Every ranked plan carries its groups' tiers, the same as estimate gives for it; the ranking's "time goes
    to" names the tier of a dp group beyond the NVLink domain."""
    fat = cluster_hardware("rail-fat-tree-2to1", None)
    doc = search("llama3-8b", gpus=2048, hardware=fat, global_batch=1024, top=3)
    for p in doc.plans:
        assert set(p.tiers) == {"tp", "cp", "ep", "dp", "pp"}
        plan = Plan.model_validate({k: v for k, v in p.plan.items() if k != "engine"})
        assert p.tiers == group_tiers(fat, plan)
        assert p.as_json()["tiers"] == p.tiers
    assert doc.plans[0].tiers["dp"] == "spine"  # 2,048 GPUs: a dp group over all of them leaves its leaf of 256
    plain = search("llama3-8b", gpus=64, top=1)
    assert plain.plans[0].tiers["dp"] == "network"  # 8 nodes, no cluster: the NIC

    args = ("-m", "llama3-8b", "--gpus", "2048", "--global-batch", "1024", "--top", "3", "--wide")
    code, out, err = run("search", *args, "--cluster", "rail-fat-tree-2to1")
    assert code == 0, err
    assert re.search(r"dp \d+% \(spine\)", out)
