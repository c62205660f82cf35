"""Placement as the engines do it: tensor parallelism inside the NVLink domain.

Megatron-LM, NeMo and torchtitan lay tp out innermost (stride 1) and keep it within a node: its collectives
run in every layer, forward and backward, on the critical path, and at 50 GB/s per GPU of InfiniBand they would
cost about ten times what they cost on NVLink (Narayanan et al. 2021 §3.3: "tensor model parallelism within a
multi-GPU server"; Llama 3 405B ran tp 8 inside each 8-GPU server, Dubey et al. 2024 §3.3.2). The search
rejects a tp group larger than the NVLink domain unless the user allows it (`--allow-cross-node-tp`); such a
plan, or a context- or expert-parallel group that leaves the domain, is costed on the slower tier it crosses
(cost/comm.py) and its ranking line names that tier (`crossing_tiers`), as it does for dp and pp groups.
"""

from __future__ import annotations

from planner.cluster.fabric import NVLINK, tier_name
from planner.cost.comm import group_tiers
from planner.hardware import HardwareProfile
from planner.plan import Plan, Rejected

TP_CROSSES = "tp leaves the NVLink domain"
GROUPS = ("tp", "cp", "ep", "dp", "pp")
PLACED = ("tp", "cp", "ep")  # the groups engines keep inside the domain when they can


def placement_problems(hw: HardwareProfile, plan: Plan, *, allow_cross_node_tp: bool) -> list[Rejected]:
    """A tp group wider than one NVLink domain, unless allowed."""
    if allow_cross_node_tp or plan.tp <= hw.nvlink_domain:
        return []
    return [
        Rejected(
            TP_CROSSES,
            f"tp={plan.tp} spans more than the {hw.nvlink_domain}-GPU NVLink domain of {hw.name}: its collectives "
            f"would run on the {tier_name(hw, n=plan.tp, stride=1, gpus=plan.gpus)} tier in every layer (use tp <= "
            f"{hw.nvlink_domain}, or --allow-cross-node-tp)",
        )
    ]


def crossing_tiers(hw: HardwareProfile, plan: Plan, groups: tuple[str, ...] = GROUPS) -> dict[str, str]:
    """The tier each of `groups` (default all: tp, cp, ep, dp, pp) crosses when it leaves the NVLink domain, in
    the rank order cost/comm.py prices them (`group_tiers`): {dimension: tier name}; groups inside the domain,
    or of one rank, are left out."""
    tiers = group_tiers(hw, plan)
    return {dim: tier for dim in groups if (tier := tiers[dim]) is not None and tier != NVLINK}
