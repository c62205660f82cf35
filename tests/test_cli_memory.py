"""`planner memory`, `models`, `hardware`: output contracts and bad input (one line, exit 2, no traceback)."""

import json
import subprocess
import sys

import pytest
from helpers import run_planner as run
from typer.testing import CliRunner

from planner.cli import app, main

runner = CliRunner()


def test_memory_json_contract():
    code, out, err = run(
        "memory",
        "--model",
        "gpt3-175b",
        "--gpus",
        "1024",
        "--tp",
        "8",
        "--pp",
        "16",
        "--recompute",
        "full",
        "--global-batch",
        "1536",
        "--hardware",
        "a100-80gb",
        "--json",
    )
    assert code == 0, err
    doc = json.loads(out)
    for key in (
        "model",
        "hardware",
        "plan",
        "stage",
        "per_gpu_bytes",
        "total_bytes",
        "capacity_bytes",
        "fits",
        "stages",
    ):
        assert key in doc
    assert set(doc["per_gpu_bytes"]) == {"weights", "gradients", "optimizer", "activations", "buffers", "reserved"}
    assert (
        doc["total_bytes"] == sum(doc["per_gpu_bytes"].values())
        or abs(doc["total_bytes"] - sum(doc["per_gpu_bytes"].values())) <= 6
    )
    assert len(doc["stages"]) == 16 and doc["plan"]["dp"] == 8 and doc["plan"]["tp"] == 8
    assert set(doc["plan"]) >= {
        "dp",
        "tp",
        "pp",
        "vpp",
        "cp",
        "ep",
        "sp",
        "zero",
        "recompute",
        "micro_batch",
        "global_batch",
        "seq_len",
        "precision",
        "schedule",
        "engine",  # DESIGN's {PLAN} names its engine, in every document that has one (as search's plans did alone)
    }
    assert doc["plan"]["engine"] == doc["engine"] == "megatron"
    assert doc["fits"] is True and doc["stage"] == max(doc["stages"], key=lambda s: s["total_bytes"])["stage"]


def test_memory_table_and_per_stage():
    result = runner.invoke(
        app, ["memory", "--model", "llama3-8b", "--gpus", "8", "--pp", "2", "--zero", "1", "--per-stage"]
    )
    assert result.exit_code == 0, result.output
    for word in (
        "weights",
        "gradients",
        "optimizer",
        "activations",
        "buffers",
        "reserved",
        "fit",
        "per pipeline stage",
    ):
        assert word in result.output


