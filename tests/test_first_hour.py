"""What a new user meets in the first hour (issue 19 item 6): the same defaults for memory, estimate and search,
said in the header; sequence parallelism where the engine runs it; `| head` ends quietly; every table fits
100 columns, piped or not, without cutting a number; `--wide` for more; long reasons wrap."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from planner.cli import QUICK_EXIT
from planner.plan import DEFAULT_BATCH_TOKENS, default_global_batch, default_seq_len

RUNS = os.path.join(os.path.dirname(__file__), "data", "calibration_runs.yaml")


def planner(*args: str, columns: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    return subprocess.run(
        [sys.executable, "-m", "planner", *args], capture_output=True, text=True, env=env, timeout=120
    )


def json_of(*args: str) -> dict:
    proc = planner(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# ---- defaults ----------------------------------------------------------------------------------------------
def test_default_global_batch_is_about_4m_tokens_and_a_multiple_of_dp_times_micro_batch():
    assert default_global_batch(2048) == 2048 and default_global_batch(8192) == 512
    assert default_global_batch(8192, multiple_of=24) == 504  # 21 x 24: the multiple nearest 512
    assert default_global_batch(8192, multiple_of=4096) == 4096  # never below one micro-batch per rank
    assert default_seq_len(131072) == 8192 and default_seq_len(2048) == 2048


def test_a_degree_the_gpu_count_makes_up_beside_a_given_dp_is_said():
    """--gpus 64 with dp, tp and pp 2 derives cp 8 (the one degree left out, plan.py derive_plan): a mistyped count
    should not invent context parallelism unsaid (audit). With dp left out, dp is derived as always, unremarked."""
    args = ("-m", "llama3-8b", "--gpus", "64", "--tp", "2", "--pp", "2")
    made = " ".join(planner("memory", *args, "--dp", "2").stdout.split())
    assert "cp8" in made and "(cp 8 derived: --gpus 64 over the degrees given)" in made
    assert json_of("estimate", *args, "--dp", "2")["derived_degrees"] == ["cp"]
    assert json_of("estimate", *args)["derived_degrees"] == [] and "derived" not in planner("memory", *args).stdout


def test_memory_estimate_and_search_default_to_the_same_global_batch_and_say_so():
    """llama3-70b on 64 GPUs: 512 sequences of 8192 tokens for every command (it was dp x micro-batch x pp = 8
    sequences for memory and estimate)."""
    plan = ("-m", "llama3-70b", "--gpus", "64", "--tp", "8", "--pp", "4")
    mem, est = json_of("memory", *plan), json_of("estimate", *plan)
    found = json_of("search", "-m", "llama3-70b", "--gpus", "64", "--top", "1")
    assert mem["plan"]["global_batch"] == est["plan"]["global_batch"] == found["global_batch"] == 512
    assert DEFAULT_BATCH_TOKENS == 512 * 8192
    assert mem["global_batch_default"] and est["global_batch_default"] and found["global_batch_default"]
    for command in ("memory", "estimate"):
        header = planner(command, *plan).stdout.split("memory per GPU")[0].split("step time")[0]
        assert "global batch 512 (default: about 4M tokens, here 4.19M; --global-batch to change)" in " ".join(
            header.split()
        )
    given = json_of("memory", *plan, "--global-batch", "64")
    assert given["plan"]["global_batch"] == 64 and not given["global_batch_default"]
    assert "default" not in planner("memory", *plan, "--global-batch", "64", "--seq-len", "8192").stdout


def test_seq_len_defaults_to_the_context_up_to_8192_and_says_so():
    long = json_of("memory", "-m", "llama3.1-8b", "--gpus", "8")  # a 131,072-token context
    assert long["plan"]["seq_len"] == 8192 and long["seq_len_default"]
    out = " ".join(planner("estimate", "-m", "llama3.1-8b", "--gpus", "8").stdout.split())
    assert "x 8192 tokens (default: at most 8192 of the model's 131072; --seq-len to change)" in out
    short = planner("search", "-m", "gpt3-1.3b", "--gpus", "8", "--top", "1").stdout
    assert "x 2048 tokens (default: the model's context; --seq-len to change)" in " ".join(short.split())
    assert json_of("search", "-m", "llama3.1-8b", "--gpus", "8", "--top", "1")["seq_len"] == 8192
    assert json_of("memory", "-m", "llama3.1-8b", "--gpus", "8", "--seq-len", "32768")["plan"]["seq_len"] == 32768


@pytest.mark.parametrize(
    ("engine", "flags", "sp"),
    [
        ("megatron", (), True),  # optional: on with tp > 1
        ("torchtitan", ("--zero", "2"), True),  # required
        ("deepspeed", (), False),  # never
        ("megatron", ("--no-sp",), False),  # an explicit --no-sp wins
    ],
)
def test_sequence_parallelism_is_on_where_the_engine_runs_it(engine, flags, sp):
    doc = json_of("memory", "-m", "llama3-8b", "--gpus", "8", "--tp", "2", "--engine", engine, *flags)
    assert doc["plan"]["sp"] is sp
    tp1 = json_of("memory", "-m", "llama3-8b", "--gpus", "8", "--engine", engine, *flags)
    assert tp1["plan"]["sp"] is False


def test_search_does_not_turn_on_sp_for_an_engine_without_it():
    """DeepSpeed has no Megatron-style sp: its tp > 1 plans are searched without it, not all rejected."""
    doc = json_of("search", "-m", "gpt3-13b", "--gpus", "128", "--engine", "deepspeed", "--max-pp", "1")
    assert "deepspeed has no sp" not in doc["rejected"]
    assert doc["valid"] > 0 and all(not p["plan"]["sp"] for p in doc["plans"])


def test_memory_json_gives_params_and_active_params_for_moe():
    dense = json_of("memory", "-m", "llama3-8b", "--gpus", "8")
    assert dense["params"] > 8e9 and "active_params" not in dense
    moe = json_of("memory", "-m", "mixtral-8x7b", "--gpus", "64", "--ep", "8")
    assert moe["params"] > 46e9 and 12e9 < moe["active_params"] < 13.5e9  # Mixtral: 46.7B, 12.9B active
    assert (
        json_of("estimate", "-m", "mixtral-8x7b", "--gpus", "64", "--ep", "8")["active_params"] == moe["active_params"]
    )


# ---- edges -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("extra", "said"), [(("",), "''"), (("", " "), "'', ' '"), (("foo",), "(foo)")])
def test_a_stray_argument_is_named_and_a_blank_one_quoted(extra, said):
    """A blank word on the command line (an empty shell variable) is quoted: Click showed it as "( )"."""
    from helpers import run_planner

    code, out, err = run_planner("memory", "-m", "tiny", *extra)
    assert code == 2 and out == "" and said in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("args", [("search", "-m", "gpt3-175b", "--gpus", "1024"), ("models", "--json")])
def test_a_closed_pipe_ends_quietly_with_exit_0(args):
    """`planner search ... | head -1`: the reader goes away; no error, no 'Exception ignored', exit 0."""
    cmd = [sys.executable, "-m", "planner", *args]
    for reader in ("head -1", "true"):
        proc = subprocess.run(
            f"{' '.join(cmd)} | {reader} > /dev/null; echo rc=${{PIPESTATUS[0]}}",
            shell=True,
            executable="/bin/bash",
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.stdout.strip() == "rc=0" and proc.stderr == "", (reader, proc.stdout, proc.stderr)


def test_the_quick_exit_keeps_every_byte_and_the_exit_code():
    """`planner search` ends without Python's teardown (cli.entry): what it wrote is flushed first, and the exit
    code of bad input is still 2; a command that starts processes (launch) ends the usual way."""
    proc = planner("search", "-m", "mixtral-8x7b", "--gpus", "64", "--top", "40", "--json")
    assert proc.returncode == 0 and len(proc.stdout) > 64 * 1024, proc.stderr  # past a pipe's and a buffer's size
    assert len(json.loads(proc.stdout)["plans"]) == 40
    bad = planner("search", "-m", "no-such-model", "--gpus", "8")
    assert bad.returncode == 2 and bad.stderr.startswith("error: unknown model")
    assert "launch" not in QUICK_EXIT and {"memory", "estimate", "search"} <= QUICK_EXIT


TABLES = [
    ("engines",),
    ("models",),
    ("hardware",),
    ("validate", RUNS),
    ("search", "-m", "gpt3-175b", "--gpus", "1024", "--engine", "all"),
    ("search", "-m", "gpt3-13b", "--gpus", "128", "--engine", "deepspeed,megatron-deepspeed"),
    ("search", "-m", "mixtral-8x22b", "--gpus", "256", "--seq-len", "65536"),
    ("search", "-m", "llama3-405b", "--gpus", "8"),
    ("memory", "-m", "llama3-70b", "--gpus", "64", "--tp", "8", "--pp", "4", "--per-stage"),
    ("scale", "-m", "llama3-405b", "--gpus", "1024,16384", "--tokens", "15.6e12"),
]


@pytest.mark.parametrize("args", TABLES, ids=lambda a: "-".join(a[:4]).replace("/", "_"))
def test_every_table_fits_100_columns_without_cutting_a_cell(args):
    proc = planner(*args)  # piped, COLUMNS unset: 100
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 100
    assert not [line for line in lines if "…" in line]


def test_piped_output_honours_columns_and_wide_shows_more():
    narrow = planner("search", "-m", "gpt3-175b", "--gpus", "1024", columns="80").stdout.splitlines()
    assert max(len(line.rstrip()) for line in narrow) <= 80 and not [ln for ln in narrow if "…" in ln]
    wide = planner("search", "-m", "llama3-70b", "--gpus", "512", "--wide", "--mtbf-hours", "50000").stdout
    header = next(line for line in wide.splitlines() if line.lstrip().startswith("#"))
    assert "per GPU" in header and "goodput" in header and "time goes to" in header
    assert len(header.rstrip()) > 100 and "…" not in wide


def test_long_rejection_reasons_wrap_under_their_reason():
    out = planner("search", "-m", "gpt3-175b", "--gpus", "1024").stdout.splitlines()
    split = next(i for i, line in enumerate(out) if "tp leaves the NVLink domain" in line)
    assert len(out[split]) <= 100 and out[split + 1].startswith(" " * 11) and out[split + 1].strip()


# ---- shell completion ----------------------------------------------------------------------------------------
def complete(words: str) -> list[str]:
    """What bash completion offers for the command line `words` (the last word being typed)."""
    env = {**os.environ, "_PLANNER_COMPLETE": "complete_bash", "COMP_WORDS": words}
    env["COMP_CWORD"] = str(len(words.split()) - (0 if words.endswith(" ") else 1))
    code = "import sys; sys.argv = ['planner']; from planner.cli import main; main()"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_shell_completion_of_commands_options_and_catalog_names():
    assert "--install-completion" in planner("--help").stdout and "--show-completion" in planner("--help").stdout
    assert complete("planner mem") == ["memory"]
    assert {"--max-tp", "--max-pp"} <= set(complete("planner search --max"))
    assert {"llama3-70b", "llama3-8b"} <= set(complete("planner search --model llama3"))
    assert "h100-sxm" in complete("planner memory --hardware h1")
    assert "torchtitan" in complete("planner estimate --engine ")
    # the vocabularies: precision recipes, schedules (the last item of a comma list), recompute, objectives, targets
    assert complete("planner estimate --precision fp8-") == [
        "fp8-delayed",
        "fp8-current",
        "fp8-rowwise",
        "fp8-rowwise-gw-hp",
        "fp8-blockwise",
    ]
    assert complete("planner search --schedule 1f1b,dual") == ["1f1b,dualpipev"]
    assert complete("planner memory --recompute s") == ["selective"]
    assert complete("planner search --objective r") == ["risk"]
    assert "megatron-bridge" in complete("planner launch --emit meg")


def test_a_sequence_beyond_the_models_context_is_said_in_the_header():
    """Context extension is planned with a --seq-len past the model's context: the header says it is one."""
    proc = planner("estimate", "-m", "mixtral-8x7b", "--gpus", "64", "--seq-len", "65536")
    assert "beyond mixtral-8x7b's 32768-token context" in " ".join(proc.stdout.split())
    within = planner("estimate", "-m", "mixtral-8x7b", "--gpus", "64", "--seq-len", "32768")
    assert "-token context" not in within.stdout


