"""What one of the worker's layers saves for backward under its DTensor tensor parallelism, counted on two gloo
ranks (tp_probe.py), against the activation model: with sequence parallelism, the column-parallel linears keep the
all-gathered whole-sequence input PrepareModuleInput hands them (engine kernels.tp_gathered_inputs), as torchtitan's
TP plan does; Megatron keeps the sequence shard and gathers it again in backward."""

from __future__ import annotations

import json

import pytest
import torch
from helpers import make_engine

from planner.cost.activations import activation_bytes_per_layer
from tests.launch.conftest import run_probe
from tests.launch.tp_probe import B, S, spec

TP = 2


@pytest.fixture(scope="module")
def counted(tmp_path_factory) -> dict[bool, int]:
    out = tmp_path_factory.mktemp("tp_probe")
    run_probe("tp_probe.py", out, nproc=TP)
    return {sp: json.loads((out / f"tp{int(sp)}.json").read_text())["saved_bytes"] for sp in (False, True)}


def _predicted(sp: bool, gathered: bool) -> float:
    kernels = make_engine(elementwise="eager").kernels.model_copy(update={"tp_gathered_inputs": gathered})
    return activation_bytes_per_layer(
        spec(), micro_batch=B, seq_len=S, tp=TP, sp=sp, act_bytes=torch.float32.itemsize, kernels=kernels
    )


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_dtensor_tp_keeps_the_gathered_inputs_of_column_parallel_linears(counted):
    """Measured on torch 2.13 CPU: within 2% with and without sequence parallelism (the rest is RoPE tables and
    rsqrt stats). Counted as Megatron keeps them (the shards), the sequence-parallel layer is 9% under."""
    for sp in (False, True):
        assert counted[sp] == pytest.approx(_predicted(sp, gathered=True), rel=0.025), sp
    assert _predicted(False, gathered=False) == _predicted(False, gathered=True)  # nothing is gathered without sp
    assert _predicted(True, gathered=False) < 0.93 * counted[True]


def _fp8_inputs_saving(model_name: str, ffn: str, precision: str = "fp8") -> tuple[float, float]:
    """(bytes one layer keeps per micro-batch with torchtitan's tp_fp8_inputs off minus on, the hidden size times
    the sequence): tp 4 with sequence parallelism, 4,096 tokens."""
    from planner.cost.memory import kind_pieces
    from planner.io.catalog import load_engine, load_model
    from planner.layers import LayerKind
    from planner.plan import Plan

    model, titan = load_model(model_name), load_engine("torchtitan")
    kind = LayerKind("attention", ffn, "global")
    plan = Plan(tp=4, dp=1, sp=True, micro_batch=1, global_batch=1, seq_len=4096, precision=precision)
    wide = titan.model_copy(update={"kernels": titan.kernels.model_copy(update={"tp_fp8_inputs": False})})
    keep16, keep = kind_pieces(model, plan, wide, kind)[0], kind_pieces(model, plan, titan, kind)[0]
    return keep16 - keep, float(plan.seq_len * model.hidden_size)


def test_tensorwise_fp8_tp_keeps_the_gathered_inputs_in_fp8():
    """torchtitan's float8 TP (tensorwise) casts the column-parallel input to fp8 before the all-gather and the
    Float8Linear keeps that fp8 tensor: 1 byte per element of the two gathered norm outputs instead of 2."""
    saved, sh = _fp8_inputs_saving("llama3-8b", "dense")
    assert saved == pytest.approx(2 * sh * (2 - 1))
    assert _fp8_inputs_saving("llama3-8b", "dense", "bf16")[0] == 0


def test_tensorwise_fp8_tp_leaves_an_moe_blocks_gathered_input_in_16_bits():
    """The MoE block's input is gathered to Replicate in bf16 for its router and experts (torchtitan's
    apply_moe_ep_tp: PrepareModuleInputOutput, no float8 layout): only the attention block's gathered input,
    ahead of Float8ColwiseParallel wq/wk/wv, is kept in fp8."""
    saved, sh = _fp8_inputs_saving("mixtral-8x7b", "moe")
    assert saved == pytest.approx(sh * (2 - 1))  # norm1's output alone
