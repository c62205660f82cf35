"""The micro-benchmarks of `planner bench-hardware`: GEMM sweep, memory copy, disk write, collectives under
torchrun (torch is imported inside the functions)."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from typing import Any

from planner.errors import PlannerError

SIZES_FULL = [2**k for k in range(10, 27, 2)]  # 1 KiB .. 64 MiB
SIZES_QUICK = [2**10, 2**16, 2**22, 2**26]  # 1 KiB, 64 KiB, 4 MiB, 64 MiB
KINDS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "p2p")


def _comm(nproc: int, quick: bool, progress: Any, task: Any, timeout_s: float) -> dict[str, Any]:
    sizes = SIZES_QUICK if quick else SIZES_FULL
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "comm.json")
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={nproc}",
            "-m",
            "planner.bench.comm_worker",
            out,
            ",".join(map(str, sizes)),
            "0.1" if quick else "0.4",
        ]
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
        )
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout_s, kill)
        timer.start()
        err_lines: list[str] = []
        t_err = threading.Thread(target=lambda: err_lines.extend(proc.stderr), daemon=True)  # type: ignore[arg-type]
        t_err.start()
        try:
            for line in proc.stdout:  # type: ignore[union-attr]
                if line.startswith("PROGRESS"):
                    _, i, total, *label = line.split()
                    progress.update(task, completed=int(i), total=int(total), description="comm " + " ".join(label))
            rc = proc.wait()
        finally:
            timer.cancel()
        t_err.join(timeout=5)
        if killed.is_set():
            raise PlannerError(f"bench-hardware: the collectives benchmark ran past {timeout_s:.0f} s and was killed")
        if rc != 0 or not os.path.exists(out):
            raise PlannerError(f"bench-hardware: torchrun failed (exit {rc}):\n" + "".join(err_lines[-20:]))
        with open(out) as f:
            return json.load(f)


def run_bench(nproc: int, quick: bool, console: Any) -> dict[str, Any]:
    """Every micro-benchmark of this machine, with what the profile derives from them (peaks, the GEMM curve,
    the collectives' alpha-beta fits, memory per rank)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)  # one rank = one process with one thread, as `planner launch` runs it on CPU
    cuda = torch.cuda.is_available()
    device_name = (
        torch.cuda.get_device_name(0) if cuda else f"{platform.processor() or platform.machine()} CPU (1 thread)"
    )
    res: dict[str, Any] = {
        "device": "cuda" if cuda else "cpu",
        "device_name": device_name,
        "host": socket.gethostname(),
        "torch": torch.__version__,
        "quick": quick,
    }
    _measure(res, nproc, quick, console, cuda)
    _derive(res)
    res.update(_memory_and_ranks(nproc, cuda))
    return res


def _measure(res: dict[str, Any], nproc: int, quick: bool, console: Any, cuda: bool) -> None:
    """The GEMM sweep, memory bandwidth, checkpoint write and collectives, with a progress bar each."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from planner.bench import measure

    device = res["device"]
    n_mm = len(measure.gemm_sizes(device, quick)) * (4 if cuda else 2) + (0 if cuda else 2)
    with Progress(
        TextColumn("{task.description:<40}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        t_mm = progress.add_task("matmul sweep", total=n_mm)
        tick = lambda s: progress.update(t_mm, advance=1, description=s)  # noqa: E731
        res["matmul"] = measure.matmul_sweep(device, quick, tick)
        res["matmul_fp8"] = measure.fp8_sweep(quick, tick) if cuda else []
        t_mem = progress.add_task("memory bandwidth", total=2)
        res["memory"] = measure.memory_bandwidth(device, quick)
        progress.update(t_mem, advance=1, description="checkpoint write")
        res["checkpoint"] = measure.checkpoint_write(quick)
        progress.update(t_mem, advance=1, description="memory, disk done")
        if not cuda:  # on a GPU the dispatch runs ahead of the kernels: the profile's 0
            from planner.bench.dtensor import dtensor_op_s
            from planner.bench.sac import sac_op_s

            t_dt = progress.add_task("DTensor and SAC dispatch", total=2)
            res["dtensor"] = dtensor_op_s()
            progress.update(t_dt, advance=1)
            res["sac"] = sac_op_s()
            progress.update(t_dt, advance=1)
        if nproc > 1:
            t_c = progress.add_task(
                "collectives (torchrun)", total=len(KINDS) * len(SIZES_QUICK if quick else SIZES_FULL)
            )
            res["comm"] = _comm(nproc, quick, progress, t_c, timeout_s=180 if quick else 540)
        else:
            res["comm"] = None  # one device: nothing to time collectives with


def _derive(res: dict[str, Any]) -> None:
    """Peaks (the best GEMM rate per precision; fp8 = fp16 where no fp8 GEMM was timed), the bf16 and fp8 GEMM
    curves, the collectives' alpha-beta fits and the resident memory (worker RSS, or the CUDA context)."""
    from planner.bench.curves import alpha_beta, curve_from

    peak = {
        p: max(r["achieved_flops_per_s"] for r in res["matmul"] if r["precision"] == p)
        for p in ("fp32", "bf16", "fp16")
    }
    fp8 = [r["achieved_flops_per_s"] for r in res["matmul_fp8"]]
    peak["fp8"] = max(fp8) if fp8 else peak["fp16"]
    res["peak_flops"] = peak
    res["curve_precision"] = "bf16"  # `planner launch` plans default to bf16
    res["matmul_curve"] = curve_from(res["matmul"], "bf16", peak["bf16"])
    res["matmul_fp8_curve"] = curve_from(res["matmul_fp8"], "fp8", peak["fp8"]) if fp8 else []
    comm = res["comm"]
    res["fits"] = {k: alpha_beta(comm["rows"], k, comm["world_size"]) for k in KINDS} if comm else {}
    res["rss_bytes"] = comm.get("worker_rss_after_init_bytes", 0.0) if comm else 0.0
    if res["device"] == "cuda":  # on a GPU the context lives in device memory, not in the host RSS
        from planner.bench import measure

        res["rss_bytes"] = measure.cuda_context_bytes()


def _memory_and_ranks(nproc: int, cuda: bool) -> dict[str, Any]:
    """Device memory and devices per node; on a CPU, the physical memory shared by the ranks allowed here."""
    if cuda:
        import torch

        return {
            "hbm_bytes": float(torch.cuda.get_device_properties(0).total_memory),
            "hbm_note": "device memory reported by torch.cuda",
            "gpus_per_node": torch.cuda.device_count(),
            "gpus_per_node_note": "CUDA devices seen",
        }
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    ranks = max(nproc, os.cpu_count() or 1, 8)
    return {
        "hbm_bytes": float(total / ranks),
        "hbm_note": f"physical memory {total / 2**30:.1f} GiB shared by {ranks} ranks",
        "gpus_per_node": ranks,
        "gpus_per_node_note": "ranks (processes) allowed on this host",
    }
