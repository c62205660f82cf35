"""`search --save`, `ingest -o` and `calibrate -o / --engine-out` replace their own files, never someone else's: a
file already there that is not a plan file (a runs file ingest wrote, a profile) is refused by name, before anything
is written (all replaced such files silently; `calibrate runs.yaml -o runs.yaml` its own input). A
`.json` name gets JSON (it got YAML, which a JSON parser refuses), and it reads back as the YAML file does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
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
    gathered = tmp_path / "gathered.yaml"  # runs gathered by hand: 68 became 1
    gathered.write_text((Path(__file__).parent / "data" / "calibration_runs.yaml").read_text())
    before = gathered.read_text()
    code, out, err = run_planner("ingest", str(LOG), "--hardware", "v100-32gb", "-o", str(gathered))
    assert code == 2 and gathered.read_text() == before and "is not a runs file this command wrote" in err, out


def test_calibrate_replaces_profiles_but_not_its_runs_or_notes(tmp_path):
    runs, notes, profile = tmp_path / "runs.yaml", tmp_path / "notes.yaml", tmp_path / "v100.yaml"
    assert run_planner("ingest", str(LOG), "--hardware", "v100-32gb", "-o", str(runs))[0] == 0
    notes.write_text(NOTES)
    kept = runs.read_text()
    for target, what in ((runs, "a hardware profile"), (notes, "a hardware profile")):
        code, out, err = run_planner("calibrate", str(runs), "-o", str(target))
        assert code == 2 and f"-o {target}: the file there is not {what}" in err, (out, err)
    assert runs.read_text() == kept and notes.read_text() == NOTES
    for _ in range(2):
        code, _, err = run_planner("calibrate", str(runs), "-o", str(profile))
        assert code == 0 and "efficiency" in yaml.safe_load(profile.read_text()), err
    # a folder: each GPU's file and each engine's, checked before anything is written
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "v100-32gb.yaml").write_text(NOTES)
    engines = tmp_path / "engines"
    code, _, err = run_planner("calibrate", str(runs), "-o", str(tmp_path / "out"), "--engine-out", str(engines))
    assert code == 2 and "not a hardware profile" in err and not engines.exists(), err
    engines.mkdir()
    (engines / "megatron.yaml").write_text(NOTES)
    code, _, err = run_planner("calibrate", str(runs), "--engine-out", str(engines))
    assert code == 2 and "not an engine profile" in err and (engines / "megatron.yaml").read_text() == NOTES, err
    (engines / "megatron.yaml").unlink()  # a file of an engine the fit does not write is none of its business
    (engines / "planner.yaml").write_text(NOTES)
    code, _, err = run_planner("calibrate", str(runs), "--engine-out", str(engines))
    assert code == 0 and (engines / "megatron.yaml").is_file() and (engines / "planner.yaml").read_text() == NOTES, err


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


@pytest.mark.parametrize(
    "argv",
    [("search", "-m", "tiny", "--gpus", "2", "--no-advice", "--save", "-"),
     ("search", "-m", "tiny", "--gpus", "2", "--no-advice", "--plot", "-"),
     ("scale", "-m", "tiny", "--plot", "-"),
     ("launch", "--model", "tiny", "--emit", "torchrun", "--out", "-"),
     ("launch", "--model", "tiny", "--checkpoint-dir", "-", "--max-restarts", "1"),
     ("calibrate", str(LOG), "--hardware", "v100-32gb", "-o", "-"),
     ("calibrate", str(LOG), "--hardware", "v100-32gb", "--engine-out", " - "),
     ("ingest", str(LOG), "-o", "-"),
     ("bench-hardware", "--out", "-"),
     ("estimate", "-m", "tiny", "--timeline", "-")],
)  # fmt: skip
def test_a_dash_is_not_written_as_a_file_named_dash(argv, tmp_path, monkeypatch):
    """`--out -` made a folder named '-' (and `-o -` a file): no option writes to standard output, so '-' is refused
    by name before anything runs."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run_planner(*argv)
    assert code == 2 and out == "" and "'-' is not taken for standard output here" in err, err
    assert list(tmp_path.iterdir()) == []


def test_a_plan_saved_from_an_imported_config_loads_from_any_folder(tmp_path, monkeypatch):
    """search --save wrote the model as given ('q30/config.json'), which only the folder search ran in resolved:
    estimate --plan from anywhere else said 'no such file' (audit). The path is written relative to the plan file
    and read back from there."""
    config = Path(__file__).parent / "data" / "hf_configs" / "qwen3_8b.json"
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "config.json").write_text(config.read_text())
    (tmp_path / "plans").mkdir()
    monkeypatch.chdir(tmp_path)
    saved = tmp_path / "plans" / "best.yaml"
    args = ("--gpus", "8", "--global-batch", "64", "--seq-len", "4096", "--no-advice")
    code, _, err = run_planner("search", "-m", "models/config.json", *args, "--save", str(saved))
    assert code == 0, err
    assert yaml.safe_load(saved.read_text())["model"] == "../models/config.json"
    monkeypatch.chdir(tmp_path / "plans")
    code, out, err = run_planner("estimate", "--plan", "best.yaml", "--json")
    assert code == 0 and json.loads(out)["model"] == "models", err  # the folder of a config.json names it


