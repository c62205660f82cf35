"""torchrun worker: times all-reduce, reduce-scatter, all-gather, all-to-all and send/recv over message sizes.

Run as `python -m torch.distributed.run --standalone --nproc-per-node N -m planner.bench.comm_worker OUT.json SIZES`.
Rank 0 prints `PROGRESS <i> <total> <label>` lines on stdout and writes the JSON (max over ranks of each time).
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import timedelta

KINDS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "p2p")


def main(out: str, sizes: list[int], budget_s: float) -> None:
    import torch
    import torch.distributed as dist

    cuda = torch.cuda.is_available()
    backend = "nccl" if cuda else "gloo"
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group(backend, timeout=timedelta(seconds=90))
    from planner.bench.measure import rss_bytes

    rss = rss_bytes()

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    def op_for(kind: str, nbytes: int):
        numel = max(world, nbytes // 4 // world * world)
        if kind == "all_reduce":
            x = torch.ones(numel, device=device)
            return lambda: dist.all_reduce(x), numel * 4
        if kind == "reduce_scatter":
            x, y = torch.ones(numel, device=device), torch.empty(numel // world, device=device)
            return lambda: dist.reduce_scatter_tensor(y, x), numel * 4
        if kind == "all_gather":
            x, y = torch.ones(numel // world, device=device), torch.empty(numel, device=device)
            return lambda: dist.all_gather_into_tensor(y, x), numel * 4
        if kind == "all_to_all":
            x, y = torch.ones(numel, device=device), torch.empty(numel, device=device)
            return lambda: dist.all_to_all_single(y, x), numel * 4
        x = torch.ones(max(1, nbytes // 4), device=device)
        peer = rank ^ 1  # pairs (0,1), (2,3), ...; an odd last rank idles
        if peer >= world:
            return (lambda: None), x.numel() * 4
        if rank % 2 == 0:
            return (lambda: dist.send(x, peer)), x.numel() * 4
        return (lambda: dist.recv(x, peer)), x.numel() * 4

    def timed(fn, reps: int) -> float:
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                fn()
            end.record()
            sync()
            return start.elapsed_time(end) / 1e3 / reps
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        return (time.perf_counter() - t0) / reps

    def agree_max(v: float) -> float:
        t = torch.tensor([v], dtype=torch.float64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    rows, total, i = [], len(KINDS) * len(sizes), 0
    for kind in KINDS:
        for nbytes in sizes:
            fn, actual = op_for(kind, nbytes)
            fn()
            sync()
            dist.barrier()
            one = agree_max(max(timed(fn, 1), 1e-6))
            reps = max(2, min(200, int(budget_s / 3 / one)))
            best = float("inf")
            for _ in range(3):
                dist.barrier()
                best = min(best, agree_max(timed(fn, reps)))
            rows.append({"kind": kind, "bytes": actual, "reps": reps, "time_s": best})
            i += 1
            if rank == 0:
                print(f"PROGRESS {i} {total} {kind} {actual} B", flush=True)
    rss_max = agree_max(rss)
    if rank == 0:
        doc = {
            "world_size": world,
            "backend": backend,
            "device": device.type,
            "rows": rows,
            "worker_rss_after_init_bytes": rss_max,
        }
        tmp = out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, out)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], [int(s) for s in sys.argv[2].split(",")], float(sys.argv[3]) if len(sys.argv) > 3 else 0.15)
