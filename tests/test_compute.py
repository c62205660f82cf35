"""FLOPs and compute time (planner.compute)."""

from __future__ import annotations

import warnings

import pytest
from helpers import make_engine, make_hw
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.cost.compute import layer_time, stage_compute
from planner.cost.flops import (
    flops_per_token_forward,
    hardware_flops_per_step,
    layer_flops_per_token,
    model_flops_per_step,
)
from planner.plan import Plan
from planner.specs import ModelSpec, MoESpec

GPT3 = ModelSpec(
    name="gpt3-175b",
    num_layers=96,
    hidden_size=12288,
    num_attention_heads=96,
    ffn_hidden_size=4 * 12288,
    vocab_size=51200,
    max_seq_len=2048,
    linear_bias=False,
)
LLAMA_8B = ModelSpec(
    name="llama3-8b",
    num_layers=32,
    hidden_size=4096,
    num_attention_heads=32,
    num_kv_heads=8,
    ffn_hidden_size=14336,
    mlp="swiglu",
    vocab_size=128256,
    max_seq_len=8192,
    tied_embeddings=False,
    position_embedding="rope",
    norm="rmsnorm",
)
MIXTRAL = ModelSpec(
    name="mixtral",
    num_layers=32,
    hidden_size=4096,
    num_attention_heads=32,
    num_kv_heads=8,
    ffn_hidden_size=14336,
    mlp="swiglu",
    vocab_size=32000,
    max_seq_len=4096,
    tied_embeddings=False,
    position_embedding="rope",
    norm="rmsnorm",
    moe=MoESpec(num_experts=8, top_k=2, expert_ffn_hidden_size=14336),
)


def megatron_flops(b: int, s: int, l: int, h: int, v: int, factor: int) -> float:
    """Narayanan et al. 2021, Sec. 5.1 (Eq. 3): factor·B·s·l·h²·(1 + s/6h + V/16lh)."""
    return factor * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))


def test_gpt3_full_recompute_matches_megatron_formula():
    """GPT-3 175B, B = 1536, s = 2048, V = 51200 (Narayanan 2021 Sec. 5.1): 96·B·s·l·h²(...) within 1%."""
    plan = Plan(tp=8, pp=16, dp=8, micro_batch=1, global_batch=1536, seq_len=2048, recompute="full")
    ours = hardware_flops_per_step(GPT3, plan, make_engine())
    assert ours == pytest.approx(megatron_flops(1536, 2048, 96, 12288, 51200, 96), rel=0.01)


def test_gpt3_model_flops_match_72_formula():
    plan = Plan(tp=8, pp=16, dp=8, micro_batch=1, global_batch=1536, seq_len=2048)
    ours = model_flops_per_step(GPT3, plan)
    assert ours == pytest.approx(megatron_flops(1536, 2048, 96, 12288, 51200, 72), rel=0.01)
    assert hardware_flops_per_step(GPT3, plan, make_engine()) == ours  # no recompute: HFU = MFU


def test_dense_layer_flops_are_twice_the_weights_plus_attention():
    """Without biases every weight is used once per token in one GEMM: 2·params + 4·s·q."""
    s = 4096
    f = layer_flops_per_token(LLAMA_8B, s, moe=False)
    weights = LLAMA_8B.dense_layer_params - 2 * LLAMA_8B.norm_params
    assert f.total - f.attention_core_flops == pytest.approx(2 * weights)
    assert f.attention_core_flops == 4 * s * 4096


def test_moe_active_flops_below_total_params_flops():
    f = flops_per_token_forward(MIXTRAL, 4096)
    dense_part = f.total - f.attention_core_flops
    assert dense_part < 2 * MIXTRAL.num_params
    assert dense_part == pytest.approx(2 * MIXTRAL.num_active_params, rel=0.02)
    assert f.router_flops == 32 * 2 * 4096 * 8


def test_recompute_time_policies():
    hw, tr = make_hw(), make_engine(selective_recompute="attention")
    base = {"tp": 8, "micro_batch": 4, "global_batch": 4, "seq_len": 2048}
    none = layer_time(GPT3, hw, Plan(**base), tr)
    full = layer_time(GPT3, hw, Plan(**base, recompute="full"), tr)
    sel = layer_time(GPT3, hw, Plan(**base, recompute="selective"), tr)
    assert none.recompute_s == 0
    assert full.recompute_s == pytest.approx(full.forward_s)
    assert 0 < sel.recompute_s < full.recompute_s
    assert full.backward_s == none.backward_s


def test_fp8_runs_gemms_faster_but_not_twice_as_fast_overall():
    hw, tr = make_hw(), make_engine()
    plan = {"micro_batch": 2, "global_batch": 16, "dp": 8, "seq_len": 8192}
    bf16 = stage_compute(LLAMA_8B, hw, Plan(**plan), tr, 0)
    fp8 = stage_compute(LLAMA_8B, hw, Plan(**plan, precision="fp8"), tr, 0)
    assert fp8.total < bf16.total
    assert fp8.total > bf16.total / 2  # attention core and memory-bound work stay at bf16


def test_first_and_last_stage_carry_embedding_and_logits():
    hw, tr = make_hw(), make_engine()
    plan = Plan(pp=4, dp=1, micro_batch=1, global_batch=8, seq_len=2048)
    first, mid, last = (stage_compute(GPT3, hw, plan, tr, r) for r in (0, 1, 3))
    assert mid.head_forward_s == 0
    assert last.head_forward_s > first.head_forward_s > 0


@settings(max_examples=30, deadline=None)
@given(tp=st.sampled_from([1, 2, 4, 8]), b=st.integers(1, 8))
def test_compute_time_scales_with_work(tp, b):
    """More tokens per GPU never take less time; more tp never takes more per-GPU GEMM time."""
    hw, tr = make_hw(), make_engine()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t1 = layer_time(GPT3, hw, Plan(tp=tp, micro_batch=b, global_batch=b), tr)
        t2 = layer_time(GPT3, hw, Plan(tp=tp, micro_batch=b + 1, global_batch=b + 1), tr)
    assert t2.total >= t1.total
    if tp < 8:
        t3 = layer_time(GPT3, hw, Plan(tp=2 * tp, micro_batch=b, global_batch=b), tr)
        assert t3.gemm_forward_s <= t1.gemm_forward_s