def test_a_plan_saved_with_profile_files_names_them_and_loads_them_from_any_folder(tmp_path, monkeypatch):
    """--hardware and --engine given as files (planner calibrate's output) were saved by their `name:`: a calibrated
    GPU's name is in no catalog ('unknown hardware'), and a calibrated engine's is the shipped one's, so the plan was
    priced again with the shipped factors, unsaid (audit). They are written as paths from the plan file."""
    root = Path(__file__).parent.parent
    hw = yaml.safe_load((root / "hardware_profiles" / "h100-sxm.yaml").read_text())
    engine = yaml.safe_load((root / "engine_profiles" / "megatron.yaml").read_text())
    engine["behaviour"]["host_step_s"]["value"] = 1.5  # slower than the shipped engine: its own prediction
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "gpu.yaml").write_text(yaml.safe_dump({**hw, "name": "h100-ours"}))
    (tmp_path / "mine" / "megatron.yaml").write_text(yaml.safe_dump(engine))
    (tmp_path / "plans").mkdir()
    monkeypatch.chdir(tmp_path)
    args = ("--gpus", "8", "--global-batch", "64", "--seq-len", "4096", "--top", "1", "--no-advice")
    refs = ("--hardware", "mine/gpu.yaml", "--engine", "mine/megatron.yaml")
    code, _, err = run_planner("search", "-m", "llama3-8b", *args, *refs, "--save", "plans/best.yaml")
    assert code == 0, err
    saved = yaml.safe_load((tmp_path / "plans" / "best.yaml").read_text())
    assert (saved["hardware"], saved["engine"]) == ("../mine/gpu.yaml", "../mine/megatron.yaml")
    monkeypatch.chdir(tmp_path / "plans")
    code, out, err = run_planner("estimate", "--plan", "best.yaml", "--json")
    assert code == 0, err
    assert json.loads(out)["tokens_per_s"] == pytest.approx(saved["predicted"]["tokens_per_s"], rel=1e-9)


def test_two_outputs_naming_one_file_are_refused_before_either_is_written(tmp_path, monkeypatch):
    """--save b.svg --plot b.svg said it saved the plan and left the plot; calibrate -o DIR/megatron.yaml with
    --engine-out DIR replaced the fitted GPU with the engine's profile and said it wrote both (audit)."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run_planner("search", "-m", "llama3-8b", "--gpus", "8", "--save", "b.svg", "--plot", "./b.svg")
    assert code == 2 and "--save b.svg and --plot ./b.svg name the same file" in err
    runs = str(Path(__file__).parent / "data" / "calibration_runs.yaml")
    code, _, err = run_planner(
        "calibrate", runs, "--hardware", "h100-sxm", "-o", "o/megatron.yaml", "--engine-out", "o"
    )
    assert code == 2 and "--engine-out o writes the megatron engine profile there" in err
    assert not any(tmp_path.iterdir())  # nothing written, no folder made


def test_a_capped_gpu_is_saved_and_said_by_its_capped_name(tmp_path, monkeypatch):
    """The header said the search's command as `--hardware h100-sxm` beside `hardware: h100-sxm-500w` (review)."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run_planner("search", "-m", "llama3-8b", "--gpus", "8", "--power-limit", "500", "--top", "1",
                               "--no-advice", "--save", "p.yaml")  # fmt: skip
    text = (tmp_path / "p.yaml").read_text()
    assert code == 0 and "--hardware h100-sxm-500w" in text.splitlines()[0], err
    assert yaml.safe_load(text)["hardware"] == "h100-sxm-500w"


def test_a_command_that_fails_after_writing_takes_its_files_back(tmp_path, monkeypatch):
    """`search --save plan.yaml --plot p.svg > /dev/full` failed (exit 2, the ranking could not be printed) and kept
    the files: a new one is removed, one it replaced holds what it held before, and a command that succeeds keeps
    them (planner/io/files.py taken_back_on_failure)."""
    pytest.importorskip("matplotlib")
    import planner.render.ranking as ranking

    plan, plot = tmp_path / "best.yaml", tmp_path / "p.svg"
    args = ("search", "-m", "llama3-8b", "--gpus", "8", "--no-advice", "--save", str(plan), "--plot", str(plot))
    assert run_planner(*args, "--top", "1")[0] == 0 and plot.is_file()
    before = plan.read_text()
    plot.unlink()

    def full(*_: object, **__: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ranking, "print_result", full)
    code, _, err = run_planner(*args, "--top", "3", "--dp", "4")
    assert code == 2 and err.strip() == "error: No space left on device", err
    assert plan.read_text() == before and not plot.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.yaml"]  # nor a temporary file


def test_a_file_a_launched_run_writes_for_itself_is_kept_when_the_command_fails(tmp_path):
    """The checkpoint manifest (launch/run_files.py) is kept=True: a run that fails (exit 1) keeps its checkpoints,
    and a resume needs the manifest beside them; an output is taken back."""
    from planner.io.files import taken_back_on_failure, write_text_atomic

    manifest, output = tmp_path / "manifest.json", tmp_path / "out.yaml"
    with pytest.raises(SystemExit), taken_back_on_failure():
        write_text_atomic(manifest, "{}\n", kept=True)
        write_text_atomic(output, "plan: {}\n")
        raise SystemExit(1)
    assert manifest.read_text() == "{}\n" and not output.exists()
    with taken_back_on_failure():
        write_text_atomic(output, "plan: {}\n")
    assert output.is_file()
