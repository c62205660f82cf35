"""Host time of op-level selective activation checkpointing (SAC), where the step waits on the host (CPU runs; 0 on
GPUs, where the dispatch runs ahead of the kernels).

torch's SAC (torch/utils/checkpoint.py `create_selective_checkpoint_contexts`) runs a checkpointed layer's forward
under a TorchDispatchMode that calls the policy for every aten op and stores the outputs it keeps
(`_CachingTorchDispatchMode`), and its recompute under another that answers the kept ones from that store
(`_CachedTorchDispatchMode`): every op of the layer's forward passes through Python twice. On a 2-core AVX-512/AMX box
that costs 17-19 µs an op each time (benchmarks/sac_ops.py, four runs: a tiny-model step with op-level SAC against
full recompute, 52-53 ms against 37-38 ms, over twice the forward's 420 ops), the efficiency block's
`sac_op_overhead_s`.

The op counts are measured, not derived: the policy's calls over one forward of the worker's layer
(launch/model.py Block) under torch 2.13, counted for each of its variants (benchmarks/sac_ops.py prints them,
tests/test_sac_ops.py holds this formula to them). A LayerNorm, GELU, learned-position, multi-head layer on 16-bit
weights dispatches 38 ops; RoPE adds 24 on each of q and k, grouped-query attention's repeat of k and v 8, a SwiGLU
MLP 5 (a third linear, SiLU and the product), each RMSNorm 7 more than LayerNorm's one fused op. Under torch.autocast
(fp32 weights: the worker's DDP, engine ZeroStage.autocast) each linear's weight cast adds 1 and each bias's 1, each
LayerNorm 2 (its input and output kept fp32) and a SwiGLU product 1: 6-14 more a layer, not counted here, since a
layer's time is keyed by its shapes and not by the ZeRO stage that decides autocast (cost/keys.py LAYER); on the
tiny model that leaves out about 2 ms of a 35-75 ms CPU step.
"""

from __future__ import annotations

from planner.engine import Kernels
from planner.hardware import HardwareProfile
from planner.layers import LayerKind
from planner.specs import ModelSpec

BASE_OPS = 38  # LayerNorm, GELU, learned positions, multi-head attention, 16-bit weights
ROPE_OPS = 48  # rotary embedding on q and on k, 24 ops each
GQA_OPS = 8  # repeat_interleave of k and v
SWIGLU_OPS = 5  # a third linear's 4 ops, and the product (SiLU replaces GELU)
RMSNORM_EXTRA_OPS = 7  # per norm: RMSNorm's pieces against LayerNorm's one fused op


def forward_ops(model: ModelSpec, kind: LayerKind) -> int:
    """Aten ops one forward of the layer on 16-bit weights dispatches through the SAC policy (the worker's attention
    and dense-MLP layer; another kind is counted as that layer, which the worker does not build)."""
    swiglu, rms = model.mlp == "swiglu", model.norm == "rmsnorm"
    ops = BASE_OPS + SWIGLU_OPS * swiglu + RMSNORM_EXTRA_OPS * kind.blocks * rms
    return (
        ops + ROPE_OPS * (model.position_embedding == "rope") + GQA_OPS * (model.kv_heads < model.num_attention_heads)
    )


def runs_op_sac(recompute: str, kernels: Kernels) -> bool:
    """Whether the plan's recompute is op-level selective checkpointing (the engine's kernels.selective_recompute)."""
    return recompute == "selective" and kernels.selective_recompute == "op"


def op_s(hw: HardwareProfile, recompute: str, kernels: Kernels) -> float:
    """Host cost of one op through the SAC policy's modes for this plan: 0 but under op-level selective recompute."""
    return hw.efficiency.sac_op_overhead_s if runs_op_sac(recompute, kernels) else 0.0
