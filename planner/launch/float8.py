"""Per-tensor dynamic fp8 linears for the worker: the `fp8-current` recipe (precision.py), as torchao's tensorwise
float8 training runs it under torchtitan (torch).

Each of a linear's three GEMMs runs in fp8 through ``torch._scaled_mm``: the forward (input x weight), the input
gradient (output gradient x weight) and the weight gradient (output gradient x input). Every operand is scaled by
its own amax when the GEMM runs: E4M3 for inputs and weights, E5M2 for gradients (Micikevicius et al. 2022,
"FP8 Formats for Deep Learning" §3: E5M2's range for gradients). The 16-bit input and the weight are what the
forward saves, and the backward casts them again, as torchao's Float8Linear does (engine_profiles/torchtitan.yaml
`quantized_activations: false`, `fp8_weight_cache: false`): no fp8 copy outlives its GEMM.

fp8 GEMMs on Hopper take the first operand row-major and the second column-major (cuBLASLt's TN layout); the
backward's transposed operands are made contiguous copies for that. Only the transformer layers' linears are
converted: attention, norms, the embedding and the output layer stay in the 16-bit precision (precision.py's
head_precision). The linears' dimensions and the tokens of a micro-batch must be multiples of 16 on a GPU
(worker_support.py `fp8_problems`; launch/preflight.py says so before a run starts).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import nn

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
FUSED_ON_CPU = False  # True compiles the casts on CPU too (needs a C++ toolchain): how the graph count was checked
AMAX_EPS = 1e-12  # the smallest amax scaled from: an all-zero tensor casts to zeros, not NaN


def _quantize(t: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    amax = t.abs().amax().float().clamp(min=AMAX_EPS)  # t is detached: quantize() hands it over so
    scale = torch.finfo(dtype).max / amax
    fp8 = (t.float() * scale).clamp(-torch.finfo(dtype).max, torch.finfo(dtype).max).to(dtype)
    return fp8, scale.reciprocal()


# Distinct graphs the compiled cast may hold: one per (shape, input dtype, format). A Llama layer's linears cast
# about ten (four shapes of weight, two of input, three of output gradient); torch._dynamo's default of 8 was
# reached on one model's linears and the rest fell back, silently, to the eager cast.
CAST_GRAPHS = 64


@functools.cache
def _fused_quantize() -> Callable[[torch.Tensor, torch.dtype], tuple[torch.Tensor, torch.Tensor]]:
    """`_quantize` compiled into an amax reduction and one cast kernel (TorchInductor), a graph per shape. Eager
    PyTorch makes six passes over an fp32 temporary; on one H200, casting a 16384 x 11008 bf16 input took 1.86 ms
    eager, 0.70 ms compiled with dynamic shapes and 0.31 ms compiled per shape, where reading and writing it once
    takes 0.21 ms (benchmarks/results/h200-2026-11-26-casts)."""
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, CAST_GRAPHS)
    return torch.compile(_quantize, dynamic=False)


def quantize(t: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(t · s cast to `dtype`, 1/s): s maps the tensor's amax onto the format's largest finite value. Fused on a
    GPU, as torchao's casts are under torch.compile (torchtitan compiles its float8 linears); eager on CPU, where
    the worker rehearses layouts and TorchInductor would need a C++ toolchain. Never differentiated: the autograd
    Function below owns the gradients, so the cast runs without grad mode (one graph whoever calls it)."""
    with torch.no_grad():
        return (_fused_quantize() if t.is_cuda or FUSED_ON_CPU else _quantize)(t.detach(), dtype)


def _column_major(t: torch.Tensor) -> torch.Tensor:
    """The same matrix stored column by column: the layout a second fp8 GEMM operand needs."""
    return t.t().contiguous().t()


class _Float8Matmul(torch.autograd.Function):
    """y = x @ weightᵀ with all three GEMMs in fp8; x is (tokens, in), weight (out, in)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        xq, x_inv = quantize(x, E4M3)
        wq, w_inv = quantize(weight, E4M3)
        ctx.save_for_backward(x, weight)
        return torch._scaled_mm(xq, wq.t(), scale_a=x_inv, scale_b=w_inv, out_dtype=x.dtype)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, weight = ctx.saved_tensors
        gq, g_inv = quantize(grad_out.contiguous(), E5M2)
        wq, w_inv = quantize(weight, E4M3)
        grad_x = torch._scaled_mm(gq, _column_major(wq), scale_a=g_inv, scale_b=w_inv, out_dtype=grad_out.dtype)
        xq, x_inv = quantize(x, E4M3)
        grad_w = torch._scaled_mm(
            gq.t().contiguous(), _column_major(xq), scale_a=g_inv, scale_b=x_inv, out_dtype=weight.dtype
        )
        return grad_x, grad_w


class Float8Linear(nn.Linear):
    """An nn.Linear whose GEMMs run in per-tensor dynamic fp8; same parameters and names as the module it
    replaces. Under autocast the input is cast to the autocast dtype first, as F.linear would cast it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        device = x.device.type
        if torch.is_autocast_enabled(device):
            x = x.to(torch.get_autocast_dtype(device))
        with torch.autocast(device, enabled=False):
            y = _Float8Matmul.apply(x.reshape(-1, x.shape[-1]), self.weight)
            y = y.reshape(*x.shape[:-1], y.shape[-1])
            return y if self.bias is None else y + self.bias.to(y.dtype)


def convert_to_float8(model: nn.Module) -> int:
    """Turn every nn.Linear under the model's transformer layers (``model.layers``) into a Float8Linear, in place
    (parameters, names and initial values unchanged); returns how many were converted."""
    converted = 0
    for module in model.layers.modules():  # type: ignore[union-attr]
        if type(module) is nn.Linear:
            module.__class__ = Float8Linear
            converted += 1
    return converted
