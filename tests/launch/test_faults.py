"""Checkpoints, restarts and hangs: resume reproduces the uninterrupted losses; a hung collective fails loudly."""

from __future__ import annotations

import time

import pytest

from tests.launch.conftest import COMMON, FP32_TOL, REF_STEPS, max_delta, torchrun


def test_latest_marker_ignores_an_unfinished_save(tmp_path):
    """A crash mid-save leaves step_N.tmp behind; resume reads only 'latest', which still names the last good one."""
    from planner.launch.checkpoint import latest_step

    assert latest_step(tmp_path) is None
    (tmp_path / "step_000004").mkdir()
    (tmp_path / "latest").write_text("step_000004\n")
    (tmp_path / "step_000008.tmp").mkdir()
    assert latest_step(tmp_path) == 4


def test_error_file_is_whole_or_absent(tmp_path, monkeypatch):
    """A rank's error file for torchrun: complete JSON when written, and no file at all when the writer dies
    before it finishes (here: the rename never happens), never the truncated file that crashes torchrun's agent."""
    import json
    import os

    from planner.launch.worker import WholeErrorFile

    target = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(target))
    WholeErrorFile().record_exception(ValueError("rank 0 lost its peer"))
    assert "rank 0 lost its peer" in json.loads(target.read_text())["message"]["message"]
    assert [p.name for p in tmp_path.iterdir()] == ["error.json"]

    target.unlink()

    def dies(*_args):
        raise OSError("killed before the rename")

    monkeypatch.setattr(os, "replace", dies)
    with pytest.warns(UserWarning, match="killed before the rename"):
        WholeErrorFile().record_exception(ValueError("again"))
    assert not target.exists()


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_checkpoint_resume_into_another_layout(tiny_path, reference, tmp_path):
    """Save at step 4 under FSDP dp2, resume under TP2+SP: steps 5..8 match the uninterrupted run."""
    ckpt = tmp_path / "ckpt"
    base = ["--model", tiny_path, *COMMON, "--checkpoint-dir", str(ckpt), "--checkpoint-every", "4"]
    first = torchrun(
        2, [*base, "--steps", "4", "--dp", "2", "--zero", "3", "--micro-batch", "4"], tmp_path / "a", timeout_s=120
    )
    assert first.rc == 0, first.output[-4000:]
    assert (ckpt / "latest").read_text().strip() == "step_000004" and not list(ckpt.glob("*.tmp"))
    second = torchrun(
        2,
        [*base, "--steps", str(REF_STEPS), "--resume", "--tp", "2", "--sp", "--micro-batch", "4"],
        tmp_path / "b",
        timeout_s=120,
    )
    assert second.rc == 0, second.output[-4000:]
    assert sorted(second.losses()) == list(range(5, REF_STEPS + 1))
    assert max_delta(first.losses(), reference) <= FP32_TOL
    assert max_delta(second.losses(), reference) <= FP32_TOL


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_killed_rank_is_restarted_and_resumes_from_the_checkpoint(tiny_path, reference, tmp_path):
    """Rank 1 dies (os._exit) at step 5 of attempt 0; torchrun restarts both ranks, which load step 4."""
    ckpt = tmp_path / "ckpt"
    run = torchrun(
        2,
        [
            "--model",
            tiny_path,
            *COMMON,
            "--steps",
            str(REF_STEPS),
            "--dp",
            "2",
            "--zero",
            "3",
            "--micro-batch",
            "4",
            "--checkpoint-dir",
            str(ckpt),
            "--checkpoint-every",
            "4",
        ],
        tmp_path,
        timeout_s=200,
        torchrun_flags=("--max-restarts", "1"),
        extra_env={"PLANNER_LAUNCH_FAIL": "1:5"},
    )
    assert run.rc == 0, run.output[-4000:]
    by_attempt: dict[int, dict[int, float]] = {}
    for rec in run.steps_log:
        by_attempt.setdefault(rec["attempt"], {})[rec["step"]] = rec["loss"]
    assert sorted(by_attempt[0]) == [1, 2, 3, 4]  # died during step 5
    assert sorted(by_attempt[1]) == [5, 6, 7, 8]  # resumed right after the checkpoint: nothing lost
    assert run.profile["attempt"] == 1 and run.profile["start_step"] == 5
    assert max_delta(by_attempt[0], reference) <= FP32_TOL
    assert max_delta(by_attempt[1], reference) <= FP32_TOL


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_hung_collective_ends_with_a_timeout_error(tiny_path, tmp_path):
    """Rank 1 sleeps at step 2; rank 0's collective times out after 5 s and torchrun tears the job down."""
    t0 = time.monotonic()
    run = torchrun(
        2,
        ["--model", tiny_path, *COMMON, "--steps", "4", "--dp", "2", "--micro-batch", "4", "--timeout-s", "5"],
        tmp_path,
        timeout_s=100,
        extra_env={"PLANNER_LAUNCH_HANG": "1:2"},
    )
    assert run.rc != 0
    assert "collective timed out after 5 s at step 2" in run.output, run.output[-4000:]
    assert time.monotonic() - t0 < 90
