"""torchrun worker: times all-reduce, reduce-scatter, all-gather, all-to-all and send/recv over message sizes.

Run as `python -m torch.distributed.run --standalone --nproc-per-node N -m planner.bench.comm_worker OUT.json SIZES`.
Rank 0 prints `PROGRESS <i> <total> <label>` lines on stdout and writes the JSON (max over ranks of each time).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

KINDS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "p2p")


class _Rank:
    """This rank's process group, device and timers (torch imported when a worker starts)."""

    def __init__(self) -> None:
        import torch
        import torch.distributed as dist

        self.torch, self.dist = torch, dist
        self.cuda = torch.cuda.is_available()
        self.backend = "nccl" if self.cuda else "gloo"
        self.rank, self.world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        local = int(os.environ.get("LOCAL_RANK", 0))
        self.device = torch.device("cuda", local) if self.cuda else torch.device("cpu")
        if self.cuda:
            torch.cuda.set_device(self.device)
        dist.init_process_group(self.backend, timeout=timedelta(seconds=90))

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def op_for(self, kind: str, nbytes: int) -> tuple[Callable[[], Any], int]:
        """The collective of `kind` on about `nbytes` (a multiple of the world size), and its actual bytes."""
        torch, dist, world, device = self.torch, self.dist, self.world, self.device
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
        return self._p2p(nbytes)

    def _p2p(self, nbytes: int) -> tuple[Callable[[], Any], int]:
        x = self.torch.ones(max(1, nbytes // 4), device=self.device)
        peer = self.rank ^ 1  # pairs (0,1), (2,3), ...; an odd last rank idles
        if peer >= self.world:
            return (lambda: None), x.numel() * 4
        if self.rank % 2 == 0:
            return (lambda: self.dist.send(x, peer)), x.numel() * 4
        return (lambda: self.dist.recv(x, peer)), x.numel() * 4

    def timed(self, fn: Callable[[], Any], reps: int) -> float:
        """Seconds per call over `reps` calls (CUDA events on a GPU)."""
        if self.cuda:
            start, end = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                fn()
            end.record()
            self.sync()
            return start.elapsed_time(end) / 1e3 / reps
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        return (time.perf_counter() - t0) / reps

    def agree_max(self, v: float) -> float:
        """The largest of every rank's `v`."""
        t = self.torch.tensor([v], dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return float(t.item())

    def measure(self, kind: str, nbytes: int, budget_s: float) -> dict[str, Any]:
        """One row: the best of three timed runs (the slowest rank's), with as many calls as fit the budget."""
        fn, actual = self.op_for(kind, nbytes)
        fn()
        self.sync()
        self.dist.barrier()
        one = self.agree_max(max(self.timed(fn, 1), 1e-6))
        reps = max(2, min(200, int(budget_s / 3 / one)))
        best = float("inf")
        for _ in range(3):
            self.dist.barrier()
            best = min(best, self.agree_max(self.timed(fn, reps)))
        return {"kind": kind, "bytes": actual, "reps": reps, "time_s": best}


def main(out: str, sizes: list[int], budget_s: float) -> None:
    r = _Rank()
    from planner.bench.measure import rss_bytes

    rss = rss_bytes()
    rows, total = [], len(KINDS) * len(sizes)
    for kind in KINDS:
        for nbytes in sizes:
            rows.append(r.measure(kind, nbytes, budget_s))
            if r.rank == 0:
                print(f"PROGRESS {len(rows)} {total} {kind} {rows[-1]['bytes']} B", flush=True)
    rss_max = r.agree_max(rss)
    if r.rank == 0:
        doc = {
            "world_size": r.world,
            "backend": r.backend,
            "device": r.device.type,
            "rows": rows,
            "worker_rss_after_init_bytes": rss_max,
        }
        tmp = out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, out)
    r.dist.barrier()
    r.dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], [int(s) for s in sys.argv[2].split(",")], float(sys.argv[3]) if len(sys.argv) > 3 else 0.15)
    # The table is written and the group destroyed: leave without C++ static destructors, where gloo's threads
    # intermittently abort a finished process (SIGABRT; planner/launch/worker.py), which torchrun reports as a
    # failed measurement.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
