"""Per-GPU memory of torchtitan's own Llama at a data-parallel width the machine does not have: one process is rank
0 of a `fake` process group of WORLD ranks (collectives return at once, their buffers allocated as NCCL's would
be), so FSDP2 shards, gathers and reduce-scatters at the real sizes while one GPU holds rank 0's tensors.

    python benchmarks/gpu_titan_memory.py CASE [--device cuda] [--streams]

CASE is NAME:WORLD:LOCAL_BATCH:SEQ:AC[:LAYERS], NAME one of the flavours below, AC none | op | full (torchtitan's
activation_checkpoint.mode with selective_ac_option "op" for `op`), with `+compile` for torch.compile of the model
and the loss. The model, its parallelization, the optimizer and
the loss are torchtitan's (0.2.2: models/llama3, parallelize_llama, build_optimizers, build_cross_entropy_loss) with
its defaults: bf16 parameters and fp32 reduction under FSDP, fused AdamW, eager model and loss. Three steps, each
forward, loss, `del pred`, backward, clip, step, zero_grad as torchtitan's train.py runs them; it prints the peaks
torchtitan's DeviceMemoryMonitor logs (reserved, active) and the allocated peak, per step. The data is garbage (no
collective moves a byte), which changes no tensor's size. Needs torchtitan 0.2.2 and a torch that has the fake
backend; run it as torchtitan's run_train.sh does, with PYTORCH_ALLOC_CONF=expandable_segments:True. Step times
are compute and host time alone (no collective waits). The numbers are rank 0's, the rank that holds no more than
any other under FSDP without pipelining.

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

# torchtitan's own flavours (models/llama3/__init__.py) and Llama 2 13B's shape (its params.json: dim 5120, 40
# layers, 40 heads, multiple_of 256, vocabulary 32,000).
FLAVOURS: dict[str, dict] = {
    "llama3-8b": {"dim": 4096, "n_layers": 32, "n_heads": 32, "n_kv_heads": 8, "ffn_dim_multiplier": 1.3,
                  "multiple_of": 1024, "rope_theta": 500000},
    "llama3-70b": {"dim": 8192, "n_layers": 80, "n_heads": 64, "n_kv_heads": 8, "ffn_dim_multiplier": 1.3,
                   "multiple_of": 4096, "rope_theta": 500000},
    "llama2-13b": {"dim": 5120, "n_layers": 40, "n_heads": 40, "n_kv_heads": 40, "multiple_of": 256,
                   "vocab_size": 32000},
    "tiny": {"dim": 256, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "multiple_of": 64, "vocab_size": 1024},
}  # fmt: skip
STEPS = 3


def run(case: str, device: str, streams: bool = False) -> dict:
    import torch
    import torch.distributed as dist

    model, optimizers, loss_fn, job, vocab = build(case, device)
    phases = Phases(torch, device)
    model.output.register_forward_pre_hook(phases.on_grad_of_input("loss + output backward"))
    batch, seq_len = job.training.local_batch_size, job.training.seq_len
    steps = []
    for _ in range(STEPS):
        phases.mark("before")
        tokens = torch.randint(0, vocab, (batch, seq_len + 1), device=device)
        start_s = time.perf_counter()
        optimizers.zero_grad()
        pred = model(tokens[:, :-1])
        phases.mark("forward")
        loss = loss_fn(pred, tokens[:, 1:]) / (batch * seq_len)
        del pred
        phases.mark("loss")
        loss.backward()
        phases.mark("layers backward")
        clip_grad_norm_(model, job.training.max_norm)
        optimizers.step()
        phases.mark("clip + optimizer step")
        steps.append(phases.take() | {"step_s": time.perf_counter() - start_s})
    pools = {"streams": stream_pools(torch, model)} if streams and device == "cuda" else {}
    dist.destroy_process_group()
    layers = len(model.layers)
    return {"case": case, "layers": layers, "steps": steps} | pools


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


def clip_grad_norm_(model, max_norm: float) -> None:
    from torchtitan.distributed.utils import clip_grad_norm_ as titan_clip

    titan_clip(list(model.parameters()), max_norm, foreach=True)


def build(case: str, device: str):
    """torchtitan's model, parallelized, initialised, with its optimizer and loss, on a fake process group."""
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore
    from torchtitan.components.loss import build_cross_entropy_loss
    from torchtitan.components.optimizer import build_optimizers
    from torchtitan.models.llama3 import Transformer, TransformerModelArgs, parallelize_llama

    name, world, local_batch, seq, ac, *layers = case.split(":")
    world_size = int(world)
    shape = dict(FLAVOURS[name], max_seq_len=int(seq)) | ({"n_layers": int(layers[0])} if layers else {})
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world_size)
    if device == "cuda":
        torch.cuda.set_device(0)
    job = job_config(world_size, int(local_batch), int(seq), ac)
    dims = parallel_dims(world_size, device)
    args = TransformerModelArgs(**shape)
    with torch.device("meta"):
        model = Transformer(args)
    parallelize_llama(model, dims, job)
    model.to_empty(device=device)
    with torch.no_grad():
        model.init_weights(buffer_device=torch.device(device))
    model.train()
    return model, build_optimizers([model], job.optimizer, dims), build_cross_entropy_loss(job), job, args.vocab_size


def job_config(world_size: int, local_batch: int, seq_len: int, ac: str):
    from torchtitan.config import JobConfig

    job = JobConfig()
    job.training.local_batch_size, job.training.seq_len = local_batch, seq_len
    job.parallelism.data_parallel_shard_degree = world_size
    mode, _, more = ac.partition("+")
    job.activation_checkpoint.mode = "selective" if mode == "op" else mode
    job.activation_checkpoint.selective_ac_option = "op"
    job.compile.enable = more == "compile"  # the model and the loss, torchtitan's default components
    return job


def parallel_dims(world_size: int, device: str):
    from torchtitan.distributed import ParallelDims

    if device == "cpu":  # torchtitan names cuda where it finds no accelerator
        import torchtitan.distributed.parallel_dims as pd

        pd.device_type = "cpu"
    dims = ParallelDims(dp_replicate=1, dp_shard=world_size, cp=1, tp=1, pp=1, ep=1, etp=1, world_size=world_size)
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
    args = parser.parse_args()
    result = run(args.case, args.device, args.streams)
    json.dump(result, sys.stdout)
    print()


if __name__ == "__main__":
    main()
