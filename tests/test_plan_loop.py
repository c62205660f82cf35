"""The loop users run: `search --save` -> `memory/estimate --plan` -> `launch --plan` (dry run here)."""

import json
import subprocess
import sys


def planner(*args: str, cwd=None):
    proc = subprocess.run(
        [sys.executable, "-m", "planner", *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )
    return proc.returncode, proc.stdout, proc.stderr


def test_saved_plan_drives_memory_estimate_and_launch(tmp_path):
    saved = tmp_path / "best.yaml"
    code, _, err = planner(
        "search", "--model", "tiny", "--gpus", "2", "--hardware", "cpu", "--global-batch", "8", "--save", str(saved)
    )
    assert code == 0, err
    code, out, err = planner("estimate", "--plan", str(saved), "--json")
    assert code == 0, err
    est = json.loads(out)
    assert est["model"] == "tiny" and est["hardware"] == "cpu" and est["plan"]["dp"] * est["plan"]["tp"] == 2
    code, out, err = planner("launch", "--plan", str(saved), "--dry-run", "--json", cwd=tmp_path)
    assert code == 0, err
    dry = json.loads(out)
    text = json.dumps(dry)
    assert "torchrun" in text and "--model" in text and "tiny" in text


def test_launch_without_model_or_plan_is_one_line():
    code, out, err = planner("launch", "--dp", "2", "--dry-run")
    assert code == 2 and out == "" and "no model given" in err and "Traceback" not in err
