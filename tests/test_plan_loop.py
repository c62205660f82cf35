"""The loop users run: `search --save` -> `memory/estimate --plan` -> `launch --plan` (dry run here)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest


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


def test_calibrate_says_which_runs_it_leaves_out_and_leaves_no_folder_when_it_fails(tmp_path):
    """A run the engine's rules refuse is left out of the fit with a warning naming it (it was dropped unseen), and
    a calibration that fails removes the --engine-out folder it made."""
    import yaml
    from helpers import run_planner

    runs = yaml.safe_load((Path(__file__).parent / "data" / "calibration_runs.yaml").read_text())
    good = next(r for r in runs if r["software"]["engine"] == "megatron" and r["measured"].get("step_s"))
    bad = {**good, "id": "bad-tp", "plan": {**good["plan"], "tp": 7}}
    path = tmp_path / "runs.yaml"
    path.write_text(yaml.safe_dump([good, bad]))
    code, _out, err = run_planner("calibrate", str(path), "-o", str(tmp_path / "out"))
    assert code == 0, err
    assert "run 'bad-tp' is left out of the fit" in " ".join(err.split())
    alone = tmp_path / "bad.yaml"
    alone.write_text(yaml.safe_dump([bad]))
    code, _out, err = run_planner(
        "calibrate", str(alone), "-o", str(tmp_path / "o2"), "--engine-out", str(tmp_path / "e")
    )
    assert code == 2 and not (tmp_path / "e").exists()


def test_search_save_with_nothing_fitting_shows_the_closest_misses_first(tmp_path):
    """--save has nothing to write when nothing fits (exit 2, no file), but the closest misses and what would make
    them fit are printed before that line: they are what the user needs next."""
    target = tmp_path / "best.yaml"
    code, out, err = planner("search", "-m", "kimi-k2", "--gpus", "64", "--save", str(target))
    assert code == 2 and not target.exists()
    assert "Closest misses" in out and "no plan to --save" in err


def test_a_saved_plan_names_the_hardware_and_engine_it_was_searched_on(tmp_path):
    target = tmp_path / "best.yaml"
    code, _out, err = planner(
        "search", "-m", "llama3-8b", "--gpus", "16", "--engine", "torchtitan", "--save", str(target)
    )
    assert code == 0, err
    first = target.read_text().splitlines()[0]
    assert first.startswith("# planner search --model llama3-8b --gpus 16 --hardware h100-sxm --engine torchtitan:")


def test_a_plan_document_from_json_output_reads_back_as_a_plan_file_with_its_engine(tmp_path):
    """Every --json document's `plan` names its engine (DESIGN's {PLAN}); cut out as a file, it prices the same plan
    on that engine, and a file whose own engine differs is one line."""
    from helpers import run_planner

    args = ("-m", "llama3-8b", "--gpus", "8", "--dp", "8", "--zero", "3", "--engine", "torchtitan")
    code, out, err = run_planner("estimate", *args, "--json")
    assert code == 0, err
    doc = json.loads(out)
    cut = tmp_path / "plan.json"
    cut.write_text(json.dumps(doc["plan"]))
    code, out, err = run_planner("estimate", "-m", "llama3-8b", "--plan", str(cut), "--json")
    assert code == 0, err
    assert json.loads(out)["plan"] == doc["plan"] and json.loads(out)["time"] == doc["time"]
    cut.write_text(json.dumps({"engine": "megatron", "plan": doc["plan"]}))
    code, out, err = run_planner("estimate", "-m", "llama3-8b", "--plan", str(cut))
    assert code == 2 and out == "" and "the plan's engine 'torchtitan' is not the file's engine 'megatron'" in err


def test_a_plan_file_field_of_the_wrong_type_is_refused_not_coerced(tmp_path):
    """YAML's `dp: true` was read as dp 1 (pydantic's lax mode, audit): each field is checked strictly, one line."""
    from helpers import run_planner

    bad = tmp_path / "plan.yaml"
    bad.write_text("gpus: 2\nplan:\n  dp: true\n  tp: 2\n")
    code, out, err = run_planner("memory", "-m", "llama3-8b", "--plan", str(bad))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "plan.dp: Input should be a valid integer (got True)" in err


def test_search_save_with_every_plan_breaking_a_rule_says_the_rule_not_that_nothing_fits(tmp_path):
    """torchtitan v0.2.2 has no multi-token prediction: every DeepSeek-V3 plan breaks that rule before its memory is
    counted, so '--save' has nothing to write for that reason (it had said 'nothing fits')."""
    target = tmp_path / "best.yaml"
    code, _out, err = planner(
        "search", "-m", "deepseek-v3", "--gpus", "256", "--engine", "torchtitan", "--save", str(target)
    )
    said = " ".join(err.split())
    assert code == 2 and not target.exists()
    assert "no plan is valid" in said and "multi-token prediction" in said and "nothing fits" not in said


def test_vpp_without_a_pipeline_is_said_as_the_users_own_words():
    """`--vpp 2` without --pp was refused as 'schedule=interleaved needs pp > 1': the schedule was the default vpp
    implies, not one the user gave."""
    from helpers import run_planner

    code, out, err = run_planner("estimate", "-m", "llama3-8b", "--tp", "2", "--dp", "4", "--vpp", "2")
    assert code == 2 and out == "" and "vpp=2 splits each pipeline stage into virtual stages: it needs pp > 1" in err
    code, _, err = run_planner("estimate", "-m", "llama3-8b", "--pp", "2", "--dp", "4", "--schedule", "interleaved")
    assert code == 2 and "schedule=interleaved needs pp > 1 and vpp > 1, got pp=2, vpp=1" in err


@pytest.mark.parametrize("command", [("search", "--gpus", "8"), ("scale", "--tokens", "1e9", "--gpus", "8")])
def test_a_command_without_a_model_says_so(command):
    """search and scale said 'unknown model "None"' and listed the catalog (audit)."""
    code, out, err = planner(*command)
    assert code == 2 and out == "" and "no model given: pass --model" in err and "None" not in err, err
