"""The files a launch owns, refused in one line before any process starts: a checkpoint folder it would replace or
resume wrongly (run_files.py), and the profile it would write."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import pytest

from planner.errors import PlannerError
from tests.launch.conftest import REPO, launch_cli

BASE = ("--model", "tiny", "--dp", "2", "--global-batch", "8", "--seq-len", "64", "--precision", "fp32")


def _checkpoints(root, step: int, model: dict | None) -> None:
    """A folder as checkpoint.save leaves it: step_N/, latest and (when given) the manifest."""
    (root / f"step_{step:06d}").mkdir(parents=True)
    (root / "latest").write_text(f"step_{step:06d}\n")
    if model is not None:
        (root / "planner-checkpoint.json").write_text(json.dumps({"model": model}))


def _tiny() -> dict:
    from planner.io.catalog import load_model

    return load_model("tiny").model_dump(mode="json")


def _one_line(code: int, err: str, says: str) -> None:
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_a_folder_of_checkpoints_is_neither_replaced_nor_resumed_unasked(capsys, tmp_path):
    ckpt = tmp_path / "ck"
    _checkpoints(ckpt, 4, {**_tiny(), "name": "other", "num_layers": 2})
    before = sorted(p.name for p in ckpt.iterdir())
    args = (*BASE, "--steps", "8", "--checkpoint-dir", str(ckpt), "--profile-out", str(tmp_path / "p.json"))
    code, _, err = launch_cli(capsys, *args, "--checkpoint-every", "2")
    _one_line(code, err, "already holds checkpoints: give --resume to continue them, --force to replace them")
    code, _, err = launch_cli(capsys, *args, "--resume")
    _one_line(code, err, "are another model's ('other'; name='tiny' (saved 'other'), num_layers=4 (saved 2))")
    (ckpt / "planner-checkpoint.json").unlink()
    code, _, err = launch_cli(capsys, *args, "--resume")
    _one_line(code, err, "has no readable planner-checkpoint.json")
    assert sorted(p.name for p in ckpt.iterdir()) == [n for n in before if n != "planner-checkpoint.json"]
    assert not (tmp_path / "p.json").exists()


def test_resume_needs_steps_left_past_the_warmup(capsys, tmp_path):
    ckpt = tmp_path / "ck"
    _checkpoints(ckpt, 4, _tiny())
    args = (*BASE, "--checkpoint-dir", str(ckpt), "--resume", "--profile-out", str(tmp_path / "p.json"))
    code, _, err = launch_cli(capsys, *args, "--steps", "4")
    _one_line(code, err, "checkpoint at step 4 >= --steps 4 (use --steps N > 4)")
    code, _, err = launch_cli(capsys, *args, "--steps", "6", "--warmup", "2")
    _one_line(code, err, "checkpoint at step 4 leaves 2 of --steps 6, none past --warmup 2 to time (use --steps N > 6)")
    assert not (tmp_path / "p.json").exists()


def test_force_replaces_and_resume_keeps_all_but_unfinished_saves(tmp_path):
    from planner.io.catalog import load_model
    from planner.launch.run_files import check_checkpoints, prepare_checkpoints

    ckpt, tiny = tmp_path / "ck", load_model("tiny")
    _checkpoints(ckpt, 4, _tiny())
    (ckpt / "step_000006.tmp").mkdir()
    (ckpt / "notes.txt").write_text("mine")
    check_checkpoints(ckpt, tiny, resume=True, force=False, steps=8, warmup=2)
    prepare_checkpoints(ckpt, tiny, resume=True)
    assert sorted(p.name for p in ckpt.iterdir()) == ["latest", "notes.txt", "planner-checkpoint.json", "step_000004"]
    check_checkpoints(ckpt, tiny, resume=False, force=True, steps=8, warmup=2)
    prepare_checkpoints(ckpt, tiny, resume=False)
    assert sorted(p.name for p in ckpt.iterdir()) == ["notes.txt", "planner-checkpoint.json"]


def test_a_profile_with_no_timed_step_is_still_json():
    """A restart that resumes at the last step times nothing: the profile says null, never NaN (not JSON)."""
    from planner.io.files import finite_json
    from planner.launch.measured import summarize
    from planner.launch.runner import comparison, measured_vs_predicted

    stats = summarize([], 2, 512)
    assert stats["median_step_s"] is None and stats["tokens_per_s"] is None
    doc = json.loads(json.dumps(finite_json({**stats, "losses": [{"loss": float("nan")}]}), allow_nan=False))
    assert doc["losses"] == [{"loss": None}]
    profile = {**stats, "plan": {"global_batch": 8, "seq_len": 64}, "memory_per_rank": [{"peak_bytes": 1,
               "params_bytes": 1, "grads_bytes": 0, "optimizer_bytes": 0}]}  # fmt: skip
    assert comparison(profile, {"step_time_s": 0.1})[0] == ("median step time", "n/a", "100.0 ms", "n/a")
    assert measured_vs_predicted(profile, {"step_time_s": 0.1})[0] == {
        "quantity": "median_step_s", "measured": None, "predicted": 0.1, "error": None, "upper_bound": False
    }  # fmt: skip


def test_activations_counted_on_cpu_under_a_pipeline_are_an_upper_bound_not_an_error():
    """CPU hooks see no free: under a pipeline schedule they sum every micro-batch's saved tensors (measured.py), and
    the table printed +134% against the prediction as if it were an error; it says upper bound, with no error."""
    from planner.launch.runner import comparison, measured_vs_predicted

    rank = {"peak_bytes": 3e6, "params_bytes": 1e6, "grads_bytes": 0, "optimizer_bytes": 0, "activation_bytes": 2e6}
    pred = {"step_time_s": 0.5, "tensor_bytes": 2e6, "model_state_bytes": 1e6, "activation_bytes": 1e6}
    for pp, device, bounded in ((2, "cpu", True), (1, "cpu", False), (2, "NVIDIA H100", False)):
        profile = {"median_step_s": 0.4, "tokens_per_s": 100.0, "device": device, "memory_per_rank": [rank],
                   "plan": {"global_batch": 8, "seq_len": 64, "pp": pp}}  # fmt: skip
        quantities = {q["quantity"]: q for q in measured_vs_predicted(profile, pred)}
        activations = quantities["activation_bytes"]
        assert activations["upper_bound"] is bounded and (activations["error"] is None) is bounded
        assert quantities["model_state_bytes"]["error"] == 0.0 and not quantities["model_state_bytes"]["upper_bound"]
        row = comparison(profile, pred)[3]
        assert row[0] == "  saved activations"  # the label a script keys on stays; the cell says it
        assert ("upper bound" in row[1]) is bounded and (row[3] == "n/a") is bounded


def test_a_profile_path_that_names_a_folder_is_refused_before_the_run(capsys, tmp_path):
    """An existing folder (or a name ending in /) as --profile-out: one line, exit 2, and nothing written beside
    it, rather than a failure of rank 0 after the whole run."""
    folder = tmp_path / "out"
    folder.mkdir()
    args = (*BASE, "--steps", "3", "--warmup", "1")
    code, _, err = launch_cli(capsys, *args, "--profile-out", str(folder))
    _one_line(code, err, f"cannot write --profile-out {str(folder)!r}: that is a folder, give a file name")
    code, _, err = launch_cli(capsys, *args, "--profile-out", str(tmp_path / "new") + "/")
    _one_line(code, err, "names a folder; give a file name")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and not list(folder.iterdir())


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_a_run_leaves_no_temporary_files_and_json_is_one_document(tmp_path):
    """torchrun's log folder (a /tmp/torchelastic_* by default, never removed) is the launcher's own temporary
    folder, removed when the run ends; under --json the workers' progress goes to stderr, so stdout is one JSON
    document; a checkpoint every step keeps the newest two (--keep-checkpoints)."""
    temp, ckpt = tmp_path / "tmp", tmp_path / "ck"
    temp.mkdir()
    (ckpt / "step_000009.tmp").mkdir(parents=True)  # a save a crash cut short: no checkpoint, removed on start
    argv = [sys.executable, "-m", "planner", "launch", *BASE, "--steps", "3", "--warmup", "1", "--json",
            "--profile-out", str(tmp_path / "p.json"),
            "--checkpoint-dir", str(ckpt), "--checkpoint-every", "1"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(temp)}
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=80)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["profile"] == str(tmp_path / "p.json") and "[launch] step 3/3" in proc.stderr
    # each compared quantity as numbers too (the rows are the table's strings): seconds, bytes, tokens/s
    step = next(q for q in doc["quantities"] if q["quantity"] == "median_step_s")
    assert isinstance(step["measured"], float) and step["predicted"] > 0
    assert step["error"] == pytest.approx(step["measured"] / step["predicted"] - 1)
    assert [q["quantity"] for q in doc["quantities"]][1:] == [
        "peak_tensor_bytes", "model_state_bytes", "activation_bytes", "tokens_per_s"
    ]  # fmt: skip
    kept = sorted(p.name for p in ckpt.iterdir())
    assert kept == ["latest", "planner-checkpoint.json", "step_000002", "step_000003"]  # --keep-checkpoints 2
    left = [p.name for p in temp.iterdir() if p.name.startswith(("torchelastic_", "planner-launch-"))]
    assert left == []  # torch's own caches (torchinductor_USER) are shared between runs, not the run's


def test_an_earlier_runs_profile_is_not_replaced_unasked(capsys, tmp_path):
    for name in ("p.json", "p.json.steps.jsonl"):
        (tmp_path / name).write_text("earlier")
        code, _, err = launch_cli(capsys, *BASE, "--steps", "3", "--profile-out", str(tmp_path / "p.json"))
        _one_line(code, err, f"--profile-out: {str(tmp_path / name)!r} exists: give --force to replace it")
        assert (tmp_path / name).read_text() == "earlier"
        (tmp_path / name).unlink()


def test_a_resume_continues_its_profile_and_steps_log(capsys, tmp_path):
    """A resume appends to its steps log (worker.py keeps it past step 0) and rewrites its profile: both existing
    is what a resume looks like, not an earlier run to protect (it was refused unless --force, which also lifts the
    GPU memory check). The dry run passes the file checks and stops before starting anything."""
    ckpt = tmp_path / "ck"
    _checkpoints(ckpt, 4, _tiny())
    for name in ("p.json", "p.json.steps.jsonl"):
        (tmp_path / name).write_text("earlier")
    args = (*BASE, "--steps", "8", "--checkpoint-dir", str(ckpt), "--resume", "--profile-out", str(tmp_path / "p.json"))
    from planner.cli.launch_here import _check_outputs
    from planner.launch.command import RunConfig
    from planner.plan import Plan

    cfg = RunConfig(model="tiny", plan=Plan(dp=2, global_batch=8, seq_len=64), checkpoint_dir=str(ckpt), resume=True,
                    profile_out=str(tmp_path / "p.json"), steps=8)  # fmt: skip
    assert _check_outputs(cfg, load_tiny(), force=False) == ckpt
    code, _, err = launch_cli(capsys, *args[:-2], "--profile-out", str(tmp_path / "p.json"), "--dry-run")
    assert code == 0, err


def test_checkpoint_dir_with_restarts_alone_is_idle(capsys, tmp_path):
    """--max-restarts reloads what --checkpoint-every saves: with neither saving nor --resume, the folder does
    nothing."""
    code, _, err = launch_cli(capsys, *BASE, "--steps", "3", "--checkpoint-dir", str(tmp_path / "ck"),
                              "--max-restarts", "2")  # fmt: skip
    _one_line(code, err, "saves nothing and reads nothing alone")


def load_tiny():
    from planner.io.catalog import load_model

    return load_model("tiny")


def test_a_killed_launchers_log_folder_is_removed_by_the_next_launch(tmp_path):
    """torchrun's log folder is removed when the run ends, but a SIGKILLed launcher runs no cleanup: the next launch
    removes the folders whose launcher (named by its pid) is gone, and leaves a live launcher's and any other."""
    from planner.launch.runner import remove_stale_log_dirs

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"planner-launch-{dead.pid}-a1b2"
    stale.mkdir()
    (stale / "error.json").write_text("{}")
    live = tmp_path / f"planner-launch-{os.getpid()}-c3d4"
    live.mkdir()
    other = tmp_path / "planner-launch-e5f6g7"  # an older launcher's, without a pid
    other.mkdir()
    assert remove_stale_log_dirs(str(tmp_path)) == [stale]
    assert not stale.exists() and live.exists() and other.exists()


