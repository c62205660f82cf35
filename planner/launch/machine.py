"""What this machine can hold, and the limits a local launch keeps (no torch).

`planner launch` compares the plan with the machine before it starts a process, and refuses (exit 2, one
line with the numbers) what would take the machine down; `--force` does not lift these limits:

- processes: on CPU at most MAX_PROCS_PER_CORE workers per core this process may run on
  (``os.sched_getaffinity``); on GPUs one process per visible device (``preflight``'s devices check);
- host memory: every worker's predicted tensors (the planner's own memory estimate of the plan on this device
  type: on CPU model states, activations and buffers, priced on the ``cpu`` profile) plus the measured
  runtime of one worker, times the workers, plus the torchrun agent, must fit in RAM_SHARE of the memory
  available (``MemAvailable`` of /proc/meminfo, or less under a cgroup memory limit).

The runtime figures were measured on the 2-core reference box (torch 2.13.0+cpu, Python 3.11, 2026-11-25):
peak RSS (``VmHWM``) sampled every 50 ms over `planner launch --model tiny` runs of 1, 2 and 4 workers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from planner.units import MiB, fmt_bytes

# Two workers per core: every worker runs one OpenMP thread (command.RUN_ENV), so two per core keep each at
# half a core or more; beyond that a step waits on descheduled peers at every collective (shared/reference/
# torch_cpu_notes.md, measured on 2 cores: "8 procs on 2 cores work, but about 3x slower than 4").
MAX_PROCS_PER_CORE = 2
# Peak RSS of one worker: 332-337 MiB (1, 2 and 4 workers; the tiny model's tensors are under 15 MiB of it):
# the torch runtime, about 234 MiB private and 101 MiB of shared libraries, counted in full for every worker.
WORKER_RUNTIME_BYTES = 340 * MiB
AGENT_RUNTIME_BYTES = 225 * MiB  # peak RSS of the torchrun agent: 221 MiB, the same runs
# A local run may take this share of the available memory; the rest is for the machine's other users, the
# page cache and what the estimate leaves out (allocator fragmentation, gloo buffers that grow with the world).
RAM_SHARE = 0.8
UNLIMITED_BYTES = 2**60  # cgroup v1 writes "no limit" as 2**63 rounded down to a page


@dataclass(frozen=True)
class Host:
    """The CPU cores and memory this process may use."""

    cores: int
    available_bytes: float | None  # None: unknown (no /proc/meminfo)
    bf16_units: bool | None = None  # the CPU has bf16 dot-product units (AVX512_BF16 or AMX); None: unknown

    def max_processes(self) -> int:
        return self.cores * MAX_PROCS_PER_CORE

    def describe(self) -> str:
        mem = f"{fmt_bytes(self.available_bytes)} available" if self.available_bytes is not None else "memory unknown"
        return f"{self.cores} core{'s' if self.cores != 1 else ''} and {mem}"


@dataclass(frozen=True)
class HostNeed:
    """What a local run asks of the host: its worker processes and their memory."""

    processes: int
    tensor_bytes_per_process: float  # the planner's estimate on this device type (0 on GPUs: device memory)
    step_temporary_bytes: float = 0.0  # the optimizer step's working copies beside the tensors (host_memory.py)

    @property
    def bytes_per_process(self) -> float:
        return self.tensor_bytes_per_process + self.step_temporary_bytes + WORKER_RUNTIME_BYTES

    @property
    def total_bytes(self) -> float:
        return self.processes * self.bytes_per_process + AGENT_RUNTIME_BYTES

    def describe(self) -> str:
        step = f" + optimizer step {fmt_bytes(self.step_temporary_bytes)}" if self.step_temporary_bytes else ""
        return (
            f"{self.processes} x {fmt_bytes(self.bytes_per_process)} (predicted tensors "
            f"{fmt_bytes(self.tensor_bytes_per_process)}{step} + worker runtime {fmt_bytes(WORKER_RUNTIME_BYTES)}) "
            f"+ torchrun {fmt_bytes(AGENT_RUNTIME_BYTES)} = {fmt_bytes(self.total_bytes)}"
        )


def memory_fits(need: HostNeed, host: Host) -> bool:
    return host.available_bytes is None or need.total_bytes <= RAM_SHARE * host.available_bytes


def usable_cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def ranks_per_core(processes: int, cores: int) -> float:
    """How many ranks time-share each core where they outnumber the cores (1 where each has its own)."""
    return max(1.0, processes / cores)


def probe_host() -> Host:
    return Host(cores=usable_cores(), available_bytes=available_memory_bytes(), bf16_units=cpu_bf16_units())


# CPU flags (Linux /proc/cpuinfo) of native bf16 arithmetic: without them oneDNN emulates bf16 GEMMs. Measured on
# an AVX2-only AMD EPYC (2026-11-25, torch 2.13, one thread): bf16 GEMMs at ~2 GFLOP/s against ~32 in fp32.
BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_bf16_units(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool | None:
    """Whether the CPU has native bf16 units, from its flags; None where /proc/cpuinfo is not there."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return None
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), None)
    return None if flags is None else any(f in flags for f in BF16_FLAGS)


def available_memory_bytes(proc: Path = Path("/proc"), cgroups: Path = Path("/sys/fs/cgroup")) -> float | None:
    """MemAvailable (the kernel's estimate of what can be allocated without swapping), or the room left
    under this process's cgroup memory limit where that is smaller (a container's limit, which
    /proc/meminfo does not show)."""
    available = _meminfo_bytes(proc / "meminfo").get("MemAvailable")
    room = _cgroup_room_bytes(proc / "self" / "cgroup", cgroups)
    if available is None:
        return room
    return min(available, room) if room is not None else available


def _meminfo_bytes(path: Path) -> dict[str, float]:
    try:
        text = path.read_text()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        parts = value.split()
        if parts and parts[0].isdigit():
            out[key] = float(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    return out


def _cgroup_room_bytes(membership: Path, root: Path) -> float | None:
    """limit - usage of the memory cgroup (v2 memory.max, v1 memory.limit_in_bytes), None without a limit: the
    smaller of the cgroup's own folder and the root of the mount (what a container sees of its own cgroup)."""
    try:
        lines = membership.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        rel = path.lstrip("/")
        if controllers == "":  # cgroup v2
            dirs, files = [root / rel, root], ("memory.max", "memory.current")
        elif "memory" in controllers.split(","):
            dirs, files = [root / "memory" / rel, root / "memory"], ("memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        rooms = []
        for d in dirs:
            limit, usage = _read_int(d / files[0]), _read_int(d / files[1])
            if limit is not None and usage is not None and limit < UNLIMITED_BYTES:
                rooms.append(float(max(limit - usage, 0)))
        return min(rooms) if rooms else None
    return None


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return UNLIMITED_BYTES if text == "max" else int(text) if text.isdigit() else None
