"""This machine's cores and memory, and the limits a local launch keeps (machine.py, no torch, no process)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from planner.launch.machine import (
    AGENT_RUNTIME_BYTES,
    MAX_PROCS_PER_CORE,
    RAM_SHARE,
    WORKER_RUNTIME_BYTES,
    Host,
    HostNeed,
    available_memory_bytes,
    memory_fits,
    probe_host,
)
from planner.units import GiB, MiB


def test_probe_host_reads_affinity_and_meminfo():
    host = probe_host()
    assert host.cores == len(os.sched_getaffinity(0))
    meminfo = Path("/proc/meminfo").read_text().splitlines()
    total = next(float(line.split()[1]) * 1024 for line in meminfo if line.startswith("MemTotal:"))
    assert host.available_bytes is not None and 0 < host.available_bytes <= total
    assert host.max_processes() == MAX_PROCS_PER_CORE * host.cores


def _fake(tmp_path: Path, membership: str, files: dict[str, str], meminfo_kb: int = 8 * 2**20) -> tuple[Path, Path]:
    proc, cgroups = tmp_path / "proc", tmp_path / "cgroup"
    (proc / "self").mkdir(parents=True)
    (proc / "meminfo").write_text(f"MemTotal: {2 * meminfo_kb} kB\nMemAvailable: {meminfo_kb} kB\n")
    (proc / "self" / "cgroup").write_text(membership)
    for rel, text in files.items():
        (cgroups / rel).parent.mkdir(parents=True, exist_ok=True)
        (cgroups / rel).write_text(text)
    return proc, cgroups


def test_a_cgroup_v2_limit_below_memavailable_wins(tmp_path):
    proc, cgroups = _fake(
        tmp_path, "0::/job/a\n", {"job/a/memory.max": str(3 * 2**30), "job/a/memory.current": str(2**30)}
    )
    assert available_memory_bytes(proc, cgroups) == 2 * GiB  # 3 GiB limit - 1 GiB used, below 8 GiB available


def test_a_cgroup_v1_limit_and_no_limit(tmp_path):
    limited = {"memory/memory.limit_in_bytes": str(4 * 2**30), "memory/memory.usage_in_bytes": str(2**30)}
    proc, cgroups = _fake(tmp_path / "a", "4:memory:/gone\n1:cpu:/\n", limited)  # own folder not mounted
    assert available_memory_bytes(proc, cgroups) == 3 * GiB
    unlimited = {"memory.max": "max", "memory.current": "5"}
    proc, cgroups = _fake(tmp_path / "b", "0::/\n", unlimited)
    assert available_memory_bytes(proc, cgroups) == 8 * GiB  # MemAvailable


def test_need_counts_every_worker_runtime_and_the_agent():
    need = HostNeed(processes=4, tensor_bytes_per_process=10 * MiB)
    assert need.total_bytes == 4 * (10 * MiB + WORKER_RUNTIME_BYTES) + AGENT_RUNTIME_BYTES
    just = need.total_bytes / RAM_SHARE
    assert memory_fits(need, Host(2, just)) and not memory_fits(need, Host(2, just * 0.99))
    assert memory_fits(need, Host(2, None))  # unknown memory is reported, not refused


@pytest.mark.parametrize("cores", [1, 2, 16])
def test_process_limit_is_per_core(cores):
    assert Host(cores, 64 * GiB).max_processes() == cores * MAX_PROCS_PER_CORE
