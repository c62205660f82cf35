"""The library side of `planner launch`: resolve the plan, check it, run torchrun, compare (no torch import)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planner.engine import Engine
from planner.hardware import HardwareProfile
from planner.launch.command import RunConfig, env_prefix, local_torchrun, run_env, shell_join, torchrun_argv
from planner.launch.layout import MESH_DIMS, mesh_shape, rank_layout
from planner.launch.machine import HostNeed, ranks_per_core
from planner.launch.preflight import Environment, Preflight, preflight
from planner.launch.processes import (
    STOP_GRACE_S,
    Stopped,
    child_dies_with,
    relay,
    start_time,
    stop_on_signals,
    stop_tree,
)
from planner.plan import Plan
from planner.specs import ModelSpec

MAX_RANKS_SHOWN = 64  # a dry run lists the first ranks' layout; a 16,384-rank listing helps nobody


# What a plan that cannot be priced predicts (its batch has no micro-batches): nothing, which the checks say.
UNPRICED: dict[str, float | None] = dict.fromkeys(
    ("peak_bytes", "tensor_bytes", "model_state_bytes", "activation_bytes", "step_time_s")
)


def predicted(
    model: ModelSpec, hw: HardwareProfile, plan: Plan, engine: Engine, *, share: float = 1.0
) -> dict[str, float | None]:
    """Peak bytes per device and step time of the worker's run, priced with the engine the worker runs
    (engine_profiles/planner.yaml: eager kernels, DDP/FSDP2 as the worker applies them); `share`: how many ranks
    time-share each core (shared_cores), which multiplies the step the profile prices for a core each."""
    from planner.cost.coster import Coster

    est = Coster(model, hw, engine).estimate(plan)
    b = est.memory.peak.breakdown
    states = persistent_states(model, plan, engine)
    return {
        "peak_bytes": float(est.memory.total_bytes),  # the pre-flight check: everything a device holds
        "tensor_bytes": float(b.total_bytes - b.reserved_bytes),  # what the run can measure
        "model_state_bytes": states,  # what lives between steps, which the worker counts after the last step
        "activation_bytes": float(b.activations_bytes),
        "step_time_s": float(est.time.step_s) * share,
    }


def shared_cores(env: Environment, processes: int) -> float:
    """How many of this node's worker processes share each CPU core, where they outnumber the cores (1 on GPUs, and
    where each has a core): the cpu profile prices a rank on a core of its own (one thread per rank, as launch runs
    them), so time-shared ranks take this many times as long a step. More processes than the host may start are
    refused by the processes check, not priced (1)."""
    host = env.host
    if env.device_type != "cpu" or host is None or processes > host.max_processes():
        return 1.0
    return ranks_per_core(processes, host.cores)


def persistent_states(model: ModelSpec, plan: Plan, engine: Engine) -> float:
    """Weights, gradients and optimizer state that outlive the step on the most loaded rank (no gathered
    copies, no accumulation buffers): what the worker's tensor count sees after a step."""
    from planner.cost.coster import Coster
    from planner.io.catalog import load_hardware

    return Coster(model, load_hardware("cpu"), engine).persistent_bytes(plan)  # no term depends on the hardware


@dataclass
class DryRun:
    preflight: Preflight
    command: str
    mesh: dict[str, int]
    ranks: list[str]
    rehearsal: dict | None = None  # what --rehearse changed (rehearse.Rehearsal.to_dict)
    plan: dict | None = None  # the plan run, its engine with it (Plan.document)
    predicted: dict | None = None  # what the run is priced at (predicted(): bytes and seconds)

    def to_dict(self) -> dict:
        doc = {
            "ok": not self.preflight.failures(),
            "checks": [c.__dict__ for c in self.preflight.checks],
            "notes": self.preflight.notes,
            "command": self.command,
            "mesh": self.mesh,
            "ranks": self.ranks,
            "plan": self.plan,
            "predicted": self.predicted,
        }
        return doc if self.rehearsal is None else {**doc, "rehearsal": self.rehearsal}


