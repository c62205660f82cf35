"""torchrun helper for test_tp_activations: the bytes one of the worker's layers saves for backward under its own
tensor parallelism (launch/tensor_parallel.py apply_tp, DTensor, gloo), counted with saved-tensor hooks on rank 0.

    torchrun --standalone --nproc-per-node 2 tp_probe.py OUT_DIR

Writes OUT_DIR/tp{sp}.json for sequence parallelism off and on: {"saved_bytes", "tp", "sp"}.
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

from planner.launch.measured import ActivationCounter
from planner.launch.model import GPT
from planner.launch.tensor_parallel import apply_tp
from planner.specs import ModelSpec

B, S, H, F = 2, 128, 256, 1024  # a Llama-style layer (RMSNorm, SwiGLU, RoPE), fp32


def spec() -> ModelSpec:
    return ModelSpec(
        name="layer", num_layers=1, hidden_size=H, num_attention_heads=4, ffn_hidden_size=F, mlp="swiglu",
        vocab_size=512, max_seq_len=S, tied_embeddings=False, position_embedding="rope", norm="rmsnorm",
    )  # fmt: skip


def _saved_bytes(tp: int, sp: bool) -> int:
    torch.manual_seed(0)
    model = GPT(spec())
    apply_tp(model, init_device_mesh("cpu", (tp,)), sp=sp)
    block = model.layers["0"]
    x = torch.randn(B, S // tp if sp else S, H, requires_grad=True)  # the rank's sequence shard with sp
    counter = ActivationCounter([block])
    with counter.track():
        block(x).sum().backward()
    return counter.peak


def main() -> None:
    out = Path(sys.argv[1])
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    tp = dist.get_world_size()
    for sp in (False, True):
        saved = _saved_bytes(tp, sp)
        if dist.get_rank() == 0:
            (out / f"tp{int(sp)}.json").write_text(json.dumps({"saved_bytes": saved, "tp": tp, "sp": sp}))


if __name__ == "__main__":
    from probe_exit import run_probe_main

    run_probe_main(main)
