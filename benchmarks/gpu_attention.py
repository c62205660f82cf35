"""Fused causal attention by backend and head widths on one GPU: PyTorch SDPA's FlashAttention-2 backend (what
torchtitan and the planner's worker run) against its cuDNN backend (the cuDNN fused attention Transformer Engine
runs for Megatron on Hopper), at the head widths of 2026 models: 128 (Llama, Qwen3), 64 (GPT-OSS) and MLA's 192
query/key and 128 value widths (DeepSeek-V3, Kimi-K2).

    python benchmarks/gpu_attention.py [--out attention.json]

Needs a CUDA device. FLOPs follow the planner's conventions (cost/kernels.py attention_core_s): forward
4·b·s²·h·(d_qk + d_v)/2 / 2 (the causal half), backward 2.5 × the forward; the backward time is the forward and
backward together less the forward. Each figure is the median of 20 timed runs after 5 warm-ups, with CUDA events,
on random data; a backend that refuses a shape is recorded with its error.
"""

from __future__ import annotations

import argparse
import json

from gpu_kernels import time_ms

SEQS = (512, 1024, 2048, 4096, 8192, 16384)
WIDTHS = ((128, 128), (64, 64), (192, 128))  # (query/key, value) per head
BACKENDS = ("FLASH_ATTENTION", "CUDNN_ATTENTION")


def attention(backend: str, seq: int, d_qk: int, d_v: int, tokens: int = 32768, heads: int = 16) -> dict:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    batch = max(1, tokens // seq)
    q, k = (torch.randn(batch, heads, seq, d_qk, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            for _ in range(2))  # fmt: skip
    v = torch.randn(batch, heads, seq, d_v, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(batch, heads, seq, d_v, device="cuda", dtype=torch.bfloat16)
    flops_fwd = 4 * batch * heads * seq * seq * (d_qk + d_v) / 2 / 2
    row = {"backend": backend, "seq": seq, "batch": batch, "heads": heads, "d_qk": d_qk, "d_v": d_v}
    try:
        with sdpa_kernel(getattr(SDPBackend, backend)):
            fwd = time_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
            both = time_ms(lambda: torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                                        (q, k, v), grad))  # fmt: skip
    except RuntimeError as e:  # this backend does not take the shape
        return row | {"error": str(e).splitlines()[0][:200]}
    return row | {"forward_tflops": flops_fwd / fwd / 1e9, "backward_tflops": 2.5 * flops_fwd / (both - fwd) / 1e9}


def main() -> None:
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="attention.json")
    args = ap.parse_args()
    res = {
        "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(), "attention": [],
    }  # fmt: skip
    for backend in BACKENDS:
        for d_qk, d_v in WIDTHS:
            for s in SEQS:
                r = attention(backend, s, d_qk, d_v)
                res["attention"].append(r)
                shown = r.get("error") or f"fwd {r['forward_tflops']:6.1f}, bwd {r['backward_tflops']:6.1f} TFLOP/s"
                print(f"{backend:16s} d={d_qk}/{d_v} s={s:6d}: {shown}", flush=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