def test_a_second_launch_into_the_same_outputs_is_refused_while_the_first_runs(capsys, tmp_path):
    """Two launches into one profile (or one checkpoint folder) both passed the outputs check before either wrote,
    then interleaved their files: the running one holds a claim (launch/claims.py), and the second is refused in
    one line naming the holder's pid, its dry run failing the outputs check; with the claim released, it runs."""
    from planner.launch.claims import claimed, lock_path

    profile, ckpt = tmp_path / "p.json", tmp_path / "ck"
    ckpt.mkdir()  # as the launcher makes it before it claims it: its claim sits inside it
    for flag, output in (("--profile-out", profile), ("--checkpoint-dir", ckpt)):
        args = (*BASE, "--steps", "1", "--warmup", "0", "--profile-out", str(profile), "--checkpoint-dir", str(ckpt),
                "--checkpoint-every", "1")  # fmt: skip
        with claimed({flag: output}):
            assert lock_path(output).read_text() == f"{os.getpid()}\n"
            code, _, err = launch_cli(capsys, *args)
            _one_line(
                code, err, f"{flag}: {str(output)!r} is being written by another planner launch (pid {os.getpid()})"
            )
            code, out, _ = launch_cli(capsys, *args, "--dry-run")
            assert code == 1 and f"[FAIL] outputs: {flag}: {str(output)!r} is being written" in out, out
            assert not profile.exists() and not list(ckpt.glob("step_*")) and not (ckpt / "latest").exists()
        assert not lock_path(output).exists()  # released and removed
        code, out, _ = launch_cli(capsys, *args, "--dry-run")
        assert code == 0 and "[ok] outputs:" in out, out


