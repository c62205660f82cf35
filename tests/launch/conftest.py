"""Helpers for the launch tests: the tiny model spec and a torchrun runner with an outer wall-clock timeout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from planner.specs import ModelSpec

REPO = Path(__file__).resolve().parents[2]
TINY = {
    "name": "tiny",
    "num_layers": 4,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "ffn_hidden_size": 256,
    "mlp": "swiglu",
    "vocab_size": 256,
    "max_seq_len": 64,
    "tied_embeddings": False,
    "position_embedding": "rope",
    "norm": "rmsnorm",
    "rope_theta": 10000.0,  # the worker's RoPE base (planner/launch/model.py); --emit megatron needs it
}
# Every layout shares these, so losses are comparable step for step with the 1-process reference.
COMMON = ["--global-batch", "8", "--seq-len", "64", "--precision", "fp32", "--seed", "0"]
FP32_TOL = 1e-5  # torch_cpu_notes.md: fp32 layouts stay within 9.5e-7 of the 1-process run
REF_STEPS = 8


@pytest.fixture(autouse=True)
def _run_in_a_fresh_folder(tmp_path, monkeypatch) -> None:
    """Each test runs in a folder of its own: a launch's default outputs (planner-launch-profile.json) land there,
    and a dry run's outputs check finds none an earlier run left in the working folder."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="session")
def tiny_path(tmp_path_factory) -> str:
    catalog = REPO / "planner" / "catalog" / "model_specs" / "tiny.yaml"
    if catalog.exists():
        return str(catalog)
    import yaml

    path = tmp_path_factory.mktemp("spec") / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return str(path)


@pytest.fixture(scope="session")
def tiny() -> ModelSpec:
    return ModelSpec(**TINY)


@dataclass
class Run:
    rc: int
    output: str
    profile: dict | None
    steps_log: list[dict]

    def losses(self) -> dict[int, float]:
        return {r["step"]: r["loss"] for r in self.profile["losses"]} if self.profile else {}


def torchrun(
    nproc: int,
    args: list[str],
    out: Path,
    *,
    timeout_s: float = 240,
    extra_env: dict | None = None,
    torchrun_flags: tuple[str, ...] = (),
) -> Run:
    """torchrun --standalone the worker; kill the whole process group past timeout_s."""
    out.mkdir(parents=True, exist_ok=True)
    profile = out / "profile.json"
    argv = [
        str(Path(sys.executable).with_name("torchrun")),
        "--standalone",
        "--nproc-per-node",
        str(nproc),
        *torchrun_flags,
        "-m",
        "planner.launch.worker",
        *args,
        "--profile-out",
        str(profile),
    ]
    returncode, output = _run_group(argv, timeout_s, extra_env)
    log = profile.with_name(profile.name + ".steps.jsonl")
    steps = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return Run(returncode, output, json.loads(profile.read_text()) if profile.exists() else None, steps)


def _run_group(argv: list[str], timeout_s: float, extra_env: dict | None = None) -> tuple[int, str]:
    """Run torchrun in its own process group, one thread per worker; kill the whole group past timeout_s and fail
    with the output's tail. (exit code, output)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", **(extra_env or {})}
    proc = subprocess.Popen(
        argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"torchrun exceeded {timeout_s:g} s:\n{output[-4000:]}")
    return proc.returncode, output


def run_probe(script: str, out: Path, *, nproc: int = 2, timeout_s: float = 100) -> None:
    """torchrun --standalone a probe script of this folder with `out` as its argument; fail past timeout_s
    (the whole process group killed) or on a non-zero exit, with the output's tail."""
    argv = [
        str(Path(sys.executable).with_name("torchrun")), "--standalone", "--nproc-per-node", str(nproc),
        str(Path(__file__).with_name(script)), str(out),
    ]  # fmt: skip
    returncode, output = _run_group(argv, timeout_s)
    assert returncode == 0, output[-3000:]


@pytest.fixture(scope="session")
def reference(tiny_path, tmp_path_factory) -> dict[int, float]:
    """Per-step losses of the 1-process run, computed once per session."""
    run = torchrun(
        1,
        ["--model", tiny_path, *COMMON, "--micro-batch", "4", "--steps", str(REF_STEPS)],
        tmp_path_factory.mktemp("ref"),
        timeout_s=120,
    )
    assert run.rc == 0, run.output[-4000:]
    return run.losses()


def max_delta(losses: dict[int, float], reference: dict[int, float]) -> float:
    assert losses, "no losses recorded"
    return max(abs(v - reference[s]) for s, v in losses.items())


def launch_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """`planner launch ARGV` in this process: (exit code, stdout, stderr)."""
    from planner.cli import main

    try:
        main(["launch", *argv])
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err
