"""Multi-node launch files: a per-node torchrun command, a Slurm batch script, a PyTorchJob manifest (pure).

All three use c10d rendezvous (elastic, no fixed node rank needed) and run the same worker arguments
as a local run (``command.worker_argv``), with the plan written alongside as a comment or annotation.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from planner.launch.command import RDZV_PORT, RUN_ENV, WORKER_MODULE, RunConfig, shell_join, torchrun_argv, worker_argv

DEFAULT_IMAGE = "pytorch/pytorch:2.13.0-cuda12.8-cudnn9-runtime"


def _plan_comment(cfg: RunConfig) -> list[str]:
    return [f"# plan: {cfg.plan.summary()}", f"# plan (all fields): {json.dumps(cfg.plan.model_dump())}",
            f"# model: {cfg.model}"]


def torchrun_script(cfg: RunConfig, *, nnodes: int, nproc_per_node: int, max_restarts: int = 0) -> str:
    argv = torchrun_argv(cfg, nproc_per_node=nproc_per_node, nnodes=nnodes, max_restarts=max_restarts,
                         rdzv_endpoint=f"$MASTER_ADDR:{RDZV_PORT}", rdzv_id="${JOB_ID:-planner}")
    lines = ["#!/usr/bin/env bash",
             f"# Run this same command on each of the {nnodes} nodes; set MASTER_ADDR to one node's address.",
             *_plan_comment(cfg), "set -euo pipefail", ': "${MASTER_ADDR:?set MASTER_ADDR to the rendezvous host}"']
    lines += [f"export {k}={v}" for k, v in RUN_ENV.items()]
    return "\n".join(lines + [shell_join(argv), ""])


def slurm_script(cfg: RunConfig, *, nnodes: int, nproc_per_node: int, max_restarts: int = 0,
                 time: str = "01:00:00", job_name: str = "planner-launch") -> str:
    argv = torchrun_argv(cfg, nproc_per_node=nproc_per_node, nnodes=nnodes, max_restarts=max_restarts,
                         rdzv_endpoint=f"$MASTER_ADDR:{RDZV_PORT}", rdzv_id="$SLURM_JOB_ID")
    argv[argv.index("--nnodes") + 1] = "$SLURM_NNODES"
    lines = [
        "#!/usr/bin/env bash",
        f"#SBATCH --job-name={job_name}",
        f"#SBATCH --nodes={nnodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --gpus-per-node={nproc_per_node}",
        f"#SBATCH --time={time}",
        "#SBATCH --exclusive",
        *_plan_comment(cfg),
        "set -euo pipefail",
        'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "export MASTER_ADDR",
        *[f"export {k}={v}" for k, v in RUN_ENV.items()],
        "# One torchrun per node (ntasks-per-node=1); torchrun starts the GPU workers.",
        "srun --kill-on-bad-exit=1 " + shell_join(argv),
        "",
    ]
    return "\n".join(lines)


def k8s_manifest(cfg: RunConfig, *, nnodes: int, nproc_per_node: int, max_restarts: int = 0,
                 image: str = DEFAULT_IMAGE, name: str = "planner-launch") -> dict:
    """A Kubeflow PyTorchJob: 1 Master + nnodes−1 Workers, one pod per node, nproc_per_node GPUs each.

    The operator sets MASTER_ADDR/MASTER_PORT in every pod; torchrun rendezvouses there with c10d.
    """
    command = ["torchrun", "--nnodes", str(nnodes), "--nproc-per-node", str(nproc_per_node),
               "--rdzv-backend", "c10d", "--rdzv-endpoint", "$(MASTER_ADDR):$(MASTER_PORT)", "--rdzv-id", name]
    if max_restarts:
        command += ["--max-restarts", str(max_restarts)]
    command += ["-m", WORKER_MODULE, *worker_argv(cfg)]
    env = [{"name": k, "value": v} for k, v in RUN_ENV.items()]

    def replica(count: int) -> dict:
        return {
            "replicas": count,
            "restartPolicy": "OnFailure",
            "template": {"spec": {"containers": [{
                "name": "pytorch", "image": image, "command": command, "env": env,
                "resources": {"limits": {"nvidia.com/gpu": nproc_per_node}},
            }]}},
        }

    specs = {"Master": replica(1)}
    if nnodes > 1:
        specs["Worker"] = replica(nnodes - 1)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "annotations": {
            "planner/plan": json.dumps(cfg.plan.model_dump()), "planner/model": cfg.model}},
        "spec": {"nprocPerNode": str(nproc_per_node), "pytorchReplicaSpecs": specs},
    }


def write_cluster_files(kind: str, cfg: RunConfig, out: Path, *, nnodes: int, nproc_per_node: int,
                        max_restarts: int = 0) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    kw = dict(nnodes=nnodes, nproc_per_node=nproc_per_node, max_restarts=max_restarts)
    if kind == "torchrun":
        path, text = out / "torchrun.sh", torchrun_script(cfg, **kw)
    elif kind == "slurm":
        path, text = out / "launch.slurm", slurm_script(cfg, **kw)
    elif kind == "k8s":
        path, text = out / "pytorchjob.yaml", yaml.safe_dump(k8s_manifest(cfg, **kw), sort_keys=False)
    else:
        raise ValueError(kind)
    path.write_text(text)
    if path.suffix in (".sh", ".slurm"):
        path.chmod(0o755)
    return path
