"""`planner search`: the pipeline (candidates -> checks -> memory screen -> pruned estimates -> ranking),
its sanity against published configurations, its counts, and the CLI contract."""

from __future__ import annotations

import itertools
import json
import math
import random
from pathlib import Path

import pytest
import yaml
from helpers import make_engine, run_planner
from hypothesis import given, settings
from hypothesis import strategies as hst

from planner.cli import main
from planner.cost.coster import Coster
from planner.cost.memory import memory_report
from planner.cost.schedule import step_time
from planner.engine import plan_problems
from planner.explore.pipeline import search
from planner.explore.results import pareto_front
from planner.explore.space import NOT_FIT, PRUNED_ONE_RANK, Checkpointing, Space, micro_batches, structures
from planner.io.catalog import load_engine, load_hardware, load_model
from planner.plan import Plan, divisors
from planner.plan_checks import check_plan
from planner.render.search_documents import search_doc

GENERIC = make_engine()


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = 0
    try:
        main(list(args))
    except SystemExit as e:
        code = int(e.code or 0)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


@pytest.fixture(scope="module")
def gpt3_a100():
    m, hw = load_model("gpt3-175b"), load_hardware("a100-80gb")
    return m, hw, search(m, hw, Space(gpus=1024, global_batch=1536, seq_len=2048), GENERIC)


# ---- sanity ------------------------------------------------------------------------------------------
def test_gpt3_175b_beats_megatron_and_keeps_tp_in_a_node(gpt3_a100):
    """Narayanan et al. 2021, Table 1: GPT-3 175B on 1024 A100s ran tp 8, pp 16, dp 8, micro-batch 1,
    full recompute. The search must find that plan valid and rank plans at least as fast above it."""
    m, hw, res = gpt3_a100
    assert res.top and all(r.plan.tp <= hw.gpus_per_node for r in res.top)
    megatron = Plan(dp=8, tp=8, pp=16, micro_batch=1, recompute="full", global_batch=1536, seq_len=2048)
    assert not check_plan(m, megatron, 1024) and memory_report(m, hw, megatron, GENERIC).fits
    assert res.top[0].time.tokens_per_s >= step_time(m, hw, megatron, make_engine()).tokens_per_s


def test_small_model_is_not_split_by_tp():
    m, hw = load_model("gpt3-1.3b"), load_hardware("h100-sxm")
    res = search(m, hw, Space(gpus=8, global_batch=512, seq_len=2048), GENERIC)
    assert res.best.plan.tp == 1 and res.best.plan.pp == 1 and res.best.plan.dp == 8


# ---- pipeline properties --------------------------------------------------------------------------------
def test_counts_add_up(gpt3_a100):
    _, _, res = gpt3_a100
    assert res.evaluated == res.valid + sum(res.rejected.values())
    assert res.valid == res.timed + sum(res.pruned.values())
    assert res.rejected[NOT_FIT] > 0 and len(res.top) == 10


def test_pruning_finds_the_same_top_plans_as_timing_everything():
    """The same top plans but for the heavier-recompute twins of a plan that fits, which only the exhaustive
    search times (PRUNED_RECOMPUTE)."""
    m, hw = load_model("llama2-13b"), load_hardware("h100-sxm")
    space = Space(gpus=32, global_batch=256, seq_len=4096)
    fast, full = search(m, hw, space, GENERIC, top=5), search(m, hw, space, GENERIC, top=10, exhaustive=True)
    seen, lightest = set(), []
    for r in full.top:  # fastest first: a plan's lighter-recompute twin, when it fits, comes before it
        twin = r.plan.model_copy(update={"recompute": "none"})
        if twin not in seen:
            seen.add(twin)
            lightest.append(r.plan)
    assert [r.plan for r in fast.top] == lightest[:5]
    assert full.timed == full.valid and fast.timed < full.timed


def test_memory_screen_equals_memory_report():
    """The search's per-rank screen is memory_report's arithmetic on the ranks that can be the peak."""
    rng = random.Random(0)
    for name, gpus, hw_name, prec in [
        ("gpt3-175b", 64, "a100-80gb", "bf16"),
        ("mixtral-8x7b", 32, "h100-sxm", "fp8"),
        ("llama3-70b", 48, "h100-sxm", "bf16"),
    ]:
        m, hw = load_model(name), load_hardware(hw_name)
        space = Space(
            gpus=gpus, global_batch=192, seq_len=4096 if name != "gpt3-175b" else 2048, precision=prec, max_cp=2
        )
        engines = [make_engine(e) for e in ("megatron", "torchtitan", "deepspeed", "planner")]
        screens = [Coster(m, hw, e) for e in engines]
        sts = structures(m, hw, space)
        for st in rng.sample(sts, min(25, len(sts))):
            for mb in micro_batches(space, st.dp)[:2]:
                for z, rc in [(0, "none"), (1, "selective"), (3, "full"), (2, "none")]:
                    p = Plan(
                        dp=st.dp,
                        tp=st.tp,
                        pp=st.pp,
                        vpp=st.vpp,
                        cp=st.cp,
                        ep=st.ep,
                        sp=st.sp,
                        zero=z,
                        recompute=rc,
                        micro_batch=mb,
                        global_batch=space.global_batch,
                        seq_len=space.seq_len,
                        precision=prec,
                        schedule=st.schedule,
                    )
                    for engine, screen in zip(engines, screens):
                        if plan_problems(m, p, engine, gpus):
                            continue
                        report = memory_report(m, hw, p, engine)
                        got, _rank = screen.peak(p)
                        assert got == pytest.approx(report.total_bytes, rel=1e-12), engine.name


