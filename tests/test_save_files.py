"""`search --save` and `ingest -o` replace their own files, never someone else's: a file already there that is not
a plan file (a runs file) is refused by name, before anything is written (both replaced such files silently). A
`.json` name gets JSON (it got YAML, which a JSON parser refuses), and it reads back as the YAML file does."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from helpers import run_planner

LOG = Path(__file__).parent / "data" / "logs" / "megatron_lm_gpt2_tp4_pp8.log"
NOTES = "my precious notes\n"


def test_search_save_replaces_a_plan_file_but_not_notes(tmp_path):
    notes, plan = tmp_path / "notes.yaml", tmp_path / "best.yaml"
    notes.write_text(NOTES)
    code, out, err = run_planner("search", "-m", "llama3-8b", "--gpus", "8", "--no-advice", "--save", str(notes))
    assert code == 2 and notes.read_text() == NOTES, (out, err)
    assert err.strip().count("\n") == 0 and f"--save {notes}: the file there is not a plan file" in err, err
    for _ in range(2):  # a plan file is the command's own: saving again replaces it
        code, _, err = run_planner("search", "-m", "llama3-8b", "--gpus", "8", "--no-advice", "--save", str(plan))
        assert code == 0 and "plan" in yaml.safe_load(plan.read_text()), err
    empty = tmp_path / "empty.yaml"
    empty.touch()
    assert run_planner("search", "-m", "llama3-8b", "--gpus", "8", "--no-advice", "--save", str(empty))[0] == 0


def test_ingest_output_replaces_a_runs_file_but_not_notes(tmp_path):
    notes, runs = tmp_path / "notes.yaml", tmp_path / "runs.yaml"
    notes.write_text(NOTES)
    code, out, err = run_planner("ingest", str(LOG), "--hardware", "v100-32gb", "-o", str(notes))
    assert code == 2 and notes.read_text() == NOTES and "-o " in err and "is not a runs file" in err, (out, err)
    for _ in range(2):
        code, _, err = run_planner("ingest", str(LOG), "--hardware", "v100-32gb", "-o", str(runs))
        assert code == 0 and isinstance(yaml.safe_load(runs.read_text()), list), err


def test_a_json_name_gets_json_that_reads_back(tmp_path):
    as_json, as_yaml = tmp_path / "best.json", tmp_path / "best.yaml"
    for path in (as_json, as_yaml):
        code, _, err = run_planner("search", "-m", "llama3-8b", "--gpus", "8", "--no-advice", "--save", str(path))
        assert code == 0, err
    saved = json.loads(as_json.read_text())
    assert saved == yaml.safe_load(as_yaml.read_text()) and saved["plan"]["dp"] >= 1
    assert as_yaml.read_text().startswith("# planner search") and not as_json.read_text().startswith("#")
    estimates = [run_planner("estimate", "--plan", str(p), "--json") for p in (as_json, as_yaml)]
    assert estimates[0][0] == 0 and estimates[0][1] == estimates[1][1], estimates[0][2]
