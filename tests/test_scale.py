"""`planner scale` (api/scaling.py): the best plan per GPU count, its time to train and GPU-hours, table, JSON, plot."""

from __future__ import annotations

import importlib.util
import json
import math
import re

import pytest
from helpers import run_planner as run

from planner.api.scaling import scale
from planner.errors import PlannerError
from planner.explore.advice import gpu_counts
from planner.units import fmt_range


def test_counts_from_a_list_or_a_range():
    assert gpu_counts("4096,1024,1024", node=8) == [1024, 4096]
    assert gpu_counts("1024..8192", node=8) == [1024, 2048, 4096, 8192]
    for bad in ("", "a,b", "0,8", "1..2000000000"):
        with pytest.raises(PlannerError, match="--gpus"):
            gpu_counts(bad, node=8)


def test_each_count_gets_its_best_plan_and_the_run_it_makes():
    s = scale("llama3-70b", gpus=[8, 256, 1024, 4096], tokens=15e12, global_batch=1024, seq_len=8192)
    by = {p.gpus: p for p in s.points}
    assert by[8].plan is None and by[8].note.startswith("nothing fits in 79.16 GiB per GPU (closest: ")  # one node
    for g in (256, 1024, 4096):
        p = by[g]
        assert p.plan is not None and p.plan.gpus == g and p.plan.global_batch == 1024
        steps = math.ceil(15e12 / (1024 * 8192))
        assert p.train_s == pytest.approx(steps * p.step_s)
        assert p.gpu_hours == pytest.approx(p.train_s * g / 3600)
        assert p.tokens_per_s == pytest.approx(1024 * 8192 / p.step_s)
    # a fixed batch on more GPUs: faster in all, never faster per GPU
    assert by[256].tokens_per_s < by[1024].tokens_per_s < by[4096].tokens_per_s
    assert by[256].tokens_per_s_per_gpu >= by[1024].tokens_per_s_per_gpu >= by[4096].tokens_per_s_per_gpu


def test_scale_on_a_cluster_is_slower_beyond_an_oversubscribed_spine():
    """At 16,384 GPUs the 2:1 fat tree's spine halves the dp share; inside one leaf nothing changes."""
    args = ("scale", "-m", "llama3-70b", "--gpus", "256,16384", "--tokens", "15e12", "--global-batch", "2048", "--json")
    code, out, err = run(*args, "--cluster", "rail-fat-tree-2to1")
    assert code == 0, err
    fat = {p["gpus"]: p for p in json.loads(out)["points"]}
    code, out, err = run(*args, "--cluster", "dgx-superpod-h100")
    assert code == 0, err
    pod = {p["gpus"]: p for p in json.loads(out)["points"]}
    assert fat[256]["tokens_per_s"] == pytest.approx(pod[256]["tokens_per_s"])
    assert fat[16384]["tokens_per_s"] < pod[16384]["tokens_per_s"]


def test_cli_table_json_and_errors(tmp_path):
    code, out, err = run("scale", "-m", "llama3-8b", "--gpus", "64,128", "--tokens", "1e12", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["model"] == "llama3-8b" and doc["tokens"] == 1e12
    assert [p["gpus"] for p in doc["points"]] == [64, 128]
    for key in ("fits", "plan", "engine", "tokens_per_s", "tokens_per_s_per_gpu", "mfu", "step_s", "train_s"):
        assert key in doc["points"][0]
    # each count carries its plan's 80% intervals, as estimate and search give them, and the time to train's
    point = doc["points"][0]
    lo, hi = point["uncertainty"]["tokens_per_s_interval"]
    assert lo < point["tokens_per_s"] < hi
    assert point["train_s_interval"] == pytest.approx(
        [point["train_s"] * point["tokens_per_s"] / hi, point["train_s"] * point["tokens_per_s"] / lo]
    )
    code, out, err = run("scale", "-m", "llama3-8b", "--gpus", "64,128", "--tokens", "1e12")
    assert code == 0 and "GPU-hours" in out and "64" in out
    assert fmt_range(lo, hi) in out and "80% interval" in out
    code, out, err = run("scale", "-m", "llama3-8b", "--gpus", "64")
    assert code == 2 and "--tokens" in err and out == ""
    code, out, err = run("scale", "-m", "llama3-8b", "--gpus", "64..x", "--tokens", "1e12")
    assert code == 2 and "--gpus" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("given", "said"),
    [(("--engine", "nosuch"), 'unknown engine "nosuch"'), (("--engine", "megatron,nosuch"), 'unknown engine "nosuch"'),
     (("--global-batch", "0"), "--global-batch 0"), (("--global-batch", "AUTO"), "--global-batch 'AUTO'"),
     (("--global-batch", "auto", "--max-tokens-per-step", "1"), "--max-tokens-per-step 1")],
)  # fmt: skip
def test_a_bad_option_is_refused_not_tabled_at_each_count(given, said):
    """An option every count's search refuses the same way is the options' error: one line, exit 2 (it was a table
    row per count, exit 0)."""
    code, out, err = run("scale", "-m", "llama3-8b", "--gpus", "8,16", "--tokens", "1e12", *given)
    assert code == 2 and said in err and out == "" and len(err.strip().splitlines()) == 1, err