def test_plan_file_round_trip(tmp_path):
    from planner.io.planfile import write_plan_file
    from planner.plan import Plan

    path = tmp_path / "plan.yaml"
    write_plan_file(
        str(path),
        plan=Plan(dp=4, tp=2, zero=1, global_batch=32, seq_len=4096),
        model="llama3-8b",
        hardware="h100-sxm",
        engine="megatron",
        gpus=8,
    )
    code, out, err = run("memory", "--plan", str(path), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["model"] == "llama3-8b" and doc["plan"]["tp"] == 2 and doc["plan"]["zero"] == 1
    code, out, _ = run("memory", "--plan", str(path), "--tp", "4", "--json")  # flag wins, dp re-derived
    assert code == 0 and json.loads(out)["plan"]["tp"] == 4 and json.loads(out)["plan"]["dp"] == 2
    code, out, _ = run("memory", "--plan", str(path), "--gpus", "16", "--json")  # so does another GPU count
    assert code == 0 and json.loads(out)["plan"]["tp"] == 2 and json.loads(out)["plan"]["dp"] == 8
    code, out, _ = run("memory", "--plan", str(path), "--gpus", "16", "--dp", "4", "--tp", "4", "--json")
    assert code == 0 and json.loads(out)["plan"]["dp"] == 4


def test_grad_dtype_is_kept_by_the_plan_file_and_overridden_by_the_flag(tmp_path):
    """search --save keeps --grad-dtype under training:; memory --plan reads it; a flag wins over it."""
    path = tmp_path / "best.yaml"
    code, _, err = run(
        "search", "--model", "llama3-8b", "--gpus", "8", "--zero", "1", "--grad-dtype", "param", "--save", str(path)
    )  # zero 1: its gradient buffer takes the dtype asked (FSDP2 plans keep fp32 gradients of fp32 shards)
    assert code == 0, err
    assert "grad_dtype: param" in path.read_text()

    def grads(*extra: str) -> float:
        code, out, err = run("memory", "--plan", str(path), "--json", *extra)
        assert code == 0, err
        return json.loads(out)["per_gpu_bytes"]["gradients"]

    assert grads("--grad-dtype", "fp32") == pytest.approx(2 * grads())


def test_does_not_fit_is_reported_not_refused():
    code, out, err = run("memory", "--model", "llama3-70b", "--gpus", "8", "--json")
    assert code == 0, err
    assert json.loads(out)["fits"] is False


def test_a_plan_that_does_not_fit_says_what_would_make_it_fit():
    """memory says what the search's closest misses try (a higher ZeRO stage, recompute, fewer sequences a
    micro-batch, the engine's CPU offload, more GPUs), each re-evaluated: it only said "does not fit". The JSON
    carries them as `would_fit`, absent where the plan fits."""
    args = ("memory", "-m", "llama3-70b", "--hardware", "gb200-nvl72", "--gpus", "64", "--tp", "1", "--pp", "1",
            "--zero", "3", "--micro-batch", "1", "--global-batch", "256", "--seq-len", "8192",
            "--recompute", "none")  # fmt: skip
    code, out, err = run(*args, "--json")
    assert code == 0, err
    doc = json.loads(out)
    changes = {v["change"]: v for v in doc["would_fit"]}
    assert doc["fits"] is False and changes["recompute full"]["fits"] and changes["recompute full"]["total_bytes"] < (
        doc["capacity_bytes"]
    )  # fmt: skip
    offload = next(c for c in changes if c.startswith("--offload-layers "))
    assert changes[offload]["settings"] == {"offload_layers": int(offload.split()[-1])}  # what makes it fit
    assert changes["recompute full"]["settings"] == {}
    code, text, err = run(*args)
    assert code == 0 and f"with {offload}: " in text and "with recompute full: 41.94 GiB" in " ".join(text.split())
    assert "GPUs (dp" not in text  # recompute fits on the 64 GPUs the plan has: more GPUs is not offered
    code, text, err = run(*args[:6], "8", *args[7:], "--hardware", "h100-sxm", "--recompute", "full")  # saves all
    assert code == 0 and "with 32 GPUs (dp 32): " in " ".join(text.split()), err
    code, text, err = run(*args, "--hardware", "h100-hbm2e-500w")  # no host link stated: no offload to suggest
    assert code == 0 and "does not fit" in text and "--offload-layers" not in text, err
    code, text, err = run("memory", "-m", "llama3-405b", "--hardware", "cpu", "--gpus", "1", "--recompute", "full")
    assert code == 0 and "nothing tried makes it fit, more GPUs neither" in " ".join(text.split()), err
    code, out, err = run(*args, "--recompute", "full", "--json")
    assert code == 0 and json.loads(out)["fits"] and "would_fit" not in json.loads(out), err
    code, out, err = run("estimate", *args[1:], "--json")  # estimate says the same, beside its memory terms
    assert code == 0 and json.loads(out)["would_fit"] == doc["would_fit"], err


@pytest.mark.parametrize(
    "args, expected",
    [
        (["memory", "--model", "gpt5"], 'unknown model "gpt5"'),
        (["memory", "--model", "tiny", "--hardware", "h1000"], "h1000"),
        (["memory", "--model", "tiny", "--tp", "x"], "--tp"),
        (["memory", "--model", "gpt3-175b", "--gpus", "64", "--tp", "7"], "tp=7"),
        (["memory", "--model", "tiny", "--gpus", "8", "--tp", "2", "--pp", "2", "--dp", "3"], "gpus"),
        (["memory", "--model", "tiny", "--recompute", "some"], "--recompute 'some'"),
        (["memory", "--model", "tiny", "--sp"], "sp"),
        (["memory", "--model", "tiny", "--plan", "/nonexistent/plan.yaml"], "no such plan file"),
        (["memory", "--model", "/nonexistent/model.yaml"], "/nonexistent/model.yaml"),
        (["memory", "--model", "tiny", "--global-batch", "3", "--dp", "2"], "global_batch=3"),
        (["memory", "--model", "gpt2-1.5b", "--seq-len", "2048"], "seq_len=2048"),
        (["memory", "--model", "tiny", "--ep", "2", "--dp", "2"], "ep=2"),
        (["memory", "--model", "tiny", "--pp", "2", "--vpp", "2", "--global-batch", "1"], "interleaved"),
        (["memory", "--model", "tiny", "--zero", "5"], "--zero"),
        (["models", "show", "nope"], "nope"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, expected):
    code, out, err = run(*args)
    assert code == 2, (out, err)
    assert out == ""
    assert "Traceback" not in err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1 or (len(" ".join(lines)) < 400 and lines[0].startswith("error")), err
    assert expected in err.replace("\n", " ")


def test_bad_files_are_one_line(tmp_path):
    misspelt = tmp_path / "m.yaml"
    misspelt.write_text(
        "name: x\nnum_layerz: 2\nhidden_size: 64\nnum_attention_heads: 4\nffn_hidden_size: 256\n"
        "vocab_size: 256\nmax_seq_len: 64\n"
    )
    code, _out, err = run("memory", "--model", str(misspelt))
    assert code == 2 and "num_layerz" in err and "Traceback" not in err
    bad_json = tmp_path / "config.json"
    bad_json.write_text("{not json")
    code, _, err = run("memory", "--model", str(bad_json))
    assert code == 2 and "config.json" in err and "Traceback" not in err
    plan = tmp_path / "plan.yaml"
    plan.write_text("plan: {tp: 2, tpp: 3}\n")
    code, _, err = run("memory", "--model", "tiny", "--plan", str(plan))
    assert code == 2 and "tpp" in err


def test_catalog_commands():
    assert runner.invoke(app, ["models"]).exit_code == 0
    result = runner.invoke(app, ["models", "show", "llama3-8b", "--json"])
    assert result.exit_code == 0 and json.loads(result.output)["derived"]["params"] > 8e9
    result = runner.invoke(app, ["hardware"])
    assert result.exit_code == 0 and "h100-sxm" in result.output
    result = runner.invoke(app, ["hardware", "show", "a100-80gb", "--json"])
    assert result.exit_code == 0 and json.loads(result.output)["gpus_per_node"] == 8


def test_main_entry_points():
    assert run("--help")[0] == 0
    assert run("memory", "--help")[0] == 0
    with pytest.raises(SystemExit) as exc:
        main(["memory", "--model", "nope"])
    assert exc.value.code == 2


@pytest.mark.parametrize(
    "args",
    [
        ["memory", "--model", "llama3-8b", "--gpus", "8", "--json"],
        ["estimate", "--model", "llama3-8b", "--gpus", "8", "--json"],
        ["search", "--model", "llama3-8b", "--gpus", "8", "--json"],
    ],
)
def test_json_commands_do_not_import_rich_torch_or_scipy(args):
    """Start-up is the floor of every command: a JSON document needs no rich (tables), torch or scipy."""
    code = (
        "import sys, contextlib, io\n"
        "from planner.cli import main\n"
        f"sys.argv = ['planner', *{args!r}]\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        main()\n    except SystemExit as e:\n        assert not e.code, e.code\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'rich', 'torch', 'scipy'}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"


def test_version_is_said_without_building_the_app():
    """--version printed after every command module was imported (0.45 s, the cost model and the API with them)."""
    code = (
        "import sys\nfrom planner.cli import main\nmain(['--version'])\n"
        "print(sorted(m for m in sys.modules if m.startswith(('planner.api', 'planner.cost', 'planner.cli.search'))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    from planner import __version__

    assert proc.returncode == 0 and proc.stdout.splitlines() == [f"planner {__version__}", "[]"], proc.stderr


def test_memory_takes_the_cluster_and_power_cap_an_estimate_line_names():
    """An estimate's command line runs under memory as it stands: --cluster names the GPU (here the GB200 of the
    NVL72 SuperPOD), and a power cap changes no byte."""
    line = ("-m", "llama3-8b", "--gpus", "8", "--cluster", "gb200-nvl72-superpod", "--power-limit", "900", "--json")
    code, out, err = run("memory", *line)
    assert code == 0, err
    mem = json.loads(out)
    code, out, err = run("estimate", *line)
    assert code == 0, err
    est = json.loads(out)
    assert mem["total_bytes"] == est["total_bytes"] and mem["hardware"] == est["hardware"]
    code, out, err = run("memory", "-m", "llama3-8b", "--gpus", "8", "--hardware", "gb200-nvl72", "--json")
    assert code == 0, err
    assert json.loads(out)["total_bytes"] == mem["total_bytes"]


def test_the_json_terms_add_up_to_the_total_byte_for_byte():
    """Each term rounded alone could miss the rounded total by a byte (three halves round to 0 + 0 + 2 = 2, or
    to 0 + 0 + 0 under round-half-even, where their sum rounds to 2): the spare bytes go to the largest remainders."""
    from planner.cost.memory import MemoryBreakdown
    from planner.render.documents import _ints

    b = MemoryBreakdown(10.5, 20.5, 30.5, 0.4, 0.4, 0.0)
    whole = _ints(b)
    assert sum(whole.values()) == round(b.total_bytes) == 62
    assert all(abs(whole[k] - v) < 1 for k, v in b.as_dict().items())


@pytest.mark.parametrize(("global_batch", "said"), [(1024, "(each virtual stage takes them 8 at a time)"), (1536, "")])
def test_the_header_says_the_micro_batch_group_an_interleaved_plan_was_priced_with(global_batch, said):
    """16 micro-batches over pp 6 run through each virtual stage 8 at a time (Megatron-Core's group, which the
    emitted files state): the header says so, as the in-flight activations were counted with it; 24 take pp."""
    args = ("--model", "gpt3-175b", "--gpus", "1536", "--hardware", "a100-80gb", "--tp", "4", "--pp", "6",
            "--vpp", "4", "--global-batch", str(global_batch), "--seq-len", "2048", "--zero", "1")  # fmt: skip
    for command in ("memory", "estimate"):
        code, out, err = run(command, *args)
        header = " ".join(out.split("\n\n")[0].split())
        assert code == 0 and "micro-batches per step" in header, err
        assert (said in header) if said else ("at a time" not in header)


@pytest.mark.parametrize(
    ("given", "said"),
    [(("--gpus", "0"), "--gpus': Input should be greater than or equal to 1 (got '0')"),
     (("--tp=abc",), "--tp': Input should be a valid integer, unable to parse string as an integer (got 'abc')")],
)  # fmt: skip
def test_an_option_out_of_its_bounds_is_named_with_the_value_given(given, said):
    """click names the option and the bound it broke; the line adds the value given, as every other refusal does."""
    code, out, err = run("estimate", "-m", "llama3-8b", *given)
    assert code == 2 and out == "" and said in " ".join(err.split()) and len(err.strip().splitlines()) == 1


def test_a_change_that_fits_by_a_hair_is_said_to_fit_only_so():
    """What would make a plan fit printed 'fits' of a change whose 80% interval of memory passes the GPU, which
    estimate of the changed plan flags 'may not fit': each change now says so, in its text and its JSON, as the
    estimate of that changed plan does."""
    from planner.cost.coster import Coster
    from planner.io.catalog import load_engine, load_hardware, load_model
    from planner.plan import Plan

    args = ("memory", "-m", "llama3-8b", "--gpus", "8", "--hardware", "h100-sxm", "--tp", "1", "--zero", "1",
            "--recompute", "none", "--micro-batch", "2")  # fmt: skip
    code, out, err = run(*args, "--json")
    assert code == 0, err
    doc = json.loads(out)
    coster = Coster(load_model("llama3-8b"), load_hardware("h100-sxm"), load_engine("megatron"))
    risky = []
    for v in doc["would_fit"]:
        plan = Plan(**{k: x for k, x in v["plan"].items() if k != "engine"})
        high = coster.memory_high_bytes(plan, v["total_bytes"])
        assert v["may_not_fit"] == (v["fits"] and high > doc["capacity_bytes"]), v
        risky += [v["change"]] * v["may_not_fit"]
    assert "recompute full" in risky  # 76.9 of 79.2 GiB, its interval past it
    code, text, err = run(*args)
    said = " ".join(text.split())
    assert code == 0 and "with recompute full: 76.91 GiB — fits; its 80% interval of memory passes the GPU" in said
