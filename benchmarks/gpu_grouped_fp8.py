"""fp8 grouped expert GEMMs on one GPU against the planner's fp8 charge: torch._scaled_grouped_mm with rowwise
scales (e4m3, one scale per token row and per expert output column, as torchao's MoE fp8 training runs it), the
up-projection's forward at the expert shapes of benchmarks/gpu_grouped.py, beside the same GEMM in bf16.

    python benchmarks/gpu_grouped_fp8.py --hardware h200 [--out grouped_fp8.json]

"pred" is cost/kernels.py grouped_gemm_s at precision fp8-current: the fp8 curve and one byte per weight. The
operands are cast beforehand: the casts are not timed. Needs a GPU with fp8 tensor cores (compute capability 9.0
for the grouped kernel); median of 20 timed runs after 5 warm-ups, CUDA events, random data.
"""

from __future__ import annotations

from gpu_grouped import SHAPES, predicted_s, sweep
from gpu_kernels import time_ms  # the same timing: CUDA events, median of 20 after 5 warm-ups


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


if __name__ == "__main__":
    sweep(
        measure, measured="fp8_ms", default_out="grouped_fp8.json", skip=(RuntimeError, TypeError),
        titles=("fp8 ms", "pred", "err", "bf16 ms", "TFLOP/s", "rel"),
        columns="{fp8_ms:8.3f} {pred_fp8_ms:8.3f} {err:+6.1f}% {bf16_ms:8.3f} {fp8_tflops:8.1f} {rel_error:6.3f}",
    )  # fmt: skip
