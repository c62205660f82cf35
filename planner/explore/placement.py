"""Placement as the engines do it: tensor parallelism inside the NVLink domain.

Megatron-LM, NeMo and torchtitan lay tp out innermost (stride 1) and keep it within a node: its collectives
run in every layer, forward and backward, on the critical path, and at 50 GB/s per GPU of InfiniBand they would
cost about ten times what they cost on NVLink (Narayanan et al. 2021 §3.3: "tensor model parallelism within a
multi-GPU server"; Llama 3 405B ran tp 8 inside each 8-GPU server, Dubey et al. 2024 §3.3.2). The search
rejects a tp group larger than the NVLink domain unless the user allows it (`--allow-cross-node-tp`); such a
plan, or a context- or expert-parallel group that leaves the domain, is costed on the slower tier it crosses
(cost/comm.py) and its ranking line names that tier (`crossing_tiers`).
"""

from __future__ import annotations

from planner.cluster.fabric import NVLINK, tier_name
from planner.cost.params import plan_etp
from planner.hardware import HardwareProfile
from planner.plan import Plan, Rejected

TP_CROSSES = "tp leaves the NVLink domain"


def placement_problems(hw: HardwareProfile, plan: Plan, *, allow_cross_node_tp: bool) -> list[Rejected]:
    """A tp group wider than one NVLink domain, unless allowed."""
    if allow_cross_node_tp or plan.tp <= hw.nvlink_domain:
        return []
    return [
        Rejected(
            TP_CROSSES,
            f"tp={plan.tp} spans more than the {hw.nvlink_domain}-GPU NVLink domain of {hw.name}: its collectives "
            f"would run on the {tier_name(hw, n=plan.tp, stride=1)} tier in every layer (use tp <= "
            f"{hw.nvlink_domain}, or --allow-cross-node-tp)",
        )
    ]


def crossing_tiers(hw: HardwareProfile, plan: Plan) -> dict[str, str]:
    """The tier each of tp, cp and ep crosses when it leaves the NVLink domain (rank order tp, cp, ep over dp,
    as cost/traffic.py and cost/moe.py price them): {dimension: tier name}; dimensions inside it are left out."""
    groups = {
        "tp": (plan.tp, 1),
        "cp": (plan.cp, plan.tp),
        "ep": (plan.ep, plan_etp(plan)),
    }
    out = {}
    for dim, (n, stride) in groups.items():
        name = tier_name(hw, n=n, stride=stride)
        if name != NVLINK:
            out[dim] = name
    return out