def test_a_search_where_no_candidate_is_valid_does_not_blame_memory():
    """97 GPUs for Llama 3.1 8B: every candidate breaks a divisibility rule before its memory is counted, so the
    answer is not 'no plan fits in 184 GiB' (an 8B model fits one GB200 many times over); the request cannot be met
    as given, so it is refused (exit 2, one line) with the batch to try."""
    proc = planner("search", "-m", "llama3.1-8b", "--gpus", "97", "--hardware", "gb200-nvl72")
    assert proc.returncode == 2 and proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1
    assert "no plan is valid: global batch not divisible by dp x micro-batch" in proc.stderr
    assert "--global-batch auto" in proc.stderr and "no plan fits" not in proc.stderr


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (("search", "--gpus", "8"), "torchtitan has no Mamba-2 / hybrid layer patterns"),
        (("scale", "--gpus", "8,16", "--tokens", "1e12"), "torchtitan has no Mamba-2 / hybrid layer patterns"),
    ],
)
def test_a_model_the_engine_cannot_run_is_refused_by_search_and_scale(command, said):
    """search and scale refuse an engine that lacks the model's layers as estimate does (exit 2, one line), not
    '0 valid' with exit 0 (audit)."""
    proc = planner(command[0], "-m", "nemotron-h-8b", "--engine", "torchtitan", *command[1:])
    assert proc.returncode == 2 and proc.stdout == "" and said in proc.stderr


