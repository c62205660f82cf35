"""`planner launch` at the CLI edge: dry run, emit, refusals (no torchrun started)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from planner.launch.machine import Host
from planner.launch.preflight import Environment
from tests.helpers import byte_fields
from tests.launch.conftest import launch_cli as _run


def test_dry_run_prints_checks_mesh_command_and_layout(capsys, tiny_path, monkeypatch):
    """8 processes: a dry run on a 4-core host (this one may have fewer, where the dry run fails its host check)."""
    host = Environment("cpu", 0, "x86_64", (), "2.13.0+cpu", Host(cores=4, available_bytes=16 * 2**30))
    monkeypatch.setattr("planner.cli.launch.probe_environment", lambda: host)
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
        "--zero",
        "1",
        "--micro-batch",
        "2",
        "--seq-len",
        "64",
        "--dry-run",
    )
    assert code == 0, out
    assert "[ok] world size" in out and "mesh: pp=2 x dp=2 x cp=1 x tp=2" in out
    assert "[ok] processes: 8 on 4 cores: at most 8 here (2 per core)" in out and "[ok] host memory" in out
    assert "torchrun --standalone" in out and "--nproc-per-node 8" in out and "OMP_NUM_THREADS=1" in out
    assert "MALLOC_MMAP_THRESHOLD_=131072" in out  # the command shown is the one run: on CPU, its allocator setting
    assert "rank 7: pp=1 dp=1 cp=0 tp=1 | stage 1: layers 2-3" in out


def test_a_rehearsal_splits_the_sequence_with_tp_as_estimate_and_the_emitted_file_do(capsys, tiny_path, tmp_path):
    """The same flags ran --no-sp here and --sp in the emitted torchrun file and in estimate (review): tp 2 without
    --sp/--no-sp now runs sequence parallelism in all three, and --no-sp still turns it off."""
    flags = ("--model", tiny_path, "--dp", "2", "--tp", "2", "--zero", "3", "--seq-len", "64")
    code, out, _ = _run(capsys, *flags, "--dry-run", "--json")
    assert code == 0 and " --sp " in json.loads(out)["command"], out
    code, out, _ = _run(capsys, *flags, "--no-sp", "--dry-run", "--json")
    assert code == 0 and " --no-sp " in json.loads(out)["command"], out
    code, out, _ = _run(capsys, *flags, "--emit", "torchrun", "--out", str(tmp_path / "job"))
    assert code == 0 and " --sp " in (tmp_path / "job" / "torchrun.sh").read_text(), out


def test_dry_run_with_a_failing_check_exits_1(capsys, tiny_path):
    """The worker's DDP does not combine with tp: the check fails, the dry run still prints everything."""
    code, out, _ = _run(capsys, "--model", tiny_path, "--dp", "2", "--tp", "2", "--seq-len", "64", "--dry-run")
    assert code == 1 and "[FAIL] divisibility and support" in out and "mesh:" in out
    code, out, _ = _run(
        capsys, "--model", tiny_path, "--dp", "2", "--tp", "2", "--seq-len", "64", "--dry-run", "--json"
    )
    doc = json.loads(out)
    assert code == 1 and doc["ok"] is False and any(not c["ok"] for c in doc["checks"])


