"""The bytes a forward pass saves for backward on a GPU, per layer and outside the layers, against the planner's
count: the planner worker's own model (planner/launch/model.py) under bf16 autocast without the weight-cast cache
(cache_enabled=False, so only activations are counted), one micro-batch, no recompute.

    python benchmarks/gpu_activations.py [--model gpt3-1.3b] [--out activations.json]

For 2 and 4 layers and micro-batches 1 and 4 at sequence 2048: memory_allocated after the forward (logits
included) and after the loss, minus before, and the peak of the backward. The slope over layers is what one layer
saves; the planner's per-layer count for the same plan is printed beside it (cost/memory.py kind_pieces, the
`planner` engine). Needs a CUDA device.
"""

from __future__ import annotations

import argparse
import json

LAYERS = (2, 4)
MICRO_BATCHES = (1, 4)
SEQ = 2048


def measure(model_name: str, layers: int, micro_batch: int) -> dict:
    import torch

    from planner.io.catalog import load_model
    from planner.launch.model import GPT, cross_entropy

    spec = load_model(model_name).model_copy(update={"num_layers": layers})
    with torch.device("cuda"):
        model = GPT(spec)
    x = torch.randint(0, spec.vocab_size, (micro_batch, SEQ), device="cuda")
    y = torch.randint(0, spec.vocab_size, (micro_batch, SEQ), device="cuda")
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
        logits = model(x)
        forward = torch.cuda.memory_allocated() - base
        loss = cross_entropy(logits, y)
    loss_bytes = torch.cuda.memory_allocated() - base
    forward_peak = torch.cuda.max_memory_allocated() - base
    torch.cuda.reset_peak_memory_stats()
    loss.backward()
    torch.cuda.synchronize()
    out = {
        "layers": layers, "micro_batch": micro_batch, "seq": SEQ, "after_forward": forward,
        "after_loss": loss_bytes, "forward_peak": forward_peak,
        "backward_peak": torch.cuda.max_memory_allocated() - base,
    }  # fmt: skip
    del model, x, y, logits, loss
    torch.cuda.empty_cache()
    return out


def predicted(model_name: str, micro_batch: int) -> dict[str, float]:
    """The planner's count for the same plan on the `planner` engine: bytes one layer keeps, and the logits."""
    from planner.cost.memory import activation_pieces, logits_bytes
    from planner.io.catalog import load_engine, load_model
    from planner.plan import Plan

    spec, engine = load_model(model_name), load_engine("planner")
    plan = Plan(micro_batch=micro_batch, global_batch=micro_batch, seq_len=SEQ)
    (keep, work), *_ = activation_pieces(spec, plan, engine).values()
    return {
        "per_layer": float(keep),
        "backward_working_set": float(work),
        "logits": float(logits_bytes(spec, plan, engine)),
    }


def main() -> None:
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gpt3-1.3b")
    ap.add_argument("--out", default="activations.json")
    args = ap.parse_args()
    res: dict = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "model": args.model, "rows": []}
    mib = 2**20
    for mb in MICRO_BATCHES:
        rows = [measure(args.model, n, mb) for n in LAYERS]
        res["rows"] += rows
        span = LAYERS[-1] - LAYERS[0]
        per_layer = (rows[-1]["after_forward"] - rows[0]["after_forward"]) / span
        outside = rows[0]["after_forward"] - LAYERS[0] * per_layer
        pred = predicted(args.model, mb)
        res[f"mb{mb}"] = {"per_layer": per_layer, "outside_layers": outside, "predicted": pred}
        print(f"mb{mb}: saved per layer {per_layer / mib:.1f} MiB (planner {pred['per_layer'] / mib:.1f}), outside the "
              f"layers {outside / mib:.1f} MiB (planner's logits {pred['logits'] / mib:.1f}); "
              f"{json.dumps({k: round(v / mib, 1) for k, v in rows[-1].items() if k not in ('layers', 'seq')})}",
              flush=True)  # fmt: skip
    with open(args.out, "w") as f:
        json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
