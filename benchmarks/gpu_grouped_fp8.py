"""fp8 grouped expert GEMMs on one GPU against the planner's fp8 charge: torch._scaled_grouped_mm with rowwise
scales (e4m3, one scale per token row and per expert output column, as torchao's MoE fp8 training runs it), the
up-projection's forward at the expert shapes of benchmarks/gpu_grouped.py, beside the same GEMM in bf16.

    python benchmarks/gpu_grouped_fp8.py --hardware h200 [--out grouped_fp8.json]

"pred" is cost/kernels.py grouped_gemm_s at precision fp8-current: the fp8 curve and one byte per weight. The
operands are cast beforehand: the casts are not timed. Needs a GPU with fp8 tensor cores (compute capability 9.0
for the grouped kernel); median of 20 timed runs after 5 warm-ups, CUDA events, random data.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gpu_grouped import MAX_TOKENS, ROWS, SHAPES
from gpu_kernels import time_ms  # the same timing: CUDA events, median of 20 after 5 warm-ups


def predicted_s(hidden: int, ffn: int, experts: int, rows: int, hardware: str, precision: str) -> float:
    from planner.cost.kernels import grouped_gemm_s, grouped_utilisation
    from planner.cost.layer_time import hw_rates
    from planner.io.catalog import load_hardware

    hw = load_hardware(hardware)
    peak, hbm_bw = hw_rates(hw, precision)
    flops, weights = 2.0 * rows * experts * hidden * ffn, experts * hidden * ffn
    util = grouped_utilisation(rows)
    return grouped_gemm_s(flops, util, weights, peak=peak, eff=hw.efficiency, precision=precision, hbm_bw=hbm_bw)


def measure(name: str, rows: int, hardware: str) -> dict:
    import torch

    hidden, ffn, experts = SHAPES[name]
    tokens = rows * experts
    torch.manual_seed(0)
    x = torch.randn(tokens, hidden, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(experts, ffn, hidden, device="cuda", dtype=torch.bfloat16)
    offs = torch.arange(rows, tokens + 1, rows, device="cuda", dtype=torch.int32)
    top = torch.finfo(torch.float8_e4m3fn).max
    x_scale = top / x.abs().amax(dim=1).float().clamp(min=1e-12)  # (tokens,)
    w_scale = top / w.abs().amax(dim=2).float().clamp(min=1e-12)  # (experts, ffn)
    xq = (x.float() * x_scale[:, None]).to(torch.float8_e4m3fn)
    wq = (w.float() * w_scale[:, :, None]).to(torch.float8_e4m3fn)  # (experts, ffn, hidden), row-major
    x_inv, w_inv = x_scale.reciprocal(), w_scale.reciprocal()

    def fp8() -> torch.Tensor:
        return torch._scaled_grouped_mm(
            xq, wq.transpose(-2, -1), x_inv, w_inv, offs=offs, out_dtype=torch.bfloat16
        )  # fmt: skip

    ref = torch._grouped_mm(x, w.transpose(-2, -1), offs=offs).float()
    rel = ((fp8().float() - ref).norm() / ref.norm()).item()
    flops = 2.0 * tokens * hidden * ffn
    fp8_ms = time_ms(fp8)
    bf16_ms = time_ms(lambda: torch._grouped_mm(x, w.transpose(-2, -1), offs=offs))
    return {
        "shape": name, "hidden": hidden, "ffn": ffn, "experts": experts, "rows_per_expert": rows,
        "fp8_ms": fp8_ms, "bf16_ms": bf16_ms, "fp8_tflops": flops / fp8_ms / 1e9,
        "pred_fp8_ms": predicted_s(hidden, ffn, experts, rows, hardware, "fp8-current") * 1e3,
        "pred_bf16_ms": predicted_s(hidden, ffn, experts, rows, hardware, "bf16") * 1e3, "rel_error": rel,
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hardware", default="h200")
    ap.add_argument("--out", type=Path, default=Path("grouped_fp8.json"))
    args = ap.parse_args()
    import torch

    print(f"{'shape':20} {'rows':>5} {'fp8 ms':>8} {'pred':>8} {'err':>7} {'bf16 ms':>8} {'TFLOP/s':>8} {'rel':>6}")
    rows = []
    for name, (_, _, experts) in SHAPES.items():
        for r in (r for r in ROWS if r * experts <= MAX_TOKENS):
            try:
                row = measure(name, r, args.hardware)
            except (RuntimeError, TypeError) as e:  # a kernel this torch lacks: say so and go on
                print(f"{name:20} {r:5d} failed: {str(e).splitlines()[0][:200]}", flush=True)
                continue
            rows.append(row)
            err = (row["fp8_ms"] - row["pred_fp8_ms"]) / row["pred_fp8_ms"] * 100
            print(
                f"{name:20} {r:5d} {row['fp8_ms']:8.3f} {row['pred_fp8_ms']:8.3f} {err:+6.1f}%"
                f" {row['bf16_ms']:8.3f} {row['fp8_tflops']:8.1f} {row['rel_error']:6.3f}",
                flush=True,
            )
    args.out.write_text(json.dumps({"device": torch.cuda.get_device_name(0), "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
