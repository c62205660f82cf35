"""The worker's fp8 linears (planner/launch/float8.py) and what the launcher checks before it runs them.

On CPU torch._scaled_mm runs the same fp8 arithmetic as on a GPU, so the numerics are checked here: each GEMM is
the exact product of the quantized operands (against float64 on the dequantized values), and it is not the bf16
product (the fp8 rounding shows). The speed is measured on a GPU only (benchmarks/gpu_float8.py,
benchmarks/results/h200-2026-11-26-fp8).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from planner.launch.float8 import E4M3, E5M2, Float8Linear, convert_to_float8, quantize  # noqa: E402
from planner.launch.model import GPT  # noqa: E402
from planner.launch.worker_support import fp8_problems  # noqa: E402
from planner.plan import Plan  # noqa: E402
from planner.specs import ModelSpec  # noqa: E402
from tests.launch.conftest import COMMON, TINY, max_delta, torchrun  # noqa: E402


def _dequantized(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    q, inverse = quantize(t, dtype)
    return q.double() * inverse.double()


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def test_quantize_maps_the_amax_onto_the_format_and_zeros_to_zeros():
    t = torch.randn(64, 32) * 1e-3
    q, inverse = quantize(t, E4M3)
    assert q.dtype == E4M3 and q.shape == t.shape
    assert q.float().abs().max().item() == torch.finfo(E4M3).max  # the amax lands on 448
    assert _rel(q.double() * inverse.double(), t) < 0.05  # 3 mantissa bits: ~2-4% per element
    zeros, _ = quantize(torch.zeros(16, 16), E5M2)
    assert not zeros.float().isnan().any() and zeros.float().abs().sum().item() == 0


def test_each_gemm_is_the_product_of_the_quantized_operands():
    torch.manual_seed(0)
    layer = Float8Linear(64, 48, bias=True)
    x = torch.randn(32, 64, dtype=torch.bfloat16, requires_grad=True)
    y = layer(x)
    grad = torch.randn_like(y)
    y.backward(grad)
    xd, wd, gd = _dequantized(x.detach(), E4M3), _dequantized(layer.weight.detach(), E4M3), _dequantized(grad, E5M2)
    assert _rel(y - layer.bias.to(y.dtype), xd @ wd.t()) < 1e-2  # bf16 output rounding only
    assert _rel(x.grad, gd @ wd) < 1e-2
    assert _rel(layer.weight.grad, gd.t() @ xd) < 1e-3  # fp32 weight gradient
    exact = x.detach().double() @ layer.weight.detach().double().t()
    assert _rel(y - layer.bias.to(y.dtype), exact) > 5e-3  # fp8 rounding is there: not a bf16 GEMM


def test_autocast_casts_the_input_as_a_linear_would():
    layer = Float8Linear(32, 32, bias=False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = layer(torch.randn(2, 16, 32))
    assert y.dtype == torch.bfloat16 and y.shape == (2, 16, 32)


def test_only_the_layers_linears_are_converted_and_names_are_kept():
    model = GPT(ModelSpec(**TINY))
    names = [n for n, _ in model.named_parameters()]
    converted = convert_to_float8(model)
    assert converted == 7 * TINY["num_layers"]  # wq wk wv wo, w1 w2 w3 per SwiGLU layer
    assert [n for n, _ in model.named_parameters()] == names
    assert type(model.output) is nn.Linear  # the output layer stays 16-bit
    assert all(type(m) is Float8Linear for m in model.layers.modules() if isinstance(m, nn.Linear))


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"precision": "bf16", "tp": 2}, None),
        ({"tp": 2}, "tp=2"),
        ({"precision": "fp8-blockwise"}, "only as per-tensor dynamic scaling"),
        ({"seq_len": 2056}, "micro_batch x seq_len / cp=2056"),
    ],
)
def test_fp8_plans_the_worker_cannot_run_are_named(changes, expected):
    model = ModelSpec(**{**TINY, "max_seq_len": 4096})
    plan = Plan(**{"precision": "fp8-current", "global_batch": 8, "seq_len": 64, **changes})
    problems = fp8_problems(model, plan, "cuda", (9, 0))
    assert (not problems) if expected is None else any(expected in p for p in problems), problems


def test_fp8_needs_compute_capability_8_9():
    plan = Plan(precision="fp8", global_batch=8, seq_len=64)
    assert any(
        "compute capability 8.9+" in p and "8.0" in p for p in fp8_problems(ModelSpec(**TINY), plan, "cuda", (8, 0))
    )
    assert fp8_problems(ModelSpec(**TINY), plan, "cuda", (8, 9)) == []
    assert fp8_problems(ModelSpec(**TINY), plan, "cpu") == []  # torch._scaled_mm runs on CPU at any size


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_worker_trains_in_fp8_close_to_bf16(tiny_path, tmp_path):
    """DDP over 2 ranks with gradient accumulation, fp8 against bf16: the same losses to within fp8's rounding."""
    flags = ["--model", tiny_path, "--steps", "4", "--warmup", "1", "--dp", "2", "--micro-batch", "2"]
    common = [f if f != "fp32" else "bf16" for f in COMMON]
    bf16 = torchrun(2, [*flags, *common], tmp_path / "bf16", timeout_s=90)
    fp8 = torchrun(2, [*flags, *[f if f != "bf16" else "fp8-current" for f in common]], tmp_path / "fp8", timeout_s=90)
    assert bf16.rc == 0 and fp8.rc == 0, (bf16.output[-2000:], fp8.output[-2000:])
    delta = max_delta(fp8.losses(), bf16.losses())
    assert 0 < delta < 2e-2, (fp8.losses(), bf16.losses())  # measured 5e-3 to 7e-3 here
