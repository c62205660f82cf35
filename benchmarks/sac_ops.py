"""Count the ops op-level selective checkpointing passes through its policy, and time their host cost
(cost/sac_host.py's figures, hardware efficiency.sac_op_overhead_s).

    python benchmarks/sac_ops.py [--model tiny] [--steps 40]

One process, no process group: the worker's model (launch/model.py) with its activation checkpointing
(launch/parallelize.py apply_ac). It first counts the policy's calls over one forward of one layer for each variant
of the worker's layer (norm, MLP, positions, grouped-query attention, 16-bit weights or fp32 under autocast) and
prints them beside cost/sac_host.py's count, then times the model's step under op-level SAC and under full
recompute, fastest of --steps each, and prints the difference over twice the forward's policy calls (the forward
under the caching mode, the recompute under the cached one): the host cost of one op through SAC's modes. Full
recompute runs the same ops again without the modes; the GEMMs SAC does not recompute make the figure slightly low.
"""

from __future__ import annotations

import argparse
import itertools
import time

import torch
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper

import planner.launch.parallelize as parallelize
from planner.cost.sac_host import forward_ops
from planner.io.catalog import load_model
from planner.launch.model import GPT, Block, cross_entropy
from planner.layers import LayerKind
from planner.specs import ModelSpec

LAYER = LayerKind("attention", "dense", "global")
CALLS = [0]


def _counted_context():
    """parallelize's SAC contexts, with the forward's policy calls counted in CALLS."""
    forward, recompute = _ORIGINAL()
    policy = forward.policy_fn

    def counting(ctx, op, *args, **kwargs):
        CALLS[0] += 1
        return policy(ctx, op, *args, **kwargs)

    forward.policy_fn = counting
    return forward, recompute


_ORIGINAL = parallelize._op_sac_context


def layer_calls(spec: ModelSpec, *, autocast: bool) -> int:
    """The policy's calls over one forward of one layer of `spec` (fp32 weights under autocast, else bf16)."""
    block = Block(spec) if autocast else Block(spec).to(torch.bfloat16)
    block = checkpoint_wrapper(block, checkpoint_impl=CheckpointImpl.NO_REENTRANT, context_fn=_counted_context)
    x = torch.randn(1, 16, spec.hidden_size, dtype=torch.float32 if autocast else torch.bfloat16, requires_grad=True)
    CALLS[0] = 0
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        block(x)
    return CALLS[0]


def variants() -> list[tuple[str, ModelSpec]]:
    """Every variant of the worker's layer that the count separates."""
    out = []
    axes = (("rmsnorm", "layernorm"), ("swiglu", "gelu"), ("rope", "learned"), (4, 2))
    for norm, mlp, pos, kv in itertools.product(*axes):
        spec = ModelSpec(name="layer", num_layers=1, hidden_size=64, num_attention_heads=4, num_kv_heads=kv,
                         ffn_hidden_size=256, mlp=mlp, vocab_size=128, max_seq_len=64, position_embedding=pos,
                         norm=norm)  # fmt: skip
        out.append((f"{norm} {mlp} {pos} kv{kv}", spec))
    return out


def step_s(spec: ModelSpec, recompute: str, steps: int) -> float:
    """The fastest of `steps` training steps (bf16 weights, micro-batch 2 of 128 tokens) under `recompute`."""
    torch.manual_seed(0)
    model = GPT(spec).to(torch.bfloat16)
    parallelize.apply_ac(model, mode=recompute)
    x = torch.randint(0, spec.vocab_size, (2, 128))
    times = []
    for _ in range(steps + 3):
        start = time.perf_counter()
        cross_entropy(model(x), x).backward()
        times.append(time.perf_counter() - start)
    return min(times[3:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--steps", type=int, default=40)
    args = ap.parse_args()
    torch.set_num_threads(1)  # as launch runs each rank
    parallelize._op_sac_context = _counted_context
    print("policy calls over one layer's forward (16-bit weights, autocast) against cost/sac_host.py's count:")
    for name, spec in variants():
        bf16, cast = layer_calls(spec, autocast=False), layer_calls(spec, autocast=True)
        print(f"  {name:30s} {bf16:4d} {cast:4d}   model {forward_ops(spec, LAYER)}")
    spec = load_model(args.model)
    calls = spec.num_layers * layer_calls(spec, autocast=False)
    full, sac = step_s(spec, "full", args.steps), step_s(spec, "selective", args.steps)
    print(f"{args.model}: full recompute {full * 1e3:.2f} ms, op-level SAC {sac * 1e3:.2f} ms a step; "
          f"{calls} policy calls a forward -> {(sac - full) / (2 * calls) * 1e6:.1f} us an op")  # fmt: skip


if __name__ == "__main__":
    main()
