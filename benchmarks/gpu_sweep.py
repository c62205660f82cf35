"""Profile single-GPU plans with `planner launch` and print measured vs predicted step time and memory.

    python benchmarks/gpu_sweep.py --hardware h200 --out runs/h200 [--only NAME ...] [--steps 10]

Each case is one `planner launch` process (torchrun, NCCL, bf16 autocast, eager PyTorch) writing a
profile JSON into --out; `planner calibrate runs/h200/*.json --hardware h200 -o fitted.yaml` fits the
profile to them. The table compares the median timed step with `planner estimate` and
torch.cuda.max_memory_allocated with the predicted tensor bytes (everything but the allocator reserve).
It needs a CUDA device and torch. Its figures: benchmarks/results/h100-2026-11-25, h200-2026-11-26 and
h200-2026-11-26-fp8 (the `-fp8` cases: the worker's fp8 linears against the same plans in bf16).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

DEFAULTS = {"--seq-len": "2048", "--precision": "bf16"}  # unless a case's flags say otherwise
# name: (model, extra flags). gpt3-1.3b is the fitting set; the llama-shaped rehearsals (SwiGLU, RMSNorm,
# RoPE, untied 32k vocab) and gpt3-2.7b check that a fit on one model carries to another.
CASES: dict[str, tuple[str, list[str]]] = {
    "g13-mb1": ("gpt3-1.3b", ["--micro-batch", "1", "--global-batch", "8"]),
    "g13-mb2": ("gpt3-1.3b", ["--micro-batch", "2", "--global-batch", "8"]),
    "g13-mb4": ("gpt3-1.3b", ["--micro-batch", "4", "--global-batch", "8"]),
    "g13-mb8": ("gpt3-1.3b", ["--micro-batch", "8", "--global-batch", "8"]),
    "g13-mb4-sel": ("gpt3-1.3b", ["--micro-batch", "4", "--global-batch", "8", "--recompute", "selective"]),
    "g13-mb8-sel": ("gpt3-1.3b", ["--micro-batch", "8", "--global-batch", "8", "--recompute", "selective"]),
    "g13-mb4-full": ("gpt3-1.3b", ["--micro-batch", "4", "--global-batch", "8", "--recompute", "full"]),
    "g13-mb16-full": ("gpt3-1.3b", ["--micro-batch", "16", "--global-batch", "16", "--recompute", "full"]),
    "g27-mb2": ("gpt3-2.7b", ["--micro-batch", "2", "--global-batch", "8"]),
    "g27-mb4-sel": ("gpt3-2.7b", ["--micro-batch", "4", "--global-batch", "8", "--recompute", "selective"]),
    "g27-mb8-full": ("gpt3-2.7b", ["--micro-batch", "8", "--global-batch", "8", "--recompute", "full"]),
    "l7x8-mb2": ("llama2-7b", ["--layers", "8", "--micro-batch", "2", "--global-batch", "8"]),
    "l7x8-mb4-sel": (
        "llama2-7b",
        ["--layers", "8", "--micro-batch", "4", "--global-batch", "8", "--recompute", "selective"],
    ),
    "l7x8-mb8-full": (
        "llama2-7b",
        ["--layers", "8", "--micro-batch", "8", "--global-batch", "8", "--recompute", "full"],
    ),
    # Llama 3 8B (GQA, 128k vocabulary) at 8k tokens.
    "l3x8-s8k": ("llama3-8b", ["--layers", "8", "--seq-len", "8192", "--micro-batch", "1", "--global-batch", "4"]),
}
# fp8: the worker's per-tensor dynamic fp8 linears (launch/float8.py) against the same plans in bf16 on the same GPU.
FP8_OF = ("l3x8-s8k", "g13-mb4", "l7x8-mb2", "l7x8-mb4-sel", "l7x8-mb8-full")
CASES.update({f"{name}-fp8": (CASES[name][0], [*CASES[name][1], "--precision", "fp8-current"]) for name in FP8_OF})


def run_case(name: str, hardware: str, out: Path, steps: int, warmup: int, timeout_s: float) -> dict:
    model, flags = CASES[name]
    profile = out / f"{name}.json"
    cmd = [
        sys.executable,
        "-m",
        "planner",
        "launch",
        "--model",
        model,
        "--hardware",
        hardware,
        *[x for flag, value in DEFAULTS.items() if flag not in flags for x in (flag, value)],
        *flags,
        "--steps",
        str(steps),
        "--warmup",
        str(warmup),
        "--profile-out",
        str(profile),
        "--json",
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return {"name": name, "rc": proc.returncode, "wall_s": wall, "error": (proc.stdout + proc.stderr)[-2000:]}
    return {"name": name, "rc": 0, "wall_s": wall, **measured_vs_predicted(json.loads(profile.read_text()), hardware)}


def measured_vs_predicted(profile: dict, hardware: str) -> dict:
    from planner.io.catalog import load_engine, load_hardware
    from planner.launch.runner import predicted
    from planner.plan import Plan
    from planner.specs import ModelSpec

    model, plan = ModelSpec(**profile["model"]), Plan(**profile["plan"])
    pred = predicted(model, load_hardware(hardware), plan, load_engine("planner"))
    rank = profile["memory_per_rank"][0]
    return {
        "step_s": profile["median_step_s"],
        "pred_step_s": pred["step_time_s"],
        "peak_bytes": rank["peak_bytes"],
        "pred_tensor_bytes": pred["tensor_bytes"],
        "state_bytes": rank["params_bytes"] + rank["grads_bytes"] + rank["optimizer_bytes"],
        "pred_state_bytes": pred["model_state_bytes"],
        "device": profile["device"],
        "torch": profile["torch_version"],
    }


def _pct(measured: float, pred: float | None) -> str:
    return f"{(measured - pred) / pred * 100:+.1f}%" if pred else "n/a"  # as `planner launch` prints it


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hardware", default="h200")
    ap.add_argument("--out", type=Path, default=Path("runs"))
    ap.add_argument("--only", nargs="*", default=list(CASES))
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--timeout-s", type=float, default=240.0)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    print(f"{'case':15} {'step ms':>9} {'pred':>9} {'err':>7} | {'peak GiB':>9} {'pred':>7} {'err':>7} | wall s")
    for name in args.only:
        r = run_case(name, args.hardware, args.out, args.steps, args.warmup, args.timeout_s)
        rows.append(r)
        if r["rc"]:
            print(f"{name:15} FAILED rc={r['rc']}: {r['error'][-600:]}", flush=True)
            continue
        gib = 2**30
        print(
            f"{name:15} {r['step_s'] * 1e3:9.1f} {r['pred_step_s'] * 1e3:9.1f} {_pct(r['step_s'], r['pred_step_s']):>7}"
            f" | {r['peak_bytes'] / gib:9.2f} {r['pred_tensor_bytes'] / gib:7.2f}"
            f" {_pct(r['peak_bytes'], r['pred_tensor_bytes']):>7} | {r['wall_s']:.0f}",
            flush=True,
        )
    (args.out / "summary.json").write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