def test_a_count_with_no_plan_says_why():
    """No valid plan names the rule every candidate broke (it said "nothing fits"); at every count, exit 2."""
    args = ("scale", "-m", "llama3-8b", "--gpus", "8,16", "--tokens", "1e12", "--precision", "nvfp4", "--json")
    code, out, err = run(*args)
    assert code == 2 and out == ""
    assert err.startswith("error: no plan is valid: h100-sxm has no nvfp4")


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="needs planner[plot]")
def test_plot_is_written(tmp_path):
    """Into a folder not there yet, as every file the commands write (it was refused: 'No such file')."""
    path = tmp_path / "new" / "scale.svg"
    code, out, err = run("scale", "-m", "llama3-8b", "--gpus", "64,128", "--tokens", "1e12", "--plot", str(path))
    assert code == 0 and "plot written" in out, err
    assert path.read_text().lstrip().startswith("<?xml") and "days to train" in path.read_text()


def test_a_plot_of_no_count_that_fits_is_refused_in_one_line(tmp_path):
    """Llama 3 405B fits on neither 8 nor 16 GPUs: --plot drew a log axis of no points and raised a traceback (exit 1,
    audit). It is one line, exit 2, nothing written."""
    path = tmp_path / "none.svg"
    code, _, err = run("scale", "-m", "llama3-405b", "--gpus", "8,16", "--tokens", "1e12", "--plot", str(path))
    assert code == 2 and err.strip().splitlines() == [
        f"error: --plot {path}: no GPU count has a plan that fits, nothing to draw (without --plot the table says why)"
    ], err
    assert not path.exists() and "Traceback" not in err
    in_the_way = tmp_path / "x.svg"
    in_the_way.write_text("a file, not a folder")
    args = ("scale", "-m", "llama3-8b", "--gpus", "8", "--tokens", "1e12", "--plot", str(in_the_way / "p.svg"))
    code, out, err = run(*args)
    assert code == 2 and out == "" and f"cannot write plot '{in_the_way / 'p.svg'}': {in_the_way} is a file" in err


def test_counts_beyond_the_cluster_say_so():
    code, out, err = run("scale", "-m", "llama3-8b", "--gpus", "64,32768", "--tokens", "1e12", "--cluster",
                         "dgx-superpod-h100", "--json")  # fmt: skip
    assert code == 0, err
    points = {p["gpus"]: p for p in json.loads(out)["points"]}
    assert points[64]["fits"] and points[64]["note"] is None
    assert not points[32768]["fits"] and "more than cluster dgx-superpod-h100 holds" in points[32768]["note"]
    # no figures for a count that cannot run: null, not 0.0 (a script taking the least train_s would pick it)
    for key in ("tokens_per_s", "tokens_per_s_per_gpu", "mfu", "step_s", "train_s", "gpu_hours"):
        assert points[32768][key] is None and points[64][key] > 0
    code, out, err = run("scale", "-m", "llama3-8b", "--gpus", "64,32768", "--tokens", "1e12", "--cluster",
                         "dgx-superpod-h100", "--precision", "fp8")  # fmt: skip
    assert code == 0, err
    said = " ".join(out.split())
    assert "32768 GPUs: --gpus 32768 is more than cluster dgx-superpod-h100 holds (16384 GPUs)" in said  # uncut
    assert ", fp8, " in out.split("tokens to train")[0]  # the header names the curve's precision


