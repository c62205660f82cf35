"""The host cost of one op on a DTensor (hardware efficiency.dtensor_op_overhead_s; cost/dtensor_host.py), timed on
this CPU: a training step of a small stack of linears, with torch's tensor parallelism (ColwiseParallel /
RowwiseParallel) over a mesh of one rank, so every weight is a DTensor and nothing is sent, against the same step on
plain tensors; the difference over the DTensor ops the step dispatches (counted with a TorchDispatchMode). The same
measurement as benchmarks/dtensor_ops.py on the worker's model, with torch's own modules only (bench does not
import the launcher): on a 2-core AVX-512/AMX box both gave 41-43 µs an op (2026-11-28). torch is imported inside."""

from __future__ import annotations

import time
from typing import Any

HIDDEN = 64  # tiny widths: the kernels cost little, so the step's difference is the dispatch
BLOCKS = 4  # each a column-parallel and a row-parallel linear with a GELU between, as an MLP under TP
TOKENS = 128
STEPS = 30  # timed steps each way; the fastest counts (a shared box slows some)


def dtensor_op_s() -> dict[str, Any]:
    """{"ops", "plain_step_s", "dtensor_step_s", "op_s"}: the DTensor ops of one step and the host time of each."""
    import torch
    import torch.distributed as dist

    owned = not dist.is_initialized()
    if owned:
        dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    try:
        torch.manual_seed(0)
        x = torch.randn(TOKENS, HIDDEN)
        plain, sharded = _stack(tp=False), _stack(tp=True)
        ops = _count(sharded, x)
        plain_s, sharded_s = _fastest(plain, x), _fastest(sharded, x)
    finally:
        if owned:
            dist.destroy_process_group()
    return {"ops": ops, "plain_step_s": plain_s, "dtensor_step_s": sharded_s,
            "op_s": max(0.0, (sharded_s - plain_s) / ops)}  # fmt: skip


def _stack(*, tp: bool) -> tuple[Any, Any]:
    """(model, AdamW) with the same weights: plain, or its linears TP-sharded over a mesh of this one rank."""
    import torch
    from torch import nn

    torch.manual_seed(1)
    blocks = [nn.Sequential(nn.Linear(HIDDEN, 4 * HIDDEN, bias=False), nn.GELU(),
                            nn.Linear(4 * HIDDEN, HIDDEN, bias=False)) for _ in range(BLOCKS)]  # fmt: skip
    model = nn.Sequential(*blocks)
    if tp:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        mesh = init_device_mesh("cpu", (1,))
        for block in blocks:
            parallelize_module(block, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4)


def _step(stack: tuple[Any, Any], x: Any) -> None:
    import torch

    model, opt = stack
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()


def _count(stack: tuple[Any, Any], x: Any) -> int:
    """The ops of one step (the optimizer's states made by a step before) with a DTensor among their arguments."""
    from torch.distributed.tensor import DTensor
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if any(isinstance(a, DTensor) for a in tree_flatten((args, kwargs))[0]):
                self.n += 1
            return func(*args, **(kwargs or {}))

    _step(stack, x)
    with Count() as counter:
        _step(stack, x)
    return counter.n


def _fastest(stack: tuple[Any, Any], x: Any) -> float:
    for _ in range(5):
        _step(stack, x)
    times = []
    for _ in range(STEPS):
        t0 = time.perf_counter()
        _step(stack, x)
        times.append(time.perf_counter() - t0)
    return min(times)
