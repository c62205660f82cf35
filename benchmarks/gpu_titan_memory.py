"""Per-GPU memory of torchtitan's own Llama at a data-parallel width the machine does not have: one process is rank
0 of a `fake` process group of WORLD ranks (collectives return at once, their buffers allocated as NCCL's would
be), so FSDP2 shards, gathers and reduce-scatters at the real sizes while one GPU holds rank 0's tensors.

    python benchmarks/gpu_titan_memory.py CASE [--device cuda] [--streams]

CASE is NAME:WORLD:LOCAL_BATCH:SEQ:AC[:LAYERS][:KEY=VALUE...], NAME one of the flavours below, AC none | op | full
(torchtitan's activation_checkpoint.mode with selective_ac_option "op" for `op`), with `+compile` for torch.compile
of the model and the loss. KEY=VALUE sets the mesh and the pipeline: pp, tp, cp (1 unless given; the FSDP shard
degree is WORLD over their product), rank (this process's global rank, 0 unless given: under pipelining rank
s x WORLD/pp holds stage s), mb (the pipeline's micro-batch size) and sched (torchtitan's schedule name, 1F1B unless
given). The model, its parallelization, the pipeline split and schedule, the optimizer and the loss are
torchtitan's (0.2.2: models/llama3, parallelize_llama, pipeline_llm, build_optimizers, build_cross_entropy_loss)
with its defaults: bf16 parameters and fp32 reduction under FSDP, fused AdamW, eager model and loss, loss
parallelism under tp. Each step (three unless --steps) is forward, loss, `del pred`, backward, clip, step,
zero_grad as torchtitan's train.py runs them, or its pipeline schedule's step; it prints the peaks torchtitan's
DeviceMemoryMonitor logs (reserved, active) and the allocated peak, per step. The data is garbage (no collective
moves a byte), which changes no tensor's size. A pipeline stage is given the shapes its neighbours would send
(static_metadata), which a fake group cannot carry. Needs torchtitan 0.2.2 and torch 2.11 (its PipelineStage's
`inputs_meta`) with the fake backend; torchtitan imports Hugging Face `datasets` at load, which no case uses. Run it
as torchtitan's run_train.sh does, with PYTORCH_ALLOC_CONF=expandable_segments:True. Step times are compute and
host time alone (no collective waits). Without pipelining the numbers are rank 0's, the rank that holds no more
than any other under FSDP.

With --streams it also reads the allocator's segments after the last step (torch.cuda.memory_snapshot) and sums
them by the stream they belong to, naming FSDP2's own streams: the caching allocator serves a block only to the
stream it was made on (c10/cuda/CUDACachingAllocator.cpp get_free_block: `(*it)->stream != p.stream()` fails the
search), so what FSDP2's all-gather copy-in and reduce-scatter streams allocate (their all-gather outputs and
reduce-scatter inputs) stays reserved beside the compute stream's pool. That is the measurement the planner's
`reserved_bytes` lacks (benchmarks/results/h200-2026-11-27-titan: reserved − allocated 2.1-11.4 GiB).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

# torchtitan's own flavours (models/llama3/__init__.py) and Llama 2 13B's shape (its params.json: dim 5120, 40
# layers, 40 heads, multiple_of 256, vocabulary 32,000).
FLAVOURS: dict[str, dict] = {
    "llama3-8b": {"dim": 4096, "n_layers": 32, "n_heads": 32, "n_kv_heads": 8, "ffn_dim_multiplier": 1.3,
                  "multiple_of": 1024, "rope_theta": 500000},
    "llama3-70b": {"dim": 8192, "n_layers": 80, "n_heads": 64, "n_kv_heads": 8, "ffn_dim_multiplier": 1.3,
                   "multiple_of": 4096, "rope_theta": 500000},
    "llama3-405b": {"dim": 16384, "n_layers": 126, "n_heads": 128, "n_kv_heads": 8, "ffn_dim_multiplier": 1.2,
                    "multiple_of": 4096, "rope_theta": 500000},
    "llama2-13b": {"dim": 5120, "n_layers": 40, "n_heads": 40, "n_kv_heads": 40, "multiple_of": 256,
                   "vocab_size": 32000},
    "tiny": {"dim": 256, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "multiple_of": 64, "vocab_size": 1024},
}  # fmt: skip


def run(case: str, device: str, streams: bool = False, steps_n: int = 3) -> dict:
    import torch
    import torch.distributed as dist

    setup = build(case, device)
    phases = Phases(torch, device)
    if setup.schedule is None:
        setup.parts[0].output.register_forward_pre_hook(phases.on_grad_of_input("loss + output backward"))
    steps = []
    for _ in range(steps_n):
        phases.mark("before")
        start_s = time.perf_counter()
        setup.optimizers.zero_grad()
        step_phases(setup, phases)
        clip_grad_norm_(setup)
        setup.optimizers.step()
        phases.mark("clip + optimizer step")
        steps.append(phases.take() | {"step_s": time.perf_counter() - start_s})
    pools = {"streams": stream_pools(torch, setup.parts[0])} if streams and device == "cuda" else {}
    dist.destroy_process_group()
    layers = sum(len(part.layers) for part in setup.parts)
    where = {"first": setup.first, "last": setup.last, "chunks": len(setup.parts)}
    return {"case": case, "layers": layers, "steps": steps} | where | pools


def step_phases(setup: Setup, phases: Phases) -> None:
    """One forward and backward of the local batch: through the pipeline schedule as torchtitan's train.py
    forward_backward_step runs it (first stage given the tokens, last stage the labels), or as one model."""
    import torch

    job = setup.job
    batch, seq_len = job.training.local_batch_size, job.training.seq_len
    tokens = torch.randint(0, setup.vocab, (batch, seq_len + 1), device=setup.device)
    inputs, labels = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()  # as the dataloader gives them
    if setup.schedule is not None:
        targets, losses = (labels, []) if setup.last else (None, None)
        args = (inputs,) if setup.first else ()
        with train_context(setup):
            setup.schedule.step(*args, target=targets, losses=losses, return_outputs=False)
        phases.mark("pipeline step")
        return
    with train_context(setup):
        pred = setup.parts[0](inputs)
        phases.mark("forward")
        loss = setup.loss_fn(pred, labels) / (batch * seq_len)
        del pred
        phases.mark("loss")
        loss.backward()
    phases.mark("layers backward")


def stream_pools(torch, model) -> list[dict]:
    """The allocator's segments summed by stream, largest first: reserved and allocated bytes, segment count, and
    the stream's name where it is the compute stream or one of FSDP2's (FSDPCommContext, _fsdp_param_group.py)."""
    names = {torch.cuda.current_stream().cuda_stream: "compute"}
    context = model._get_fsdp_state()._comm_ctx
    for attr in ("all_gather_copy_in_stream", "all_gather_stream", "reduce_scatter_stream", "all_reduce_stream"):
        names.setdefault(getattr(context, attr).cuda_stream, attr)
    pools: dict[int, dict] = {}
    for segment in torch.cuda.memory_snapshot():
        stream = segment["stream"]
        pool = pools.setdefault(
            stream, {"stream": names.get(stream, str(stream)), "reserved_bytes": 0, "allocated_bytes": 0, "segments": 0}
        )
        pool["reserved_bytes"] += segment["total_size"]
        pool["allocated_bytes"] += segment["allocated_size"]
        pool["segments"] += 1
    return sorted(pools.values(), key=lambda pool: -pool["reserved_bytes"])


def train_context(setup: Setup):
    """torchtitan's train_context (train.py): loss parallelism where the output projection is tensor-parallel."""
    from torch.distributed.tensor.parallel import loss_parallel

    on = setup.dims.tp_enabled and not setup.job.parallelism.disable_loss_parallel
    return loss_parallel() if on else nullcontext()