def test_a_search_one_setting_rules_out_is_refused_naming_that_setting():
    """A recompute module no candidate can take (moe_act on a dense model): an impossible request, refused as
    estimate refuses an impossible plan (exit 2, one line), naming the rule and the setting, not a GPU count or a
    batch to try (it exited 0 with '0 valid')."""
    proc = planner("search", "-m", "llama3-8b", "--gpus", "8", "--recompute-modules", "moe_act")
    assert proc.returncode == 2 and proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1
    assert "no plan is valid: moe_act without grouped-GEMM experts" in proc.stderr
    assert proc.stderr.strip().endswith("given --recompute-modules moe_act") and "power-of-two" not in proc.stderr


def test_a_search_whose_fixed_degree_no_plan_can_take_is_refused_and_writes_nothing(tmp_path):
    """--tp 3 on 32 heads: every candidate breaks that rule; the search says the rule with its example and what was
    given, exit 2, nothing on stdout (also under --json) and no --save file."""
    saved = tmp_path / "best.yaml"
    for extra in ((), ("--json",)):
        proc = planner("search", "-m", "llama3-8b", "--gpus", "24", "--tp", "3", "--save", str(saved), *extra)
        assert proc.returncode == 2 and proc.stdout == "" and not saved.exists()
        assert "tp=3 must divide num_attention_heads=32 (try tp in 1, 2, 4, 8, 16, 32)); given --tp 3" in proc.stderr