def test_the_table_says_which_engine_each_count_runs():
    # --engine torchtitan,planner: Llama 3 70B's best plan on 64 H100s runs on torchtitan, on 4,096 on the planner's
    # worker; one engine throughout is named once in the header instead
    args = ("scale", "-m", "llama3-70b", "--gpus", "64,4096", "--tokens", "15e12")
    code, out, err = run(*args, "--engine", "torchtitan,planner", "--json")
    assert code == 0, err
    engines = [p["engine"] for p in json.loads(out)["points"]]
    assert len(set(engines)) == 2
    code, out, err = run(*args, "--engine", "torchtitan,planner")
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:1] == ["GPUs"])  # the columns, below the header
    assert code == 0 and " engine " in lines[at], err
    # a row: its count, then its engine; a wrapped note may start with a count too ("4,096 GPUs; planner ...")
    words = [line.split() for line in lines[at + 1 :]]
    rows = [w for w in words if len(w) > 1 and w[0].replace(",", "").isdigit() and w[1] in {"torchtitan", "planner"}]
    assert [r[1] for r in rows] == engines
    code, out, err = run(*args)
    assert code == 0 and out.startswith("llama3-70b on h100-sxm with megatron,") and " engine " not in out, err


def test_the_header_states_the_batch_as_every_command_does():
    args = ("scale", "-m", "llama3-8b", "--gpus", "8,16", "--tokens", "1e12")
    code, out, err = run(*args)
    assert code == 0 and "global batch 512 (default: about 4M tokens" in " ".join(out.split("GPUs")[0].split()), err
    code, out, err = run(*args, "--global-batch", "256")
    header = out.split("GPUs")[0]
    assert code == 0 and "global batch 256 x 8192 tokens" in " ".join(header.split()) and "about 4M" not in header
    # auto's batch, the same at every count, was stated as if given (audit)
    code, out, err = run(
        "scale", "-m", "llama3-70b", "--gpus", "1024,2048", "--tokens", "1e12", "--global-batch", "auto"
    )
    header = " ".join(out.split("tokens to train")[0].split())
    assert code == 0 and "global batch auto (512 at every count) x 8192 tokens" in header, err
    code, out, err = run("scale", "-m", "llama3-70b", "--gpus", "1024,16384", "--tokens", "1e12", "--global-batch",
                         "auto")  # fmt: skip
    header = " ".join(out.split("tokens to train")[0].split())
    assert code == 0 and "global batch auto (per count, in the batch column) x 8192 tokens" in header, err


def test_failures_priced_stretch_the_time_to_train_by_the_checkpoint_goodput():
    """With a failure rate (--mtbf-hours, or a cluster's), each count also has the expected time to train and
    GPU-hours: the failure-free ones over the Young/Daly goodput estimate gives the same plan; without one, none."""
    from planner.api import estimate

    kw = {"tokens": 15e12, "global_batch": 1024, "seq_len": 8192}
    free = scale("llama3-70b", gpus=[1024, 4096], **kw)
    priced = scale("llama3-70b", gpus=[1024, 4096], mtbf_hours=20000, **kw)
    assert free.failures is None and priced.failures.gpu_mtbf_hours == 20000
    for a, b in zip(free.points, priced.points, strict=True):
        assert a.plan == b.plan and a.goodput is None and a.expected is None and 0 < b.goodput < 1
        assert b.train_s == pytest.approx(a.train_s) and b.gpu_hours == pytest.approx(a.gpu_hours)
        assert b.expected.seconds == pytest.approx(a.train_s / b.goodput) == b.priced_train_s
        assert b.expected.gpu_hours == pytest.approx(a.gpu_hours / b.goodput) == b.priced_gpu_hours
        assert b.checkpoint.interval_s / b.step_s == pytest.approx(round(b.checkpoint.interval_s / b.step_s))
        doc = estimate("llama3-70b", plan=b.plan, engine=b.engine, mtbf_hours=20000)
        assert doc.checkpoint.goodput == pytest.approx(b.goodput)
        # each interval brackets its own time, as estimate's train document pairs them (audit: the failure-free
        # train_s fell below an interval built around the expected time)
        point = b.as_json()
        lo, hi = point["train_s_interval"]
        assert lo < point["train_s"] < hi and a.as_json()["train_s_interval"] == pytest.approx([lo, hi])
        lo, hi = point["expected_train_s_interval"]
        assert lo < point["expected_train_s"] < hi and a.as_json()["expected_train_s_interval"] is None
        assert doc.checkpoint.interval_s == pytest.approx(b.checkpoint.interval_s)
    per_node = scale("llama3-70b", gpus=[1024], mtbf_hours=2500, mtbf_per="node", **kw)
    assert per_node.failures.gpu_mtbf_hours == 20000 and per_node.points[0].goodput == pytest.approx(
        priced.points[0].goodput
    )


