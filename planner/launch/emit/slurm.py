"""A Slurm batch script: one torchrun per node (ntasks-per-node=1), c10d rendezvous on the first node (pure)."""

from __future__ import annotations

import math

from planner.launch.command import RDZV_PORT, RUN_ENV, RunConfig, shell_join, torchrun_argv
from planner.launch.emit.common import plan_comment
from planner.launch.emit.targets import Target, register
from planner.launch.preflight import WALL_SLACK

FILE_NAME = "launch.slurm"


def slurm_script(
    cfg: RunConfig,
    *,
    nnodes: int,
    nproc_per_node: int,
    max_restarts: int = 0,
    time_limit_s: float | None = None,
    job_name: str = "planner-launch",
    device: str = "nvidia",
    segment: int | None = None,
) -> str:
    """The batch script; `time_limit_s`: its --time (None: an hour, Slurm's partitions' usual default)."""
    argv = torchrun_argv(
        cfg,
        nproc_per_node=nproc_per_node,
        nnodes=nnodes,
        max_restarts=max_restarts,
        rdzv_endpoint=f"$MASTER_ADDR:{RDZV_PORT}",
        rdzv_id="$SLURM_JOB_ID",
    )
    argv[argv.index("--nnodes") + 1] = "$SLURM_NNODES"
    lines = [
        "#!/usr/bin/env bash",
        f"#SBATCH --job-name={job_name}",
        f"#SBATCH --nodes={nnodes}",
        "#SBATCH --ntasks-per-node=1",
        *([f"#SBATCH --gpus-per-node={nproc_per_node}"] if device != "cpu" else []),
        *_time_lines(time_limit_s),
        "#SBATCH --exclusive",
        *_segment_comment(segment),
        *plan_comment(cfg),
        "set -euo pipefail",
        "# Submit from the directory holding this script (cd OUT && sbatch launch.slurm): the model and hardware",
        "# files it names sit next to it.",
        'cd "${SLURM_SUBMIT_DIR:-.}"',
        'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "export MASTER_ADDR",
        *[f"export {k}={v}" for k, v in RUN_ENV.items()],
        "# One torchrun per node (ntasks-per-node=1); torchrun starts the GPU workers.",
        "srun --kill-on-bad-exit=1 " + shell_join(argv),
        "",
    ]
    return "\n".join(lines)


def _time_lines(time_limit_s: float | None) -> list[str]:
    """The job's --time (an hour where not priced) and where it came from."""
    if not time_limit_s:
        return ["#SBATCH --time=0-01:00:00"]
    return [
        f"#SBATCH --time={slurm_time(time_limit_s)}",
        f"# --time: launch --wall-s, else start-up plus {WALL_SLACK:g}x the predicted steps, at least an hour (above a "
        "partition's MaxTime the job stays pending: lower it there)",
    ]


def slurm_time(seconds: float) -> str:
    """Slurm's days-hours:minutes:seconds, rounded up to the minute (sbatch --time)."""
    minutes = math.ceil(seconds / 60)
    days, rest = divmod(minutes, 24 * 60)
    return f"{days}-{rest // 60:02d}:{rest % 60:02d}:00"


def _segment_comment(segment: int | None) -> list[str]:
    """Where NVLink domains are wider than a node (NVL72 racks), the placement the plan was priced with: `segment`
    nodes in each domain (Slurm's topology/block plugin places a job in segments of one size a block)."""
    if not segment:
        return []
    return [
        f"# Priced with {segment} nodes in each NVLink domain: uncomment on Slurm's topology/block plugin to match",
        f"##SBATCH --segment={segment}",
    ]


register(
    Target(
        "slurm",
        1,
        FILE_NAME,
        lambda o: slurm_script(
            o.cfg,
            nnodes=o.nodes,
            nproc_per_node=o.per_node,
            max_restarts=o.max_restarts,
            device=o.device,
            segment=o.segment,
            time_limit_s=o.time_limit_s,
        ),
        timed=True,
    )
)