def test_fixed_tp_and_lists():
    m, hw = load_model("llama3-8b"), load_hardware("h100-sxm")
    res = search(
        m,
        hw,
        Space(
            gpus=16,
            global_batch=256,
            seq_len=8192,
            tp=4,
            zero=(1, 3),
            recompute=("selective", "full"),
            micro_batches=(1, 2),
        ),
        GENERIC,
        top=50,
    )
    assert res.top and all(r.plan.tp == 4 for r in res.top)
    assert {r.plan.zero for r in res.top} <= {1, 3} and {r.plan.micro_batch for r in res.top} <= {1, 2}
    assert all(r.plan.recompute != "none" for r in res.top)


def test_moe_searches_ep_and_long_sequences_search_cp():
    m, hw = load_model("mixtral-8x7b"), load_hardware("h100-sxm")
    sts = structures(m, hw, Space(gpus=64, global_batch=64, seq_len=32768))
    assert {s.ep for s in sts} >= {1, 2, 8} and {s.cp for s in sts} >= {1, 2, 4}
    # ep within dp x cp when experts split like the dense layers (etp = tp); within tp x cp x dp with etp = 1
    # (Megatron's MoE parallel folding)
    assert all((s.dp * s.cp) % s.ep == 0 and 8 % s.ep == 0 for s in sts if s.etp is None)
    folded = [s for s in sts if s.etp == 1]
    assert folded and all((s.tp * s.cp * s.dp) % s.ep == 0 and s.tp > 1 for s in folded)
    short = structures(load_model("gpt3-13b"), hw, Space(gpus=64, global_batch=64, seq_len=2048))
    assert {s.cp for s in short} == {1} and {s.ep for s in short} == {1}
    assert all(s.sp == (s.tp > 1) for s in short)
    assert all(s.schedule in ("1f1b", "interleaved") for s in short)  # gpipe only when asked


def test_nothing_fits_shows_closest_misses_with_fixes():
    m, hw = load_model("llama3-405b"), load_hardware("h100-sxm")
    res = search(m, hw, Space(gpus=8, global_batch=64, seq_len=8192), GENERIC)
    assert not res.top and res.valid == 0 and res.misses
    first = res.misses[0]
    assert first.over_bytes > 0 and first.gpus_needed and first.gpus_needed > 8
    assert any(v.fits for v in first.variants)
    assert all(a.over_bytes <= b.over_bytes for a, b in zip(res.misses, res.misses[1:]))
    doc = search_doc(res).model_dump()["closest_misses"][0]  # each plan document names the engine it was priced for
    assert doc["plan"]["engine"] == GENERIC.name and {v["plan"]["engine"] for v in doc["variants"]} == {GENERIC.name}
    # at dp 1 ZeRO shards nothing: no same-GPU variant raises the stage (ZeRO-3 would add FSDP's fp32 parameters)
    for miss in res.misses:
        if miss.plan.dp * miss.plan.cp == 1:
            same_gpus = [v for v in miss.variants if v.plan.gpus == miss.plan.gpus]
            assert all(v.plan.zero == miss.plan.zero for v in same_gpus), [v.change for v in same_gpus]
        # a change names only what it changes: "with zero 1 + recompute full + micro-batch 1" of an mb1 rc=full plan
        for v in miss.variants:
            said = v.change.split(" with ")[-1]
            assert not ("recompute full" in said and miss.plan.recompute == "full"), v.change
            assert not ("micro-batch 1" in said and miss.plan.micro_batch == 1), v.change


def test_pareto_front():
    pts = [(1.0, 1.0), (2.0, 3.0), (1.5, 0.5), (3.0, 2.0), (4.0, 5.0)]
    assert pareto_front(pts) == [0, 1, 4]


# ---- CLI --------------------------------------------------------------------------------------------
def test_cli_json_shape(capsys):
    code, out, err = cli(capsys, "search", "--model", "gpt3-1.3b", "--gpus", "8", "--json", "--top", "3")
    assert code == 0, err
    doc = json.loads(out)
    for key in ("evaluated", "valid", "rejected", "seconds", "hardware", "model", "plans", "timed", "pruned"):
        assert key in doc
    # default global batch: about 4M tokens, 2048 sequences of 2048
    assert doc["hardware"] == "h100-sxm" and doc["global_batch"] == 2048 and len(doc["plans"]) == 3
    assert doc["global_batch_default"] is True
    assert doc["evaluated"] == doc["valid"] + sum(doc["rejected"].values())
    row = doc["plans"][0]
    for key in ("plan", "memory", "time", "tokens_per_s", "tokens_per_s_per_gpu", "mfu", "hfu", "tflops_per_gpu"):
        assert key in row
    assert set(row["time"]["exposed_comm_s"]) == {"tp", "cp", "ep", "pp", "dp"}
    assert row["memory"]["fits"] is True and "per_gpu_bytes" in row["memory"]
    assert row["tokens_per_s"] >= doc["plans"][1]["tokens_per_s"]


