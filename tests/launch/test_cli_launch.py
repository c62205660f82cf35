"""`planner launch` at the CLI edge: dry run, emit, refusals (no torchrun started)."""

from __future__ import annotations

import json

import pytest
import yaml

from planner.cli import main


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        main(["launch", *argv])
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def test_dry_run_prints_checks_mesh_command_and_layout(capsys, tiny_path):
    code, out, _ = _run(
        capsys,
        "--model",
        tiny_path,
        "--pp",
        "2",
        "--dp",
        "2",
        "--tp",
        "2",
        "--sp",
        "--micro-batch",
        "2",
        "--seq-len",
        "64",
        "--dry-run",
    )
    assert code == 0
    assert "[ok] world size" in out and "mesh: pp=2 x dp=2 x cp=1 x tp=2" in out
    assert "torchrun --standalone" in out and "--nproc-per-node 8" in out and "OMP_NUM_THREADS=1" in out
    assert "rank 7: pp=1 dp=1 cp=0 tp=1 | stage 1: layers 2-3" in out


def test_dry_run_json_and_plan_file(capsys, tiny_path, tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"dp": 2, "zero": 3, "global_batch": 8, "seq_len": 64}))
    code, out, _ = _run(capsys, "--model", tiny_path, "--plan", str(plan), "--micro-batch", "2", "--dry-run", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["mesh"] == {"pp": 1, "dp": 2, "cp": 1, "tp": 1}
    assert "--zero 3" in doc["command"] and "--micro-batch 2" in doc["command"]
    assert all(c["ok"] for c in doc["checks"])


def test_bad_plan_is_one_line_and_exit_2(capsys, tiny_path):
    code, _, err = _run(capsys, "--model", tiny_path, "--tp", "3", "--seq-len", "64")
    assert code == 2 and "tp=3" in err


def test_cp_on_cpu_is_refused_before_starting(capsys, tiny_path):
    code, _, err = _run(capsys, "--model", tiny_path, "--cp", "2", "--seq-len", "64", "--global-batch", "2")
    assert code == 2 and "cp=2" in err and "CPU" in err


@pytest.mark.parametrize(
    "kind,name",
    [
        ("slurm", "launch.slurm"),
        ("k8s", "pytorchjob.yaml"),
        ("torchrun", "torchrun.sh"),
        ("megatron", "megatron_args.sh"),
        ("torchtitan", "torchtitan.toml"),
        ("deepspeed", "deepspeed.json"),
    ],
)
def test_emit_writes_files(capsys, tiny_path, tmp_path, kind, name):
    code, out, _ = _run(
        capsys,
        "--model",
        tiny_path,
        "--dp",
        "4",
        "--tp",
        "2",
        "--nnodes",
        "2",
        "--seq-len",
        "64",
        "--emit",
        kind,
        "--out",
        str(tmp_path),
    )
    assert code == 0 and (tmp_path / name).exists() and name in out


def test_emit_needs_out(capsys, tiny_path):
    code, _, err = _run(capsys, "--model", tiny_path, "--seq-len", "64", "--emit", "slurm")
    assert code == 2 and "--out" in err
