"""A Kubeflow PyTorchJob manifest: 1 Master + nnodes − 1 Workers, one pod per node (pure)."""

from __future__ import annotations

import json

from planner.launch.command import RUN_ENV, WORKER_MODULE, RunConfig, worker_argv
from planner.launch.emit.targets import Layout, Target, register

FILE_NAME = "pytorchjob.yaml"


def _torchrun_command(cfg: RunConfig, *, nnodes: int, nproc_per_node: int, max_restarts: int, name: str) -> list[str]:
    """torchrun rendezvousing with c10d at the MASTER_ADDR:MASTER_PORT the operator sets in every pod."""
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
    return [*command, "-m", WORKER_MODULE, *worker_argv(cfg)]


# The extended resource each device plugin offers (NVIDIA's k8s-device-plugin, AMD's k8s-device-plugin).
GPU_RESOURCE = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}


def _replica(count: int, *, image: str, command: list[str], env: list[dict], gpus: int, device: str) -> dict:
    """A replica spec: `count` pods of one container with `gpus` GPUs. Master and Workers share the command and
    environment lists (YAML writes them once, as an anchor and its alias)."""
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
                        "resources": {"limits": {GPU_RESOURCE[device]: gpus} if device in GPU_RESOURCE else {}},
                    }
                ]
            }
        },
    }


def k8s_manifest(
    cfg: RunConfig,
    *,
    nnodes: int,
    nproc_per_node: int,
    max_restarts: int = 0,
    image: str,
    name: str = "planner-launch",
    device: str = "nvidia",
) -> dict:
    """A Kubeflow PyTorchJob: 1 Master + nnodes−1 Workers, one pod per node, nproc_per_node GPUs each.

    The operator sets MASTER_ADDR/MASTER_PORT in every pod; torchrun rendezvouses there with c10d. `image`
    must hold torch and planner (and any model or hardware YAML the command names, in its working directory).
    """
    command = _torchrun_command(cfg, nnodes=nnodes, nproc_per_node=nproc_per_node, max_restarts=max_restarts, name=name)
    env = [{"name": k, "value": v} for k, v in RUN_ENV.items()]
    specs = {
        role: _replica(count, image=image, command=command, env=env, gpus=nproc_per_node, device=device)
        for role, count in (("Master", 1), ("Worker", nnodes - 1))
        if count
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": name,
            "annotations": {"planner/plan": json.dumps(cfg.plan.model_dump()), "planner/model": cfg.model},
        },
        "spec": {"nprocPerNode": str(nproc_per_node), "pytorchReplicaSpecs": specs},
    }


def _manifest_text(o: Layout) -> str:
    import yaml

    manifest = k8s_manifest(
        o.cfg, nnodes=o.nodes, nproc_per_node=o.per_node, max_restarts=o.max_restarts,
        image=o.image or "planner:latest", device=o.device,
    )  # fmt: skip
    return _files_note(o.cfg) + yaml.safe_dump(manifest, sort_keys=False)


def _files_note(cfg: RunConfig) -> str:
    """Comment lines naming the user's own files the command reads (copied next to the manifest by emit's
    portable_files), which a pod finds only in its image's working directory."""
    own = [ref for ref in (cfg.model, cfg.hardware, cfg.engine) if ref.endswith((".yaml", ".yml", ".json"))]
    if not own:
        return ""
    return (
        f"# The pods read {', '.join(own)} from the working directory of the image: copy these files, written next\n"
        "# to this manifest, into the image (or mount them there) before `kubectl apply`.\n"
    )


register(Target("k8s", 2, FILE_NAME, _manifest_text))