def test_cli_table_save_round_trip(capsys, tmp_path):
    path = tmp_path / "best.yaml"
    code, out, err = cli(
        capsys,
        "search",
        "--model",
        "llama3-8b",
        "--gpus",
        "16",
        "--max-pp",
        "2",
        "--top",
        "3",
        "--save",
        str(path),
        "--explain",
        "tp=16",
    )
    assert code == 0, err
    for word in ("h100-sxm", "evaluated", "valid", "rejected", "tokens/s", "MFU", "best:", "why not tp=16"):
        assert word in out
    saved = yaml.safe_load(path.read_text())
    assert saved["model"] == "llama3-8b" and saved["gpus"] == 16
    code, out, err = cli(capsys, "memory", "--plan", str(path), "--json")
    assert code == 0, err
    assert json.loads(out)["plan"] == {**saved["plan"], "engine": saved["engine"]}


def test_explain_says_a_degree_that_cannot_make_up_the_gpus_and_is_in_the_json(capsys):
    args = ("search", "--model", "llama3-8b", "--gpus", "16", "--no-advice")
    code, out, err = cli(capsys, *args, "--explain", "pp=3")
    said = " ".join(out.split())
    assert code == 0 and "pp=3 cannot make up 16 GPUs" in said and "--pp 3" not in said, err
    code, out, err = cli(capsys, *args, "--max-pp", "2", "--explain", "pp=8")
    said = " ".join(out.split())
    assert code == 0 and "raise --max-pp" in said, err  # divides: the space's bound keeps it out
    assert "the best of them, dp2 tp1 pp8" in said  # and the pinned search runs past that bound (review)
    code, out, err = cli(capsys, *args, "--explain", "tp=16", "--json")
    assert code == 0, err
    why = json.loads(out)["explain"]
    assert (why["field"], why["value"], why["outside_search_space"]) == ("tp", 16, None)
    assert why["rejected"] == sum(why["by_reason"].values()) > 0
    assert set(why["examples"]) == set(why["by_reason"])  # an example of each reason counted, none of another


def test_explain_is_the_search_pinned_to_the_value(capsys):
    """--explain runs the same search with the value pinned: its rejections are the pinned search's own (they
    were read off the unpinned search's rejections, which labelled every rule rejection rc=none), and its best
    valid plan is set against the winner (it said nothing of valid plans that lost on throughput; a value outside
    the space may beat the winner: Mixtral 8x7B on 64 GPUs at 16k runs faster at cp 2, which an MoE search leaves to
    --max-cp)."""
    args = ("search", "--model", "llama3-70b", "--gpus", "64", "--top", "1", "--no-advice", "--json")
    for pin, flag in (("recompute=full", ("--recompute", "full")), ("pp=2", ("--pp", "2"))):
        code, out, err = cli(capsys, *args, "--explain", pin)
        assert code == 0, err
        doc = json.loads(out)
        why, winner = doc["explain"], doc["plans"][0]["tokens_per_s"]
        code, out, err = cli(capsys, *args, *flag)
        pinned = json.loads(out)
        assert why["rejected"] == sum(pinned["rejected"].values()) and why["valid"] == pinned["valid"]
        assert why["best"]["tokens_per_s"] == pytest.approx(pinned["plans"][0]["tokens_per_s"])
        assert why["best_vs_winner"] == pytest.approx(why["best"]["tokens_per_s"] / winner)
    assert why["best_vs_winner"] < 1  # pp=2: valid, slower
    moe = ("search", "--model", "mixtral-8x7b", "--gpus", "64", "--seq-len", "16384", "--top", "1", "--no-advice")
    code, out, err = cli(capsys, *moe, "--explain", "cp=2")
    said = " ".join(out.split())
    assert code == 0 and "outside the search space" in said and "above the winner's" in said, err


def test_explain_a_stage_the_engine_does_not_run_counts_every_candidate_under_it(capsys):
    """Megatron has no ZeRO-2: every pinned candidate breaks that rule, which the count says first (240 of 1,902
    were counted under the structure's rules, tp beyond NVLink and the interleaved schedule, before it)."""
    args = ("search", "--model", "llama3-8b", "--gpus", "64", "--no-advice", "--json", "--explain", "zero=2")
    code, out, err = cli(capsys, *args)
    why = json.loads(out)["explain"]
    assert code == 0 and why["valid"] == 0 and why["by_reason"] == {"megatron has no zero 2": why["rejected"]}, err