def test_failures_on_a_cluster_are_its_own_and_the_table_says_so():
    args = ("scale", "-m", "llama3-70b", "--gpus", "1024", "--tokens", "15e12", "--cluster", "rail-fat-tree-2to1")
    code, out, err = run(*args, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert "Dubey et al. 2024" in doc["failures"]["source"] and 0 < doc["points"][0]["goodput"] < 1
    assert doc["cluster"] == "rail-fat-tree-2to1" and doc["failures"]["restart_s"] == 600
    code, out, err = run(*args)
    said = " ".join(out.split())
    assert code == 0 and "goodput" in out and "a GPU fails every 50,677 h" in said
    assert said.startswith("llama3-70b on h100-sxm in rail-fat-tree-2to1 with megatron")
    code, out, err = run("scale", "-m", "llama3-70b", "--gpus", "1024", "--tokens", "15e12")
    assert code == 0 and "failure-free times" in out and "goodput" not in out
    doc = json.loads(run("scale", "-m", "llama3-70b", "--gpus", "1024", "--tokens", "15e12", "--json")[1])
    assert doc["cluster"] is None and doc["failures"] is None and doc["points"][0]["goodput"] is None
    code, out, err = run("scale", "-m", "llama3-70b", "--gpus", "1024", "--tokens", "15e12", "--mtbf-hours", "0.5")
    assert code == 2 and "--mtbf-hours" in err and out == ""
    code, out, err = run(*args, "--restart-minutes", "-1")
    assert code == 2 and "--restart-minutes" in err and out == ""


def test_restarts_make_the_largest_counts_slower_to_train_than_they_run():
    """A failure costs its restart whatever the size, and a larger job fails more often: goodput falls with the
    count, and with no restart time (--restart-minutes 0) it is higher at every count."""
    kw = {"tokens": 15e12, "global_batch": 2048, "seq_len": 8192, "mtbf_hours": 50677}
    s = scale("llama3-405b", gpus=[16384, 131072], **kw)
    quick = scale("llama3-405b", gpus=[16384, 131072], restart_minutes=0, **kw)
    assert s.restart_s == 600 and quick.restart_s == 0
    small, big = s.points
    assert small.goodput > big.goodput
    assert all(q.goodput > p.goodput for p, q in zip(s.points, quick.points, strict=True))
    assert scale("llama3-405b", gpus=[16384], restart_minutes=3, **kw).points[0].goodput > small.goodput


def test_a_default_batch_that_underfeeds_a_count_points_to_auto():
    """512 sequences cannot feed 131,072 GPUs: the table says which counts the default batch leaves below 90% of
    the best per-GPU rate and names --global-batch auto; a batch the user chose is not second-guessed."""
    args = ("scale", "-m", "llama3-405b", "--gpus", "16384,131072", "--tokens", "15.6e12")
    code, out, err = run(*args)
    said = " ".join(out.split())
    assert code == 0, err
    assert "the default batch keeps 131072 GPUs below 90% of the best per-GPU rate: --global-batch auto" in said
    code, out, err = run(*args, "--global-batch", "512")
    assert code == 0 and "--global-batch auto chooses" not in out
    # a count whose goodput is 0.0 keeps nothing (it was read as 1.0, failure-free, and made the reference), and a
    # count that stalls is the failures', not the batch's: 8 GPUs keep 15%, 64 nothing, 8192 stall (audit)
    code, out, err = run("scale", "-m", "llama3-8b", "--gpus", "8,64,8192", "--tokens", "1e12", "--mtbf-hours", "1")
    assert code == 0 and "the default batch keeps 64 GPUs below 90%" in " ".join(out.split()), (out, err)


def test_a_count_whose_mfu_is_above_the_best_published_is_marked_as_estimate_marks_it():
    """scale showed 51.6% MFU on 1,024 H100s with no mark where estimate says "implausible": the row's MFU
    carries `?`, the footer names the ceiling, and each JSON point its plausibility."""
    args = ("scale", "-m", "llama3-405b", "--gpus", "1024", "--tokens", "1e12")
    code, out, err = run(*args, "--json")
    assert code == 0, err
    point = json.loads(out)["points"][0]
    assert point["plausibility"]["ok"] is False and point["mfu"] > point["plausibility"]["mfu_ceiling"]
    code, out, err = run(*args)
    assert code == 0 and f"{point['mfu']:.1%}?" in out and "? = MFU above the best published" in out, err


def test_a_count_whose_memory_interval_passes_the_gpu_is_marked_as_search_marks_it():
    """scale chose the plan search chose (DeepSeek-V3 on 1,152 GB200s in mxfp8) without the "may not fit" search
    says of it, and its JSON had no such field (audit): each point carries may_not_fit and its peak memory, and the
    footer names the counts, as search names its plans."""
    from planner import search

    common = ("-m", "deepseek-v3", "--hardware", "gb200-nvl72", "--gpus", "1152", "--precision", "mxfp8")
    code, out, err = run("scale", *common, "--tokens", "15e12", "--json")
    assert code == 0, err
    point = json.loads(out)["points"][0]
    best = search("deepseek-v3", hardware="gb200-nvl72", gpus=1152, precision="mxfp8", top=1).plans[0]
    assert point["plan"] == best.plan  # the {PLAN} document, its engine with it
    assert point["may_not_fit"] is best.may_not_fit is True
    assert point["peak_memory_bytes"] == round(best.memory.total_bytes)  # whole bytes, as estimate --json gives
    hi = point["uncertainty"]["peak_memory_interval"][1]
    assert point["peak_memory_bytes"] < 184.4 * 2**30 < hi  # fits by the prediction, not by the interval
    code, out, err = run("scale", *common, "--tokens", "15e12")
    said = " ".join(out.split())
    assert code == 0 and "may not fit (the 80% interval of its memory passes the GPU): the plan at 1,152 GPUs" in said


def test_a_range_on_a_cluster_reaches_the_clusters_size_and_stops_there():
    """gb200-nvl72-superpod holds 62,208 GPUs: 16384..131072 tried 73,728 and 131,072 (both refused as larger
    than the cluster) and never its own size."""
    from planner.cluster import cluster_of
    from planner.explore.advice import range_counts
    from planner.io.clusters import cluster_hardware

    hw = cluster_hardware("gb200-nvl72-superpod", None)
    size = cluster_of(hw).gpus
    counts = range_counts("16384..131072", hw)
    assert max(counts) == size and size in counts and min(counts) == 16384
    assert range_counts("1024..4096", hw)[-1] == 4096  # a range inside the cluster is unchanged


def test_a_count_that_fits_but_stalls_keeps_its_plan_and_the_failure_rate():
    """Llama 3.1 405B on 131,072 GPUs each failing every 1,000 h: the plan fits but a failure every 27 s leaves no
    time to train. It was a count where nothing fits (fits false, no figures), the JSON's failures null, the
    footer 'failure-free times: --mtbf-hours H prices...' and --restart-minutes said to change nothing (audit)."""
    args = ("scale", "-m", "llama3.1-405b", "--gpus", "131072", "--tokens", "15e12", "--global-batch", "2048",
            "--mtbf-hours", "1000", "--restart-minutes", "60")  # fmt: skip
    code, out, err = run(*args, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["failures"]["gpu_mtbf_hours"] == 1000 and doc["failures"]["restart_s"] == 3600
    (point,) = doc["points"]
    assert point["fits"] and point["stalled"] and point["plan"]["global_batch"] == 2048
    assert point["tokens_per_s"] > 0 and point["train_s"] > 0 and point["goodput"] < 1e-6
    assert point["expected_train_s"] is None and point["expected_gpu_hours"] is None
    assert "leave no time to train" in point["note"]
    code, out, err = run(*args)
    said = " ".join(out.split())
    assert code == 0 and "changes nothing" not in err, err
    assert "failure-free times" not in said and "a GPU fails every 1,000 h (--mtbf-hours 1000 per GPU)" in said
    assert "131072 GPUs stall: failures every" in said and " never " in said


@pytest.mark.parametrize(
    ("args", "rule", "hint"),
    [
        (("--gpus", "10000", "--mtbf-hours", "50677"), "(2,652 of the",
         "--global-batch auto finds 1250 at 10,000 GPUs"),
        (("--cluster", "gb200-nvl72-superpod", "--gpus", "62208", "--global-batch", "2048"), "(",
         "--global-batch auto finds 1944 at 62,208 GPUs"),
    ],
)  # fmt: skip
def test_a_count_no_plan_is_valid_at_names_the_binding_rule_and_the_batch_auto_finds(args, rule, hint):
    """10,000 = 2^4 x 5^4 GPUs: no dp divides 512 sequences; 62,208 = 2^8 x 243 GB200s: no dp divides 2,048 and
    takes the 243. Each said 'every candidate broke a rule before its memory was counted', naming none (audit), then
    the 62,208 led with 'most often: tp does not divide heads', candidates that never could run (audit): the batch is
    what binds. No count of the curve has a valid plan, so the request is refused (exit 2) with that reason and the
    batch to try."""
    code, out, err = run("scale", "-m", "llama3.1-405b", "--tokens", "15e12", *args, "--json")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith(f"error: no plan is valid: the global batch binds {rule}") and err.strip().endswith(hint)
    assert "pass the model's shape rules and break it: global batch not divisible by dp x micro-batch" in err


def test_a_curve_with_some_counts_valid_keeps_the_others_notes():
    """Only where no count has a valid plan is the curve refused: 10,000 GPUs beside 8,192 is a row with its note."""
    code, out, err = run("scale", "-m", "llama3.1-405b", "--tokens", "15e12", "--gpus", "8192,10000", "--json")
    assert code == 0, err
    first, second = json.loads(out)["points"]
    assert (
        first["fits"] and not second["fits"] and second["note"].startswith("no plan is valid: the global batch binds")
    )


def test_a_range_cut_at_the_clusters_size_says_so_once():
    """--gpus 1024..131072 on dgx-superpod-h100 (16,384 GPUs) stopped at 16,384 with no line (audit)."""
    args = ("-m", "llama3-8b", "--gpus", "1024..131072", "--cluster", "dgx-superpod-h100", "--global-batch", "2048")
    said = "the range stops at the cluster's 16,384 GPUs"
    code, out, err = run("scale", *args, "--tokens", "1e12", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["note"] == said and doc["points"][-1]["gpus"] == 16384, err
    code, out, err = run("scale", *args, "--tokens", "1e12")
    assert code == 0 and " ".join(out.split()).count(said) == 1, err
    code, out, err = run("search", *args, "--top", "1", "--json")
    (chosen,) = [a for a in json.loads(out)["advice"] if a["kind"] == "chosen_gpus"]
    assert code == 0 and chosen["message"].endswith(said), err
    code, out, err = run("search", *args, "--top", "1")
    assert code == 0 and " ".join(out.split()).count(said) == 1, err
    code, out, err = run("scale", "-m", "llama3-8b", "--gpus", "1024..4096", "--cluster", "dgx-superpod-h100",
                         "--tokens", "1e12", "--json")  # fmt: skip
    assert code == 0 and json.loads(out)["note"] is None, err  # a range inside the cluster: nothing to say


@pytest.mark.parametrize(
    ("given", "said"),
    [({"tokens": float("nan")}, "--tokens nan: give a finite number"), ({"tokens": float("inf")}, "--tokens inf"),
     ({"tokens": "1e12"}, "--tokens '1e12'"), ({"tokens": True}, "--tokens True"), ({"tokens": 1e30}, "--tokens 1e+30"),
     ({"gpus": [64.5]}, "--gpus [64.5]: give whole counts"), ({"seq_len": 0}, "--seq-len 0"),
     ({"max_tokens_per_step": 0}, "--max-tokens-per-step 0")],
)  # fmt: skip
def test_the_python_scale_checks_its_values_as_the_options_are(given, said):
    """README: the Python API raises PlannerError for bad input, as the command line refuses it. scale() raised
    ValueError, OverflowError, TypeError or AttributeError, or took 1e30 tokens, True as one token and 0 as the
    default sequence or batch bound (audit)."""
    with pytest.raises(PlannerError, match=re.escape(said)):
        scale("llama3-8b", **({"gpus": [64], "tokens": 1e12} | given))


@pytest.mark.parametrize(("command", "has_plan"), [("scale", False), ("search", False), ("estimate", True)])
def test_the_help_offers_a_plan_file_only_where_the_command_takes_one(command, has_plan):
    """--model and --hardware said "(default: the --plan file's)" in scale and search, which take no --plan (audit)."""
    code, out, err = run(command, "--help")
    said = " ".join(out.split())
    assert code == 0 and ("the --plan file's" in said) == has_plan == ("--plan " in said), err


@pytest.mark.parametrize("command", ["scale", "search"])
def test_a_tokens_per_step_bound_below_the_default_batch_is_refused_as_a_given_batch_above_it_is(command):
    """--max-tokens-per-step 1,000,000 ran at the default 4.19M tokens a step without a word, where a given batch
    above the bound is refused (audit); with --global-batch auto it bounds the batch chosen."""
    args = (command, "-m", "llama3-8b", "--gpus", "64", "--max-tokens-per-step", "1000000")
    args += ("--tokens", "1e12") if command == "scale" else ("--top", "1")
    code, out, err = run(*args)
    said = "--max-tokens-per-step 1000000 is below the default global batch (512 x 8192 tokens): give --global-batch"
    assert code == 2 and out == "" and said in err, err
    code, out, err = run(*args, "--global-batch", "auto", "--json")
    doc = json.loads(out)
    plan = doc["points"][0]["plan"] if command == "scale" else doc["plans"][0]["plan"]
    assert code == 0 and plan["global_batch"] * plan["seq_len"] <= 1_000_000, err


def test_a_count_that_trains_longer_than_fewer_gpus_is_said_to():
    """Llama 3.1 405B on 16,384 H100s at the default 512 sequences takes longer to train than on 8,192 (a deeper
    pipeline idling), and the table said nothing of it (review): the text says it, and --json's point names the
    fewer count that trains sooner; a count that trains sooner names none."""
    args = ("scale", "-m", "llama3.1-405b", "--hardware", "h100-sxm", "--gpus", "8192,16384", "--tokens", "15e12")
    code, out, err = run(*args, "--json")
    assert code == 0, err
    points = {p["gpus"]: p for p in json.loads(out)["points"]}
    assert points[16384]["train_s"] > points[8192]["train_s"]
    assert points[16384]["trains_slower_than"] == 8192 and points[8192]["trains_slower_than"] is None
    code, text, err = run(*args)
    said = " ".join(text.split())
    assert code == 0 and "slower with more GPUs: 16,384 GPUs train longer than 8,192" in said, err
    assert "fewer GPUs, or --global-batch auto" in said  # the default batch: auto may feed them


def test_a_curve_over_several_engines_says_it_searched_them():
    """`--engine all` printed 'with megatron' alone where megatron won every count, as if it were the one searched
    (review): the header says it is the best of the engines, and --json names what was searched."""
    args = ("scale", "-m", "llama3-8b", "--hardware", "h100-sxm", "--gpus", "8,16", "--tokens", "1e12")
    code, out, err = run(*args, "--engine", "all", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["engines_searched"] == "all", err
    (winner,) = {p["engine"] for p in doc["points"]}
    code, text, err = run(*args, "--engine", "all")
    assert code == 0 and f"with {winner} (the best of --engine all at every count)" in " ".join(text.split()), err
    code, out, err = run(*args, "--json")
    assert code == 0 and json.loads(out)["engines_searched"] is None, err
    from planner.api.scaling import _several

    assert [_several(e) for e in ("ALL", " all", "megatron,megatron", "megatron, torchtitan", None)] == [
        "all", "all", None, "megatron,torchtitan", None
    ]  # fmt: skip
