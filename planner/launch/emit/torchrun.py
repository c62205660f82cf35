"""A per-node torchrun script with c10d rendezvous: run the same command on each node (pure)."""

from __future__ import annotations

from planner.launch.command import RDZV_PORT, RUN_ENV, RunConfig, shell_join, torchrun_argv
from planner.launch.emit.common import plan_comment
from planner.launch.emit.targets import Target, register

FILE_NAME = "torchrun.sh"


def torchrun_script(cfg: RunConfig, *, nnodes: int, nproc_per_node: int, max_restarts: int = 0) -> str:
    argv = torchrun_argv(
        cfg,
        nproc_per_node=nproc_per_node,
        nnodes=nnodes,
        max_restarts=max_restarts,
        rdzv_endpoint=f"$MASTER_ADDR:{RDZV_PORT}",
        rdzv_id="${JOB_ID:-planner}",
    )
    lines = [
        "#!/usr/bin/env bash",
        f"# Run this same command on each of the {nnodes} nodes; set MASTER_ADDR to one node's address.",
        *plan_comment(cfg),
        "set -euo pipefail",
        'cd "$(dirname "$0")"  # the model and hardware files it names sit next to this script',
        ': "${MASTER_ADDR:?set MASTER_ADDR to the rendezvous host}"',
    ]
    lines += [f"export {k}={v}" for k, v in RUN_ENV.items()]
    return "\n".join([*lines, shell_join(argv), ""])


register(
    Target(
        "torchrun",
        0,
        FILE_NAME,
        lambda o: torchrun_script(o.cfg, nnodes=o.nodes, nproc_per_node=o.per_node, max_restarts=o.max_restarts),
    )
)
