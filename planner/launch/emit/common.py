"""What several targets share: the plan as comments, and the layers of each chunk."""

from __future__ import annotations

import json

from planner.cost.stages import Layout
from planner.errors import PlannerError
from planner.launch.command import RDZV_PORT, RunConfig
from planner.plan import Plan


def plan_comment(cfg: RunConfig) -> list[str]:
    return [
        f"# plan: {cfg.plan.summary()}",
        f"# plan (all fields): {json.dumps(cfg.plan.model_dump())}",
        f"# model: {cfg.model}",
    ]


def node_gpus(plan: Plan, nodes: int, per_node: int | None) -> int:
    """GPUs per node of an engine target's run line: as given, else the plan's spread over `nodes`."""
    return per_node or plan.gpus // nodes


def engine_torchrun(nodes: int, per_node: int, program: str) -> str:
    """The torchrun line that starts an engine's own trainer (`program`: its module or script and arguments) on
    `nodes` nodes of `per_node` GPUs, run on each node; rendezvous as the cluster targets' (command.py
    torchrun_argv) and torchtitan's multinode_trainer.slurm do it: c10d at one node's address."""
    if nodes == 1:
        return f"torchrun --standalone --nnodes 1 --nproc-per-node {per_node} {program}"
    return (
        f"torchrun --nnodes {nodes} --rdzv-backend c10d --rdzv-endpoint $MASTER_ADDR:{RDZV_PORT} --rdzv-id planner "
        f"--nproc-per-node {per_node} {program}"
    )


def layers_per_chunk(layout: Layout, target: str) -> int:
    """The one layer count every chunk of the layout holds; an uneven layout is refused (for now) rather
    than written as a wrong even split."""
    sizes = {c.num_layers for c in layout.chunks}
    if len(sizes) != 1:
        counts = [c.num_layers for c in layout.chunks]
        raise PlannerError(
            f"--emit {target}: the layout puts {counts} layers on the {len(counts)} chunks; "
            f"{target} takes an even split here; choose pp·vpp dividing num_layers={layout.num_layers}"
        )
    return sizes.pop()
