"""Alpha-beta fits of the collective timings and the profile YAML (every number commented)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from planner.cost.comm import ring_steps
from planner.hardware import HardwareProfile
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


def profile_yaml(res: dict[str, Any], name: str, stamp: str, *, links: HardwareProfile | None = None) -> str:
    """The hardware profile of what bench-hardware measured, every number commented with where it came from;
    `links`: where the link tiers come from when no collective was timed (one device)."""
    m = f"# measured by bench-hardware {stamp}"
    lines = _header(res, name, stamp) + _gpu(res, stamp, m) + _link_lines(res, stamp, links)
    return "\n".join(lines + _efficiency(res, stamp, m, links)) + "\n"


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
        *(
            ["  architecture: cpu   # CPU processes: priced as the cpu profile is, no GPU behaviour"]
            if res["device"] == "cpu"
            else []
        ),
        "  peak_flops:",
    ]
    for p in ("fp32", "bf16", "fp16"):
        lines.append(f"    {p}: {_num(peak[p])}   {m} (best GEMM rate)")
    lines.append(
        f"    fp8: {_num(peak['fp8'])}   {m} (best e4m3 GEMM, torch._scaled_mm)"
        if res.get("matmul_fp8")
        else f"    fp8: {_num(peak['fp8'])}   # the fp16 figure measured by bench-hardware {stamp} (no FP8 GEMM here)"
    )
    return lines


def _efficiency(res: dict[str, Any], stamp: str, m: str, links: HardwareProfile | None) -> list[str]:
    lines = [f"efficiency:   {m}", "  matmul:"]
    for f, e in res["matmul_curve"]:
        lines.append(f"    - {{flops: {f:.3e}, efficiency: {e:.4f}}}   {m}")
    if res.get("matmul_fp8_curve"):
        lines.append("  matmul_fp8:")
        for f, e in res["matmul_fp8_curve"]:
            lines.append(f"    - {{flops: {f:.3e}, efficiency: {e:.4f}}}   {m} (e4m3, torch._scaled_mm)")
    cpu = res["device"] == "cpu"
    return [
        *lines,
        f"  hbm: 1.0   # bench-hardware {stamp}: the bandwidth above is already achieved",
        *_link_efficiency_lines(stamp, links),
        f"  step_overhead_s: 0.0   # bench-hardware {stamp}: not measured; `planner calibrate` fits it",
        _dtensor_line(res, stamp, m),
        _sac_line(res, stamp, m),
        f'  fitted: "bench-hardware {stamp}"',
        "reserved:",
        f"  cuda_context_bytes: {_num(res['rss_bytes'])}   {m} "
        + ("(device memory outside the allocator)" if not cpu else "(worker RSS after init_process_group)"),
        f"  comm_workspace_bytes: 5.0e7   # assumed by bench-hardware {stamp}, not measured",
        f"  allocator_fraction: 0.05   # assumed by bench-hardware {stamp}, not measured",
        f"checkpoint_write_bytes_per_s: {_num(res['checkpoint']['bytes_per_s'])}   {m} (write + fsync in TMPDIR)",
    ]


def _dtensor_line(res: dict[str, Any], stamp: str, m: str) -> str:
    return _dispatch_line(res.get("dtensor"), "dtensor_op_overhead_s", stamp, m, lambda dt: (
        f"(a step on DTensors over a mesh of one rank against the plain step, {dt['ops']} DTensor ops: "
        f"{dt['dtensor_step_s'] * 1e3:.2f} vs {dt['plain_step_s'] * 1e3:.2f} ms)"
    ))  # fmt: skip


def _sac_line(res: dict[str, Any], stamp: str, m: str) -> str:
    return _dispatch_line(res.get("sac"), "sac_op_overhead_s", stamp, m, lambda sac: (
        f"(a step under selective checkpointing that saves nothing against plain checkpointing, {sac['ops']} ops: "
        f"{sac['sac_step_s'] * 1e3:.2f} vs {sac['plain_step_s'] * 1e3:.2f} ms)"
    ))  # fmt: skip


def _dispatch_line(
    timed: dict[str, Any] | None, field: str, stamp: str, m: str, how: Callable[[dict[str, Any]], str]
) -> str:
    """A host-dispatch cost's profile line: 0 on a GPU (its dispatch runs ahead of the kernels) or where it could
    not be timed here (why), else the measured cost per op and how it was measured."""
    if timed is None:
        return f"  {field}: 0.0   # bench-hardware {stamp}: a GPU's dispatch runs ahead of its kernels"
    if timed["why"]:
        return f"  {field}: 0.0   # bench-hardware {stamp}: not timed: {timed['why']}"
    return f"  {field}: {_num(timed['op_s'])}   {m} {how(timed)}"


def _link_lines(res: dict[str, Any], stamp: str, links: HardwareProfile | None) -> list[str]:
    """The node and its link tiers: the all-reduce fit over the ranks that ran, or a named profile's (one device)."""
    m = f"# measured by bench-hardware {stamp}"
    if links is not None:
        c = f"# copied from {links.name} by bench-hardware {stamp} (one device: no collective timed)"
        return [
            f"gpus_per_node: {links.gpus_per_node}   {c}",
            f"nvlink_domain: {links.nvlink_domain}   {c}",
            "intra_node:",
            f"  bandwidth_bytes_per_s: {_num(links.intra_node.bandwidth_bytes_per_s)}   {c}",
            f"  latency_s: {_num(links.intra_node.latency_s)}   {c}",
            "inter_node:",
            f"  bandwidth_bytes_per_s: {_num(links.inter_node.bandwidth_bytes_per_s)}   {c}",
            f"  latency_s: {_num(links.inter_node.latency_s)}   {c}",
        ]
    ar, comm = res["fits"]["all_reduce"], res["comm"]
    return [
        f"gpus_per_node: {res['gpus_per_node']}   # bench-hardware {stamp}: {res['gpus_per_node_note']}",
        f"intra_node:   # all-reduce alpha-beta fit over {comm['world_size']} {comm['backend']} ranks",
        f"  bandwidth_bytes_per_s: {_num(ar['bandwidth_bytes_per_s'])}   {m}",
        f"  latency_s: {_num(ar['latency_s'])}   {m}",
        "inter_node:   # one host: the same as intra_node (no inter-node link was measured)",
        f"  bandwidth_bytes_per_s: {_num(ar['bandwidth_bytes_per_s'])}   {m} (copy of intra_node)",
        f"  latency_s: {_num(ar['latency_s'])}   {m} (copy of intra_node)",
    ]