def test_dry_run_json_and_plan_file(capsys, tiny_path, tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"dp": 2, "zero": 3, "global_batch": 8, "seq_len": 64}))
    code, out, _ = _run(capsys, "--model", tiny_path, "--plan", str(plan), "--micro-batch", "2", "--dry-run", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["mesh"] == {"pp": 1, "dp": 2, "cp": 1, "tp": 1}
    assert "--zero 3" in doc["command"] and "--micro-batch 2" in doc["command"]
    assert all(c["ok"] for c in doc["checks"])
    # the plan run and what it is priced at, as numbers (they were only in the checks' text)
    assert (doc["plan"]["dp"], doc["plan"]["zero"], doc["plan"]["micro_batch"]) == (2, 3, 2)
    predicted = doc["predicted"]
    assert predicted["step_time_s"] > 0 and 0 < predicted["tensor_bytes"] <= predicted["peak_bytes"]
    sizes = list(byte_fields(doc))  # whole bytes, as every --json document (render/console.emit_json)
    assert sizes and all(isinstance(b, int) for b in sizes), sizes


def test_bad_plan_is_one_line_and_exit_2(capsys, tiny_path):
    code, _, err = _run(capsys, "--model", tiny_path, "--tp", "3", "--seq-len", "64")
    assert code == 2 and "tp=3" in err


def test_cp_on_cpu_is_refused_before_starting(capsys, tiny_path):
    code, _, err = _run(capsys, "--model", tiny_path, "--cp", "2", "--seq-len", "64", "--global-batch", "2")
    assert code == 2 and "cp=2" in err and "CPU" in err


@pytest.mark.parametrize(
    "kind,name,extra",
    [
        ("slurm", "launch.slurm", ["--zero", "1"]),
        ("k8s", "pytorchjob.yaml", ["--zero", "1", "--image", "registry.example/planner:1"]),
        ("torchrun", "torchrun.sh", ["--zero", "1"]),
        ("megatron", "megatron_args.sh", ["--sp"]),
        ("torchtitan", "torchtitan_plan.py", ["--model", "llama3-8b", "--sp", "--zero", "3"]),
        ("torchtitan-v0.2", "torchtitan.toml", ["--model", "llama3-8b", "--sp", "--zero", "3"]),
        ("megatron-bridge", "megatron_bridge.sh", ["--model", "llama3-8b", "--sp", "--zero", "1"]),
        ("deepspeed", "deepspeed.json", ["--tp", "1", "--dp", "8"]),
    ],
)
def test_emit_writes_files(capsys, tiny_path, tmp_path, kind, name, extra):
    nodes = [] if kind == "deepspeed" else ["--nnodes", "2"]  # a config that does not place the job refuses them
    code, out, err = _run(
        capsys, "--model", tiny_path, "--dp", "4", "--tp", "2", *nodes, "--seq-len", "64", *extra,
        "--emit", kind, "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 0 and (tmp_path / name).exists() and name in out, err
    text = (tmp_path / name).read_text()
    assert str(tmp_path) not in text and "/work/" not in text  # no path of the machine that wrote it


@pytest.mark.parametrize(
    "kind,extra,says",
    [
        ("torchtitan", ["--sp", "--zero", "3"], "is none of them"),  # tiny is no torchtitan flavor
        ("slurm", [], "zero=0"),  # the worker's DDP runs data parallelism alone, not with tp=2
        ("k8s", ["--zero", "1"], "--image"),
        ("k8s", ["--zero", "1", "--image", "bad image"], "--image 'bad image': an image reference has no spaces"),
        ("deepspeed", ["--pp", "2", "--dp", "2", "--zero", "2", "--global-batch", "8"], "zero=2"),
    ],
)
def test_emit_refuses_what_the_target_refuses(capsys, tiny_path, tmp_path, kind, extra, says):
    code, _, err = _run(
        capsys, "--model", tiny_path, "--dp", "4", "--tp", "2", "--seq-len", "64", *extra, "--emit", kind,
        "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 2 and says in err and "Traceback" not in err
    assert not any(tmp_path.iterdir())  # nothing half-written


def test_cluster_targets_take_whole_nodes_of_the_profile(capsys, tmp_path):
    code, _, err = _run(
        capsys, "--model", "llama3-8b", "--hardware", "h100-sxm", "--dp", "1024", "--zero", "3",
        "--global-batch", "1024", "--seq-len", "2048", "--emit", "slurm", "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 0, err
    text = (tmp_path / "launch.slurm").read_text()
    assert "#SBATCH --nodes=128" in text and "#SBATCH --gpus-per-node=8" in text


def test_emit_needs_out(capsys, tiny_path):
    code, _, err = _run(capsys, "--model", tiny_path, "--seq-len", "64", "--emit", "slurm")
    assert code == 2 and "--out" in err


def test_emit_with_dry_run_checks_and_writes_nothing(capsys, tiny_path, tmp_path):
    """--dry-run runs nothing: with --emit it checks the plan as the target would and names the file it would write."""
    folder = tmp_path / "out"
    args = ("--model", "llama3-8b", "--dp", "4", "--tp", "2", "--sp", "--seq-len", "64", "--emit", "megatron")
    code, out, err = _run(capsys, *args, "--out", str(folder), "--dry-run")
    assert code == 0 and "would write" in out and "megatron_args.sh" in out and not folder.exists(), err
    code, _, err = _run(capsys, *args, "--zero", "2", "--out", str(folder), "--dry-run")  # megatron has no zero 2
    assert code == 2 and not folder.exists()
    code, out, err = _run(capsys, *args, "--out", str(folder), "--dry-run", "--json")  # --json is JSON here too
    assert code == 0 and json.loads(out) == {
        "target": "megatron", "path": str(folder / "megatron_args.sh"), "written": False, "changed": True,
        "warnings": [], "failed": [],
    }, err  # fmt: skip


def test_a_dry_run_emit_says_the_plan_does_not_fit_as_the_write_does(capsys, tmp_path):
    """A plan predicted to need 18x the GPU is written with a warning (the engine's own run may know better), but
    its --dry-run said nothing of it, and --json had no field for it. A dry run that finds it is a failing check:
    exit 1 (DESIGN.md), `failed` in the JSON; the write did what it says, exit 0."""
    folder = tmp_path / "out"
    args = ("--model", "llama3-70b", "--hardware", "h100-sxm", "--dp", "8", "--emit", "megatron", "--out", str(folder))
    code, out, err = _run(capsys, *args, "--dry-run")
    assert code == 1 and "would write" in out and "exceeds the 79.2 GiB" in err and not folder.exists(), err
    code, out, err = _run(capsys, *args, "--dry-run", "--json")
    said = json.loads(out)["warnings"]
    assert code == 1 and len(said) == 1 and "exceeds the 79.2 GiB" in said[0] and json.loads(out)["failed"] == said
    code, out, err = _run(capsys, *args, "--json")
    assert code == 0 and json.loads(out)["written"] and json.loads(out)["warnings"] == said, out


def test_a_node_layout_that_splits_tp_groups_over_nodes_is_said(capsys, tmp_path):
    """--nnodes 16 for a tp 2 plan of 16 GPUs runs one process a node: each tp group spans two nodes, where the plan
    was priced on NVLink. It was written without a word."""
    plan = "--model llama3-8b --dp 8 --tp 2 --sp --zero 1 --seq-len 64 --emit slurm"
    args = tuple(plan.split())
    code, out, _ = _run(capsys, *args, "--nnodes", "16", "--out", str(tmp_path / "a"), "--dry-run", "--json")
    said = json.loads(out)["warnings"]
    assert code == 0 and any("spread each tp 2 group over up to 2 nodes" in w and "2 nodes of 8" in w for w in said), (
        out
    )
    code, out, _ = _run(capsys, *args, "--nnodes", "2", "--out", str(tmp_path / "b"), "--dry-run", "--json")
    assert code == 0 and json.loads(out)["warnings"] == [], out
    # an NVLink domain of many nodes (NVL72: 18 trays of 4) holds a tp 8 group over its nodes: every NVL72 plan was
    # warned. 2 processes a tray put 36 ranks in a rack, so some tp 8 groups cross racks (it was not warned); tp 16
    # straddles racks as priced (72 is no multiple of 16): no change, no warning
    nvl = ("--model", "llama3-70b", "--hardware", "gb200-nvl72", "--sp", "--zero", "1", "--emit", "megatron")
    for tp, dp, nodes, warned in ((8, 18, 36, False), (8, 9, 36, True), (16, 18, 72, False), (32, 18, 576, True)):
        out_dir = str(tmp_path / f"n{tp}-{nodes}")
        code, out, _ = _run(capsys, *nvl, "--tp", str(tp), "--dp", str(dp), "--nnodes", str(nodes), "--out", out_dir,
                            "--dry-run", "--json")  # fmt: skip
        said = [w for w in json.loads(out)["warnings"] if "spread each tp" in w]
        assert code == 0 and bool(said) == warned, (tp, dp, nodes, out)
    assert "over up to 3 72-GPU NVLink domains" in said[0] and "priced with it across 2 of them" in said[0]


def test_emitting_the_same_plan_again_says_it_left_the_file_as_it_is(capsys, tmp_path):
    """A second --emit of one plan writes nothing: it said "wrote" although the file was left untouched."""
    args = ("--model", "llama3-8b", "--dp", "4", "--tp", "2", "--sp", "--seq-len", "64", "--emit", "megatron")
    path = tmp_path / "megatron_args.sh"
    code, out, err = _run(capsys, *args, "--out", str(tmp_path))
    assert code == 0 and f"wrote {path}" in out, err
    os.utime(path, (0, 0))
    code, out, err = _run(capsys, *args, "--out", str(tmp_path))
    assert code == 0 and "wrote" not in out and f"{path} is already this plan's file" in out, err
    assert path.stat().st_mtime == 0  # untouched
    code, out, err = _run(capsys, *args, "--out", str(tmp_path), "--json")
    assert code == 0 and json.loads(out) == {"target": "megatron", "path": str(path), "written": False,
                                             "changed": False, "warnings": [], "failed": []}, err  # fmt: skip
    code, out, err = _run(capsys, *args, "--out", str(tmp_path), "--dry-run")
    assert code == 0 and "would write" not in out and f"{path} is already this plan's file" in out, err
    code, out, err = _run(capsys, *args, "--tp", "4", "--out", str(tmp_path), "--force", "--json")
    assert code == 0 and json.loads(out)["written"] is json.loads(out)["changed"] is True, err
    assert path.stat().st_mtime > 0


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (("--out", "x"), "--out is for --emit's files"),
        (("--image", "img"), "--image is for --emit's files"),
        (("--checkpoint-every", "2"), "--checkpoint-every 2 needs --checkpoint-dir"),
        (("--resume",), "--resume needs --checkpoint-dir"),
        (("--checkpoint-dir", "ck"), "--checkpoint-dir 'ck' saves nothing and reads nothing alone"),
        (("--checkpoint-dir", "ck", "--resume", "--keep-checkpoints", "3"), "--keep-checkpoints 3 prunes what"),
        (("--timeout-s", "1e-9"), "1e-09 is out of [5, 86400]"),
        (("--out", ""), "'--out': is empty"),
        (("--emit", "slurm", "--out", ""), "'--out': is empty"),
        (("--profile-out", " "), "'--profile-out': is empty"),
        (("--emit", "megatron", "--out", "o", "--steps", "1000", "--seed", "7"),
         "--emit megatron writes an engine's own configuration, which does not carry --steps, --seed"),
        (("--emit", "deepspeed", "--out", "o", "--max-restarts", "2", "--checkpoint-dir", "ck", "--checkpoint-every",
          "5"), "does not carry --checkpoint-dir, --max-restarts"),
        (("--emit", "k8s", "--image", "r/p:1", "--out", "o", "--wall-s", "100"), "--emit k8s writes a cluster "
         "script, which does not carry --wall-s"),
        (("--emit", "slurm", "--image", "r/p:1", "--out", "o"), "--emit slurm writes none; drop it"),  # was ignored
        (("--emit", "megatron", "--image", "r/p:1", "--out", "o"), "--emit megatron writes none; drop it"),
        (("--emit", "deepspeed", "--out", "o", "--nnodes", "2", "--nproc", "4"),  # the same file either way (audit)
         "--emit deepspeed writes deepspeed.json, which does not place the job: --nnodes 2 and --nproc 4 would do"),
    ],
)  # fmt: skip
def test_options_that_would_do_nothing_are_refused(capsys, tiny_path, given, says):
    """An option the others make idle (an --out without --emit, checkpoints without a folder, an empty path read
    as the current folder) is one line and exit 2, not ignored."""
    code, _, err = _run(capsys, "--model", tiny_path, "--seq-len", "64", *given, "--dry-run")
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err


def test_a_dry_run_says_what_the_run_would_refuse_to_replace(capsys, tiny_path, tmp_path):
    """The run refuses, before writing anything, to replace an earlier run's profile without --force; its dry run
    says so as a failing check (exit 1), and passes it with --force."""
    (tmp_path / "planner-launch-profile.json").write_text("{}")
    args = ("--model", tiny_path, "--seq-len", "64", "--dry-run")
    code, out, _ = _run(capsys, *args)
    assert code == 1 and "[FAIL] outputs: --profile-out:" in out and "exists: give --force" in out
    code, out, _ = _run(capsys, *args, "--force")
    assert code == 0 and "[ok] outputs: --profile-out: nothing there the run would replace unasked" in out


def test_a_dry_run_fails_the_outputs_the_run_would_refuse(capsys, tiny_path, tmp_path):
    """A checkpoint folder the run cannot write, and a profile and a checkpoint folder of one path (whose claims
    then refused the run as 'being written by another planner launch', its own pid): the dry run passed both and
    the run refused (audit). Nothing is made on the way."""
    args = ("--model", tiny_path, "--seq-len", "64", "--checkpoint-every", "1", "--dry-run")
    code, out, _ = _run(capsys, *args, "--checkpoint-dir", "/proc/planner-x")
    assert code == 1 and "[FAIL] outputs: --checkpoint-dir: cannot write into '/proc/planner-x'" in out, out
    code, out, _ = _run(capsys, *args, "--checkpoint-dir", "ck", "--profile-out", "ck")
    assert code == 1 and "--checkpoint-dir" in out and "ck name the same file" in out, out
    assert not (tmp_path / "ck").exists()


def test_rehearsal_layers_the_pipeline_cannot_split_are_refused_as_the_options(capsys, tiny_path):
    """--layers 3 under pp 4 said 'even cannot split 3 layers over pp=4 x vpp=1 chunks', naming neither the option
    nor what it could be (audit)."""
    code, _, err = _run(capsys, "--model", tiny_path, "--seq-len", "64", "--pp", "4", "--layers", "3", "--dry-run")
    assert code == 2 and err.startswith("error: --layers 3: planner cannot split num_layers=3 over pp=4"), err
    assert "pp·vpp at most num_layers" in err


def test_a_batch_with_no_micro_batches_fails_the_dry_runs_rule_check(capsys, tiny_path):
    """A global batch the data-parallel ranks' micro-batches do not divide (16 x 2 into 8) has nothing to price:
    the dry run fails its rule check and says why (exit 1, as for any rule), predicting nothing (it divided by its
    zero micro-batches); the run itself refuses it."""
    args = ("--model", tiny_path, "--seq-len", "64", "--dp", "2", "--global-batch", "8", "--micro-batch", "16")
    code, out, err = _run(capsys, *args, "--dry-run")
    assert code == 1 and "global_batch=8 is not divisible by dp=2 x micro_batch=16" in out and "Traceback" not in err
    code, out, err = _run(capsys, *args, "--dry-run", "--json")
    assert code == 1 and json.loads(out)["predicted"]["step_time_s"] is None
    code, out, err = _run(capsys, *args)
    assert code == 2 and "pre-flight check failed" in err and "micro_batch=16" in err
    assert "[ok] run time: 8 steps, not priced;" in _run(capsys, *args, "--dry-run")[1]  # it said 8 x 0.0 us


def test_a_plan_whose_precision_this_machine_lacks_fails_the_dry_runs_check(capsys, tmp_path):
    """A valid plan file saved for a B200 in mxfp8, dry-run here: this machine (a CPU) has no fp8 units. It was one
    error line and exit 2, as for bad input, where the other checks this machine fails are [FAIL] lines and exit 1
    (audit): now a failing check, nothing priced; the run itself refuses it as before."""
    from helpers import run_planner

    saved = tmp_path / "mx.yaml"
    assert run_planner("search", "-m", "tiny", "--gpus", "2", "--hardware", "b200", "--precision", "mxfp8", "--top",
                       "1", "--no-advice", "--save", str(saved))[0] == 0  # fmt: skip
    code, out, err = _run(capsys, "--plan", str(saved), "--dry-run")
    assert code == 1 and "[FAIL] precision: precision=mxfp8: cpu" in out and "has no fp8 tensor cores" in out, err
    code, out, err = _run(capsys, "--plan", str(saved), "--dry-run", "--json")
    assert code == 1 and json.loads(out)["predicted"]["step_time_s"] is None
    code, out, err = _run(capsys, "--plan", str(saved))
    assert code == 2 and out == "" and "has no fp8 tensor cores" in err and len(err.strip().splitlines()) == 1


def test_a_dry_run_fails_what_the_run_would_refuse_and_bounds_its_time(capsys, tiny_path):
    """The audit's cases: 1F1B over two stages with one micro-batch (torch's Schedule1F1B raises), --nnodes 2 run
    here (the run refuses it), and a run predicted to take days: each fails its check in the dry run (exit 1), and
    every run here states the wall limit it is stopped after."""
    base = ("--model", tiny_path, "--seq-len", "64", "--dry-run")
    code, out, _ = _run(capsys, *base, "--pp", "2", "--micro-batch", "1", "--global-batch", "1")
    assert code == 1 and "schedule=1f1b needs at least pp=2 micro-batches per step, not 1" in out
    code, out, _ = _run(capsys, *base, "--pp", "2", "--micro-batch", "1", "--global-batch", "1", "--schedule", "gpipe")
    assert code == 0 and "[ok] divisibility and support" in out
    code, out, _ = _run(capsys, *base, "--dp", "2", "--nnodes", "2")
    assert code == 1 and "[FAIL] nodes: --nnodes 2: a multi-node run starts on every node" in out
    code, out, _ = _run(capsys, *base, "--dp", "2")
    assert code == 0 and "[ok] run time: 8 steps x" in out and "stopped if still running after 300 s (--wall-s)" in out
    long = ("--model", "gpt3-125m", "--dp", "2", "--zero", "3", "--seq-len", "2048", "--global-batch", "64",
            "--steps", "1000", "--dry-run")  # fmt: skip
    code, out, _ = _run(capsys, *long)
    assert code == 1 and "[FAIL] run time: 1000 steps" in out and "give --wall-s to allow it" in out
    code, out, _ = _run(capsys, *long, "--wall-s", "2000000")  # given: the user's limit, and it runs
    assert "[ok] run time" in out and "stopped if still running after 2000000 s" in out


def test_cluster_targets_copy_an_engine_profile_of_the_users_own(capsys, tiny_path, tmp_path):
    """A user's engine profile file goes next to the script and is named relatively, as the model file is: the
    nodes have no path of the machine that wrote the script (it had been named by its absolute path, uncopied)."""
    own = tmp_path / "mine" / "myeng.yaml"
    own.parent.mkdir()
    own.write_text((Path(__file__).parents[2] / "engine_profiles" / "planner.yaml").read_text())
    out = tmp_path / "out"
    code, _, err = _run(
        capsys, "--model", tiny_path, "--engine", str(own), "--dp", "2", "--seq-len", "64", "--emit", "slurm",
        "--out", str(out),
    )  # fmt: skip
    assert code == 0, err
    text = (out / "launch.slurm").read_text()
    assert (out / "myeng.yaml").read_text() == own.read_text()
    assert "myeng.yaml" in text and str(own) not in text


@pytest.mark.parametrize("given", ["folder", "config.json"])
def test_cluster_targets_copy_a_hugging_face_config_by_its_folders_name(capsys, tmp_path, given):
    """A model given as a Hugging Face folder (or its config.json) was named in the script by this machine's path,
    uncopied: its config goes next to the script as FOLDER.json (the name the model takes), and a Kubernetes
    manifest says the pods read it from the image's working directory."""
    folder = tmp_path / "llama31-8b"
    folder.mkdir()
    (folder / "config.json").write_text((Path(__file__).parents[1] / "data" / "hf_configs" / "llama3.1_8b.json")
                                        .read_text())  # fmt: skip
    ref = str(folder if given == "folder" else folder / "config.json")
    plan = ("--dp", "8", "--zero", "3", "--recompute", "full", "--global-batch", "64", "--seq-len", "4096")
    for target, name, image in (("slurm", "launch.slurm", ()), ("k8s", "pytorchjob.yaml", ("--image", "r/p:1"))):
        out = tmp_path / target
        code, _, err = _run(capsys, "--model", ref, "--hardware", "h100-sxm", *plan, "--emit", target, "--out",
                            str(out), *image, "--force")  # fmt: skip
        assert code == 0, err
        text = (out / name).read_text()
        assert (out / "llama31-8b.json").read_text() == (folder / "config.json").read_text()
        assert "llama31-8b.json" in text and str(tmp_path) not in text
    assert text.startswith("# The pods read llama31-8b.json from the working directory of the image")


def test_a_folder_named_as_a_catalog_model_does_not_replace_it(capsys, tmp_path, monkeypatch):
    """load_model takes the catalog's llama3-8b over a folder of that name here: the script names the catalog model
    too (the audit: it copied the folder's config, so the job trained another model than the one priced)."""
    (tmp_path / "llama3-8b").mkdir()
    (tmp_path / "llama3-8b" / "config.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    code, _, err = _run(capsys, "--model", "llama3-8b", "--hardware", "h100-sxm", "--dp", "8", "--zero", "3",
                        "--global-batch", "64", "--emit", "slurm", "--out", "out", "--force")  # fmt: skip
    assert code == 0, err
    assert "--model llama3-8b " in (tmp_path / "out" / "launch.slurm").read_text()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["launch.slurm"]


def test_an_engine_s_own_file_is_priced_as_that_engine_without_engine(tmp_path, capsys):
    """--emit megatron --tp-overlap was refused ('priced on planner ... price it with --engine megatron'): an
    engine's own file is priced as that engine runs it unless --engine or the plan file says otherwise; a cluster
    file still launches the planner worker."""
    args = ["--model", "llama3-8b", "--dp", "8", "--tp", "2", "--zero", "1"]
    code, _, err = _run(capsys, *args, "--emit", "megatron", "--tp-overlap", "--out", str(tmp_path / "m"))
    assert code == 0, err
    assert "--tp-comm-overlap" in (tmp_path / "m" / "megatron_args.sh").read_text()
    code, _, err = _run(capsys, *args, "--emit", "slurm", "--out", str(tmp_path / "s"))
    assert code == 0 and "--engine planner" in (tmp_path / "s" / "launch.slurm").read_text(), err


def test_a_slurm_job_asks_for_the_time_its_steps_are_predicted_to_take(capsys, tmp_path):
    """The script asked for one hour whatever the run: 100,000 steps of a 70B plan (about 17 s each, 19 days) were
    killed after the first hour. --time is now --wall-s, or start-up plus 3x the predicted steps as a run here."""
    base = ("--model", "llama3-70b", "--hardware", "h100-sxm", "--dp", "128", "--tp", "2", "--zero", "3", "--force",
            "--recompute", "full", "--global-batch", "512", "--seq-len", "4096", "--emit", "slurm")  # fmt: skip
    code, _, err = _run(capsys, *base, "--steps", "100000", "--out", str(tmp_path / "a"))
    assert code == 0, err
    limit = re.search(r"#SBATCH --time=(\d+)-(\d\d):(\d\d):00", (tmp_path / "a" / "launch.slurm").read_text())
    assert limit is not None
    days = int(limit[1]) + int(limit[2]) / 24 + int(limit[3]) / 1440
    assert 3 * 100_000 * 5 / 86400 < days < 3 * 100_000 * 30 / 86400  # 3x 100k steps of 5-30 s each
    code, _, err = _run(capsys, *base, "--wall-s", "5400", "--out", str(tmp_path / "b"))
    assert code == 0 and "#SBATCH --time=0-01:30:00" in (tmp_path / "b" / "launch.slurm").read_text(), err
