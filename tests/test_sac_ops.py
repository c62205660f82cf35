"""Op-level selective checkpointing's host cost (cost/sac_host.py): the ops its policy sees in one forward of the
worker's layer, counted live against the model's count, and where the cost is priced (CPU profiles) and not (GPUs).
benchmarks/sac_ops.py prints the same counts and times the per-op cost."""

from __future__ import annotations

import itertools

import pytest
import torch
from helpers import make_engine
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper

from planner.cost.layer_time import layer_time
from planner.cost.sac_host import forward_ops
from planner.io.catalog import load_engine, load_hardware, load_model
from planner.launch import parallelize
from planner.launch.model import Block
from planner.layers import LayerKind
from planner.plan import Plan
from planner.specs import ModelSpec

LAYER = LayerKind("attention", "dense", "global")


def _policy_calls(spec: ModelSpec) -> int:
    """The SAC policy's calls over one forward of one bf16 layer of `spec`, as the worker checkpoints it."""
    calls = [0]

    def counted():
        forward, recompute = parallelize._op_sac_context()
        policy = forward.policy_fn

        def counting(ctx, op, *args, **kwargs):
            calls[0] += 1
            return policy(ctx, op, *args, **kwargs)

        forward.policy_fn = counting
        return forward, recompute

    block = checkpoint_wrapper(Block(spec).to(torch.bfloat16), checkpoint_impl=CheckpointImpl.NO_REENTRANT,
                               context_fn=counted)  # fmt: skip
    block(torch.randn(1, 16, spec.hidden_size, dtype=torch.bfloat16, requires_grad=True))
    return calls[0]


@pytest.mark.parametrize(
    ("norm", "mlp", "pos", "kv"),
    list(itertools.product(("rmsnorm", "layernorm"), ("swiglu", "gelu"), ("rope", "learned"), (4, 2))),
)
def test_the_policy_sees_the_ops_the_model_counts(norm, mlp, pos, kv):
    """Every variant of the worker's layer: the count is exact (torch 2.13 CPU)."""
    spec = ModelSpec(name="layer", num_layers=1, hidden_size=64, num_attention_heads=4, num_kv_heads=kv,
                     ffn_hidden_size=256, mlp=mlp, vocab_size=128, max_seq_len=64, position_embedding=pos,
                     norm=norm)  # fmt: skip
    assert _policy_calls(spec) == forward_ops(spec, LAYER)


def test_sac_dispatch_is_priced_on_cpu_only_and_only_under_op_level_selective():
    """A selective launch on CPU was priced 22 ms against 63-74 ms measured: the SAC modes' Python per op was not
    priced. It adds the forward's ops twice (forward and recompute) at the profile's cost, on the cpu profile; a
    GPU profile (0: hidden behind the kernels), full recompute and Megatron's attention-only policy add nothing."""
    tiny, worker, cpu = load_model("tiny"), load_engine("planner"), load_hardware("cpu")
    plan = Plan(micro_batch=2, global_batch=2, seq_len=128, recompute="selective")
    with_sac = layer_time(tiny, cpu, plan, worker)
    unpriced = cpu.model_copy(update={"efficiency": cpu.efficiency.model_copy(update={"sac_op_overhead_s": 0.0})})
    without = layer_time(tiny, unpriced, plan, worker)
    added = 2 * forward_ops(tiny, LAYER) * cpu.efficiency.sac_op_overhead_s
    assert with_sac.total - without.total == pytest.approx(added, rel=1e-9) and added > 0
    full = plan.model_copy(update={"recompute": "full"})
    assert layer_time(tiny, cpu, full, worker) == layer_time(tiny, unpriced, full, worker)
    attention_only = make_engine(selective_recompute="attention")
    assert layer_time(tiny, cpu, plan, attention_only) == layer_time(tiny, unpriced, plan, attention_only)
    assert load_hardware("h100-sxm").efficiency.sac_op_overhead_s == 0.0
