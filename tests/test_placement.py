"""Placement as the engines do it (planner/explore/placement.py): tp stays inside the NVLink domain unless the
user allows otherwise; a group that leaves it is costed on the slower tier and the output names that tier."""

from __future__ import annotations

from helpers import make_hw
from helpers import run_planner as run

from planner.api import run_search
from planner.cluster import on_cluster
from planner.explore.placement import PLACED, TP_CROSSES, crossing_tiers, placement_problems
from planner.io.catalog import load_hardware
from planner.io.clusters import load_cluster
from planner.plan import Plan


def test_tp_wider_than_the_domain_is_a_rejection_with_the_values():
    hw = make_hw()
    assert placement_problems(hw, Plan(tp=8, dp=2), allow_cross_node_tp=False) == []
    (problem,) = placement_problems(hw, Plan(tp=16), allow_cross_node_tp=False)
    assert problem.reason == TP_CROSSES
    assert "tp=16" in problem.detail and "8-GPU NVLink domain" in problem.detail and "network" in problem.detail
    assert placement_problems(hw, Plan(tp=16), allow_cross_node_tp=True) == []
    # an NVL72 rack allows tp 16..72 (on NVLink where the groups tile the ranks a rack: tests/test_hardware_2026.py)
    assert placement_problems(load_hardware("gb200-nvl72"), Plan(tp=64), allow_cross_node_tp=False) == []


def test_crossing_tiers_follow_the_rank_order():
    """tp stride 1, cp stride tp, ep stride etp (= tp unless given), dp·cp stride tp, pp stride tp·cp·dp; only
    groups beyond the domain are named, and the placement groups (tp, cp, ep) alone when asked."""
    hw = on_cluster(load_hardware("h100-sxm"), load_cluster("rail-fat-tree-2to1"))
    assert crossing_tiers(hw, Plan(tp=8, dp=4)) == {"dp": "leaf"}  # 32 ranks
    assert crossing_tiers(hw, Plan(tp=8, dp=4), PLACED) == {}
    assert crossing_tiers(hw, Plan(tp=2, dp=4)) == {}  # dp of 4 over tp 2: one domain
    assert crossing_tiers(hw, Plan(tp=4, cp=4, dp=2)) == {"cp": "leaf", "dp": "leaf"}  # 16 and 32 ranks
    assert crossing_tiers(hw, Plan(tp=8, cp=1024, seq_len=131072)) == {"cp": "spine", "dp": "spine"}  # 8192 ranks
    assert crossing_tiers(hw, Plan(tp=2, ep=8, dp=8)) == {"ep": "leaf", "dp": "leaf"}
    assert crossing_tiers(hw, Plan(tp=2, ep=8, etp=1, dp=8), PLACED) == {}
    assert crossing_tiers(hw, Plan(tp=8, dp=32, pp=64)) == {"dp": "leaf", "pp": "core"}  # 256, 16384 ranks
    assert crossing_tiers(make_hw(), Plan(tp=16)) == {"tp": "network"}


def test_search_never_ranks_tp_beyond_the_domain_unless_allowed():
    """Llama 3 70B on 256 H100s: no ranked plan has tp > 8 and the rejections count the rule; allowed, tp 16
    plans are valid and costed (slower than tp 8 on the same GPUs)."""
    res = run_search("llama3-70b", gpus=256, global_batch=256, seq_len=8192, top=50)
    assert res.top and all(r.plan.tp <= 8 for r in res.top)
    assert res.rejected[TP_CROSSES] > 0
    wide = run_search("llama3-70b", gpus=256, global_batch=256, seq_len=8192, tp=16, allow_cross_node_tp=True)
    assert wide.top and TP_CROSSES not in wide.rejected
    assert wide.top[0].time.tokens_per_s < res.top[0].time.tokens_per_s


def test_ranking_and_estimate_name_the_tier_a_group_crosses():
    code, out, err = run(
        "search", "-m", "llama3-70b", "--gpus", "256", "--tp", "16", "--allow-cross-node-tp", "--top", "2", "--wide"
    )
    assert code == 0, err
    rows = [line for line in out.splitlines() if line.startswith(("1 ", "2 "))]
    assert rows and all("tp16" in r and "tp " in r and "(net)" in r for r in rows)
    code, out, err = run("search", "-m", "llama3-70b", "--gpus", "256", "--tp", "16", "--json")
    assert code == 2 and out == "" and f"no plan is valid: {TP_CROSSES}" in err and "--allow-cross-node-tp" in err
    plan = ("--gpus", "64", "--tp", "2", "--ep", "8", "--sp")
    code, out, err = run("estimate", "-m", "mixtral-8x7b", *plan, "--cluster", "dgx-superpod-h100")
    assert code == 0, err
    assert "leaves the 8-GPU NVLink domain: ep (on the leaf tier)" in out


def test_the_issues_16k_search_keeps_tp_in_the_node_and_is_advised():
    """Issue 23's second search: Llama 3 405B, 2,048 x 8k tokens on 16,384 H100s. Before, tp 16 across two nodes
    with ZeRO-3 ranked first; now no ranked plan leaves the node, and the advice names the count the batch feeds."""
    from planner.api.advising import search_advised

    a = search_advised("llama3-405b", gpus=16384, hardware=None, engine=None, global_batch=2048, top=5)
    assert a.result.top and all(r.plan.tp <= 8 for r in a.result.top)
    assert a.result.rejected[TP_CROSSES] > 0
    (fed,) = [x for x in a.advice if x.kind == "gpus"]
    assert fed.global_batch == 2048 and 1024 <= fed.gpus < 16384


def test_estimate_of_a_cross_node_tp_plan_says_so():
    code, out, err = run("estimate", "-m", "llama3-70b", "--gpus", "64", "--tp", "16", "--global-batch", "64")
    assert code == 0, err
    assert "leaves the 8-GPU NVLink domain: tp (on the network tier)" in out
