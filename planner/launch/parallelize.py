"""Apply a plan to the GPT with PyTorch's own building blocks, in torchtitan's order: TP → AC → FSDP/DDP (torch).

How each ZeRO stage runs is the engine profile's (engine_profiles/planner.yaml, read by
``data_parallel_kind``): DDP for zero 0 (1-D data parallelism only: DDP cannot wrap DTensor parameters, and
DDP + several stages per rank fails in the reducer, torch_cpu_notes.md row 6e); FSDP2
``fully_shard(reshard_after_forward=False)`` for zero 1 and 2 (FSDP2 has no optimizer-only mode); FSDP2
``fully_shard(reshard_after_forward=True)`` for zero 3.

Context parallelism (cp > 1, CUDA only) joins the data-parallel group: every cp rank computes the loss of
its slice of the sequences, so gradients are averaged over the flattened dp×cp mesh, as torchtitan does
(``mesh[("dp", "cp")]._flatten("dp_cp")``). That group is FSDP2 even for zero 0 and dp 1, as in torchtitan.

Zero-bubble schedules with FSDP2 resharding give silently wrong losses on torch 2.13 (notes row 6d), so
``reshard_after_forward`` is forced off for them.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh

from planner.engine import ZeroStage
from planner.launch.float8 import convert_to_float8
from planner.launch.measured import count_kept
from planner.launch.model import GPT
from planner.launch.worker_support import FP8

ZERO_BUBBLE = ("interleaved_zb", "zbv", "dualpipev")


# Selective recompute ("op" policy, engine kernels.selective_recompute): keep the attention output and the
# 1st, 3rd, 5th ... matmul output of each layer, recompute the other matmuls and the elementwise ops. This is
# torchtitan's per-op rule (torchtitan/distributed/activation_checkpoint.py, `_op_sac_save_list` and its
# "every second mm" counter), the one cost.activations prices.
_MATMULS = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten._scaled_mm.default}
_ATTENTION = {
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
    torch.ops.aten._scaled_dot_product_efficient_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention.default,
}


def _op_sac_context():
    """A fresh pair of selective-checkpoint contexts for one layer call, counting its matmuls separately in
    the forward and in the recompute (both must choose the same outputs)."""
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    counts = {False: 0, True: 0}

    def policy(ctx, op, *args, **kwargs):
        if op in _MATMULS:
            counts[ctx.is_recompute] += 1
            keep = counts[ctx.is_recompute] % 2 == 1
        else:
            keep = op in _ATTENTION
        if keep and not ctx.is_recompute:  # held by the checkpoint, where the activation hooks cannot see it
            count_kept(getattr(ctx, "op_output", None))
        return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


def apply_ac(model: GPT, *, mode: str) -> None:
    """full: recompute each block; selective: op-level SAC per block; none: nothing."""
    if mode == "none":
        return
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper

    kw = {} if mode == "full" else {"context_fn": _op_sac_context}
    for name in list(model.layers.keys()):
        model.layers[name] = checkpoint_wrapper(model.layers[name], checkpoint_impl=CheckpointImpl.NO_REENTRANT, **kw)


def mp_dtype(precision: str) -> torch.dtype | None:
    """The 16-bit dtype the plan computes in; fp8 plans run their other ops in bf16 (launch/float8.py)."""
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.bfloat16 if precision in FP8 else None)


def apply_fsdp(model: GPT, mesh: DeviceMesh, *, reshard: bool, precision: str) -> None:
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    dtype = mp_dtype(precision)
    mp = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32) if dtype else MixedPrecisionPolicy()
    for block in model.layers.values():
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard, mp_policy=mp)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard, mp_policy=mp)


def data_parallel_kind(stage: ZeroStage, *, dp: int, cp: int = 1) -> str:
    """'none', 'ddp', 'fsdp-noreshard' or 'fsdp': how the engine profile's ZeRO stage runs; cp counts as dp.
    Replicated weights are DDP; sharded ones are FSDP2, resharded after forward when the stage gathers one
    unit at a time, kept gathered until backward when it holds them all."""
    if dp * cp == 1:
        return "none"
    if "weights" not in stage.shards:
        return "ddp"
    return "fsdp" if stage.gathered_weights == "unit" else "fsdp-noreshard"


def data_parallel_mesh(mesh: DeviceMesh, *, cp: int) -> DeviceMesh:
    """The mesh gradients are averaged over: dp, or dp×cp flattened into one dimension when cp > 1.

    Call once per process and keep the result (torch deprecates slicing a flattened dim from the root).
    """
    if cp == 1:
        return mesh["dp"]
    return mesh[("dp", "cp")]._flatten("dp_cp")


def parallelize(
    model: GPT,
    mesh: DeviceMesh,
    *,
    plan,
    kind: str,
    schedule: str = "",
    dp_mesh: DeviceMesh | None = None,
    materialize: Callable[[nn.Module], None] | None = None,
) -> nn.Module:
    """fp8 → TP → AC → FSDP → materialize → DDP on one model (or one pipeline stage). Returns the module to train.

    dp_mesh: the gradient-averaging mesh from ``data_parallel_mesh`` (default ``mesh["dp"]``).
    materialize: called once the parameters are sharded, for a model built on the meta device (allocate
    and fill this rank's shards); DDP wraps after it, since DDP broadcasts real weights.
    """
    if plan.precision in FP8:
        convert_to_float8(model)
    if plan.tp > 1:
        from planner.launch.tensor_parallel import apply_tp  # DTensor: 0.7 s of a worker's start, for TP only

        apply_tp(model, mesh["tp"], sp=plan.sp)
    apply_ac(model, mode=plan.recompute)
    dp_mesh = mesh["dp"] if dp_mesh is None else dp_mesh
    if kind in ("fsdp", "fsdp-noreshard"):
        reshard = kind == "fsdp" and schedule not in ZERO_BUBBLE
        apply_fsdp(model, dp_mesh, reshard=reshard, precision=plan.precision)
    if materialize is not None:
        materialize(model)
    if kind == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        # the gradients are views into DDP's buckets, not a second copy of them: one gradient buffer, as Megatron's
        # contiguous grad buffer keeps it and as the planner prices zero 0 (torch DistributedDataParallel docs,
        # gradient_as_bucket_view); measured on 2 CPU workers, gpt3-125m at 8 layers: 0.36 GiB less each
        # every rank drew the same initial values (model.initial_value), so DDP's first broadcast, in 250 MB
        # flattened buckets that count in each worker's peak, has nothing to bring (init_sync)
        return DistributedDataParallel(
            model, process_group=dp_mesh.get_group(), gradient_as_bucket_view=True, init_sync=False
        )
    return model


def uses_autocast(kind: str, precision: str) -> bool:
    """FSDP2 casts parameters itself (MixedPrecisionPolicy); everything else runs under autocast."""
    return mp_dtype(precision) is not None and kind not in ("fsdp", "fsdp-noreshard")
