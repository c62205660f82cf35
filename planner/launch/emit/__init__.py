"""The plan written for a cluster launcher or another training engine (pure: no torch), one module per
target. Cluster targets run this project's worker under torchrun on many nodes (torchrun, slurm, k8s);
engine targets write the configuration that engine reads (megatron, torchtitan, deepspeed)."""

from __future__ import annotations

from pathlib import Path

import yaml

from planner.errors import PlannerError
from planner.launch.command import RunConfig
from planner.launch.emit import deepspeed, k8s, megatron, slurm, torchrun, torchtitan
from planner.specs import ModelSpec

CLUSTER_TARGETS = ("torchrun", "slurm", "k8s")
ENGINE_TARGETS = ("megatron", "torchtitan", "deepspeed")


def target_text(
    kind: str, cfg: RunConfig, model: ModelSpec, *, nnodes: int, per_node: int, max_restarts: int = 0
) -> tuple[str, str]:
    """(file name, text) of one target."""
    if kind == "torchrun":
        return torchrun.FILE_NAME, torchrun.torchrun_script(
            cfg, nnodes=nnodes, nproc_per_node=per_node, max_restarts=max_restarts
        )
    if kind == "slurm":
        return slurm.FILE_NAME, slurm.slurm_script(
            cfg, nnodes=nnodes, nproc_per_node=per_node, max_restarts=max_restarts
        )
    if kind == "k8s":
        manifest = k8s.k8s_manifest(cfg, nnodes=nnodes, nproc_per_node=per_node, max_restarts=max_restarts)
        return k8s.FILE_NAME, yaml.safe_dump(manifest, sort_keys=False)
    if kind == "megatron":
        return megatron.FILE_NAME, megatron.megatron_file(model, cfg.plan)
    if kind == "torchtitan":
        return torchtitan.FILE_NAME, torchtitan.torchtitan_toml(model, cfg.plan)[0]
    if kind == "deepspeed":
        return deepspeed.FILE_NAME, deepspeed.deepspeed_file(model, cfg.plan)
    raise PlannerError(f"--emit {kind}: expected one of {', '.join(CLUSTER_TARGETS + ENGINE_TARGETS)}")


def write_target(
    kind: str, cfg: RunConfig, model: ModelSpec, out: Path, *, nnodes: int, per_node: int, max_restarts: int = 0
) -> Path:
    """Write one target's file into `out` (created if needed), atomically; the path written."""
    name, text = target_text(kind, cfg, model, nnodes=nnodes, per_node=per_node, max_restarts=max_restarts)
    try:
        out.mkdir(parents=True, exist_ok=True)
        path = out / name
        tmp = path.with_name(name + ".tmp")
        tmp.write_text(text)
        if name.endswith((".sh", ".slurm")):
            tmp.chmod(0o755)
        tmp.replace(path)
    except OSError as e:
        raise PlannerError(f"cannot write --emit {kind} into {str(out)!r}: {e.strerror or e}") from None
    return path
