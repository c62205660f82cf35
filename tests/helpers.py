"""Shared test fixtures that are plain functions (pytest puts tests/ on sys.path)."""

import contextlib
import io
import subprocess
import sys
import traceback
import warnings

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
    """`planner ARGS` through main(), as the console script runs it, in this process: (exit code, stdout, stderr).
    An error main() lets through is its traceback on stderr and exit 1, as Python's would be. A launch that runs
    processes (neither --emit nor --dry-run) goes through a child process: run_planner_process.

    In this process, not a child: a child's start (the interpreter, the CLI's imports) costs 0.6-1 s of a 2-core
    CI box a call. What only a fresh process shows (what a command imports, its teardown, its terminal width, its
    signal handlers) is tested with run_planner_process or a child of its own."""
    if args and args[0] == "launch" and not {"--emit", "--dry-run"} & set(args):
        return run_planner_process(*args, timeout_s=timeout_s)
    from planner.cli import main
    from planner.io.catalog import set_user_catalogs

    set_user_catalogs([])  # as a fresh process: no catalog entry read before (a file a test rewrote is read again)
    out, err = io.StringIO(), io.StringIO()
    code, showwarning = 0, warnings.showwarning  # main() sets its own for the command's warnings
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
        except Exception:  # what the process would print: its traceback, exit 1
            traceback.print_exc()
            code = 1
        finally:
            warnings.showwarning = showwarning
    return code, out.getvalue(), err.getvalue()


def run_planner_process(*args: str, timeout_s: float = 120) -> tuple[int, str, str]:
    """`python -m planner ARGS` in a child process: (exit code, stdout, stderr)."""
    proc = subprocess.run([sys.executable, "-m", "planner", *args], capture_output=True, text=True, timeout=timeout_s)
    return proc.returncode, proc.stdout, proc.stderr


def byte_fields(doc, sizes=False):
    """Every size of a document: the values at any depth under a `*_bytes` key (a figure, a list, a mapping), but
    not in validate's `error`, which holds percent keyed by the measured fields' names (DESIGN.md)."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k != "error":
                yield from byte_fields(v, sizes or str(k).endswith("_bytes"))
    elif isinstance(doc, list):
        for v in doc:
            yield from byte_fields(v, sizes)
    elif sizes and doc is not None:
        yield doc
