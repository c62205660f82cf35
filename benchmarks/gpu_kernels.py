"""Kernel ceilings of one GPU, the physics a hardware profile's efficiency block states: fused causal attention
(PyTorch SDPA, the FlashAttention-2 backend torchtitan and the planner's worker run) forward and backward by
sequence length, and dense GEMMs by size in bf16 and in fp8 (torch._scaled_mm) with tensorwise, rowwise and
1x128/128x128 blockwise scales.

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


def time_ms(fn, warmup: int = 5, reps: int = 20) -> float:  # type: ignore[no-untyped-def]
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
        fwd = time_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        both = time_ms(lambda: torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                                    (q, k, v), grad))  # fmt: skip
        del out
    bwd = both - fwd
    return {
        "seq": seq, "batch": batch, "heads": heads, "head_dim": head_dim,
        "forward_tflops": flops_fwd / fwd / 1e9, "backward_tflops": 2.5 * flops_fwd / bwd / 1e9,
    }  # fmt: skip


def _fp8_scales(n: int, scaling: str):  # type: ignore[no-untyped-def]
    """Scales for an n x n x n e4m3 GEMM: one per tensor, one per row of A and column of B (torchao's rowwise
    recipe), or DeepSeek-V3's 1x128 tiles of A and 128x128 blocks of B (Transformer Engine's blockwise recipe);
    the blockwise scales are column-major, as cuBLASLt's block-scaled GEMMs take them."""
    import torch

    if scaling == "tensorwise":
        one = torch.tensor(1.0, device="cuda")
        return one, one
    if scaling == "rowwise":
        return torch.ones(n, 1, device="cuda"), torch.ones(1, n, device="cuda")
    return torch.ones(n // 128, n, device="cuda").t(), torch.ones(n // 128, n // 128, device="cuda").t()


def gemm(n: int, scaling: str) -> dict:
    """An n^3 GEMM in bf16 (scaling "bf16") or e4m3 with the named scaling."""
    import torch

    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    if scaling != "bf16":
        fa, fb = a.to(torch.float8_e4m3fn), b.t().contiguous().t().to(torch.float8_e4m3fn)
        sa, sb = _fp8_scales(n, scaling)
        ms = time_ms(lambda: torch._scaled_mm(fa, fb, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16))
    else:
        ms = time_ms(lambda: a @ b)
    precision = "bf16" if scaling == "bf16" else "fp8"
    return {"n": n, "precision": precision, "scaling": scaling, "flops": 2 * n**3, "tflops": 2 * n**3 / ms / 1e9}


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
    for scaling in ("bf16", "tensorwise", "rowwise", "blockwise"):
        for n in GEMMS:
            try:
                res["gemm"].append(gemm(n, scaling))
            except (RuntimeError, AttributeError, ValueError) as e:  # not on this device or torch
                print(f"gemm {n} {scaling}: {str(e).splitlines()[0][:200]}")
                break
            r = res["gemm"][-1]
            print(f"gemm {r['precision']} {scaling} n={n:6d}: {r['tflops']:7.1f} TFLOP/s", flush=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