def test_explain_offers_no_option_whose_every_plan_is_refused(capsys):
    """--explain schedule=dualpipev on megatron said 'fix it with --schedule dualpipev', and the pinned search
    beneath it refused all its candidates (review): the option is said not to help."""
    args = ("search", "-m", "qwen3-30b-a3b", "--hardware", "b200", "--gpus", "16", "--no-advice", "--json")
    code, out, err = cli(capsys, *args, "--explain", "schedule=dualpipev")
    why = json.loads(out)["explain"]
    assert code == 0 and why["valid"] == 0 and "fix it with" not in why["outside_search_space"], err
    assert why["outside_search_space"].endswith("--schedule dualpipev would not help: no plan with it is valid here")


def test_explain_reads_a_value_as_the_plan_field_does_and_names_the_engine(capsys):
    """`sp=no` is pydantic's False: it was compared as the string 'no', said to be outside the space, and told to
    use `--sp no`, which is no option. With several engines the best pinned plan names its engine."""
    args = ("search", "-m", "llama3-8b", "--gpus", "64", "--tp", "2", "--no-advice", "--json", "--explain")
    code, out, err = cli(capsys, *args, "sp=no")
    no = json.loads(out)["explain"]
    code2, out2, _ = cli(capsys, *args, "sp=false")
    assert code == code2 == 0 and no == json.loads(out2)["explain"] and no["value"] is False, err
    assert no["outside_search_space"].endswith("(fix it with --no-sp)")  # megatron's tp 2 searches with sp
    many = ("search", "-m", "llama3-8b", "--gpus", "64", "--engine", "megatron,torchtitan", "--no-advice")
    code, out, err = cli(capsys, *many, "--json", "--explain", "zero=3")
    best = json.loads(out)["explain"]["best"]
    assert code == 0 and best["engine"] in ("megatron", "torchtitan"), err
    code, out, err = cli(capsys, *many, "--explain", "zero=3")
    assert f"on {best['engine']}" in " ".join(out.split()), out


def test_a_schedule_the_engine_does_not_run_is_the_one_reason(capsys):
    """--schedule dualpipev on Megatron: 'most often' (14,736 of 16,320), then a hint of other GPU counts and
    --global-batch auto, which cannot help; the schedule is a rule of the engine alone, said first and only."""
    code, _out, err = cli(capsys, "search", "-m", "deepseek-v3", "--gpus", "2048", "--schedule", "dualpipev")
    assert code == 2 and "no plan is valid: megatron has no dualpipev schedule" in err, err
    assert "most often" not in err and "--global-batch auto" not in err


def test_lists_where_one_value_is_taken_say_so(capsys):
    """'all' inside an engine list was looked up as an engine ("unknown engine 'all'"); a precision list given to
    a command that takes one was said to be no precision."""
    code, _, err = cli(capsys, "search", "-m", "llama3-8b", "--gpus", "8", "--engine", "all,megatron")
    assert code == 2 and "or 'all' alone" in err and "unknown engine" not in err, err
    code, _, err = cli(capsys, "search", "-m", "llama3-8b", "--gpus", "8", "--engine", "megatron,,torchtitan")
    assert code == 2 and "(no empty one)" in err, err  # an empty name was passed over (audit)
    mine = str(Path(__file__).parent.parent / "engine_profiles" / "megatron.yaml")  # a copy would load as megatron
    code, _, err = cli(capsys, "search", "-m", "llama3-8b", "--gpus", "8", "--engine", f"megatron,{mine}")
    assert code == 2 and "two of them are named megatron" in err, err
    code, _, err = cli(capsys, "scale", "-m", "llama3-8b", "--gpus", "8,16", "--tokens", "1e12", "--precision",
                       "bf16,mxfp8")  # fmt: skip
    assert code == 2 and "(this command takes one; search takes a comma list)" in err, err


def test_a_closest_miss_offers_only_what_the_engine_runs(capsys):
    """llm-foundry runs neither tp nor pp: a miss more GPUs cannot fix is not told to add them (audit)."""
    code, out, err = cli(capsys, "search", "-m", "llama3-405b", "--gpus", "8", "--hardware", "a100-40gb", "--engine",
                         "llm-foundry")  # fmt: skip
    said = " ".join(out.split())
    assert code == 0 and "use larger-memory GPUs (llm-foundry runs neither tp nor pp)" in said, err
    assert "add tp" not in said


def test_cli_nothing_fits(capsys):
    code, out, err = cli(capsys, "search", "--model", "llama3-405b", "--gpus", "8")
    assert code == 0, err
    assert "no plan fits" in out and "Closest misses" in out and "fits" in out