def dry_run(
    cfg: RunConfig,
    model: ModelSpec,
    engine: Engine,
    env: Environment,
    *,
    nproc_per_node: int,
    nnodes: int,
    max_restarts: int,
    peak_bytes: float | None,
    need: HostNeed | None = None,
) -> DryRun:
    pf = preflight(
        model, cfg.plan, engine, env, nproc_per_node=nproc_per_node, nnodes=nnodes, predicted_peak_bytes=peak_bytes,
        host_need=need,
    )  # fmt: skip
    argv = torchrun_argv(cfg, nproc_per_node=nproc_per_node, nnodes=nnodes, max_restarts=max_restarts)
    world = cfg.plan.gpus
    shown = [rank_layout(r, cfg.plan, model.num_layers).describe() for r in range(min(world, MAX_RANKS_SHOWN))]
    if world > MAX_RANKS_SHOWN:
        shown.append(f"... and {world - MAX_RANKS_SHOWN} more ranks")
    return DryRun(
        pf,
        f"{env_prefix(env.device_type == 'cpu')} {shell_join(argv)}",
        dict(zip(MESH_DIMS, mesh_shape(cfg.plan))),
        shown,
    )


class Interrupted(Exception):
    """The launcher got SIGINT, SIGTERM or SIGHUP during a run; torchrun and every worker are stopped."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    def __str__(self) -> str:
        return f"interrupted ({signal.Signals(self.signum).name}): workers stopped"


def run_torchrun(
    cfg: RunConfig,
    *,
    nproc_per_node: int,
    max_restarts: int,
    cpu: bool,
    wall_timeout_s: float | None = None,
    progress_to_stderr: bool = False,
) -> int:
    """Run the plan on this node and return torchrun's exit code (124: stopped at the wall limit); output streams
    through (rank 0 prints one line per step; to stderr with `progress_to_stderr`, leaving stdout to the caller).
    torchrun and every worker end when this returns, raises or is killed (processes.py); SIGINT, SIGTERM and SIGHUP
    stop the run and raise Interrupted once they are stopped."""
    remove_stale_log_dirs()
    log_dir = tempfile.mkdtemp(prefix=f"{LOG_DIR_PREFIX}{os.getpid()}-")  # torchrun's logs, removed at the end
    argv = torchrun_argv(
        cfg, nproc_per_node=nproc_per_node, max_restarts=max_restarts, torchrun=local_torchrun(), log_dir=log_dir
    )
    env = {**os.environ, **run_env(cpu)}  # `cpu`: the workers compute on this host's CPU
    proc: subprocess.Popen | None = None
    muted, relays = threading.Event(), []
    try:
        with stop_on_signals():
            try:
                proc = subprocess.Popen(
                    argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                    start_new_session=True, preexec_fn=child_dies_with(os.getpid()),
                )  # fmt: skip
                assert proc.stdout is not None and proc.stderr is not None
                relays = [relay(proc.stdout, sys.stderr if progress_to_stderr else sys.stdout, muted),
                          relay(proc.stderr, sys.stderr, muted)]  # fmt: skip
                return proc.wait(timeout=wall_timeout_s)
            except subprocess.TimeoutExpired:
                muted.set()
                print(f"planner launch: stopping torchrun after {wall_timeout_s:g} s wall time", file=sys.stderr)
                return 124
            except KeyboardInterrupt:
                muted.set()
                raise Interrupted(signal.SIGINT) from None
            except Stopped as exc:
                muted.set()
                raise Interrupted(exc.signum) from None
            finally:
                if proc is not None:
                    stop_tree(proc)
                for thread in relays:
                    thread.join(timeout=STOP_GRACE_S)  # what the workers printed last, before the caller's lines
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)


LOG_DIR_PREFIX = "planner-launch-"  # then the launcher's pid: a folder a killed launcher left is known by it


def remove_stale_log_dirs(root: str | None = None) -> list[Path]:
    """Remove the torchrun log folders of launchers that are gone (a SIGKILL skips run_torchrun's cleanup), this
    user's only, and return them; a live launcher's folder, or one whose pid is reused, stays."""
    gone = []
    for path in Path(root or tempfile.gettempdir()).glob(f"{LOG_DIR_PREFIX}*-*"):
        pid = path.name[len(LOG_DIR_PREFIX) :].split("-", 1)[0]
        if not (pid.isdigit() and path.is_dir() and path.stat().st_uid == os.getuid()) or start_time(int(pid)):
            continue
        shutil.rmtree(path, ignore_errors=True)
        gone.append(path)
    return gone


def measured_vs_predicted(profile: dict, pred: dict[str, float | None]) -> list[dict[str, Any]]:
    """Each compared quantity as numbers (`launch --json`'s `quantities`): its key in seconds, bytes or tokens/s,
    measured, predicted and the relative error (None where either is missing); memory compares tensor bytes (no
    runtime reserve), on the rank with the largest measured peak."""
    ranks = profile["memory_per_rank"]
    worst = max(ranks, key=lambda r: r["peak_bytes"])
    state = worst["params_bytes"] + worst["grads_bytes"] + worst["optimizer_bytes"]
    step_s = pred.get("step_time_s")
    pred_tps = profile["plan"]["global_batch"] * profile["plan"]["seq_len"] / step_s if step_s else None
    # on CPU saved activations are counted by hooks that see no free: under a pipeline schedule, every micro-batch's
    # (launch/measured.py), an upper bound with no error to give, and so is the peak that adds them
    bound = {"peak_tensor_bytes", "activation_bytes"} if counted_upper_bound(profile) else set()
    out = []
    for key, measured, predicted in (
        ("median_step_s", profile["median_step_s"], step_s),
        ("peak_tensor_bytes", worst["peak_bytes"], pred.get("tensor_bytes")),
        ("model_state_bytes", state, pred.get("model_state_bytes")),
        ("activation_bytes", worst.get("activation_bytes", 0), pred.get("activation_bytes")),
        ("tokens_per_s", profile.get("tokens_per_s") or None, pred_tps),
    ):
        error = (measured - predicted) / predicted if predicted and measured is not None and key not in bound else None
        out.append({"quantity": key, "measured": measured, "predicted": predicted or None, "error": error,
                    "upper_bound": key in bound})  # fmt: skip
    return out


def counted_upper_bound(profile: dict) -> bool:
    """Whether the profile's activation count is an upper bound: tensors counted on CPU under a pipeline schedule."""
    return profile.get("device") == "cpu" and int(profile["plan"].get("pp", 1)) > 1


ROW_NAMES = {
    "median_step_s": "median step time",
    "peak_tensor_bytes": "peak tensor memory per rank",
    "model_state_bytes": "  model states (params+grads+optimizer)",
    "activation_bytes": "  saved activations",
    "tokens_per_s": "tokens/s",
}


def comparison(profile: dict, pred: dict[str, float | None]) -> list[tuple[str, str, str, str]]:
    """(quantity, measured, predicted, % error) rows as the table prints them (measured_vs_predicted's numbers)."""
    units = {"median_step_s": lambda v: f"{v * 1e3:.1f} ms", "tokens_per_s": lambda v: f"{v:.0f}"}
    rows = []
    for q in measured_vs_predicted(profile, pred):
        fmt = units.get(q["quantity"], lambda v: f"{v / 2**20:.2f} MiB")
        measured, predicted, error = q["measured"], q["predicted"], q["error"]
        rows.append((
            ROW_NAMES[q["quantity"]],
            (fmt(measured) + (" (upper bound)" if q["upper_bound"] else "")) if measured is not None else "n/a",
            fmt(predicted) if predicted else "n/a",
            f"{error * 100:+.1f}%" if error is not None else "n/a",
        ))  # fmt: skip
    return rows


def read_profile(path: str | Path) -> dict:
    return json.loads(Path(path).read_text())