@pytest.mark.parametrize(("value", "said"), [("1e12", "1000000000000.0 is out of [1, 1e+10]"),
                                             ("nan", "nan is not a finite number in [1, 1e+10]")])  # fmt: skip
def test_a_number_out_of_its_range_is_not_called_infinite(value, said):
    from helpers import run_planner

    code, out, err = run_planner("estimate", "-m", "tiny", "--mtbf-hours", value)
    assert code == 2 and said in err and out == "", err


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--precision", "fp8-rowise"), "--precision 'fp8-rowise' is not valid (did you mean \"fp8-rowwise\"?)"),
        (("--recompute", "ful"), "--recompute 'ful' is not valid (did you mean \"full\"?)"),
        (("--precision", "xyz"), "--precision 'xyz' is not valid; choose one of fp32,"),  # nothing close: no guess
    ],
)
def test_a_misspelt_choice_names_the_nearest_one(args, said):
    """A misspelt precision or recompute level got the whole list; like a misspelt model name it now also gets
    the name it most likely meant (errors.did_you_mean, the one home of both)."""
    from helpers import run_planner

    code, out, err = run_planner("estimate", "-m", "tiny", *args)
    assert code == 2 and out == "" and err.strip().startswith(f"error: {said}"), err
    assert len(err.strip().splitlines()) == 1