def _link_efficiency_lines(stamp: str, links: HardwareProfile | None) -> list[str]:
    if links is not None:
        c = f"# copied from {links.name} by bench-hardware {stamp}"
        return [
            f"  intra_node: {links.efficiency.intra_node}   {c}",
            f"  inter_node: {links.efficiency.inter_node}   {c}",
            f"  half_bandwidth_bytes: {_num(links.efficiency.half_bandwidth_bytes)}   {c}",
            f"  collective_base_s: {_num(links.efficiency.collective_base_s)}   {c}",
        ]
    return [
        f"  intra_node: 1.0   # bench-hardware {stamp}: the bandwidth above is already achieved",
        f"  inter_node: 1.0   # bench-hardware {stamp}: the bandwidth above is already achieved",
    ]


def write_atomic(path: Path, text: str) -> None:
    write_text_atomic(path, text, what="hardware profile")


def curve_from(rows: list[dict[str, Any]], precision: str, peak: float) -> list[tuple[float, float]]:
    out: dict[float, float] = {}
    for r in rows:
        if r["precision"] == precision:
            out[r["flops"]] = max(out.get(r["flops"], 0.0), min(1.0, r["achieved_flops_per_s"] / peak))
    return [(f, max(1e-3, e)) for f, e in sorted(out.items()) if math.isfinite(e)]
