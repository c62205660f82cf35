"""What the worker's fp8 linears (planner/launch/float8.py, the `fp8-current` recipe) gain over bf16 on one GPU, and
what their casts cost: forward + backward of one linear at Llama 2 7B shapes, as the worker runs it (fp32 weights
under bf16 autocast, a bf16 output gradient).

    python benchmarks/gpu_float8.py [--out float8.json]

Per shape (tokens x in -> out): the bf16 nn.Linear step, the Float8Linear step, and its three fp8 GEMMs alone
(torch._scaled_mm on operands cast beforehand, in the layouts the backward makes). Float8Linear minus the GEMMs is
what the amax passes, casts and transposes cost, the terms cost/quantization.py prices as HBM traffic. Needs a CUDA
device with fp8 tensor cores (compute capability 8.9+). Median of 20 timed runs after 5 warm-ups, CUDA events,
random data.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gpu_kernels import time_ms  # the same timing: CUDA events, median of 20 after 5 warm-ups

# (tokens, in, out): attention projections, the SwiGLU up/gate and the down projection of Llama 2 7B
SHAPES = [(t, i, o) for t in (4096, 16384) for i, o in ((4096, 4096), (4096, 11008), (11008, 4096))]


def measure(tokens: int, d_in: int, d_out: int) -> dict:
    import torch
    from torch import nn

    from planner.launch.float8 import E4M3, E5M2, Float8Linear, quantize

    torch.manual_seed(0)
    ref = nn.Linear(d_in, d_out, bias=False, device="cuda")
    fp8 = nn.Linear(d_in, d_out, bias=False, device="cuda")
    fp8.load_state_dict(ref.state_dict())
    fp8.__class__ = Float8Linear
    x = torch.randn(tokens, d_in, device="cuda", requires_grad=True)
    grad = torch.randn(tokens, d_out, device="cuda", dtype=torch.bfloat16)

    def step(layer: nn.Module):  # type: ignore[no-untyped-def]
        def run() -> None:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                y = layer(x)
            y.backward(grad)

        return run

    with torch.autocast("cuda", dtype=torch.bfloat16):
        rel = ((fp8(x).float() - ref(x).float()).norm() / ref(x).float().norm()).item()
    xq, xs = quantize(x.detach().bfloat16(), E4M3)
    wq, ws = quantize(ref.weight.detach(), E4M3)
    gq, gs = quantize(grad, E5M2)
    w_col, x_col, g_row = wq.t().contiguous().t(), xq.t().contiguous().t(), gq.t().contiguous()

    def gemms() -> None:
        torch._scaled_mm(xq, wq.t(), scale_a=xs, scale_b=ws, out_dtype=torch.bfloat16)
        torch._scaled_mm(gq, w_col, scale_a=gs, scale_b=ws, out_dtype=torch.bfloat16)
        torch._scaled_mm(g_row, x_col, scale_a=gs, scale_b=xs, out_dtype=torch.float32)

    flops = 3 * 2.0 * tokens * d_in * d_out
    bf16_ms, fp8_ms, gemm_ms = time_ms(step(ref)), time_ms(step(fp8)), time_ms(gemms)
    return {
        "tokens": tokens,
        "in": d_in,
        "out": d_out,
        "bf16_ms": bf16_ms,
        "fp8_ms": fp8_ms,
        "fp8_gemms_ms": gemm_ms,
        "bf16_tflops": flops / bf16_ms / 1e9,
        "fp8_tflops": flops / fp8_ms / 1e9,
        "fp8_gemm_tflops": flops / gemm_ms / 1e9,
        "speedup": bf16_ms / fp8_ms,
        "forward_rel_error": rel,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("float8.json"))
    args = ap.parse_args()
    import torch

    rows = [measure(*shape) for shape in SHAPES]
    args.out.write_text(json.dumps({"device": torch.cuda.get_device_name(0), "rows": rows}, indent=2) + "\n")
    print(
        f"{'tokens x in -> out':24} {'bf16 ms':>8} {'fp8 ms':>8} {'gemms':>8} {'speedup':>8} {'cast ms':>8} {'rel':>7}"
    )
    for r in rows:
        shape = f"{r['tokens']} x {r['in']} -> {r['out']}"
        cast = r["fp8_ms"] - r["fp8_gemms_ms"]
        print(
            f"{shape:24} {r['bf16_ms']:8.3f} {r['fp8_ms']:8.3f} {r['fp8_gemms_ms']:8.3f} {r['speedup']:8.2f}x"
            f" {cast:8.3f} {r['forward_rel_error']:7.4f}"
        )


if __name__ == "__main__":
    main()
