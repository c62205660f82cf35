"""Calibrate the `cpu` profile on launched tiny-model plans and predict plans the fit never saw.

    python benchmarks/bench_calibrate_cpu.py [--bound-pct 20]

Launches sixteen plans (`planner launch --model tiny`, torchrun over gloo, one or two ranks), fits the GEMM scale
and the three fixed costs (per step, per kernel, per collective call) on nine of them with `planner.fit`, and
prints the held-out median |error| before and after; exit 1 when after is not better than before or above the
bound. The four tensor-parallel plans are held out whole: their host cost per DTensor op is the profile's
measured one (benchmarks/dtensor_ops.py), never fitted here. It starts from the shipped `cpu` profile without its
fitted fixed costs and with this host's bf16 GEMM
rates measured first (the shipped ones come from an AVX-512-BF16 box; an AVX2-only box emulates bf16 ~70x
slower). A timing measurement on a shared box: a benchmark, not a test (it moved out of the suite, where two
xdist workers and other jobs on two cores moved its held-out error from 4-10% to 28-39%). Takes ~6 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from planner.fit.calibrate import apply_params, fit, observation_from_profile, predict_step_s
from planner.hardware import MatmulPoint
from planner.io.catalog import load_hardware

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}


def _planner() -> list[str]:
    exe = shutil.which("planner", path=str(Path(sys.executable).parent)) or shutil.which("planner")
    return [exe] if exe else [sys.executable, "-m", "planner"]


def _without_fixed_costs(hw):
    names = ("step_overhead_s", "kernel_overhead_s", "collective_overhead_s")
    return hw.model_copy(update={"efficiency": apply_params(hw.efficiency, dict.fromkeys(names, 0.0))})


# (id, launch flags). Calibrated on FIT, predicted on HELD_OUT (plans the fit never saw). Every held-out plan
# interpolates a mechanism the fit saw: p1_mb4 between p1_mb1/p1_mb8 (and the 4-micro-batch p1_mb2_gb8),
# dp2_mb2 between dp2_mb1 and dp2_mb4, fsdp2_mb4 a bigger micro-batch of fsdp2_mb2. The tensor-parallel plans
# test a mechanism the fit never saw: on CPU their step is dominated by DTensor's per-op host dispatch (tp2 runs
# 90-180 ms against 20 ms for one process), the profile's measured dtensor_op_overhead_s times the op counts of
# cost/dtensor_host.py, and by gloo calls (collective_overhead_s, fitted on the DDP and FSDP plans). Fitting the
# per-op cost to them instead traded it against the other fixed costs (kernel_overhead_s 6x up, the collective
# cost to 0) and left the fit set 11% off.
PLANS = {
    "p1_mb1": ["--nproc", "1", "--micro-batch", "1"],
    "p1_mb2_s32": ["--nproc", "1", "--micro-batch", "2", "--seq-len", "32"],
    "p1_mb8": ["--nproc", "1", "--micro-batch", "8"],
    "p1_mb2_gb8": ["--nproc", "1", "--micro-batch", "2", "--global-batch", "8"],
    "p1_mb4_full": ["--nproc", "1", "--micro-batch", "4", "--recompute", "full"],
    "dp2_mb1": ["--dp", "2", "--micro-batch", "1"],
    "dp2_mb4": ["--dp", "2", "--micro-batch", "4"],
    "fsdp2_mb2": ["--dp", "2", "--zero", "3", "--micro-batch", "2"],
    "fsdp2_mb2_full": ["--dp", "2", "--zero", "3", "--micro-batch", "2", "--recompute", "full"],
    "p1_mb4": ["--nproc", "1", "--micro-batch", "4"],
    "dp2_mb2": ["--dp", "2", "--micro-batch", "2"],
    "fsdp2_mb4": ["--dp", "2", "--zero", "3", "--micro-batch", "4"],
    "tp2_mb1": ["--tp", "2", "--micro-batch", "1"],
    "tp2_mb4": ["--tp", "2", "--micro-batch", "4"],
    "tp2sp_mb2": ["--tp", "2", "--sp", "--micro-batch", "2"],
    "tp2_mb2_full": ["--tp", "2", "--micro-batch", "2", "--recompute", "full"],
}
HELD_OUT = ("p1_mb4", "dp2_mb2", "fsdp2_mb4", "tp2_mb1", "tp2_mb4", "tp2sp_mb2", "tp2_mb2_full")
# Per-token GEMM rate, and the three fixed costs that dominate a 0.3M-parameter model in eager PyTorch on CPU:
# per step (optimizer loop), per kernel (op dispatch, x layers x micro-batches, +forward again with recompute)
# and per collective call (gloo; FSDP gathers and reduces every layer every micro-batch). Each is pinned by a
# different group of fit plans; hbm and intra_node are left at the measured bandwidths (they are not identifiable:
# at these sizes the bytes terms are a few percent of a step).
FIT_PARAMS = ("matmul_scale", "step_overhead_s", "kernel_overhead_s", "collective_overhead_s")
# Each rank has one of the 2 cores and the box is shared, so a step is only ever slowed down: fit and judge the
# fastest of many timed steps (min_step_s), which repeats from run to run; the median of 8 steps varied ~2x.
# Two ranks on two shared cores are slowed far more often than one (a step waits for both), so they run
# longer: a 2-rank step is 15-60 ms, 100 of them cost a few seconds next to ~9 s of torchrun start-up.
STEPS_1, STEPS_2, WARMUP, STAT = 25, 50, 5, "min"
# Measured on the AVX-512-BF16 2-core box from the shipped profile (before -> after, held-out median): 75.7 -> 10.4%,
# 75.8 -> 7.2%, 76.3 -> 3.9%, 74.9 -> 8.7%; the floor was p1_mb4, where square-GEMM rates bend and the launched
# skinny GEMMs scale linearly with tokens (the rates are now measured at the launched shape).


def _worker_gemm_rates(tokens=(64, 128, 256, 512), budget_s: float = 0.25) -> dict[float, float]:
    """bf16 GEMM FLOP/s on one thread (as launch runs each rank) at the tiny model's MLP shape, tokens x 64 by
    64 x 256, by FLOPs of one GEMM: bench-hardware's sweep cut to the sizes this benchmark launches, so it takes a
    second."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rates = {}
        for t in tokens:
            a, b = torch.randn(t, 64, dtype=torch.bfloat16), torch.randn(64, 256, dtype=torch.bfloat16)
            a @ b
            t0, reps = time.perf_counter(), 0
            while time.perf_counter() - t0 < budget_s:
                a @ b
                reps += 1
            flops = 2.0 * t * 64 * 256
            rates[flops] = flops * reps / (time.perf_counter() - t0)
        return rates
    finally:
        torch.set_num_threads(threads)