def test_cli_goodput_objective(capsys):
    code, out, err = cli(
        capsys,
        "search",
        "--model",
        "gpt3-1.3b",
        "--gpus",
        "8",
        "--objective",
        "goodput",
        "--mtbf-hours",
        "5000",
        "--json",
        "--top",
        "2",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert 0 < doc["plans"][0]["goodput"] <= 1
    ck = doc["plans"][0]["checkpoint"]  # as estimate's: the interval, the restart, the goodput
    assert ck["goodput"] == doc["plans"][0]["goodput"] and ck["restart_s"] == 600 and ck["interval_s"] > 0


@pytest.mark.parametrize(
    "args",
    [
        ("--gpus", "0"),
        ("--gpus", "8", "--zero", "7"),
        ("--gpus", "8", "--objective", "speed"),
        ("--gpus", "8", "--recompute", "some"),
        ("--gpus", "8", "--micro-batches", "a,b"),
        ("--gpus", "8", "--explain", "tpx16"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(capsys, args):
    code, out, err = cli(capsys, "search", "--model", "gpt3-1.3b", *args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_ranking_by_memory_finds_the_least_memory_plan_the_exhaustive_search_finds():
    """More recompute is slower but smaller: ranking by memory keeps every recompute level that fits, not only the
    least (which the throughput ranking times alone)."""
    model, hw = load_model("llama3-8b"), load_hardware("h100-sxm")
    space = Space(gpus=8, global_batch=64, seq_len=8192)
    quick = search(model, hw, space, GENERIC, objective="memory", top=1)
    full = search(model, hw, space, GENERIC, objective="memory", top=1, exhaustive=True)
    assert quick.top[0].estimate.memory.total_bytes == full.top[0].estimate.memory.total_bytes
    assert quick.top[0].plan.recompute == "full"


def test_with_activation_offload_the_search_times_every_recompute_level_that_fits():
    """Offloaded activations go over the host link: no recompute keeps more of them to send, so it can be slower
    than selective (cost/offload.py). The search no longer drops the heavier recompute twins of a plan that fits
    there: Qwen3-30B-A3B offloading its MoE activations and attention cores ran rc=none at 66k tokens/s as the best
    plan, where selective, which only the exhaustive search timed, runs three times as fast."""
    flags = ("--model", "qwen3-30b-a3b", "--gpus", "64", "--tp", "8", "--pp", "4", "--cp", "2", "--dp", "1",
             "--zero", "0", "--micro-batch", "4", "--global-batch", "128", "--seq-len", "8192", "--schedule", "1f1b",
             "--no-flash", "--offload-modules", "moe_act,core_attn", "--top", "1", "--json")  # fmt: skip
    tops = []
    for extra in ((), ("--exhaustive",)):
        code, out, err = run_planner("search", *flags, *extra)
        assert code == 0, err
        tops.append(json.loads(out)["plans"][0])
    assert tops[0]["plan"] == tops[1]["plan"] and tops[0]["plan"]["recompute"] == "selective"


def test_cli_plot_needs_matplotlib_or_draws(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "p.svg"
    code, _out, err = cli(capsys, "search", "--model", "gpt3-1.3b", "--gpus", "8", "--plot", str(path), "--top", "2")
    assert code == 0, err
    assert path.read_text().lstrip().startswith("<?xml")


def test_screen_levels_decide_each_recompute_level_as_the_full_peaks_do():
    """levels() decides each recompute level as peaks() does: a level that fits carries its peak (or 0.0); a level
    that misses carries its peak or inf (some level of the same plan misses by no more). And more recompute never
    needs more memory (issue 21: a rank holding only the loss, as torchtitan's split gives it, carried a layer's
    backward working set it does not have, which made full recompute look heavier than none there)."""
    rng = random.Random(1)
    recs = ("none", "selective", "full")
    seen = {"fits": 0, "nothing fits": 0, "grows": 0}
    for name, gpus, hw_name, engines, batch, seq in [
        ("mixtral-8x7b", 64, "h100-sxm", ("megatron", "torchtitan"), 256, 4096),
        ("llama3-70b", 64, "a100-80gb", ("megatron", "torchtitan"), 256, 4096),
        ("llama3-8b", 512, "mi300x", ("torchtitan",), 512, 8192),
    ]:
        m, hw = load_model(name), load_hardware(hw_name)
        space = Space(gpus=gpus, global_batch=batch, seq_len=seq)
        for e in engines:
            engine = make_engine(e)
            screen = Coster(m, hw, engine)
            sts = structures(m, hw, space)
            for st in rng.sample(sts, min(60, len(sts))):
                for mb in micro_batches(space, st.dp):
                    base = Plan(
                        dp=st.dp, tp=st.tp, pp=st.pp, vpp=st.vpp, cp=st.cp, ep=st.ep, sp=st.sp, micro_batch=mb,
                        global_batch=space.global_batch, seq_len=space.seq_len, schedule=st.schedule,
                    )  # fmt: skip
                    for z in range(4):
                        if plan_problems(m, base.model_copy(update={"zero": z}), engine, gpus):
                            continue
                        full = {rc: screen.peaks(base, (z,), recs)[(z, rc)][0] for rc in recs}
                        lazy = screen.levels(base, z, recs)
                        seen["grows"] += any(full[a] < full[b] for a, b in itertools.pairwise(recs))
                        fits = [rc for rc in recs if full[rc] <= screen.capacity_bytes]
                        seen["fits" if fits else "nothing fits"] += 1
                        missed = [lazy[rc] for rc in recs if lazy[rc] > screen.capacity_bytes and lazy[rc] != math.inf]
                        for rc in recs:
                            if full[rc] > screen.capacity_bytes:
                                assert lazy[rc] in (full[rc], math.inf), (rc, lazy, full)
                                if lazy[rc] == math.inf:
                                    assert min(missed) <= full[rc]
                            elif fits and rc == fits[0]:
                                assert lazy[rc] == full[rc]
                            else:
                                assert lazy[rc] in (full[rc], 0.0), (rc, lazy, full)
    assert seen["grows"] == 0 and min(seen["fits"], seen["nothing fits"]) > 5, seen


def test_structure_rules_count_before_micro_batch_rules_and_keeping_rejections_changes_no_count():
    """A structure the engine cannot run is rejected under that rule for every micro-batch, even one whose
    count would also break the interleaved schedule's rule (the structure's rules are checked once, first);
    keeping every rejection (for --explain) builds each plan but counts the same."""
    m, hw = load_model("gpt3-175b"), load_hardware("a100-80gb")
    space = Space(gpus=1024, global_batch=1536, seq_len=2048)
    fast = search(m, hw, space, make_engine("megatron"), top=3)
    kept = search(m, hw, space, make_engine("megatron"), top=3, keep_rejections=True)
    assert fast.rejected == kept.rejected and fast.evaluated == kept.evaluated
    # tp 16 leaves the 8-GPU NVLink domain (a structure rule), whatever the micro-batch: also the interleaved
    # structures whose micro-batch counts would break that schedule's rule are rejected under it
    wide = {(r.plan.pp, r.plan.vpp, r.plan.tp) for r in kept.rejections if r.reason == "tp leaves the NVLink domain"}
    assert any(vpp > 1 for _pp, vpp, _tp in wide)
    firsts = {}
    for r in kept.rejections:
        p = r.plan
        firsts.setdefault((p.pp, p.vpp, p.tp, p.dp, p.micro_batch, p.zero), r.reason)
    assert all(r == "tp leaves the NVLink domain" for k, r in firsts.items() if k[:3] in wide)


@given(hst.integers(1, 200_000))
@settings(max_examples=300, deadline=None)
def test_divisors_are_every_divisor_ascending(n):
    got = divisors(n)
    assert got == sorted(set(got)) and got[0] == 1 and got[-1] == n
    assert all(n % d == 0 for d in got)
    assert len(got) == sum(2 - (d * d == n) for d in range(1, math.isqrt(n) + 1) if n % d == 0)


def test_search_restores_the_cyclic_collector_as_it_found_it():
    """The search pauses the cyclic GC for its allocations and gives it back in the state it was in."""
    import gc

    m, hw = load_model("llama3-8b"), load_hardware("h100-sxm")
    space = Space(gpus=8, global_batch=64, seq_len=4096)
    try:
        for enabled in (True, False):
            gc.enable() if enabled else gc.disable()
            search(m, hw, space, GENERIC, top=2)
            assert gc.isenabled() is enabled
    finally:
        gc.enable()


def test_the_cli_thaws_only_what_it_froze(capsys):
    """main() moves what it imported out of the collector's generations for the command and thaws it after;
    objects a host program froze before calling it stay frozen."""
    import gc

    assert gc.get_freeze_count() == 0
    main(["search", "-m", "llama3-8b", "--gpus", "8", "--json"])
    assert gc.get_freeze_count() == 0
    try:
        gc.freeze()
        frozen = gc.get_freeze_count()
        main(["search", "-m", "llama3-8b", "--gpus", "8", "--json"])
        assert frozen * 0.9 < gc.get_freeze_count() <= frozen  # a few frozen temporaries freed; none thawed
    finally:
        gc.unfreeze()
    assert capsys.readouterr().out.count('"plans"') == 2


def _summary(res) -> tuple:
    return (
        [(r.plan, r.time.step_s, r.estimate.memory.total_bytes) for r in res.top],
        res.evaluated, res.timed, dict(res.rejected), dict(res.pruned),
    )  # fmt: skip


@pytest.mark.parametrize(("model", "n"), [("llama3-70b", 32), ("mixtral-8x7b", 16)])
def test_searches_sharing_one_front_door_give_what_fresh_ones_give(model, n, monkeypatch):
    """One process's searches of the same model, hardware and engine share one Coster (cost/coster.py
    shared_coster: the advice's probes, `planner scale`); its caches are keyed by projections of the plan, so a
    search at another count, batch, sequence length or precision after others gives what it gives alone."""
    import planner.cost.coster as coster_module
    import planner.explore.pipeline as pipeline_module

    m, hw = load_model(model), load_hardware("h100-sxm")
    spaces = [
        Space(gpus=n, global_batch=256, seq_len=4096),
        Space(gpus=n, global_batch=512, seq_len=8192),
        Space(gpus=n, global_batch=128, seq_len=2048, precision="fp8"),
        Space(gpus=2 * n, global_batch=256, seq_len=4096),
        Space(gpus=n, global_batch=n, seq_len=4096),
    ]
    coster_module._SHARED.clear()
    shared = [_summary(search(m, hw, s, GENERIC, top=3)) for s in spaces]
    assert len(coster_module._SHARED) == 1
    monkeypatch.setattr(pipeline_module, "shared_coster", Coster)  # a fresh front door for each search
    fresh = [_summary(search(m, hw, s, GENERIC, top=3)) for s in spaces]
    assert shared == fresh
    assert all(s[0] for s in fresh)  # each search ranked plans: the comparison is not of empty results


def test_a_dense_search_from_8k_takes_cp2_as_nvidias_tuned_recipes_run():
    """NVIDIA's tuned H100 bf16 recipes run Llama 3 70B at tp 4 pp 4 cp 2 and Llama 3 8B at cp 2 with 8k sequences
    (Megatron-Bridge scripts/performance/configs/llama/llama3_workload_base_configs.py), with the distributed
    optimizer (zero 1): the dense search over that optimizer finds the 70B one; at 8k a cp 2 plan of the 8B ranks
    among the top three (torch FSDP2 plans, within 2% of each other, lead), at 4k none leads; an MoE search at 8k
    leaves cp to --max-cp."""
    from planner import search

    p = search("llama3-70b", gpus=64, global_batch=128, zero=1, top=1).plans[0].plan
    assert (p["tp"], p["pp"], p["cp"]) == (4, 4, 2)
    assert 2 in {d.plan["cp"] for d in search("llama3-8b", gpus=8, global_batch=128, top=3).plans}
    assert search("llama3-8b", gpus=8, global_batch=128, seq_len=4096, top=1).plans[0].plan["cp"] == 1
    moe = search("mixtral-8x7b", gpus=64, seq_len=8192, top=5)
    assert {d.plan["cp"] for d in moe.plans} == {1}
    args = ("search", "-m", "mixtral-8x7b", "--gpus", "64", "--seq-len", "8192", "--top", "1", "--no-advice")
    said = "cp not searched: an MoE search takes cp from 32,768 tokens; --max-cp 2 adds it"
    assert said in " ".join(run_planner(*args)[1].split())  # the search says what it left out
    assert said not in " ".join(run_planner(*args, "--max-cp", "2")[1].split())
    assert "cp not searched" not in run_planner("search", "-m", "llama3-8b", "--gpus", "8", "--top", "1")[1]


def test_search_json_plans_say_may_not_fit_and_their_memory_as_memory_prints_it():
    """Each plan carries may_not_fit as estimate's document does (the text flagged it, the JSON did not), and
    its memory section leaves out the absent keys as `memory --json` does, not nulls."""
    import json

    from helpers import run_planner

    args = ("search", "-m", "deepseek-v3", "--gpus", "2048", "--top", "2", "--no-advice")
    code, out, err = run_planner(*args, "--json")
    assert code == 0, err
    plans = json.loads(out)["plans"]
    assert all(isinstance(p["may_not_fit"], bool) for p in plans)
    assert all(v is not None for p in plans for v in p["memory"].values())
    code, text, err = run_planner(*args)
    assert code == 0 and plans[0]["may_not_fit"] == ("may not fit:" in " ".join(text.split())), err


def test_risk_twice_is_no_contradiction():
    """--objective risk --risk were refused as two rankings at once (audit); they are one."""
    code, out, err = run_planner("search", "-m", "llama3-8b", "--gpus", "8", "--objective", "risk", "--risk",
                                 "--top", "1", "--no-advice", "--json")  # fmt: skip
    assert code == 0 and json.loads(out)["objective"] == "risk", err


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--max-tp", "1", "--tp", "2"), "--tp 2 is above --max-tp 1: give one of them"),
        (("--max-ep", "2", "--ep", "4"), "--ep 4 is above --max-ep 2: give one of them"),
        (("--objective", "memory", "--risk"), "give --risk or --objective memory, not both"),
    ],
)
def test_contradictory_search_options_are_refused(args, said):
    """A pinned degree above its own limit, or two rankings at once, was resolved silently (the pin won; --risk
    won): one of them is a mistake, so neither is guessed (audit)."""
    code, out, err = run_planner("search", "-m", "llama3-8b", "--gpus", "8", *args)
    assert code == 2 and out == "" and said in err and len(err.strip().splitlines()) == 1


def test_risk_pruning_every_fitting_plan_is_answered_not_refused_as_a_rule():
    """Llama 3 8B on 2 GPUs with the distributed optimizer (zero 1): plans fit by the prediction, but --risk keeps none
    whose 80% interval of memory fits.
    It was refused as 'no plan is valid, most often: does not fit in memory (..., each of which broke a rule before
    its memory was counted)' with a GPU count to try (review): exit 0, saying what --risk did."""
    code, out, err = run_planner("search", "-m", "llama3-8b", "--gpus", "2", "--zero", "1", "--risk")
    said = " ".join(out.split())
    assert code == 0 and "plans fit by the prediction, none within the 80% interval of memory" in said, err
    assert "drop --risk" in said and "before its memory was counted" not in said
    code, out, err = run_planner("search", "-m", "llama3-8b", "--gpus", "2", "--zero", "1")
    assert code == 0 and "best:" in out, err


def test_zero_stages_that_run_as_zero_0_over_one_rank_are_not_ranked_twice():
    """torchtitan at dp·cp = 1 applies no FSDP: its zero 2 and 3 are the zero 0 run, and the table listed each plan
    three times (same memory, same step). They are counted as pruned, the plan shown once."""
    space = Space(gpus=1, global_batch=512, seq_len=8192)
    res = search(load_model("llama3-8b"), load_hardware("b200"), space, make_engine("torchtitan"))
    shown = [(r.plan.tp, r.plan.micro_batch, r.plan.recompute) for r in res.top]
    assert shown and len(shown) == len(set(shown)) and {r.plan.zero for r in res.top} == {0}
    assert res.pruned[PRUNED_ONE_RANK] > 0


@pytest.mark.parametrize(
    ("model", "hardware", "gpus", "batch", "objective", "top", "engine"),
    [
        ("llama2-13b", "h100-sxm", 32, 256, "throughput", 3, None),
        ("mixtral-8x7b", "h100-sxm", 64, 512, "throughput", 1, None),
        ("mixtral-8x7b", "h100-sxm", 64, 512, "risk", 2, None),
        ("deepseek-v3", "h100-sxm", 512, 512, "goodput", 1, None),
        # DualPipeV hides the all-to-all that full recompute or 1F1B leaves exposed; offload screens every level
        ("deepseek-v3", "h800", 512, 512, "throughput", 2, "hai-llm"),
        ("mixtral-8x7b", "h100-sxm", 64, 512, "throughput", 1, "megatron+offload"),
    ],
)
def test_a_search_for_its_top_plans_only_ranks_what_the_counting_search_ranks(
    model, hardware, gpus, batch, objective, top, engine
):
    """counts=False (the advice's probes) screens memory best bound first and stops where the bound cannot beat the
    K-th best: the same ranking (step times; a tie may pick another plan of that time), the counts adding up with
    what it never screened, and something left unscreened (else the mode saves nothing)."""
    m, hw = load_model(model), load_hardware(hardware)
    schedules = ("1f1b", "dualpipev") if engine == "hai-llm" else None
    space = Space(gpus=gpus, global_batch=batch, seq_len=4096, schedules=schedules)
    eng = GENERIC if engine is None else load_engine("megatron").configured(activation_offload=0.5)
    eng = load_engine("hai-llm") if engine == "hai-llm" else eng
    ck = Checkpointing(mtbf_hours=5.0) if objective == "goodput" else Checkpointing()
    full = search(m, hw, space, eng, objective=objective, top=top, checkpointing=ck)
    best_first = search(m, hw, space, eng, objective=objective, top=top, checkpointing=ck, counts=False)
    assert [r.time.step_s for r in best_first.top] == pytest.approx([r.time.step_s for r in full.top], rel=1e-12)
    assert [r.score_tokens_per_s for r in best_first.top] == pytest.approx([r.score_tokens_per_s for r in full.top])
    assert best_first.evaluated == full.evaluated
    assert best_first.evaluated == best_first.valid + sum(best_first.rejected.values()) + best_first.unscreened
    assert best_first.valid == best_first.timed + sum(best_first.pruned.values())
    assert full.unscreened == 0 < best_first.unscreened


def test_a_search_says_when_no_emit_file_of_its_engine_runs_the_best_plan(capsys):
    """torchtitan trains Mixtral's layers, but no torchtitan configuration the planner writes names the model:
    the ranking says so beneath it and in JSON, per target; Llama 3 8B, which both releases write, gets no note."""
    pinned = ("--engine", "torchtitan", "--tp", "2", "--pp", "1", "--top", "2", "--no-advice")
    code, text, _ = cli(capsys, "search", "--model", "mixtral-8x7b", "--gpus", "64", *pinned)
    assert code == 0
    said = " ".join(text.split())
    assert "note: no --emit file runs the best plan on torchtitan" in said
    assert "mixtral-8x7b is none of them; torchtitan-v0.2 refuses it too" in said
    code, text, _ = cli(capsys, "search", "--model", "mixtral-8x7b", "--gpus", "64", *pinned, "--json")
    refused = [p["emit_targets"] for p in json.loads(text)["plans"]]
    assert refused and all(set(r) == {"torchtitan", "torchtitan-v0.2"} and all(r.values()) for r in refused)
    (note,) = json.loads(text)["notes"]  # the text's note line, for a JSON reader too
    assert note.startswith("no --emit file runs the best plan on torchtitan")
    code, text, _ = cli(capsys, "search", "--model", "llama3-8b", "--gpus", "8", *pinned, "--json")
    written = [p["emit_targets"] for p in json.loads(text)["plans"]]
    assert written and all(r == {"torchtitan": None, "torchtitan-v0.2": None} for r in written)
    assert json.loads(text)["notes"] == []
    code, text, _ = cli(capsys, "search", "--model", "llama3-8b", "--gpus", "8", *pinned)
    assert "no --emit file runs" not in text


def test_no_file_runs_names_the_first_refusal_and_the_other_targets():
    from planner.api.best_notes import no_file_runs

    assert no_file_runs({}, "llm-foundry") is None  # an engine no target writes: nothing to say
    assert no_file_runs({"a": None, "b": "--emit b: no"}, "e") is None  # one target writes it
    said = no_file_runs({"a": "--emit a: no", "b": "--emit b: no", "c": "--emit c: no"}, "e")
    assert said is not None and said.startswith("no --emit file runs the best plan on e (--emit a: no; b and c refuse")
