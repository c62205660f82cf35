"""Shared test fixtures that are plain functions (pytest puts tests/ on sys.path)."""

import subprocess
import sys

from planner.hardware import Efficiency, GPUSpec, HardwareProfile, LinkTier, MatmulPoint, ReservedMemory


def make_hw(*, gpus_per_node: int = 8, eff: float = 0.7, overhead_s: float = 0.0) -> HardwareProfile:
    """An A100-like profile built in code, so cost-model tests do not depend on hardware_profiles/."""
    return HardwareProfile(
        name="test-gpu",
        gpu=GPUSpec(
            name="t",
            hbm_bytes=80e9,
            hbm_bandwidth_bytes_per_s=2e12,
            peak_flops={"fp32": 20e12, "bf16": 300e12, "fp16": 300e12, "fp8": 600e12},
        ),
        gpus_per_node=gpus_per_node,
        intra_node=LinkTier(bandwidth_bytes_per_s=300e9, latency_s=3e-6),
        inter_node=LinkTier(bandwidth_bytes_per_s=25e9, latency_s=8e-6),
        efficiency=Efficiency(
            matmul=(MatmulPoint(flops=1e8, efficiency=eff / 2), MatmulPoint(flops=1e12, efficiency=eff)),
            intra_node=0.8,
            inter_node=0.8,
            step_overhead_s=overhead_s,
        ),
        reserved=ReservedMemory(cuda_context_bytes=1e9, comm_workspace_bytes=5e8, allocator_fraction=0.05),
    )


SECTIONS = {
    "optimizer": "memory",
    "grad_dtype": "memory",
    "master_copy": "memory",
    "attention": "kernels",
    "elementwise": "kernels",
    "compile": "kernels",
    "flash_kernel": "kernels",
    "dropout": "kernels",
    "selective_recompute": "kernels",
    "tp_overlap": "comm",
}


def make_engine(name: str = "megatron", **changes: object):
    """An engine profile from the catalog with some fields changed, e.g. make_engine(tp_overlap=True)."""
    from planner.io.catalog import load_engine

    engine = load_engine(name)
    for key, value in changes.items():
        section = SECTIONS[key]
        engine = engine.model_copy(update={section: getattr(engine, section).model_copy(update={key: value})})
    return engine


def run_planner(*args: str, timeout_s: float = 120) -> tuple[int, str, str]:
    """`python -m planner ARGS` as the console script runs it (through main()): (exit code, stdout, stderr)."""
    proc = subprocess.run([sys.executable, "-m", "planner", *args], capture_output=True, text=True, timeout=timeout_s)
    return proc.returncode, proc.stdout, proc.stderr