def _on_this_host(hw):
    """The profile with this host's bf16 GEMM rates: the shipped ones were measured on an AVX-512-BF16 box (143
    GFLOP/s), and an AVX2-only host (seen in CI) emulates bf16 at ~2 GFLOP/s, further off than the GEMM scale's
    bounds (0.5-1.5) reach. Peak and curve come from the measured rates, as bench-hardware writes them."""
    rates = _worker_gemm_rates()
    peak = max(rates.values())
    curve = tuple(MatmulPoint(flops=f, efficiency=r / peak) for f, r in sorted(rates.items()))
    gpu = hw.gpu.model_copy(update={"peak_flops": {**hw.gpu.peak_flops, "bf16": peak}})
    return hw.model_copy(update={"gpu": gpu, "efficiency": hw.efficiency.model_copy(update={"matmul": curve})})


def _launch(name: str, flags: list[str], tmp: Path) -> dict:
    out = tmp / f"{name}.json"
    steps = STEPS_1 if flags[:2] == ["--nproc", "1"] else STEPS_2
    cmd = [
        *_planner(),
        "launch",
        "--model",
        "tiny",
        *flags,
        "--steps",
        str(steps),
        "--warmup",
        str(WARMUP),
        "--profile-out",
        str(out),
        "--json",
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=120)
    if r.returncode != 0:
        sys.exit(f"{name}: {' '.join(cmd)}\n{r.stderr[-3000:]}")
    doc = json.loads(out.read_text())
    doc["id"] = name
    return doc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bound-pct", type=float, default=20.0, help="held-out median |error| to pass (default 20)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    base = _on_this_host(_without_fixed_costs(load_hardware("cpu")))
    with tempfile.TemporaryDirectory() as tmp:
        docs = {n: _launch(n, f, Path(tmp)) for n, f in PLANS.items()}
    obs = {n: observation_from_profile(d, base, n, stat=STAT) for n, d in docs.items()}
    train = [o for n, o in obs.items() if n not in HELD_OUT]
    held = [obs[n] for n in HELD_OUT]
    res = fit(train, base, names=FIT_PARAMS)
    eff_after = apply_params(base.efficiency, res.values)

    def err(o, eff) -> float:  # with the engine the fit saw: the planner worker's (the profiles name none)
        return abs(predict_step_s(o, eff) / o.measured_step_s - 1) * 100

    before = statistics.median(err(o, base.efficiency) for o in held)
    after = statistics.median(err(o, eff_after) for o in held)
    print(f"bf16 GEMM peak here {base.peak('bf16') / 1e9:.2f} GFLOP/s (1 thread, the tiny model's MLP shape)")
    print(
        f"{STAT} step of {STEPS_1 - WARMUP} (1 rank) / {STEPS_2 - WARMUP} (2 ranks) timed: "
        + ", ".join(f"{o.id}={o.measured_step_s * 1e3:.1f}ms" for o in obs.values())
    )
    print(f"fit ({', '.join(FIT_PARAMS)}): " + ", ".join(f"{k}={v:.4g}" for k, v in res.values.items()))
    if res.unidentified:
        print(f"not identified: {res.unidentified}")
    print(f"fit-set median |err|: before {res.median_before_pct:.1f}%  after {res.median_after_pct:.1f}%")
    for o in held:
        print(f"held-out {o.id}: before {err(o, base.efficiency):.1f}%  after {err(o, eff_after):.1f}%")
    print(
        f"HELD-OUT median |err|: before {before:.1f}%  after {after:.1f}%  (bound {args.bound_pct}%); "
        f"wall {time.perf_counter() - t0:.0f} s"
    )
    return 0 if res.median_after_pct < res.median_before_pct and after < before and after <= args.bound_pct else 1


if __name__ == "__main__":
    raise SystemExit(main())
