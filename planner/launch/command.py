"""What to run: the worker's arguments and the torchrun command line (pure, unit-tested).

The same ``RunConfig`` produces the local torchrun command, the per-node rendezvous command and the
arguments inside the Slurm script and the Kubernetes manifest, so all of them run the same worker.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field, replace

from planner.plan import Plan

WORKER_MODULE = "planner.launch.worker"
WORKER_ENGINE = "planner"  # engine_profiles/planner.yaml: what the worker runs, and how the run is priced
RDZV_PORT = 29500

# Every run: one OpenMP thread per worker (torchrun sets it only for nproc > 1, which makes the
# 1-process reference 3-100x slower and numerically different), and no shared rendezvous TCP store,
# without which torchrun restarts over gloo connect to the dead attempt's ports (torch_cpu_notes.md row 10).
RUN_ENV = {"OMP_NUM_THREADS": "1", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
# A run on this host's CPU keeps its tensors in host memory. glibc raises its mmap threshold to the largest block
# freed (mallopt(3), M_MMAP_THRESHOLD: "dynamic adjustment"), after which freed tensors stay in the heap: a worker's
# peak grew 40-75% beyond its tensors (2 workers, gpt3-125m at 8 layers, FSDP2). Setting the threshold fixes it at
# 128 KiB, so a freed tensor goes back to the system: FSDP2's peak came within 3% of the tensors, steps no slower.
CPU_RUN_ENV = {"MALLOC_MMAP_THRESHOLD_": "131072"}


@dataclass(frozen=True)
class RunConfig:
    """Everything the worker needs besides the environment."""

    model: str  # catalog name or YAML path
    plan: Plan
    steps: int = 8
    warmup: int = 2
    seed: int = 0
    layers: int | None = None
    hidden: int | None = None
    hardware: str = "cpu"
    engine: str = WORKER_ENGINE
    checkpoint_dir: str | None = None
    checkpoint_every: int = 0
    keep_checkpoints: int = 2
    resume: bool = False
    profile_out: str = "planner-launch-profile.json"
    timeout_s: float = 120.0
    extra: tuple[str, ...] = field(default_factory=tuple)

    def with_plan(self, **update: object) -> RunConfig:
        return replace(self, plan=self.plan.model_copy(update=update))


def plan_argv(plan: Plan) -> list[str]:
    """Every Plan field as a flag, in schema order (the worker parses them back with the same loop); a field left
    to its default (None, like etp) is left out."""
    out: list[str] = []
    for name in Plan.model_fields:
        value = getattr(plan, name)
        flag = "--" + name.replace("_", "-")
        if value is None:
            continue
        if isinstance(value, bool):
            out.append(flag if value else "--no-" + name.replace("_", "-"))
        else:
            out += [flag, str(value)]
    return out


def worker_argv(cfg: RunConfig) -> list[str]:
    out = ["--model", cfg.model, *plan_argv(cfg.plan)]
    out += ["--steps", str(cfg.steps), "--warmup", str(cfg.warmup), "--seed", str(cfg.seed)]
    if cfg.layers is not None:
        out += ["--layers", str(cfg.layers)]
    if cfg.hidden is not None:
        out += ["--hidden", str(cfg.hidden)]
    out += [
        "--hardware",
        cfg.hardware,
        "--engine",
        cfg.engine,
        "--timeout-s",
        f"{cfg.timeout_s:g}",
        "--profile-out",
        cfg.profile_out,
    ]
    if cfg.checkpoint_dir:
        out += ["--checkpoint-dir", cfg.checkpoint_dir, "--checkpoint-every", str(cfg.checkpoint_every)]
        out += ["--keep-checkpoints", str(cfg.keep_checkpoints)]
        if cfg.resume:
            out.append("--resume")
    return out + list(cfg.extra)


def torchrun_argv(
    cfg: RunConfig,
    *,
    nproc_per_node: int,
    nnodes: int = 1,
    max_restarts: int = 0,
    rdzv_endpoint: str | None = None,
    rdzv_id: str = "planner",
    node_rank: str | None = None,
    torchrun: str | None = None,
    log_dir: str | None = None,
) -> list[str]:
    """Single node: ``--standalone`` (a free port, never a fixed one). Multi-node: c10d rendezvous. `log_dir`:
    torchrun's ``--log-dir`` (its error files; without it torchrun makes a /tmp/torchelastic_* it never removes)."""
    head = [torchrun or "torchrun"]
    if log_dir is not None:
        head += ["--log-dir", log_dir]
    if nnodes == 1 and rdzv_endpoint is None:
        head.append("--standalone")
        head += ["--nnodes", "1"]
    else:
        head += [
            "--nnodes",
            str(nnodes),
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            rdzv_endpoint or f"$MASTER_ADDR:{RDZV_PORT}",
            "--rdzv-id",
            rdzv_id,
        ]
        if node_rank is not None:
            head += ["--node-rank", node_rank]
    head += ["--nproc-per-node", str(nproc_per_node)]
    if max_restarts:
        head += ["--max-restarts", str(max_restarts)]
    return [*head, "-m", WORKER_MODULE, *worker_argv(cfg)]


def local_torchrun() -> str:
    """The torchrun next to this interpreter (a venv's), so the workers run the same Python."""
    from pathlib import Path

    candidate = Path(sys.executable).with_name("torchrun")
    return str(candidate) if candidate.exists() else "torchrun"


def shell_join(argv: list[str]) -> str:
    """Quote for a shell, but leave $VARS unquoted-expandable ("$MASTER_ADDR:29500")."""
    parts = []
    for a in argv:
        if "$" in a:
            parts.append('"' + a.replace('"', '\\"') + '"')
        else:
            parts.append(shlex.quote(a))
    return " ".join(parts)


def run_env(cpu: bool) -> dict[str, str]:
    """What a local run sets: RUN_ENV, and where its workers compute on this host's CPU, CPU_RUN_ENV."""
    return {**RUN_ENV, **(CPU_RUN_ENV if cpu else {})}


def env_prefix(cpu: bool = False) -> str:
    """The local run's settings as the command line a dry run shows (run_env)."""
    return " ".join(f"{k}={v}" for k, v in run_env(cpu).items())
