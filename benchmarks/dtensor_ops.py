"""Count the ops a step runs on DTensors and time their host cost (cost/dtensor_host.py's figures).

    python benchmarks/dtensor_ops.py [--model tiny] [--steps 40]

One process, a gloo group of one rank: the worker's model (launch/model.py) with its tensor parallelism
(launch/tensor_parallel.py apply_tp) over a mesh of one, so every TP weight is a DTensor but nothing is sent. A
TorchDispatchMode counts the ops whose arguments include a DTensor in the forward, the backward and the optimizer
step (torch.optim.AdamW, as the worker), with and without sequence parallelism, recompute none, selective (op-level
SAC) and full, and prints them
per TP linear, per sequence-parallel norm and per parameter tensor. It then times the step with and without TP and
prints the difference per DTensor op: the host cost of DTensor's dispatch, what `dtensor_op_overhead_s` stands for.
On a GPT-style model (`--model gpt3-125m`) the per-linear counts include the biases, and the per-norm counts are
LayerNorm's; its per-op time is not read there (its larger GEMMs make the plain step's time vary more than the
dispatch it is compared with). tests/test_dtensor_ops.py holds the counts of both models.
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor

from planner.bench.dtensor import fastest_s, op_counter
from planner.io.catalog import load_model
from planner.launch.model import GPT, cross_entropy
from planner.launch.parallelize import apply_ac
from planner.launch.tensor_parallel import apply_tp


def _model(spec, *, tp: bool, sp: bool, recompute: str) -> GPT:
    torch.manual_seed(0)
    m = GPT(spec)
    if tp:
        apply_tp(m, init_device_mesh("cpu", (1,)), sp=sp)
    apply_ac(m, mode=recompute)
    return m


def _phases(m: GPT, opt: torch.optim.Optimizer, x: torch.Tensor, count: bool) -> tuple[int, int, int]:
    """One step; with `count`, the DTensor ops of its forward, backward and optimizer step."""
    modes = [op_counter() if count else None for _ in range(3)]

    def run(i, fn):
        if modes[i] is None:
            return fn()
        with modes[i]:
            return fn()

    def forward():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return cross_entropy(m(x), x)

    loss = run(0, forward)
    run(1, loss.backward)
    run(2, lambda: (opt.step(), opt.zero_grad()))
    return tuple(c.n if c else 0 for c in modes)  # type: ignore[return-value]


def _min_step_s(m: GPT, x: torch.Tensor, steps: int) -> float:
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    return fastest_s(lambda: _phases(m, opt, x, count=False), steps)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--steps", type=int, default=40)
    args = ap.parse_args()
    torch.set_num_threads(1)  # as launch runs each rank
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    spec = load_model(args.model)
    x = torch.randint(0, spec.vocab_size, (2, min(64, spec.max_seq_len)))
    layers, per_layer = spec.num_layers, 4 + spec.mlp_matrices
    linears, norms = layers * per_layer + 1, 2 * layers + 1  # + the output layer; + the final norm
    print(f"torch {torch.__version__}; {args.model}: {linears} TP linears, {norms} norms, 1 embedding")
    counts = {}
    for sp in (False, True):
        for rc in ("none", "selective", "full"):
            m = _model(spec, tp=True, sp=sp, recompute=rc)
            opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
            _phases(m, opt, x, count=False)  # the optimizer's states exist from the first step
            counts[sp, rc] = fwd, bwd, step = _phases(m, opt, x, count=True)
            tensors = sum(isinstance(p, DTensor) for p in m.parameters())
            print(f"sp={sp!s:5} recompute={rc:4}: forward {fwd}, backward {bwd}, optimizer {step} "
                  f"({step / tensors:.1f} per DTensor parameter, {tensors} of them)")  # fmt: skip
    fwd, bwd, _ = counts[False, "none"]
    print(f"per TP linear, one micro-batch: forward {(fwd - 1) / linears:.1f}, backward {(bwd - 2) / linears:.1f}")
    sfwd, sbwd, _ = counts[True, "none"]
    print(f"per SP norm, one micro-batch: forward {(sfwd - fwd) / norms:.1f}, backward {(sbwd - bwd) / norms:.1f}")
    for rc in ("selective", "full"):  # the output layer is not recomputed
        print(f"{rc} recompute adds per TP linear: {(counts[False, rc][1] - bwd) / (linears - 1):.1f}")
    plain = _min_step_s(_model(spec, tp=False, sp=False, recompute="none"), x, args.steps)
    tp = _min_step_s(_model(spec, tp=True, sp=False, recompute="none"), x, args.steps)
    ops = sum(counts[False, "none"])
    print(f"fastest step: {plain * 1e3:.1f} ms plain, {tp * 1e3:.1f} ms on DTensors (a mesh of one, nothing sent): "
          f"{(tp - plain) / ops * 1e6:.1f} us per DTensor op ({ops} ops)")  # fmt: skip
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