def clip_grad_norm_(setup: Setup) -> None:
    from torchtitan.distributed.utils import clip_grad_norm_ as titan_clip

    pp_mesh = setup.dims.get_mesh("pp") if setup.schedule is not None else None
    params = [p for part in setup.parts for p in part.parameters()]
    titan_clip(params, setup.job.training.max_norm, foreach=True, pp_mesh=pp_mesh)


@dataclass
class Setup:
    parts: list
    optimizers: Any
    loss_fn: Any
    job: Any
    dims: Any
    vocab: int
    device: str
    schedule: Any = None
    first: bool = True
    last: bool = True


def build(case: str, device: str) -> Setup:
    """torchtitan's model, parallelized (and pipelined), initialised, with its optimizer and loss, on a fake
    process group: the stages this rank holds, as torchtitan's train.py builds them."""
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore
    from torchtitan.components.loss import build_cross_entropy_loss
    from torchtitan.components.optimizer import build_optimizers
    from torchtitan.models.llama3 import Transformer, TransformerModelArgs, parallelize_llama

    name, world, local_batch, seq, ac, *more = case.split(":")
    layers = [int(m) for m in more if m.isdigit()]
    mesh = dict(m.split("=") for m in more if "=" in m)
    world_size = int(world)
    shape = dict(FLAVOURS[name], max_seq_len=int(seq)) | ({"n_layers": layers[0]} if layers else {})
    dist.init_process_group("fake", store=FakeStore(), rank=int(mesh.get("rank", 0)), world_size=world_size)
    if device == "cuda":
        torch.cuda.set_device(0)
    job = job_config(world_size, int(local_batch), int(seq), ac, mesh)
    dims = parallel_dims(world_size, device, job)
    args = TransformerModelArgs(**shape)
    with torch.device("meta"):
        model = Transformer(args)
    loss_fn = build_cross_entropy_loss(job)
    if dims.pp > 1:
        from torchtitan.distributed.pipeline_parallel import pipeline_llm

        schedule, parts, first, last = pipeline_llm(
            model, dims, job, torch.device(device), args, parallelize_llama, loss_fn
        )
        for stage in schedule._stages if hasattr(schedule, "_stages") else [schedule._stage]:
            static_metadata(stage, job, args)
    else:
        schedule, parts, first, last = None, [parallelize_llama(model, dims, job)], True, True
    for part in parts:
        part.to_empty(device=device)
        with torch.no_grad():
            part.init_weights(buffer_device=torch.device(device))
        part.train()
    optimizers = build_optimizers(parts, job.optimizer, dims)
    return Setup(parts, optimizers, loss_fn, job, dims, args.vocab_size, device, schedule, first, last)


