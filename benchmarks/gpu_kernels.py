"""Kernel ceilings of one GPU, the physics a hardware profile's efficiency block states: fused causal attention
(PyTorch SDPA, the FlashAttention-2 backend torchtitan and the planner's worker run) forward and backward by
sequence length, and dense GEMMs in bf16 and fp8 (torch._scaled_mm, tensorwise scales) by size.

    python benchmarks/gpu_kernels.py [--out kernels.json]

Needs a CUDA device. FLOPs follow the planner's conventions (cost/kernels.py): attention forward 4·b·s²·h·d / 2
(causal half), backward 2.5 × the forward; a GEMM 2·m·n·k. Each figure is the median of 20 timed runs after 5
warm-ups, with CUDA events, on random data.
"""

from __future__ import annotations

import argparse
import json
import statistics

SEQS = (512, 1024, 2048, 4096, 8192, 16384)
GEMMS = (1024, 2048, 4096, 8192, 16384)


def _time_ms(fn, warmup: int = 5, reps: int = 20) -> float:  # type: ignore[no-untyped-def]
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def attention(seq: int, head_dim: int = 128, tokens: int = 32768) -> dict:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    batch, heads = max(1, tokens // seq), 16
    shape = (batch, heads, seq, head_dim)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    grad = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    flops_fwd = 4 * batch * heads * seq * seq * head_dim / 2
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        fwd = _time_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        both = _time_ms(lambda: torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                                    (q, k, v), grad))  # fmt: skip
        del out
    bwd = both - fwd
    return {
        "seq": seq, "batch": batch, "heads": heads, "head_dim": head_dim,
        "forward_tflops": flops_fwd / fwd / 1e9, "backward_tflops": 2.5 * flops_fwd / bwd / 1e9,
    }  # fmt: skip


def gemm(n: int, fp8: bool) -> dict:
    import torch

    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    if fp8:
        fa, fb = a.to(torch.float8_e4m3fn), b.t().contiguous().t().to(torch.float8_e4m3fn)
        one = torch.tensor(1.0, device="cuda")
        ms = _time_ms(lambda: torch._scaled_mm(fa, fb, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
    else:
        ms = _time_ms(lambda: a @ b)
    return {"n": n, "precision": "fp8" if fp8 else "bf16", "flops": 2 * n**3, "tflops": 2 * n**3 / ms / 1e9}


def main() -> None:
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="kernels.json")
    args = ap.parse_args()
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "attention": [], "gemm": []}
    for s in SEQS:
        res["attention"].append(attention(s))
        r = res["attention"][-1]
        print(f"attention s={s}: fwd {r['forward_tflops']:.1f}, bwd {r['backward_tflops']:.1f} TFLOP/s", flush=True)
    for fp8 in (False, True):
        for n in GEMMS:
            try:
                res["gemm"].append(gemm(n, fp8))
            except (RuntimeError, AttributeError) as e:  # no fp8 GEMM on this device or torch
                print(f"gemm {n} fp8={fp8}: {e}")
                break
            r = res["gemm"][-1]
            print(f"gemm {r['precision']} n={n:6d}: {r['tflops']:7.1f} TFLOP/s", flush=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
