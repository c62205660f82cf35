"""Apply a plan to the GPT with PyTorch's own building blocks, in torchtitan's order: TP → AC → FSDP/DDP (torch).

ZeRO stages map onto what PyTorch composes (FSDP2 has no optimizer-only mode):

=====  ==================================================================================
zero   what runs
=====  ==================================================================================
0      DDP over the dp group (1-D data parallel, at most one pipeline stage per rank);
       with TP or several stages per rank, FSDP2 with ``reshard_after_forward=False`` —
       DDP cannot wrap DTensor parameters, and DDP + multi-stage PP fails in the reducer
       (torch_cpu_notes.md row 6e). The losses are the same; only memory differs.
1, 2   FSDP2 ``fully_shard(reshard_after_forward=False)``: gradients and optimizer state are
       sharded, weights stay gathered between forward and backward (ZeRO-2; also used for 1).
3      FSDP2 ``fully_shard(reshard_after_forward=True)``: weights sharded too (ZeRO-3).
=====  ==================================================================================

Context parallelism (cp > 1, CUDA only) joins the data-parallel group: every cp rank computes the loss of
its slice of the sequences, so gradients are averaged over the flattened dp×cp mesh, as torchtitan does
(``mesh[("dp", "cp")]._flatten("dp_cp")``). That group is FSDP2 even for zero 0 and dp 1, as in torchtitan.

Zero-bubble schedules with FSDP2 resharding give silently wrong losses on torch 2.13 (notes row 6d), so
``reshard_after_forward`` is forced off for them.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    PrepareModuleOutput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

from planner.launch.model import GPT

ZERO_BUBBLE = ("interleaved_zb", "zbv", "dualpipev")


def apply_tp(model: GPT, mesh: DeviceMesh, *, sp: bool) -> None:
    """Megatron column/row splits; with sp the norms and residual stream are sharded on the sequence."""
    seq = Shard(1) if sp else Replicate()
    if model.embed is not None:
        if model.embed.pos is None:
            parallelize_module(model.embed, mesh, {"tok": RowwiseParallel(input_layouts=Replicate(), output_layouts=seq)})
        else:  # learned positions are added on the full sequence, then the result is split (a local slice)
            parallelize_module(model.embed, mesh, {"tok": RowwiseParallel(input_layouts=Replicate(),
                                                                          output_layouts=Replicate())})
            if sp:
                parallelize_module(model, mesh, {"embed": PrepareModuleOutput(
                    output_layouts=Replicate(), desired_output_layouts=Shard(1))})
    if model.output is not None:
        plan = {"output": ColwiseParallel(input_layouts=seq, output_layouts=Replicate())}
        if sp:
            plan["norm"] = SequenceParallel()
        parallelize_module(model, mesh, plan)
    for block in model.layers.values():
        plan = {
            "attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(), "attention.wv": ColwiseParallel(),
            "attention.wo": RowwiseParallel(output_layouts=seq),
            "feed_forward.w1": ColwiseParallel(), "feed_forward.w2": RowwiseParallel(output_layouts=seq),
        }
        if block.feed_forward.w3 is not None:
            plan["feed_forward.w3"] = ColwiseParallel()
        if sp:
            gather = PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),))
            plan.update({"attention_norm": SequenceParallel(), "ffn_norm": SequenceParallel(),
                         "attention": gather, "feed_forward": gather})
        parallelize_module(block, mesh, plan)


# Selective recompute keeps matmul and attention outputs and recomputes the cheap elementwise ops
# (torchtitan's op-level SAC; Korthikanti et al. 2022 keep the matmuls and drop attention internals).
_SAVE_OPS = {
    torch.ops.aten.mm.default, torch.ops.aten.addmm.default,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
    torch.ops.aten._scaled_dot_product_efficient_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention.default,
}


def _sac_policy(ctx, op, *args, **kwargs):  # noqa: ANN001 (torch callback signature)
    from torch.utils.checkpoint import CheckpointPolicy

    return CheckpointPolicy.MUST_SAVE if op in _SAVE_OPS else CheckpointPolicy.PREFER_RECOMPUTE


def apply_ac(model: GPT, *, mode: str) -> None:
    """full: recompute each block; selective: op-level SAC per block; none: nothing."""
    if mode == "none":
        return
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    kw = {} if mode == "full" else {"context_fn": partial(create_selective_checkpoint_contexts, _sac_policy)}
    for name in list(model.layers.keys()):
        model.layers[name] = checkpoint_wrapper(model.layers[name], checkpoint_impl=CheckpointImpl.NO_REENTRANT, **kw)


def mp_dtype(precision: str) -> torch.dtype | None:
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)


def apply_fsdp(model: GPT, mesh: DeviceMesh, *, reshard: bool, precision: str) -> None:
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    dtype = mp_dtype(precision)
    mp = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32) if dtype else MixedPrecisionPolicy()
    for block in model.layers.values():
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard, mp_policy=mp)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard, mp_policy=mp)


def data_parallel_kind(*, dp: int, tp: int, zero: int, stages_per_rank: int, cp: int = 1) -> str:
    """'none', 'ddp', 'fsdp-noreshard' or 'fsdp' (the table in the module docstring); cp counts as dp."""
    if dp * cp == 1:
        return "none"
    if zero == 3:
        return "fsdp"
    if zero in (1, 2) or tp > 1 or stages_per_rank > 1 or cp > 1:
        return "fsdp-noreshard"
    return "ddp"


def data_parallel_mesh(mesh: DeviceMesh, *, cp: int) -> DeviceMesh:
    """The mesh gradients are averaged over: dp, or dp×cp flattened into one dimension when cp > 1.

    Call once per process and keep the result (torch deprecates slicing a flattened dim from the root).
    """
    if cp == 1:
        return mesh["dp"]
    return mesh[("dp", "cp")]._flatten("dp_cp")


def parallelize(model: GPT, mesh: DeviceMesh, *, plan, kind: str, schedule: str = "",  # noqa: ANN001
                dp_mesh: DeviceMesh | None = None, materialize: Callable[[nn.Module], None] | None = None) -> nn.Module:
    """TP → AC → FSDP → materialize → DDP on one model (or one pipeline stage). Returns the module to train.

    dp_mesh: the gradient-averaging mesh from ``data_parallel_mesh`` (default ``mesh["dp"]``).
    materialize: called once the parameters are sharded, for a model built on the meta device (allocate
    and fill this rank's shards); DDP wraps after it, since DDP broadcasts real weights.
    """
    if plan.tp > 1:
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

        return DistributedDataParallel(model, process_group=dp_mesh.get_group())
    return model


def uses_autocast(kind: str, precision: str) -> bool:
    """FSDP2 casts parameters itself (MixedPrecisionPolicy); everything else runs under autocast."""
    return mp_dtype(precision) is not None and kind not in ("fsdp", "fsdp-noreshard")