def static_metadata(stage, job, args) -> None:
    """Give a stage the shapes it would learn from its neighbours at the first step (torch 2.11 stage.py
    _shape_inference receives them with recv_object_list, which a fake group cannot carry): token ids into the
    first, bf16 hidden states sharded over the sequence by tp (torchtitan's TP plan ends each layer with
    Shard(1)) between stages, and the logits, sharded over the vocabulary under loss parallelism, out of the last."""
    import torch

    par = job.parallelism
    mb, seq, tp = par.pipeline_parallel_microbatch_size, job.training.seq_len, par.tensor_parallel_degree
    hidden = torch.empty(mb, seq // tp, args.dim, dtype=torch.bfloat16, device="meta")
    tokens = torch.empty(mb, seq, dtype=torch.int64, device="meta")
    logits = torch.empty(mb, seq, args.vocab_size, dtype=torch.bfloat16, device="meta")
    stage.inputs_meta = (tokens if stage.is_first else hidden,)
    stage._configure_outputs_meta((logits if stage.is_last else hidden,))


def job_config(world_size: int, local_batch: int, seq_len: int, ac: str, mesh: dict[str, str]):
    """torchtitan's defaults with the case's batch, recompute and mesh: pp, tp, cp (each 1 unless given), the
    pipeline's micro-batch size `mb` and schedule `sched`; the data-parallel shard degree is what is left."""
    from torchtitan.config import JobConfig

    job = JobConfig()
    job.training.local_batch_size, job.training.seq_len = local_batch, seq_len
    pp, tp, cp = (int(mesh.get(k, 1)) for k in ("pp", "tp", "cp"))
    par = job.parallelism
    par.pipeline_parallel_degree, par.tensor_parallel_degree, par.context_parallel_degree = pp, tp, cp
    par.data_parallel_shard_degree = world_size // (pp * tp * cp)
    par.pipeline_parallel_microbatch_size = int(mesh.get("mb", 1))
    par.pipeline_parallel_schedule = mesh.get("sched", "1F1B")
    mode, _, extra = ac.partition("+")
    job.activation_checkpoint.mode = "selective" if mode == "op" else mode
    job.activation_checkpoint.selective_ac_option = "op"
    job.compile.enable = extra == "compile"  # the model and the loss, torchtitan's default components
    return job


def parallel_dims(world_size: int, device: str, job):
    from torchtitan.distributed import ParallelDims

    if device == "cpu":  # torchtitan names cuda where it finds no accelerator
        import torchtitan.distributed.parallel_dims as pd

        pd.device_type = "cpu"
    par = job.parallelism
    dims = ParallelDims(
        dp_replicate=1, dp_shard=par.data_parallel_shard_degree, cp=par.context_parallel_degree,
        tp=par.tensor_parallel_degree, pp=par.pipeline_parallel_degree, ep=1, etp=1, world_size=world_size,
    )  # fmt: skip
    dims.build_mesh()
    return dims


class Phases:
    """The allocated peak of each phase of a step (since the mark before it) and what is allocated at its end; the
    step's reserved and allocated peaks are the largest of its phases'."""

    def __init__(self, torch, device: str) -> None:
        self.torch, self.on = torch, device == "cuda"
        self.marks: list[dict] = []

    def on_grad_of_input(self, name: str):
        """A forward pre-hook that marks `name` when the module's input gets its gradient (its backward is done)."""

        def mark(grad):
            self.mark(name)
            return grad

        def pre_hook(_module, args) -> None:
            args[0].register_hook(mark)

        return pre_hook

    def mark(self, name: str) -> None:
        if not self.on:
            return
        cuda = self.torch.cuda
        cuda.synchronize()
        stats = cuda.memory_stats()
        self.marks.append({
            "phase": name,
            "peak_allocated_bytes": stats["allocated_bytes.all.peak"],
            "peak_reserved_bytes": stats["reserved_bytes.all.peak"],
            "allocated_bytes": stats["allocated_bytes.all.current"],
            "alloc_retries": stats["num_alloc_retries"],
        })  # fmt: skip
        cuda.reset_peak_memory_stats()

    def take(self) -> dict:
        marks, self.marks = self.marks[1:], []
        if not marks:
            return {}
        return {
            "max_allocated_bytes": max(m["peak_allocated_bytes"] for m in marks),
            "max_reserved_bytes": max(m["peak_reserved_bytes"] for m in marks),
            "allocated_bytes": marks[-1]["allocated_bytes"],
            "phases": marks,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--streams", action="store_true", help="sum the allocator's segments by stream at the end")
    parser.add_argument("--steps", type=int, default=3, help="steps to run (the figures are every step's)")
    args = parser.parse_args()
    result = run(args.case, args.device, args.streams, args.steps)
    json.dump(result, sys.stdout)
    print()


if __name__ == "__main__":
    main()
