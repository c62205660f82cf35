"""What capturing layers in CUDA graphs removes and what it holds, measured on one GPU: the host time per layer
that eager PyTorch spends launching a layer's kernels (forward and backward), and the memory a graphed layer
stack keeps in its graph pool beyond the activations eager mode saves.

    python benchmarks/gpu_graphs.py [--model llama3-8b] [--out graphs.json]

The layers are the planner worker's own (planner/launch/model.py Block) from a catalog model, bf16 weights,
no optimizer. Each layer is captured on its own with torch.cuda.make_graphed_callables (one shared pool, as
torch and Megatron's cuda_graphs.py do), so a step replays one forward and one backward graph per layer.

- host time per layer: the step time of 2, 4 and 8 layers at a token count so small the GPU waits on the host
  (1 x 128 tokens); the slope over layers, eager and graphed. Megatron's and torchtitan's fitted
  `host_layer_s` (engine_profiles/) state the same quantity for their stacks.
- graph pool: peak allocated bytes of one step minus the bytes held before it, eager and graphed, at
  1 x 4096 tokens; `pool_over_eager` is what graphs add as a share of eager's saved activations, the
  quantity cost/recipe_options.py CUDA_GRAPH_POOL_FRACTION states.

Needs a CUDA device. Times are the median of 20 steps after 5 warm-ups, with CUDA events.
"""

from __future__ import annotations

import argparse
import json

from gpu_kernels import time_ms  # the same timing: CUDA events, median of 20 after 5 warm-ups

HOST_TOKENS = (1, 128)
MEMORY_TOKENS = (1, 4096)
LAYER_COUNTS = (2, 4, 8)


def _layers(model_name: str, count: int):  # type: ignore[no-untyped-def]
    import torch

    from planner.io.catalog import load_model
    from planner.launch.model import Block

    spec = load_model(model_name)
    torch.manual_seed(0)
    with torch.device("cuda"):
        return spec, [Block(spec).to(dtype=torch.bfloat16) for _ in range(count)]


def _sample(spec, tokens: tuple[int, int]):  # type: ignore[no-untyped-def]
    import torch

    return torch.randn(*tokens, spec.hidden_size, device="cuda", dtype=torch.bfloat16, requires_grad=True)


def _step(layers, x) -> None:  # type: ignore[no-untyped-def]
    h = x
    for layer in layers:
        h = layer(h)
    h.float().square().mean().backward()


def _graphed(spec, layers, tokens):  # type: ignore[no-untyped-def]
    import torch

    samples = tuple((_sample(spec, tokens),) for _ in layers)
    return list(torch.cuda.make_graphed_callables(tuple(layers), samples))


def _host_row(model_name: str, count: int) -> dict:
    spec, layers = _layers(model_name, count)
    x = _sample(spec, HOST_TOKENS)
    eager_ms = time_ms(lambda: _step(layers, x))
    graphed = _graphed(spec, layers, HOST_TOKENS)
    graph_ms = time_ms(lambda: _step(graphed, x))
    print(f"host {count} layers: eager {eager_ms:.3f} ms, graphed {graph_ms:.3f} ms", flush=True)
    return {"layers": count, "eager_ms": eager_ms, "graphed_ms": graph_ms}


def host_time(model_name: str) -> dict:
    """Step time by layer count, eager and graphed, at HOST_TOKENS; the slope is the host time per layer."""
    import torch

    rows = []
    for count in LAYER_COUNTS:
        rows.append(_host_row(model_name, count))
        torch.cuda.empty_cache()
    span = rows[-1]["layers"] - rows[0]["layers"]
    return {
        "tokens": list(HOST_TOKENS), "rows": rows,
        "eager_ms_per_layer": (rows[-1]["eager_ms"] - rows[0]["eager_ms"]) / span,
        "graphed_ms_per_layer": (rows[-1]["graphed_ms"] - rows[0]["graphed_ms"]) / span,
    }  # fmt: skip


def _step_bytes(fn) -> dict:  # type: ignore[no-untyped-def]
    import torch

    fn()  # gradients allocated, graphs warm
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return {"held_before": before, "step_peak": torch.cuda.max_memory_allocated() - before,
            "reserved": torch.cuda.memory_reserved()}  # fmt: skip


def graph_pool(model_name: str, count: int = 4) -> dict:
    """Bytes one step needs above what is held before it, eager and graphed, at MEMORY_TOKENS. Eager: the step's
    peak allocation. Graphed: the graph pool's reserved bytes (captured intermediates keep their addresses, so the
    pool stays reserved for them between steps) plus what a replayed step still allocates outside it."""
    import torch

    spec, layers = _layers(model_name, count)
    x = _sample(spec, MEMORY_TOKENS)
    eager = _step_bytes(lambda: _step(layers, x))
    torch.cuda.empty_cache()
    reserved_base = torch.cuda.memory_reserved()
    graphed = _graphed(spec, layers, MEMORY_TOKENS)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    pool = torch.cuda.memory_reserved() - reserved_base
    graph = _step_bytes(lambda: _step(graphed, x))
    eager_ms = time_ms(lambda: _step(layers, x))
    graph_ms = time_ms(lambda: _step(graphed, x))
    need = pool + graph["step_peak"]
    out = {
        "tokens": list(MEMORY_TOKENS), "layers": count, "eager": eager, "graphed": graph,
        "pool_reserved": pool, "pool_over_eager": need / eager["step_peak"] - 1.0,
        "eager_ms": eager_ms, "graphed_ms": graph_ms,
    }  # fmt: skip
    mib = 2**20
    print(f"pool {count} layers: eager step peak {eager['step_peak'] / mib:.0f} MiB; graphed: pool "
          f"{pool / mib:.0f} MiB + step peak {graph['step_peak'] / mib:.0f} MiB "
          f"({out['pool_over_eager']:+.1%}); eager {eager_ms:.2f} ms, graphed {graph_ms:.2f} ms",
          flush=True)  # fmt: skip
    return out


def main() -> None:
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama3-8b")
    ap.add_argument("--out", default="graphs.json")
    args = ap.parse_args()
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "model": args.model}
    res["host"] = host_time(args.model)
    res["pool"] = graph_pool(args.model)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
