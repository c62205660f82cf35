"""The host cost of one op on a DTensor (hardware efficiency.dtensor_op_overhead_s; cost/dtensor_host.py), timed on
this CPU: a training step of a small stack of linears, with torch's tensor parallelism (ColwiseParallel /
RowwiseParallel) over a mesh of one rank, so every weight is a DTensor and nothing is sent, against the same step on
plain tensors; the difference over the DTensor ops the step dispatches (counted with a TorchDispatchMode). The same
measurement as benchmarks/dtensor_ops.py on the worker's model, with torch's own modules only (bench does not
import the launcher): on a 2-core AVX-512/AMX box both gave 41-43 µs an op (2026-11-28). torch is imported inside."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

HIDDEN = 64  # tiny widths: the kernels cost little, so the step's difference is the dispatch
BLOCKS = 4  # each a column-parallel and a row-parallel linear with a GELU between, as an MLP under TP
TOKENS = 128
STEPS = 30  # timed steps each way; the fastest counts (a shared box slows some)
NOISE_SHARE = 0.1  # a DTensor step within this share of the plain step is not read as dispatch (a loaded box)


def dtensor_op_s() -> dict[str, Any]:
    """{"ops", "plain_step_s", "dtensor_step_s", "op_s", "why"}: the DTensor ops of one step and the host time of
    each; where it cannot be timed here (gloo does not start, a process group of several ranks is running, the
    difference is within the noise), op_s is 0 and `why` says so: the other measurements are kept."""
    import torch.distributed as dist

    if not dist.is_available() or (dist.is_initialized() and dist.get_world_size() > 1):
        return _untimed("torch.distributed is unavailable, or a group of several ranks is running in this process")
    owned = not dist.is_initialized()
    if owned:
        try:
            dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
        except RuntimeError as e:  # no usable network interface, say
            return _untimed(f"gloo could not start a group of one rank ({(str(e).splitlines() or ['?'])[0]})")
    try:
        return _timed()
    finally:
        if owned:
            dist.destroy_process_group()


def _timed() -> dict[str, Any]:
    import torch

    torch.manual_seed(0)
    x = torch.randn(TOKENS, HIDDEN)
    plain, sharded = _stack(tp=False), _stack(tp=True)
    _step(sharded, x)  # the optimizer's states exist from the first step
    counter = op_counter()
    with counter:
        _step(sharded, x)
    plain_s, sharded_s = fastest_s(lambda: _step(plain, x)), fastest_s(lambda: _step(sharded, x))
    out = {"ops": counter.n, "plain_step_s": plain_s, "dtensor_step_s": sharded_s}
    if sharded_s - plain_s <= NOISE_SHARE * plain_s:
        why = f"the DTensor step ({sharded_s * 1e3:.2f} ms) is within the plain step's noise ({plain_s * 1e3:.2f} ms)"
        return {**out, "op_s": 0.0, "why": why}
    return {**out, "op_s": (sharded_s - plain_s) / counter.n, "why": None}


def _untimed(why: str) -> dict[str, Any]:
    return {"ops": 0, "plain_step_s": None, "dtensor_step_s": None, "op_s": 0.0, "why": why}


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


def op_counter() -> Any:
    """A TorchDispatchMode counting, in `.n`, the ops dispatched with a DTensor among their arguments (used as
    `with counter:`; benchmarks/dtensor_ops.py counts each phase of a step with one)."""
    from torch.distributed.tensor import DTensor
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if any(isinstance(a, DTensor) for a in tree_flatten((args, kwargs))[0]):
                self.n += 1
            return func(*args, **(kwargs or {}))

    return Count()


def fastest_s(step: Callable[[], Any], steps: int = STEPS) -> float:
    """The fastest of `steps` timed calls after 5 untimed ones (a shared box slows some)."""
    for _ in range(5):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return min(times)
