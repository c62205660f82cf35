"""Alpha-beta fits of the collective timings and the profile YAML (every number commented)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from planner.cost.comm import ring_steps
from planner.io.files import write_text_atomic


def alpha_beta(rows: list[dict[str, Any]], kind: str, n: int) -> dict[str, float]:
    """Least squares of t = steps*alpha + frac*bytes/beta (the ring model of planner.comm), rows weighted 1/t
    so that small messages (latency) count as much as large ones (bandwidth); alpha is clamped at 0."""
    steps, frac = ring_steps(kind, n)
    pts = [(frac * r["bytes"], r["time_s"]) for r in rows if r["kind"] == kind and r["time_s"] > 0]
    if len(pts) < 2:
        return {"latency_s": 0.0, "bandwidth_bytes_per_s": float("nan"), "points": len(pts)}
    w = [1.0 / t for _, t in pts]
    # weighted normal equations of t = a + b x with weights w^2 (residual/t)
    w2 = [wi * wi for wi in w]
    s0 = sum(w2)
    s1 = sum(wi * x for wi, (x, _) in zip(w2, pts))
    s2 = sum(wi * x * x for wi, (x, _) in zip(w2, pts))
    t0 = sum(wi * t for wi, (_, t) in zip(w2, pts))
    t1 = sum(wi * x * t for wi, (x, t) in zip(w2, pts))
    det = s0 * s2 - s1 * s1
    a = (t0 * s2 - s1 * t1) / det
    b = (s0 * t1 - s1 * t0) / det
    if a < 0:  # refit through the origin
        a, b = 0.0, t1 / s2
    if b <= 0:  # flat timings: bandwidth from the largest message alone
        x, t = max(pts)
        b = t / x
    return {"latency_s": a / steps, "bandwidth_bytes_per_s": 1.0 / b, "points": len(pts)}


def _num(v: float) -> str:
    return f"{v:.4g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.4e}"


def profile_yaml(res: dict[str, Any], name: str, stamp: str) -> str:
    """The hardware profile of what bench-hardware measured, every number commented with where it came from."""
    m = f"# measured by bench-hardware {stamp}"
    lines = _header(res, name, stamp) + _gpu(res, stamp, m) + _network(res, stamp, m) + _efficiency(res, stamp, m)
    return "\n".join(lines) + "\n"


def _what(res: dict[str, Any]) -> str:
    cpu = res["device"] == "cpu"
    return "CPU figures (one process per rank, 1 thread each), not GPU figures" if cpu else res["device_name"]


def _header(res: dict[str, Any], name: str, stamp: str) -> list[str]:
    lines = [
        f"# Written by `planner bench-hardware` on {stamp} ({res['host']}). {_what(res)}.",
        "# peak_flops = the best GEMM rate measured per precision (NOT a datasheet peak); efficiency.matmul is the",
        f"# measured rate of each GEMM size relative to that peak ({res['curve_precision']} curve). Bandwidths are",
        "# achieved figures, so efficiency.hbm / intra_node / inter_node are 1.0.",
    ]
    if res["device"] == "cpu":
        lines.append("# CPU FIGURES: measured on a CPU with gloo; do not read them as any GPU's numbers.")
    return [*lines, f"name: {name}", f'description: "bench-hardware {stamp} on {res["host"]}: {_what(res)}"']


def _gpu(res: dict[str, Any], stamp: str, m: str) -> list[str]:
    peak = res["peak_flops"]
    lines = [
        "gpu:",
        f'  name: "{res["device_name"]}"',
        f"  hbm_bytes: {_num(res['hbm_bytes'])}   # {res['hbm_note']}, bench-hardware {stamp}",
        f"  hbm_bandwidth_bytes_per_s: {_num(res['memory']['bytes_per_s'])}   {m} (tensor copy, read+write bytes)",
        f"  peak_flops_source: measured   # bench-hardware {stamp}: best GEMM rates, not datasheet peaks",
        "  peak_flops:",
    ]
    for p in ("fp32", "bf16", "fp16"):
        lines.append(f"    {p}: {_num(peak[p])}   {m} (best GEMM rate)")
    lines.append(
        f"    fp8: {_num(peak['fp8'])}   # set to the fp16 figure measured by bench-hardware {stamp} (no FP8 GEMM here)"
        if res["device"] == "cpu"
        else f"    fp8: {_num(peak['fp8'])}   {m}"
    )
    return lines


def _network(res: dict[str, Any], stamp: str, m: str) -> list[str]:
    ar = res["fits"]["all_reduce"]
    return [
        f"gpus_per_node: {res['gpus_per_node']}   # bench-hardware {stamp}: {res['gpus_per_node_note']}",
        "intra_node:   # all-reduce alpha-beta fit over "
        + f"{res['comm']['world_size']} {res['comm']['backend']} ranks",
        f"  bandwidth_bytes_per_s: {_num(ar['bandwidth_bytes_per_s'])}   {m}",
        f"  latency_s: {_num(ar['latency_s'])}   {m}",
        "inter_node:   # one host: the same as intra_node (no inter-node link was measured)",
        f"  bandwidth_bytes_per_s: {_num(ar['bandwidth_bytes_per_s'])}   {m} (copy of intra_node)",
        f"  latency_s: {_num(ar['latency_s'])}   {m} (copy of intra_node)",
    ]


def _efficiency(res: dict[str, Any], stamp: str, m: str) -> list[str]:
    lines = [f"efficiency:   {m}", "  matmul:"]
    for f, e in res["matmul_curve"]:
        lines.append(f"    - {{flops: {f:.3e}, efficiency: {e:.4f}}}   {m}")
    return [
        *lines,
        f"  hbm: 1.0   # bench-hardware {stamp}: the bandwidth above is already achieved",
        f"  intra_node: 1.0   # bench-hardware {stamp}: the bandwidth above is already achieved",
        f"  inter_node: 1.0   # bench-hardware {stamp}: the bandwidth above is already achieved",
        f"  step_overhead_s: 0.0   # bench-hardware {stamp}: not measured; `planner calibrate` fits it",
        f'  fitted: "bench-hardware {stamp}"',
        "reserved:",
        f"  cuda_context_bytes: {_num(res['rss_bytes'])}   {m} (worker RSS after init_process_group)",
        f"  comm_workspace_bytes: 5.0e7   # assumed by bench-hardware {stamp}, not measured",
        f"  allocator_fraction: 0.05   # assumed by bench-hardware {stamp}, not measured",
        f"checkpoint_write_bytes_per_s: {_num(res['checkpoint']['bytes_per_s'])}   {m} (write + fsync in TMPDIR)",
    ]


def write_atomic(path: Path, text: str) -> None:
    write_text_atomic(path, text, what="hardware profile")


def curve_from(rows: list[dict[str, Any]], precision: str, peak: float) -> list[tuple[float, float]]:
    out: dict[float, float] = {}
    for r in rows:
        if r["precision"] == precision:
            out[r["flops"]] = max(out.get(r["flops"], 0.0), min(1.0, r["achieved_flops_per_s"] / peak))
    return [(f, max(1e-3, e)) for f, e in sorted(out.items()) if math.isfinite(e)]
