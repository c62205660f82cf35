"""What one fp8 cast of the worker costs on a GPU (planner/launch/float8.py `quantize`: amax, scale, clamp, cast
to e4m3), by how it is run: eager PyTorch, compiled with dynamic shapes, compiled per shape (what the worker
ships), and a leaner eager form (one reduction pass, the multiply in the input's dtype). Then the worker's linear
(benchmarks/gpu_float8.py `measure`) with the lean and the per-shape casts swapped in.

    python benchmarks/gpu_casts.py

Per tensor: the median time of one cast (CUDA events, 20 after 5 warm-ups), the first call's wall time (its
compilation), and the time to read the tensor once and write its fp8 copy at 4.2 TB/s (the H200's measured copy
rate). Then the host's time per call on a 256 x 256 tensor (100 calls, no synchronisation between them). Prints
torch._dynamo's counters, which say whether anything fell back or recompiled. Needs a CUDA device.
"""

from __future__ import annotations

import time

from gpu_kernels import time_ms  # the same timing: CUDA events, median of 20 after 5 warm-ups

COPY_BYTES_PER_S = 4.2e12  # one H200 here: benchmarks/results/h200-2026-11-26/bench-hardware.json


def variants():  # type: ignore[no-untyped-def]
    import torch

    import planner.launch.float8 as f8

    def lean(t, dtype):  # type: ignore[no-untyped-def]
        with torch.no_grad():
            t = t.detach()
            amax = torch.linalg.vector_norm(t, float("inf")).float().clamp(min=f8.AMAX_EPS)
            scale, top = torch.finfo(dtype).max / amax, torch.finfo(dtype).max
            return (t * scale).clamp_(-top, top).to(dtype), scale.reciprocal()

    dynamic = torch.compile(f8._quantize, dynamic=True)
    static = torch.compile(f8._quantize, dynamic=False)

    def compiled(fn):  # type: ignore[no-untyped-def]
        def run(t, dtype):  # type: ignore[no-untyped-def]
            with torch.no_grad():
                return fn(t.detach(), dtype)

        return run

    return {
        "eager": lambda t, d: f8._quantize(t.detach(), d),
        "dynamic": compiled(dynamic),
        "static": compiled(static),
        "lean": lean,
    }


def main() -> None:
    import gpu_float8
    import torch
    from torch._dynamo.utils import counters

    import planner.launch.float8 as f8

    casts = variants()
    for shape, dtype in (
        ((16384, 11008), torch.bfloat16),
        ((4096, 4096), torch.bfloat16),
        ((11008, 4096), torch.float32),
    ):
        t = torch.randn(shape, device="cuda", dtype=dtype)
        row: dict[str, float] = {"copy_ms": t.numel() * (2 * t.element_size() + 1) / COPY_BYTES_PER_S * 1e3}
        for name, fn in casts.items():
            t0 = time.perf_counter()
            fn(t, f8.E4M3)
            torch.cuda.synchronize()
            row[f"{name}_first_s"] = round(time.perf_counter() - t0, 2)
            row[name] = round(time_ms(lambda fn=fn, t=t: fn(t, f8.E4M3)), 4)
        ref = f8._quantize(t, f8.E4M3)[0].float()
        row["lean_max_diff"] = (casts["lean"](t, f8.E4M3)[0].float() - ref).abs().max().item()
        print(shape, dtype, row, flush=True)
    print("dynamo", {k: dict(v) for k, v in counters.items() if k in ("stats", "recompiles", "graph_break")})
    small = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    for name, fn in casts.items():
        fn(small, f8.E4M3)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(100):
            fn(small, f8.E4M3)
        torch.cuda.synchronize()
        print(f"host us/call {name} {(time.perf_counter() - t0) * 1e4:.1f}", flush=True)
    keys = ("bf16_ms", "fp8_ms", "fp8_gemms_ms", "speedup", "forward_rel_error")
    for name in ("lean", "static"):
        f8.quantize = casts[name]  # the worker's linear with this cast
        for shape in ((4096, 4096, 4096), (16384, 11008, 4096)):
            r = gpu_float8.measure(*shape)
            print(name, shape, {k: round(r[k], 3) for k in keys}, flush=True)


if __name__ == "__main__":
    main()
