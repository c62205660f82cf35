"""torchrun helper for test_context_parallel: the worker's CP micro-step on CPU/gloo, attention left out.

torch has no CPU ring-attention kernel (torch_cpu_notes.md row 11), so the model here is a per-token
lookup table (no attention): what this checks is everything around the kernel — the buffer sharding the
worker asks ``context_parallel`` for, the global positions each rank sees, that backward runs inside the
context, and that the cp-mean of the per-rank losses is the full-sequence loss. Writes one JSON per rank.
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

from planner.launch.model import cross_entropy
from planner.launch.trainer import Trainer, synthetic_batch


class Lookup(torch.nn.Module):
    """logits[b, t] = table[token] + pos_table[position]: position-dependent, attention-free."""

    def __init__(self, vocab: int, seq: int):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.table = torch.nn.Parameter(torch.randn(vocab, vocab, generator=g))
        self.pos = torch.nn.Parameter(torch.randn(seq, vocab, generator=g))
        self.seen: list[tuple[torch.Tensor, torch.Tensor]] = []

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        self.seen.append((tokens.clone(), positions.clone()))
        return self.table[tokens] + self.pos[positions]


def main(out_dir: str, seq: int = 32, rows: int = 2, vocab: int = 16) -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    cp = dist.get_world_size()
    mesh = init_device_mesh("cpu", (1, 1, cp, 1), mesh_dim_names=("pp", "dp", "cp", "tp"))
    x, y = synthetic_batch(1, seed=0, rows=rows, seq_len=seq, vocab=vocab)
    model = Lookup(vocab, seq)
    full = cross_entropy(model(x, torch.arange(seq).expand_as(x)), y).item()
    model.seen.clear()
    xb, yb = x.clone(), y.clone()
    loss = Trainer._cp_forward_backward(SimpleNamespace(cp_mesh=mesh["cp"]), model, xb, yb, 1)
    ((tokens, positions),) = model.seen
    grad = model.table.grad.clone()
    dist.all_reduce(grad)  # what FSDP over dp×cp does (sum; the mean divides by cp below)
    mean = loss.detach().reshape(1).clone()
    dist.all_reduce(mean)
    model.table.grad = None
    cross_entropy(model(x, torch.arange(seq).expand_as(x)), y).backward()
    rec = {
        "rank": dist.get_rank(),
        "cp": cp,
        "positions": positions.tolist(),
        "tokens_match": bool(torch.equal(tokens, x.gather(1, positions))),
        "inputs_untouched": bool(torch.equal(xb, x) and torch.equal(yb, y)),
        "local_len": tokens.shape[1],
        "loss_cp_mean": mean.item() / cp,
        "loss_full": full,
        "grad_max_err": (grad / cp - model.table.grad).abs().max().item(),
    }
    Path(out_dir, f"rank{rec['rank']}.json").write_text(json.dumps(rec))


if __name__ == "__main__":
    from probe_exit import run_probe_main

    run_probe_main(lambda: main(sys.argv[1]))
