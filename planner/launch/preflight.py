"""Pre-flight check: the plan against the real environment, before any process starts (pure).

``probe_environment`` is the only function that touches torch, lazily, so that --dry-run and --emit
still work where torch is not installed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from planner.engine import Engine, plan_problems
from planner.launch.machine import (
    BF16_FLAGS,
    MAX_PROCS_PER_CORE,
    RAM_SHARE,
    Host,
    HostNeed,
    memory_fits,
    probe_host,
)
from planner.launch.worker_support import architecture_limits, cp_problems, fp8_problems
from planner.plan import Plan
from planner.specs import ModelSpec
from planner.units import fmt_bytes, fmt_seconds

# Public APIs the worker uses and the torch release that made each public.
FEATURES = {
    "DeviceMesh (init_device_mesh)": (2, 2),
    "tensor parallel + SequenceParallel (parallelize_module)": (2, 3),
    "torch.distributed.pipelining schedules": (2, 4),
    "FSDP2 fully_shard (torch.distributed.fsdp)": (2, 6),
    "torch.distributed.checkpoint get_state_dict": (2, 3),
}


@dataclass(frozen=True)
class Environment:
    device_type: str  # "cpu" or "cuda"
    device_count: int  # visible accelerators on this node (CPU: 0)
    device_name: str
    free_bytes: tuple[float, ...] = ()  # per device; empty on CPU
    torch_version: str | None = None
    host: Host | None = None  # this machine's cores and memory; None: not this machine (--emit's targets)
    capability: tuple[int, int] | None = None  # the first GPU's CUDA compute capability; None on CPU

    def max_processes(self) -> int | None:
        """The most worker processes a local run may start here (machine.py): one per GPU, or
        MAX_PROCS_PER_CORE per CPU core; None when the host is not known."""
        if self.device_type == "cuda":
            return self.device_count
        return self.host.max_processes() if self.host is not None else None


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    forceable: bool = False  # --force may override (device memory only; never what protects the host)
    host: bool = False  # a limit that protects this machine (processes, host memory)


@dataclass
class Preflight:
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, name: str, ok: bool, detail: str, *, forceable: bool = False, host: bool = False) -> None:
        self.checks.append(Check(name, ok, detail, forceable, host))

    def failures(self, *, force: bool = False) -> list[Check]:
        return [c for c in self.checks if not c.ok and not (force and c.forceable)]

    def lines(self) -> list[str]:
        out = [f"[{'ok' if c.ok else 'FAIL'}] {c.name}: {c.detail}" for c in self.checks]
        return out + [f"note: {n}" for n in self.notes]


def probe_environment() -> Environment:
    host = probe_host()
    try:
        import torch
    except ImportError:
        return Environment("cpu", 0, "cpu (torch not installed)", host=host)
    import platform

    if torch.cuda.is_available():
        n = torch.cuda.device_count()
        free = tuple(float(torch.cuda.mem_get_info(i)[0]) for i in range(n))
        capability = torch.cuda.get_device_capability(0)
        return Environment("cuda", n, torch.cuda.get_device_name(0), free, torch.__version__, host, capability)
    return Environment("cpu", 0, platform.processor() or platform.machine() or "cpu", (), torch.__version__, host)


def _version(v: str) -> tuple[int, int]:
    major, minor = v.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def preflight(
    model: ModelSpec,
    plan: Plan,
    engine: Engine,
    env: Environment,
    *,
    nproc_per_node: int,
    nnodes: int,
    predicted_peak_bytes: float | None = None,
    host_need: HostNeed | None = None,
) -> Preflight:
    """Every check, passed or failed, so --dry-run can print all of them."""
    pf = Preflight()
    world = nproc_per_node * nnodes
    pf.add(
        "world size",
        plan.gpus == world,
        f"tp={plan.tp} x pp={plan.pp} x cp={plan.cp} x dp={plan.dp} = {plan.gpus}; "
        f"processes: {nproc_per_node} per node x {nnodes} nodes = {world}",
    )
    if env.device_type == "cuda":
        pf.add(
            "devices",
            env.device_count >= nproc_per_node,
            f"{env.device_count} x {env.device_name} visible, {nproc_per_node} processes per node (one per GPU)",
            host=env.host is not None,
        )
    else:
        pf.add("devices", True, f"CPU ({env.device_name}), gloo backend, {nproc_per_node} processes per node")
    _host_checks(pf, env, nproc_per_node, host_need)
    if not (env.device_type == "cpu" and env.host is not None and host_need is not None):  # else: host memory
        _device_memory(pf, env, predicted_peak_bytes)
    if env.torch_version is None:
        pf.add("torch", False, "torch is not installed (pip install 'planner[launch]', torch==2.13.0)")
    else:
        have = _version(env.torch_version)
        missing = [f"{name} needs >= {a}.{b}" for name, (a, b) in FEATURES.items() if have < (a, b)]
        pf.add("torch", not missing, f"torch {env.torch_version}" + (": " + "; ".join(missing) if missing else ""))
    problems = [str(r) for r in plan_problems(model, plan, engine, world)] + worker_limits(model, plan, env, engine)
    pf.add("divisibility and support", not problems, "; ".join(problems) or "all rules hold")
    if env.device_type == "cpu" and env.host is not None and env.host.bf16_units is False and plan.precision != "fp32":
        pf.notes.append(
            f"this CPU has no bf16 units ({' / '.join(BF16_FLAGS)} absent): {plan.precision} GEMMs are emulated, "
            "about 15x slower than fp32 here; --precision fp32 runs faster on this host"
        )
    if model.tied_embeddings and (plan.pp > 1 or plan.tp > 1):
        pf.notes.append("tied embeddings are untied in the worker when pp > 1 or tp > 1")
    if plan.zero in engine.rules.zero and plan.dp * plan.cp > 1:
        pf.notes.append(f"zero={plan.zero} runs as {engine.zero_stage(plan).mechanism} ({engine.name} engine)")
    return pf


def _host_checks(pf: Preflight, env: Environment, nproc: int, need: HostNeed | None) -> None:
    """The limits that protect this machine (machine.py): not forceable."""
    if env.host is None:
        return
    if env.device_type == "cpu":
        limit = env.host.max_processes()
        detail = f"{nproc} on {env.host.cores} cores: at most {limit} here ({MAX_PROCS_PER_CORE} per core)"
        pf.add("processes", nproc <= limit, detail, host=True)
    if need is not None:
        avail = env.host.available_bytes
        room = f"{fmt_bytes(avail)} available, {RAM_SHARE:.0%} of it usable" if avail is not None else "unknown"
        pf.add("host memory", memory_fits(need, env.host), f"needs {need.describe()}; {room}", host=True)


def host_refusal(pf: Preflight, env: Environment, need: HostNeed) -> str | None:
    """One line for a run this machine must not start (a failed host check), with the numbers; None if none."""
    if env.host is None or not any(c.host and not c.ok for c in pf.checks):
        return None
    where = f"{env.device_count} x {env.device_name}" if env.device_type == "cuda" else f"{env.host.cores} cores"
    avail = env.host.available_bytes
    have, usable = (
        (f" and {fmt_bytes(avail)} available", f" and {fmt_bytes(RAM_SHARE * avail)}")
        if avail is not None
        else ("", "")
    )
    return (
        f"this machine cannot run the plan: {need.processes} processes on {where}{have} (at most "
        f"{env.max_processes()} processes{usable} here), and the plan needs ~{fmt_bytes(need.total_bytes)}; "
        "rehearse it with --rehearse, or run it on the cluster (--emit slurm|k8s|torchrun)"
    )


def _device_memory(pf: Preflight, env: Environment, peak_bytes: float | None) -> None:
    """Predicted peak against the free memory of the fullest device (--force may override)."""
    if peak_bytes is None:
        pf.add("memory", True, "predicted peak n/a (no estimate available)")
    elif env.free_bytes:
        worst = min(env.free_bytes)
        pf.add(
            "memory",
            peak_bytes <= worst,
            f"predicted peak {peak_bytes / 2**30:.2f} GiB per device vs {worst / 2**30:.2f} GiB free on the "
            "fullest device",
            forceable=True,
        )
    else:
        pf.add("memory", True, f"predicted peak {peak_bytes / 2**30:.2f} GiB (CPU: not checked)")


# A run here stops after its wall limit (torch_cpu_notes.md: a restarted group can hang whatever the collective
# timeout; wrap every torchrun in a wall-clock limit): start-up (imports, rendezvous, model build) plus WALL_SLACK
# times the predicted steps (the prediction's error on a host it was not calibrated on, checkpoints, restarts).
WALL_STARTUP_S = 300.0
WALL_SLACK = 3.0
# A run predicted to take longer than this is not started unless its wall limit is given (--wall-s): a mistyped batch
# should not hold a machine for days.
MAX_UNASKED_RUN_S = 3600.0


def wall_limit_s(step_s: float | None, *, steps: int, restarts: int) -> float:
    """The wall-clock limit of a run not given one: start-up plus WALL_SLACK times its predicted steps, each restart
    running them again (a local run's, and an emitted Slurm job's --time)."""
    return WALL_STARTUP_S + WALL_SLACK * (step_s or 0.0) * steps * (1 + restarts)


def run_time_check(pf: Preflight, step_s: float | None, *, steps: int, restarts: int, given: float | None) -> float:
    """Add the run-time check (a run predicted over MAX_UNASKED_RUN_S needs --wall-s) and return the wall limit."""
    run_s = (step_s or 0.0) * steps * (1 + restarts)
    wall = given if given is not None else wall_limit_s(step_s, steps=steps, restarts=restarts)
    priced = f" x {fmt_seconds(step_s)} predicted = {fmt_seconds(run_s)}" if step_s is not None else ", not priced"
    said = f"{steps} steps{priced}; stopped if still running after {wall:.0f} s (--wall-s)"
    ok = given is not None or run_s <= MAX_UNASKED_RUN_S
    pf.add("run time", ok, said if ok else f"{said}: over {fmt_seconds(MAX_UNASKED_RUN_S)}; give --wall-s to allow "
           "it, or fewer --steps or a smaller --global-batch")  # fmt: skip
    return wall


def worker_limits(model: ModelSpec, plan: Plan, env: Environment, engine: Engine | None = None) -> list[str]:
    """What the rehearsal worker cannot run, with the values involved, whatever engine the plan is priced on
    (`engine`: its rules are checked beside these; what they already say is not said twice)."""
    out = []
    if plan.tp > 1 and model.vocab_size % plan.tp and not (engine and engine.rules.vocab_divisible_by_tp):
        # the worker splits the embedding and the output by vocabulary without padding it (launch/parallelize.py)
        out.append(f"tp={plan.tp} must divide vocab_size={model.vocab_size}: the worker does not pad the vocabulary")
    out += cp_problems(plan, env.device_type)
    if plan.ep > 1 or model.moe is not None:
        out.append(f"{model.name}: mixture-of-experts models and ep={plan.ep} are not supported by the worker")
    out += architecture_limits(model)
    out += fp8_problems(model, plan, env.device_type, env.capability)
    if plan.precision == "fp16" and env.device_type == "cpu":
        out.append("precision=fp16 on CPU: use bf16 (no loss scaler in the worker)")
    if plan.global_batch % (plan.dp * plan.micro_batch):
        out.append(
            f"global_batch={plan.global_batch} must be a multiple of dp={plan.dp} x micro_batch={plan.micro_batch}"
        )
    out += schedule_limits(plan)
    if plan.seq_len > model.max_seq_len:
        out.append(f"seq_len={plan.seq_len} exceeds max_seq_len={model.max_seq_len} of {model.name} (--seq-len)")
    return out


def schedule_limits(plan: Plan) -> list[str]:
    """What torch's pipelining schedules (the worker's) refuse (torch/distributed/pipelining/schedules.py, 2.13):
    1F1B needs at least one micro-batch per stage; interleaved 1F1B a micro-batch count that is a multiple of its
    rounds (max(1, m // pp))."""
    m, p = plan.num_microbatches, plan.pp
    if p == 1 or plan.global_batch % (plan.dp * plan.micro_batch):
        return []
    if plan.schedule == "1f1b" and m < p:
        return [f"schedule=1f1b needs at least pp={p} micro-batches per step, not {m} (torch's Schedule1F1B): raise "
                "--global-batch, or --schedule gpipe"]  # fmt: skip
    rounds = max(1, m // p)
    if plan.schedule == "interleaved" and m % rounds:
        return [f"schedule=interleaved needs a micro-batch count that is a multiple of its {rounds} rounds, not {m}"]
    return []
