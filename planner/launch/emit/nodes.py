"""Cluster targets' node layout: how many nodes of how many processes make the plan's GPUs (as given, else whole
nodes of the hardware profile), and what a layout does to the tensor-parallel groups the plan is priced with."""

from __future__ import annotations

from collections.abc import Callable

from planner.cluster.domains import group_domains, ranks_per_domain
from planner.errors import PlannerError
from planner.hardware import HardwareProfile
from planner.plan import Plan


def cluster_nodes(gpus: int, hw: HardwareProfile, nnodes: int | None, nproc: int | None) -> tuple[int, int]:
    """(nodes, processes per node) of a cluster target: as given, else whole nodes of the hardware profile's
    GPUs per node (a 1024-GPU plan on 8-GPU nodes is 128 nodes of 8, never one node of 1024)."""
    _check_node_split(gpus, hw, nnodes, nproc)
    if nnodes is None:
        per = nproc or min(gpus, hw.gpus_per_node)
        nnodes = -(-gpus // per)
    per_node = nproc or gpus // nnodes
    if nnodes * per_node != gpus:  # the default layout: whole nodes that do not make the plan's count
        raise PlannerError(
            f"the plan's {gpus} GPUs do not split evenly over nodes of up to {hw.gpus_per_node} {hw.name} GPUs; "
            f"give --nnodes, one of {_divisors(gpus, lambda d: gpus // d <= hw.gpus_per_node)}"
        )
    if per_node > _node_gpus(hw, gpus):
        raise PlannerError(
            f"{per_node} processes per node, but a {hw.name} node has {hw.gpus_per_node} GPUs; use --nnodes "
            f"{-(-gpus // hw.gpus_per_node)} or more"
        )
    return nnodes, per_node


def _check_node_split(gpus: int, hw: HardwareProfile, nnodes: int | None, nproc: int | None) -> None:
    """--nnodes and --nproc as given make the plan's processes: each divides them, both multiply to them."""
    default = f"default: whole {hw.name} nodes of {hw.gpus_per_node}"
    if nnodes is not None and nproc is not None and nnodes * nproc != gpus:
        raise PlannerError(
            f"--nnodes {nnodes} x --nproc {nproc} = {nnodes * nproc} processes, but the plan needs {gpus}"
        )
    node = _node_gpus(hw, gpus)
    fits = {"--nnodes": lambda d: gpus // d <= node, "--nproc": lambda d: d <= node}
    for flag, value in (("--nnodes", nnodes), ("--nproc", nproc)):
        if value is not None and gpus % value:
            raise PlannerError(
                f"{flag} {value} does not divide the plan's {gpus} GPUs; give one of {_divisors(gpus, fits[flag])} "
                f"({default})"
            )


def _node_gpus(hw: HardwareProfile, gpus: int) -> int:
    """The processes one node holds: its GPUs; a CPU host, what its cores allow (launch's own check), so any."""
    return gpus if hw.name == "cpu" else hw.gpus_per_node


def _divisors(gpus: int, fits: Callable[[int], bool]) -> str:
    """The node (or per-node) counts that divide the plan's GPUs and fit the nodes, the first 16 of them."""
    shown = [d for d in range(1, gpus + 1) if gpus % d == 0 and fits(d)]
    return ", ".join(map(str, shown[:16])) + (", ..." if len(shown) > 16 else "")


def split_groups(plan: Plan, per_node: int, hw: HardwareProfile) -> list[str]:
    """What the node layout does to tensor parallelism against the placement it is priced with: ranks are laid out
    tp first (the innermost group, as the engines order them), so a layout putting fewer ranks in each NVLink
    domain than the priced one (cluster/domains.py ranks_per_domain) spreads tp groups over more domains, where
    the network carries their traffic. A domain of several nodes (NVL72's 18 trays) holds groups spread over its
    nodes (every NVL72 plan was warned), and one that straddles domains as priced (tp 16 on 72) is no change."""
    if hw.name == "cpu" or plan.tp <= 1:  # a CPU host has no NVLink to leave
        return []
    nodes_per_domain = hw.nvlink_domain // hw.gpus_per_node
    laid = min(per_node * nodes_per_domain, plan.gpus)  # the ranks the layout puts in one domain
    priced = ranks_per_domain(hw, plan.gpus)
    (few, touched), (priced_few, priced_touched) = group_domains(laid, plan.tp, 1), group_domains(priced, plan.tp, 1)
    if touched <= priced_touched and few >= priced_few:
        return []
    where = "nodes" if nodes_per_domain == 1 else f"{hw.nvlink_domain}-GPU NVLink domains"
    as_priced = "inside one of them" if priced_touched == 1 else f"across {priced_touched} of them"
    spread = f"over up to {touched} {where}, where the plan is priced with it {as_priced}"
    if touched <= priced_touched:  # as many domains, fewer ranks in one: fewer links carry its traffic out
        spread = f"over {where} with as few as {few} of its ranks in one, where the plan is priced with {priced_few}"
    per = min(hw.gpus_per_node, plan.gpus)  # the default layout, whole nodes: the placement priced
    return [
        f"{per_node} process{'es' if per_node != 1 else ''} per node spread each tp {plan.tp} group {spread}; "
        f"{plan.gpus // per:,} nodes of {per} processes lay it out as priced"
    ]
