"""Tensor (and sequence) parallelism on the GPT with torch's DTensor styles, Megatron's column/row splits as
torchtitan applies them (torchtitan/models/llama3/infra/parallelize.py apply_tp). Its own module: importing
torch.distributed.tensor takes about 0.7 s of a worker's start on a 2-core box, which a run without TP never needs."""

from __future__ import annotations

from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    ParallelStyle,
    PrepareModuleInput,
    PrepareModuleOutput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

from planner.launch.model import GPT, Block


def apply_tp(model: GPT, mesh: DeviceMesh, *, sp: bool) -> None:
    """Megatron column/row splits; with sp the norms and residual stream are sharded on the sequence."""
    seq = Shard(1) if sp else Replicate()
    if model.embed is not None:
        if model.embed.pos is None:
            parallelize_module(
                model.embed, mesh, {"tok": RowwiseParallel(input_layouts=Replicate(), output_layouts=seq)}
            )
        else:  # learned positions are added on the full sequence, then the result is split (a local slice)
            parallelize_module(
                model.embed, mesh, {"tok": RowwiseParallel(input_layouts=Replicate(), output_layouts=Replicate())}
            )
            if sp:
                parallelize_module(
                    model,
                    mesh,
                    {"embed": PrepareModuleOutput(output_layouts=Replicate(), desired_output_layouts=Shard(1))},
                )
    if model.output is not None:
        plan: dict[str, ParallelStyle] = {"output": ColwiseParallel(input_layouts=seq, output_layouts=Replicate())}
        if sp:
            plan["norm"] = SequenceParallel()
        parallelize_module(model, mesh, plan)
    for block in model.layers.values():
        assert isinstance(block, Block)
        plan = {
            "attention.wq": ColwiseParallel(),
            "attention.wk": ColwiseParallel(),
            "attention.wv": ColwiseParallel(),
            "attention.wo": RowwiseParallel(output_layouts=seq),
            "feed_forward.w1": ColwiseParallel(),
            "feed_forward.w2": RowwiseParallel(output_layouts=seq),
        }
        if block.feed_forward.w3 is not None:
            plan["feed_forward.w3"] = ColwiseParallel()
        if sp:
            gather = PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),))
            plan.update(
                {
                    "attention_norm": SequenceParallel(),
                    "ffn_norm": SequenceParallel(),
                    "attention": gather,
                    "feed_forward": gather,
                }
            )
        parallelize_module(block, mesh, plan)
