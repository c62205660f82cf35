"""A Kubeflow PyTorchJob manifest: 1 Master + nnodes − 1 Workers, one pod per node (pure)."""

from __future__ import annotations

import json

from planner.launch.command import RUN_ENV, WORKER_MODULE, RunConfig, worker_argv

FILE_NAME = "pytorchjob.yaml"


def k8s_manifest(
    cfg: RunConfig,
    *,
    nnodes: int,
    nproc_per_node: int,
    max_restarts: int = 0,
    image: str,
    name: str = "planner-launch",
) -> dict:
    """A Kubeflow PyTorchJob: 1 Master + nnodes−1 Workers, one pod per node, nproc_per_node GPUs each.

    The operator sets MASTER_ADDR/MASTER_PORT in every pod; torchrun rendezvouses there with c10d. `image`
    must hold torch and planner (and any model or hardware YAML the command names, in its working directory).
    """
    command = [
        "torchrun",
        "--nnodes",
        str(nnodes),
        "--nproc-per-node",
        str(nproc_per_node),
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        "$(MASTER_ADDR):$(MASTER_PORT)",
        "--rdzv-id",
        name,
    ]
    if max_restarts:
        command += ["--max-restarts", str(max_restarts)]
    command += ["-m", WORKER_MODULE, *worker_argv(cfg)]
    env = [{"name": k, "value": v} for k, v in RUN_ENV.items()]

    def replica(count: int) -> dict:
        return {
            "replicas": count,
            "restartPolicy": "OnFailure",
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "pytorch",
                            "image": image,
                            "command": command,
                            "env": env,
                            "resources": {"limits": {"nvidia.com/gpu": nproc_per_node}},
                        }
                    ]
                }
            },
        }

    specs = {"Master": replica(1)}
    if nnodes > 1:
        specs["Worker"] = replica(nnodes - 1)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": name,
            "annotations": {"planner/plan": json.dumps(cfg.plan.model_dump()), "planner/model": cfg.model},
        },
        "spec": {"nprocPerNode": str(nproc_per_node), "pytorchReplicaSpecs": specs},
    }
