"""Single-process micro-benchmarks: GEMM sweep and memory bandwidth (torch is imported inside the functions)."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from functools import partial
from typing import Any

# GEMM sizes by FLOPs of one GEMM (2mnk); square-ish shapes like the ones plans produce. A GPU reaches its
# ceiling only at 1e11-1e12 FLOPs a GEMM (an H100: 77% of the bf16 peak at 8192^3 = 1.1e12, 5% at 1e9), so its
# sweep goes five decades higher than a CPU's.
FLOPS_FULL = (1e6, 3e6, 1e7, 3e7, 1e8, 3e8, 1e9, 3e9, 1e10)
FLOPS_QUICK = (1e6, 1e7, 1e8, 1e9, 1e10)
FLOPS_GPU_FULL = (1e8, 3e8, 1e9, 3e9, 1e10, 3e10, 1e11, 3e11, 1e12, 3e12, 1e13)
FLOPS_GPU_QUICK = (1e8, 1e9, 1e10, 1e11, 1e12, 1e13)
PRECISIONS = ("fp32", "bf16", "fp16")
# A precision's sweep ends before a size expected to take longer than this: an AVX2 CPU without bf16 units ran
# bf16 at 0.3-2.4 GFLOP/s, 38 s for the 1e10-FLOP size, and bench-hardware --quick past its 6-minute test limit.
SLOW_GEMM_S = 1.0


def gemm_sizes(device: str, quick: bool) -> tuple[float, ...]:
    if device == "cuda":
        return FLOPS_GPU_QUICK if quick else FLOPS_GPU_FULL
    return FLOPS_QUICK if quick else FLOPS_FULL


def _shape(flops: float, align: int = 8) -> tuple[int, int, int]:
    """A square GEMM of about `flops`, its side a multiple of `align`: the matrices plans produce have widths in
    multiples of 64-128, and a side that is not a multiple of 8 (16 bytes of bf16) keeps cuBLAS off its
    tensor-core kernels (an H100 measured 234 TFLOP/s at 17100^3 in bf16, against 763 at 8192^3)."""
    n = max(align, round((flops / 2) ** (1 / 3) / align) * align)
    return n, n, n


def _timer(device: str) -> Callable[[Callable[[], Any], int], float]:
    import torch

    if device == "cuda":

        def cuda_time(fn: Callable[[], Any], reps: int) -> float:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                fn()
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end) / 1e3 / reps

        return cuda_time

    def cpu_time(fn: Callable[[], Any], reps: int) -> float:
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        return (time.perf_counter() - t0) / reps

    return cpu_time


def _best(fn: Callable[[], Any], timer: Callable, budget_s: float) -> float:
    """Best of a few timed batches, the batch size chosen so the whole thing takes about budget_s; a call slower
    than the budget is timed once."""
    fn()
    one = max(timer(fn, 1), 1e-7)
    if one >= budget_s:
        return one
    reps = max(1, min(1000, int(budget_s / 4 / one)))
    return min(timer(fn, reps) for _ in range(3))


def matmul_sweep(device: str, quick: bool, tick: Callable[[str], None]) -> list[dict[str, Any]]:
    import torch

    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    timer = _timer(device)
    rows = []
    for prec in PRECISIONS:
        sizes = gemm_sizes(device, quick)
        if prec == "fp16" and device == "cpu":
            sizes = (1e6, 1e8)  # often emulated on CPUs (slow): two points suffice for its peak
        for i, f in enumerate(sizes):
            m, n, k = _shape(f, 64 if device == "cuda" else 8)
            a = torch.randn(m, k, device=device, dtype=dtypes[prec])
            b = torch.randn(k, n, device=device, dtype=dtypes[prec])
            t = _best(partial(torch.mm, a, b), timer, 0.25 if quick else 0.6)
            flops = 2.0 * m * n * k
            rows.append(
                {
                    "precision": prec,
                    "m": m,
                    "n": n,
                    "k": k,
                    "flops": flops,
                    "time_s": t,
                    "achieved_flops_per_s": flops / t,
                }
            )
            tick(f"matmul {prec} {m}x{n}x{k}")
            if i + 1 < len(sizes) and t * sizes[i + 1] / f > SLOW_GEMM_S:
                break  # the next size would take longer than SLOW_GEMM_S (emulated bf16 on AVX2: 38 s at 1e10)
    return rows


def fp8_sweep(quick: bool, tick: Callable[[str], None]) -> list[dict[str, Any]]:
    """FP8 GEMMs (e4m3, one scale per tensor, torch._scaled_mm) on a GPU that has them; [] where torch or the
    device has none (before Ada/Hopper, or on ROCm builds without it)."""
    import torch

    if not hasattr(torch, "_scaled_mm") or torch.cuda.get_device_capability(0) < (8, 9):
        return []
    timer, rows, one = _timer("cuda"), [], torch.tensor(1.0, device="cuda")
    for f in gemm_sizes("cuda", quick):
        m, n, k = _shape(f, 64)  # fp8 GEMMs take multiples of 16
        a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt needs
        try:
            fn = partial(torch._scaled_mm, a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            t = _best(fn, timer, 0.25 if quick else 0.6)
        except RuntimeError:
            return []
        flops = 2.0 * m * n * k
        rows.append({"precision": "fp8", "m": m, "n": n, "k": k, "flops": flops, "time_s": t,
                     "achieved_flops_per_s": flops / t})  # fmt: skip
        tick(f"matmul fp8 {m}x{n}x{k}")
    return rows


def cuda_context_bytes() -> float:
    """Device memory outside PyTorch's allocator once a context and the cuBLAS handles exist: total − free −
    reserved (the CUDA context, cuBLAS/cuDNN workspaces)."""
    import torch

    free, total = torch.cuda.mem_get_info()
    return float(total - free - torch.cuda.memory_reserved())


def memory_bandwidth(device: str, quick: bool) -> dict[str, Any]:
    """Large tensor copy: bytes read + bytes written per second, best of several."""
    import torch

    nbytes = (128 if quick else 512) * 2**20
    x = torch.empty(nbytes // 4, dtype=torch.float32, device=device).uniform_()
    y = torch.empty_like(x)
    t = _best(lambda: y.copy_(x), _timer(device), 0.5 if quick else 2.0)
    return {"tensor_bytes": nbytes, "time_s": t, "bytes_per_s": 2 * nbytes / t}


def checkpoint_write(quick: bool) -> dict[str, Any]:
    """Write + fsync a file in the temp directory (the checkpoint_write_bytes_per_s figure)."""
    nbytes = (32 if quick else 256) * 2**20
    buf = os.urandom(2**20)
    with tempfile.NamedTemporaryFile(dir=os.environ.get("TMPDIR")) as f:
        t0 = time.perf_counter()
        for _ in range(nbytes // len(buf)):
            f.write(buf)
        f.flush()
        os.fsync(f.fileno())
        t = time.perf_counter() - t0
    return {"bytes": nbytes, "time_s": t, "bytes_per_s": nbytes / t}


def rss_bytes() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return 0.0