def test_a_running_launchs_steps_log_is_named_as_its_own_and_a_refused_launch_leaves_no_folder(
    capsys, tmp_path, monkeypatch
):
    """The running launch's worker appends to its steps log: a second launch was told the log 'exists: give
    --force' before it learnt whose it was; it is told the holder's pid. A launch refused its claim removes the
    folders it made for its outputs (a new checkpoint folder here)."""
    from planner.launch.claims import claimed

    profile = tmp_path / "p.json"
    profile.with_name("p.json.steps.jsonl").write_text('{"step": 1}\n')  # what the running worker wrote
    fresh = tmp_path / "new" / "ck"
    with claimed({"--profile-out": profile}):
        code, _, err = launch_cli(capsys, *BASE, "--steps", "1", "--warmup", "0", "--profile-out", str(profile))
        _one_line(code, err, f"is being written by another planner launch (pid {os.getpid()})")
    profile.with_name("p.json.steps.jsonl").unlink()
    from planner.launch import claims

    real = claims._claim

    @contextlib.contextmanager
    def busy(flag, output):  # another launch takes the checkpoint folder between the check and the claim
        if flag == "--checkpoint-dir":
            raise PlannerError(f"{flag}: {str(output)!r} is being written by another planner launch (pid 1)")
        with real(flag, output):
            yield

    monkeypatch.setattr(claims, "_claim", busy)
    code, _, err = launch_cli(capsys, *BASE, "--steps", "1", "--warmup", "0", "--profile-out", str(profile),
                              "--checkpoint-dir", str(fresh), "--checkpoint-every", "1")  # fmt: skip
    _one_line(code, err, "is being written by another planner launch (pid 1)")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no new/ck, no claim file beside the profile
