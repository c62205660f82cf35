"""torchrun helper for test_stage_reduce: the order in which torch's ScheduleInterleaved1F1B runs a rank's chunk
passes, and which of its FSDP2 stages hold unsharded gradients when each backward starts (bf16 parameters, fp32
reduce: FSDPParam's unsharded_accumulated_grad; reshard_after_forward=False, as torchtitan under pipelining).

    torchrun --standalone --nproc-per-node 2 stage_reduce_probe.py OUT_DIR

Writes OUT_DIR/rank{r}.json: {"MICROBATCHES": {"ops": [[is_forward, chunk], ...], "alive": [[chunks], ...] per
backward}} for each micro-batch count of MICROBATCHES.
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.pipelining import PipelineStage, ScheduleInterleaved1F1B

CHUNKS, WIDTH = 2, 16
MICROBATCHES = (2, 4)  # with pp 2: one group of micro-batches, and two


def _holds_gradients(module: nn.Module) -> bool:
    params = fully_shard.state(module)._fsdp_param_group.fsdp_params
    return any(p.unsharded_accumulated_grad is not None or p.unsharded_param.grad is not None for p in params)


def _run(mesh, m: int) -> dict[str, list]:
    pp, rank = mesh["pp"].size(), mesh["pp"].get_local_rank()
    mods, stages, ops, alive = {}, [], [], []
    for chunk in range(CHUNKS):
        torch.manual_seed(chunk)
        mod = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh())
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        fully_shard(mod, mesh=mesh["dp"], reshard_after_forward=False, mp_policy=mp)
        mods[chunk] = mod
        stage = PipelineStage(mod, chunk * pp + rank, CHUNKS * pp, torch.device("cpu"), group=mesh["pp"].get_group())
        forward, backward = stage.forward_one_chunk, stage.backward_one_chunk

        def fwd(*a, _f=forward, _c=chunk, **k):
            ops.append([True, _c])
            return _f(*a, **k)

        def bwd(*a, _b=backward, _c=chunk, **k):
            ops.append([False, _c])
            alive.append([c for c in mods if _holds_gradients(mods[c])])
            return _b(*a, **k)

        stage.forward_one_chunk, stage.backward_one_chunk = fwd, bwd
        stages.append(stage)
    schedule = ScheduleInterleaved1F1B(stages, n_microbatches=m, loss_fn=lambda out, y: ((out.float() - y) ** 2).mean())
    x, y = torch.randn(m, WIDTH), torch.randn(m, WIDTH)
    schedule.step(x) if rank == 0 else schedule.step(target=y, losses=[])
    return {"ops": ops, "alive": alive}


def main() -> None:
    out = Path(sys.argv[1])
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    mesh = init_device_mesh("cpu", (dist.get_world_size(), 1), mesh_dim_names=("pp", "dp"))
    runs = {str(m): _run(mesh, m) for m in MICROBATCHES}
    (out / f"rank{dist.get_rank()}.json").write_text(json.dumps(runs))


if __name__ == "__main__":
    from probe_exit import run_probe_main

    run_probe_main(main)
