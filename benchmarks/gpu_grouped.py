"""Grouped expert GEMMs on one GPU against what the planner charges for them (cost/kernels.py grouped_gemm_s):
the local experts' up-projection run as one torch._grouped_mm, the way torchtitan's MoE runs it
(models/common/moe.py: weights stored (experts, out, in), passed transposed; token offsets per expert), by tokens
per expert.

    python benchmarks/gpu_grouped.py --hardware h200 [--out grouped.json]

Per (model shape, local experts, tokens per expert): the forward alone and forward + backward (the input
gradient and the weight gradient, two more grouped GEMMs), bf16, balanced routing. "pred" is the planner's charge
for the forward: the experts' rows padded to whole tiles at the efficiency of that many FLOPs, plus the local
experts' weights read once from HBM. The dense column times one ordinary GEMM of the same FLOPs (all tokens
through one expert-sized matrix), the size curve the charge starts from. Needs a CUDA device; median of 20 timed
runs after 5 warm-ups, CUDA events, random data.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

from gpu_kernels import time_ms  # the same timing: CUDA events, median of 20 after 5 warm-ups

# name: (hidden, expert FFN width, local experts); widths from model_specs/ (DeepSeek-V3 at EP 32 keeps 8 of its
# 256 experts, Qwen3-30B-A3B unsharded keeps all 128, Mixtral 8x7B unsharded all 8, GPT-OSS 120B at EP 8 16 of 128)
SHAPES: dict[str, tuple[int, int, int]] = {
    "deepseek-v3/ep32": (7168, 2048, 8),
    "qwen3-30b-a3b/ep1": (2048, 768, 128),
    "mixtral-8x7b/ep1": (4096, 14336, 8),
    "gpt-oss-120b/ep8": (2880, 2880, 16),
}
ROWS = (16, 64, 128, 256, 512, 1024, 2048, 4096)
MAX_TOKENS = 1 << 17  # skip a case whose input would pass 131,072 tokens


def cases() -> list[tuple[str, int]]:
    """(shape, tokens per expert) of every case measured."""
    return [(name, r) for name, (_, _, experts) in SHAPES.items() for r in ROWS if r * experts <= MAX_TOKENS]


def predicted_s(hidden: int, ffn: int, experts: int, rows: int, hardware: str, precision: str = "bf16") -> float:
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
    x = torch.randn(tokens, hidden, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(experts, ffn, hidden, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(tokens, ffn, device="cuda", dtype=torch.bfloat16)
    offs = torch.arange(rows, tokens + 1, rows, device="cuda", dtype=torch.int32)
    dense_w = w[0].detach().clone()
    x_flat = x.detach()

    def forward() -> None:
        torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)

    def both() -> None:
        torch.autograd.grad(torch._grouped_mm(x, w.transpose(-2, -1), offs=offs), (x, w), grad)

    flops = 2.0 * tokens * hidden * ffn
    fwd_ms, both_ms = time_ms(forward), time_ms(both)
    dense_ms = time_ms(lambda: x_flat @ dense_w.t())
    pred_ms = predicted_s(hidden, ffn, experts, rows, hardware) * 1e3
    return {
        "shape": name, "hidden": hidden, "ffn": ffn, "experts": experts, "rows_per_expert": rows,
        "forward_ms": fwd_ms, "backward_ms": both_ms - fwd_ms, "dense_ms": dense_ms, "pred_forward_ms": pred_ms,
        "forward_tflops": flops / fwd_ms / 1e9, "dense_tflops": flops / dense_ms / 1e9,
        "backward_over_forward": (both_ms - fwd_ms) / fwd_ms,
    }  # fmt: skip


def sweep(
    measure_fn: Callable[[str, int, str], dict], *, measured: str, columns: str, titles: tuple[str, ...],
    default_out: str, skip: tuple[type[Exception], ...] = (),
) -> None:  # fmt: skip
    """The command line of a grouped-GEMM benchmark: every case measured and printed (shape, rows, then `columns`
    formatted with the row and `err`, the `measured` time over the planner's `pred_<measured>`, under `titles`), the
    rows written to --out; a case that raises one of `skip` is printed as failed and left out."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--hardware", default="h200")
    ap.add_argument("--out", type=Path, default=Path(default_out))
    args = ap.parse_args()
    import torch

    print(f"{'shape':20} {'rows':>5} " + " ".join(f"{t:>8}" for t in titles))
    rows = []
    for name, r in cases():
        try:
            row = measure_fn(name, r, args.hardware)
        except skip as e:  # a kernel this torch lacks: say so and go on
            print(f"{name:20} {r:5d} failed: {str(e).splitlines()[0][:200]}", flush=True)
            continue
        rows.append(row)
        err = (row[measured] - row[f"pred_{measured}"]) / row[f"pred_{measured}"] * 100
        print(f"{name:20} {r:5d} " + columns.format(err=err, **row), flush=True)
    args.out.write_text(json.dumps({"device": torch.cuda.get_device_name(0), "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    sweep(
        measure, measured="forward_ms", default_out="grouped.json",
        titles=("fwd ms", "pred", "err", "TFLOP/s", "dense", "bwd/fwd"),
        columns="{forward_ms:8.3f} {pred_forward_ms:8.3f} {err:+6.1f}% {forward_tflops:8.1f} {dense_tflops:8.1f}"
        " {backward_over_forward:7.2f}",
    )  # fmt: skip
