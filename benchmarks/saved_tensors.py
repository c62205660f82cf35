"""Every tensor one layer of the planner worker's model saves for backward, by dtype and shape, deduplicated by
storage: what the planner's activation count (cost/activations.py) must add up to.

    python benchmarks/saved_tensors.py [--model gpt3-1.3b] [--device cuda] [--micro-batch 1] [--seq 2048]

Runs one Block forward under bf16 autocast (as the worker trains: fp32 weights, torch.autocast) with a
saved_tensors_hooks pack hook that records each saved tensor. CUDA and CPU autocast differ in which ops run in fp32
(layer_norm is on CUDA's fp32 list) and SDPA saves different tensors per backend, so the same layer saves different
bytes on the two devices.
"""

from __future__ import annotations

import argparse
import json


def saved(model_name: str, device: str, micro_batch: int, seq: int) -> list[dict]:
    import torch

    from planner.io.catalog import load_model
    from planner.launch.model import Block

    spec = load_model(model_name)
    with torch.device(device):
        block = Block(spec)
        x = torch.randn(micro_batch, seq, spec.hidden_size, requires_grad=True)  # the fp32 residual stream
    seen: dict[int, dict] = {}
    params = {p.untyped_storage().data_ptr() for p in block.parameters()}

    def pack(t):  # type: ignore[no-untyped-def]
        ptr = t.untyped_storage().data_ptr()
        if ptr not in params and ptr not in seen:
            is_input = ptr == x.untyped_storage().data_ptr()
            dtype = str(t.dtype).replace("torch.", "")
            size = t.untyped_storage().nbytes()
            seen[ptr] = {"shape": list(t.shape), "dtype": dtype, "bytes": size, "input": is_input}
        return t

    hooks = torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
    with hooks, torch.autocast(device, dtype=torch.bfloat16, cache_enabled=False):
        out = block(x)
    del out
    return list(seen.values())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gpt3-1.3b")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--micro-batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--out")
    args = ap.parse_args()
    rows = saved(args.model, args.device, args.micro_batch, args.seq)
    total = sum(r["bytes"] for r in rows)
    for r in rows:
        note = "  (layer input)" if r["input"] else ""
        print(f"{r['dtype']:9} {r['shape']!s:28} {r['bytes'] / 2**20:9.2f} MiB{note}")
    print(f"{args.device}: {len(rows)} saved tensors, {total / 2**20:.1f} MiB (weights' bf16 casts included)")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": args.device, "model": args.model, "rows": rows, "total": total}, f, indent=2)


if __name__ == "__main__":
    main()
