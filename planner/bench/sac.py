"""The host cost of one op through op-level selective checkpointing's dispatch modes (hardware
efficiency.sac_op_overhead_s; cost/sac_host.py), timed on this CPU: a training step of a small stack of blocks,
each checkpointed under torch's SAC with a policy that saves nothing (so it recomputes exactly what plain checkpointing
does), against the same step under plain checkpointing; the difference over twice the ops the policy sees in the
forward (the forward under the caching mode, the recompute under the cached one). Each block holds about as many ops
as the worker's layer (72 against its 38-113), since each checkpointed region also costs a fixed setup: blocks of 6
ops measured 28-38 µs an op where the worker's tiny layers measure 15-19 (benchmarks/sac_ops.py); these blocks gave
15-17 µs on the 2-core AVX-512/AMX box (2026-11-28). torch is imported inside."""

from __future__ import annotations

from typing import Any

from planner.bench.dtensor import fastest_s

HIDDEN = 64  # tiny widths: the kernels cost little, so the step's difference is the dispatch
BLOCKS = 4
DEPTH = 24  # linear + GELU pairs a block: 72 ops through the policy (t, mm, gelu)
TOKENS = 128
NOISE_SHARE = 0.1  # a SAC step within this share of the plain step is not read as dispatch (a loaded box)


def sac_op_s() -> dict[str, Any]:
    """{"ops", "plain_step_s", "sac_step_s", "op_s", "why"}: the ops one forward passes through the SAC policy and
    the host time of each; where the difference is within the noise, op_s is 0 and `why` says so."""
    import torch
    from torch import nn
    from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

    calls = [0]

    def context():
        def recompute_all(ctx, op, *args, **kwargs):
            calls[0] += not ctx.is_recompute
            return CheckpointPolicy.PREFER_RECOMPUTE

        return create_selective_checkpoint_contexts(recompute_all)

    torch.manual_seed(1)
    pairs = [(nn.Linear(HIDDEN, HIDDEN, bias=False), nn.GELU()) for _ in range(BLOCKS * DEPTH)]
    blocks = [nn.Sequential(*[m for p in pairs[i * DEPTH : (i + 1) * DEPTH] for m in p]) for i in range(BLOCKS)]
    blocks = [b.to(torch.bfloat16) for b in blocks]
    x0 = torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16)

    def step(sac: bool) -> None:
        x = x0
        for b in blocks:
            x = x + (
                checkpoint(b, x, use_reentrant=False, context_fn=context)
                if sac
                else checkpoint(b, x, use_reentrant=False)
            )
        x.float().pow(2).mean().backward()

    step(True)
    calls[0] = 0
    step(True)
    ops = calls[0]
    plain_s, sac_s = fastest_s(lambda: step(False)), fastest_s(lambda: step(True))
    out = {"ops": ops, "plain_step_s": plain_s, "sac_step_s": sac_s}
    if sac_s - plain_s <= NOISE_SHARE * plain_s:
        why = f"the SAC step ({sac_s * 1e3:.2f} ms) is within the plain step's noise ({plain_s * 1e3:.2f} ms)"
        return {**out, "op_s": 0.0, "why": why}
    return {**out, "op_s": (sac_s - plain_s) / (2 * ops), "why": None}
