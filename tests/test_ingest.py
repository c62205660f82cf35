"""`planner ingest` on real training logs (tests/data/logs/, origins in SOURCES.md).

Each excerpt's numbers are pinned to what its lines say: the expected medians below are taken over values
copied by hand from the excerpt's steady lines (warm-up, skipped, checkpoint and evaluation lines left out),
peaks are the largest printed value converted with the unit the engine's source uses.
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from helpers import run_planner

from planner.errors import PlannerError
from planner.fit.observations import observations_from_runs
from planner.fit.runs import Run, load_runs, parse_run
from planner.io.catalog import load_model
from planner.io.logs import DEFAULT_WARMUP, detect, read_log, runs_entries
from planner.io.logs.log_text import Step, steady
from planner.plan import Plan
from planner.specs import ModelSpec
from planner.units import GB, GiB, MiB

LOGS = Path(__file__).parent / "data" / "logs"
DATA = Path(__file__).parent / "data"


def ingest(name: str, **options: object):
    return read_log((LOGS / name).read_text(), source=str(LOGS / name), **options)  # type: ignore[arg-type]


# --- Megatron-LM / NeMo / Megatron-Bridge ---------------------------------------------------------------------


def test_megatron_2021_argument_dump_skipped_and_evaluation_left_out():
    r = ingest("megatron_lm_gpt2_tp4_pp8.log")
    # iterations 10, 20, 30 report skipped iterations (fp16 loss scaling); 110 follows the evaluation at 100
    assert r.steps_left_out == {"skipped": 3, "evaluation": 1}
    steady_ms = [1625.2, 1623.8, 1624.4, 1623.5, 1622.8, 1622.7, 1623.5,  # 40-100
                 1614.3, 1615.7, 1615.8, 1616.7, 1616.4, 1616.6, 1618.3, 1616.6, 1617.2]  # 120-200  # fmt: skip
    assert r.steps_used == len(steady_ms) == 16
    assert r.measured["step_s"] == pytest.approx(statistics.median(steady_ms) / 1e3)
    plan = r.plan
    assert (plan["tp"], plan["pp"], plan["dp"], plan["zero"], plan["recompute"]) == (4, 8, 1, 0, "full")
    assert (plan["micro_batch"], plan["global_batch"], plan["seq_len"], plan["precision"]) == (1, 4, 1024, "fp16")
    assert r.gpus == 32
    # a time of zero or below times no step: left out and counted, not left for the median to hide
    text = (LOGS / "megatron_lm_gpt2_tp4_pp8.log").read_text()
    broken = text.replace("(ms): 1625.2 |", "(ms): -5.0 |").replace("(ms): 1623.8 |", "(ms): 0.0 |")
    b = read_log(broken, source="broken")
    assert b.steps_left_out == {"skipped": 3, "evaluation": 1, "time <= 0": 2} and b.steps_used == 14
    assert b.measured["step_s"] == pytest.approx(statistics.median(steady_ms[2:]) / 1e3)
    assert r.model is not None
    assert (r.model["num_layers"], r.model["hidden_size"], r.model["num_attention_heads"]) == (48, 7168, 32)
    assert r.model["vocab_size"] == 50688  # "padded vocab (size: 50257) with 431 dummy tokens (new size: 50688)"
    # fp16 with accumulate_allreduce_grads_in_fp32 False: Megatron keeps fp16 gradients (priced so, not fp32)
    assert r.software == {"engine": "megatron", "attention": "softmax", "grad_dtype": "param"}
    # largest "max reserved" of every rank's report: 26880 MB (MB = 2**20 bytes in report_memory)
    assert r.measured["peak_memory_bytes"] == 26880 * MiB
    assert r.measured["peak_memory_kind"] == "max_reserved"
    assert r.measured["peak_allocated_bytes"] == round(22113.0625 * MiB)
    assert r.measured["tokens_per_s_per_gpu"] == pytest.approx(4 * 1024 / (r.measured["step_s"] * 32))


def test_a_memory_report_after_iterations_that_were_all_skipped_is_no_peak():
    """NVIDIA/Megatron-LM issue #60 (https://github.com/NVIDIA/Megatron-LM/issues/60): fp16, iterations 1-5 all skipped
    (loss-scale overflow), then "after 5 iterations memory (MB)": the optimizer never stepped, so its states were not
    allocated, and the report (17482 MB reserved) was read as the peak. It is left out, and why is said."""
    with pytest.raises(PlannerError, match=r"left out: 2 skipped\); memory: the report after 5 iterations is left out"):
        ingest("megatron_lm_issue60_skipped.log")  # iteration 10 skipped its 5 too: nothing measured, and why
    text = (LOGS / "megatron_lm_issue60_skipped.log").read_text()
    tenth = "loss scale: 8388608.0 | number of skipped iterations:   5"
    r = read_log(text.replace(tenth, tenth.replace("  5", "  0")), source="tenth-stepped")
    assert (r.measured["step_s"], r.measured["peak_memory_bytes"]) == (pytest.approx(1.9939), None)
    assert any(a.startswith("memory: the report after 5 iterations is left out: all were skipped") for a in r.assumed)
    fifth = "loss scale: 268435456.0 | number of skipped iterations:   5"  # one of iterations 1-5 stepped
    r = read_log(text.replace(fifth, fifth.replace("  5", "  4")), source="one-stepped")
    assert (r.measured["peak_memory_bytes"], r.measured["peak_memory_kind"]) == (17482 * MiB, "max_reserved")
    assert not any(a.startswith("memory:") for a in r.assumed)


def test_megatron_issue_lines_with_throughput_and_timestamps():
    r = ingest("megatron_lm_issue756_mixtral.log", warmup=0)
    assert r.measured["step_s"] == pytest.approx(statistics.median([5.4449, 5.5338, 5.7186]))
    assert r.measured["tflops_per_gpu"] == pytest.approx(236.0)
    assert r.plan["global_batch"] == 128
    assert r.model is None and any("--model" in a for a in r.assumed)
    # iterations 43-45 of a run whose start the excerpt does not show: past the default warm-up (iterations 1-3 as
    # numbered), not a warm-up counted from the excerpt's first line (audit D2), and that is said
    default = ingest("megatron_lm_issue756_mixtral.log")
    assert default.measured == r.measured and (default.steps_used, default.steps_left_out) == (3, {})
    assert any(a.startswith("warm-up: iterations 1-3 as numbered") for a in default.assumed), default.assumed


def test_an_excerpt_from_mid_run_has_no_warm_up_of_its_own():
    """Iterations 182-185 pasted without the run's start: their numbers are the run's, past its warm-up, so all four
    are steady (the warm-up was counted from the excerpt's first line, and only 185 was kept: audit D2)."""
    r = ingest("megatron_llm_issue11_iter182.log")
    assert (r.steps_used, r.steps_left_out, r.iterations) == (4, {}, (182, 185))
    assert r.measured["step_s"] == pytest.approx(statistics.median([126995.3, 125553.7, 127804.5, 130554.9]) / 1e3)
    assert any(a.startswith("warm-up: iterations 1-3 as numbered") for a in r.assumed), r.assumed


def test_megatron_swift_memory_field_is_the_peak_reserved():
    """Megatron-SWIFT prints memory(GiB), round(torch.cuda.max_memory_reserved() / 1024**3, 2) (ms-swift
    swift/megatron/trainers/base.py training_log): read as the peak, which was left out (audit D4)."""
    r = ingest("megatron_swift_issue7832_memory.log")
    assert r.measured["step_s"] == pytest.approx(99.1589)  # iteration 10; 5 averages iterations 1-5 (warm-up)
    assert r.measured["peak_memory_bytes"] == round(21.56 * GiB)  # the larger of 21.54 and 21.56
    assert r.measured["peak_memory_kind"] == "max_reserved"


def test_megatron_bridge_configuration_and_memory():
    r = ingest("megatron_bridge_llama32_1b.log", gpus=8, hardware="h100-sxm")
    assert r.measured["step_s"] == pytest.approx(4.6478)
    assert r.measured["peak_memory_bytes"] == 12232 * MiB
    assert r.plan == {
        "dp": 8, "tp": 1, "pp": 1, "vpp": 1, "cp": 1, "ep": 1, "sp": False, "zero": 1, "recompute": "none",
        "micro_batch": 1, "global_batch": 512, "seq_len": 1024, "precision": "bf16", "schedule": "1f1b",
    }  # fmt: skip
    m = r.model
    assert m is not None
    assert (m["num_layers"], m["hidden_size"], m["ffn_hidden_size"], m["num_kv_heads"]) == (16, 2048, 8192, 8)
    assert (m["mlp"], m["vocab_size"], m["tied_embeddings"], m["norm"]) == ("swiglu", 128256, True, "rmsnorm")
    assert r.software["attention"] == "flash"
    assert r.measured["tokens_per_s_per_gpu"] == pytest.approx(512 * 1024 / (4.6478 * 8))


def test_megatron_bridge_memory_in_gigabytes_is_the_peak_reserved():
    """Megatron-Bridge since 29236c3c5 (2025-10-10) reports "memory (GB) | ... | mem-max-allocated-gigabytes: 194.41 |
    ... | mem-max-reserved-gigabytes: 216.89 | ...", bytes / 1e9 (train_utils.py report_memory): it was ignored, and
    the run had no peak. Excerpt: code-index id 58822930543 (a DGX Cloud benchmarking recipe README, 2025-12-19)."""
    r = ingest("megatron_bridge_2025_12_memory_gb.log")
    assert r.measured["peak_memory_bytes"] == round(216.89 * GB)
    assert r.measured["peak_memory_kind"] == "max_reserved"
    assert r.measured["peak_allocated_bytes"] == round(194.41 * GB)
    assert r.measured["step_s"] == pytest.approx(20.2891)
    text = (LOGS / "megatron_bridge_2025_12_memory_gb.log").read_text()
    allocated_only = text.replace(" mem-max-reserved-gigabytes: 216.89 |", "")  # memory_keys without the reserved peak
    m = read_log(allocated_only, source="allocated-only").measured
    assert (m["peak_memory_bytes"], m["peak_memory_kind"]) == (round(194.41 * GB), "max_allocated")


def test_nemo_step_timing_warmup_and_checkpoints_left_out():
    r = ingest("nemo2_resiliency_demo.log")
    # global_step 0-2 are warm-up; the steps after "Scheduled async checkpoint save" (global 10, 19) and after
    # the save's "finalized" line (global 11) are left out
    assert r.steps_left_out == {"warm-up": 3, "checkpoint": 3}
    steady_s = [7.561, 7.566, 7.559, 7.568, 7.565, 7.572, 7.572,  # global_step 3-9
                7.577, 7.575, 7.58, 7.578, 7.578, 7.584, 7.579]  # global_step 12-18  # fmt: skip
    assert r.steps_used == 14
    assert r.measured["step_s"] == pytest.approx(statistics.median(steady_s))
    assert r.plan["global_batch"] == 512
    assert "median over 14 logged steps of 'train_step_timing in s'" in r.derived  # NeMo's own time basis


def test_nemo2_memory_and_tflops_on_the_step_line_are_read():
    """NeMo 2's callbacks add the peak memory in bytes and TFLOP/s to the progress line ("max_memory_reserved:
    57675874304 | max_memory_allocated: 53930270720 | ... | TFLOPS_per_GPU: 85.8"): they were dropped without a word
    (audit of real logs). The peak is the largest reserved, with its allocated beside it; TFLOP/s the median."""
    r = ingest("nemo2_issue14850_memory_tflops.log")
    assert r.measured["peak_memory_bytes"] == 57_675_874_304 and r.measured["peak_memory_kind"] == "max_reserved"
    assert r.measured["peak_allocated_bytes"] == 53_930_270_720
    assert r.measured["tflops_per_gpu"] == pytest.approx(85.8)
    assert r.measured["step_s"] == pytest.approx(statistics.median([27.01, 27.88, 26.63, 26.93]))
    assert r.iterations == (8, 11)  # as the log numbers them ("iteration 8/29", global_step 8): it said 9-12 (audit)
    text = (LOGS / "nemo2_issue14850_memory_tflops.log").read_text()
    no_reserved = re.sub(r"max_memory_reserved: \d+ \| ", "", text)  # the allocated peak where only it is logged
    m = read_log(no_reserved, source="allocated-only").measured
    assert (m["peak_memory_bytes"], m["peak_memory_kind"]) == (53_930_270_720, "max_allocated")


def test_ingest_warns_of_a_measurement_the_gpu_could_not_make(tmp_path):
    """ingest wrote runs no GPU could have made, without a word (audit of real logs): validate leaves them out, so
    ingest now says so as it reads them. A peak above the GPU's HBM (torchtitan's 81.85 GiB, 86% of a ~95 GiB
    device, read as an 80 GB H100), and a step needing more than the dense peak for the model's FLOPs (Llama 3 70B,
    1,048,576 tokens in 3.3 s: 144x one H100; 128 GPUs still 1.13x, while the log's 261.3 TFLOP/s a GPU means 512)."""
    code, _, err = run_planner("ingest", str(LOGS / "torchtitan_pr1690_qwen3_32b_step50.log"), "--hardware", "h100-sxm")
    said = " ".join(err.split())
    assert code == 0 and "its peak memory, 81.85 GiB, is more than the 79.16 GiB of one h100-sxm" in said, err
    from planner.fit.plausible import ingested_doubts

    text = (LOGS / "primus_hip_mem_mi325x.log").read_text()  # a device nearly full: 255.80 of its 255.98 GiB total
    full, over = (text.replace("153.81GB/102.17GB", used) for used in ("255.80GB/0.18GB", "262.00GB/0.00GB"))
    assert not ingested_doubts(read_log(full, source="full", hardware="mi325x"))  # within HBM_SLACK of 255.55 GiB
    assert (
        "is more than the 255.55 GiB of one mi325x"
        in ingested_doubts(read_log(over, source="over", hardware="mi325x"))[0]
    )
    plan = tmp_path / "plan.yaml"
    plan.write_text("seq_len: 8192\nprecision: bf16\n")
    megatron = ("ingest", str(LOGS / "megatron_pr3067_fsdp_llama70b_iter100.log"), "--model", "llama3-70b",
                "--hardware", "h100-sxm", "--plan", str(plan))  # fmt: skip
    for gpus, share in (("1", "144.25x"), ("128", "1.13x")):
        code, _, err = run_planner(*megatron, "--gpus", gpus)
        assert code == 0 and f"needs {share} the dense bf16 peak" in " ".join(err.split()), err
    code, _, err = run_planner(*megatron, "--gpus", "512")
    assert code == 0 and "dense" not in err, err


def test_nemo_parallel_groups_state_the_plan_and_gpus():
    """NeMo 2's megatron_init lines name each rank's groups, and the micro-batch calculator its micro-batches per
    step: the degrees, the GPUs and the micro-batch (they were left unread, the plan null)."""
    r = ingest("nemo2_dit_groups_2gpu.log")
    assert r.gpus == 2 and (r.plan["dp"], r.plan["cp"], r.plan["tp"], r.plan["pp"]) == (2, 1, 1, 1)
    assert r.plan["micro_batch"] == 8 // (4 * 2) and r.plan["global_batch"] == 8
    assert any("NeMo's parallel groups" in d for d in r.derived)
    steady_s = [0.4294, 0.4287, 0.4291, 0.4349, 0.4331, 0.4341, 0.4408, 0.4395, 0.435, 0.4333, 0.4389, 0.4324, 0.4301]
    assert r.measured["step_s"] == pytest.approx(statistics.median(steady_s))  # global_step 3-15
    # without the context-parallel group the product is not the world size: the GPUs stay unstated
    text = (LOGS / "nemo2_dit_groups_2gpu.log").read_text()
    no_cp = "\n".join(line for line in text.splitlines() if "context parallel group:" not in line)
    partial = read_log(no_cp, source="no-cp")
    assert partial.gpus is None and partial.plan["dp"] == 2 and partial.plan["cp"] is None
    # Megatron-LM prints the micro-batches line beside a dump that states micro_batch_size: no derived note then
    megatron = (LOGS / "megatron_lm_gpt2_tp4_pp8.log").read_text()
    at = megatron.index(" iteration ")
    line = "INFO:megatron.core.num_microbatches_calculator:setting number of microbatches to constant 4\n"
    dumped = read_log(megatron[:at] + line + megatron[at:], source="dump")
    assert dumped.plan["micro_batch"] == 1 and not any("micro-batches per step" in d for d in dumped.derived)


# --- Megatron-DeepSpeed ---------------------------------------------------------------------------------------


def test_megatron_deepspeed_dump_config_and_interleaved_memory_reports():
    text = (LOGS / "megatron_deepspeed_gpt2_tp4_pp16.log").read_text()
    r = ingest("megatron_deepspeed_gpt2_tp4_pp16.log")
    assert r.engine == "megatron-deepspeed"
    assert (r.plan["tp"], r.plan["pp"], r.plan["dp"], r.gpus) == (4, 16, 1, 64)
    assert (r.plan["zero"], r.plan["global_batch"], r.plan["micro_batch"], r.plan["precision"]) == (0, 1024, 4, "fp16")
    # every iteration line after the first three (warm-up), read with a plain split of the lines
    times = [
        float(line.split("elapsed time per iteration (ms):")[1].split("|")[0])
        for line in text.splitlines()
        if line.startswith(" iteration") and int(line.split()[1].split("/")[0]) > DEFAULT_WARMUP
    ]
    assert r.steps_used == len(times)
    assert r.measured["step_s"] == pytest.approx(statistics.median(times) / 1e3)
    reserved = [float(v) for v in re.findall(r"max reserved: (\d+\.\d+)", text)]
    assert r.measured["peak_memory_bytes"] == max(reserved) * MiB == 23288 * MiB


def test_megatron_deepspeed_seconds_and_launcher_prefix():
    r = ingest("megatron_deepspeed_bloom176b_seconds.log")
    assert r.engine == "megatron-deepspeed"  # "elapsed time per iteration (s)" is Megatron-DeepSpeed's
    # 31214-31222, 31250-31251: an excerpt from mid-run, its warm-up long past
    steady_s = [106.46, 105.90, 106.40, 106.33, 107.53, 106.36, 106.30, 106.13, 106.44, 106.09, 106.13]
    assert r.steps_left_out == {}
    assert r.measured["step_s"] == pytest.approx(statistics.median(steady_s))
    assert r.measured["tflops_per_gpu"] == pytest.approx(
        statistics.median([147.29, 148.06, 147.37, 147.46, 145.82, 147.43, 147.51, 147.74, 147.31, 147.80, 147.75])
    )


def test_interval_averaged_lines_in_milliseconds():
    # lines every 10 iterations from 29020, mid-run: none is warm-up (iterations 1-3 as numbered)
    r = ingest("megatron_deepspeed_tr1_13b_ms.log", engine="megatron-deepspeed")
    assert r.engine == "megatron-deepspeed" and r.software["engine"] == "megatron-deepspeed"
    assert r.steps_left_out == {}
    ms = [22336.4, 22332.6, 22148.5, 22181.7, 22107.1, 22131.2, 22119.2]
    assert r.measured["step_s"] == pytest.approx(statistics.median([22306.6, *ms]) / 1e3)
    # the same lines after Megatron's "training ..." are a run resumed from iteration 29010 (train() continues from
    # the checkpoint's iteration): the first line averages 29011-29020, which its warm-up reaches
    text = (LOGS / "megatron_deepspeed_tr1_13b_ms.log").read_text()
    resumed = read_log("training ...\n" + text, source="resumed", engine="megatron-deepspeed")
    assert resumed.steps_left_out == {"warm-up": 1} and resumed.iterations == (29030, 29090)
    assert resumed.measured["step_s"] == pytest.approx(statistics.median(ms) / 1e3)
    assert any("after the run's start, which its 'training ...' line shows" in a for a in resumed.assumed)
    assert detect((LOGS / "megatron_deepspeed_tr1_13b_ms.log").read_text()) == "megatron"  # nothing says DeepSpeed


# --- DeepSpeed ------------------------------------------------------------------------------------------------


def test_deepspeed_current_samples_per_sec_with_timestamps_and_memory():
    r = ingest("deepspeed_issue2629_running_avg.log")
    assert r.engine == "deepspeed"
    assert r.steps_left_out == {}  # steps 17-22, past the warm-up's 1-3
    # no train_batch_size in the excerpt: the step time comes from the timestamps of steps 17-22
    assert r.measured["step_s"] == pytest.approx(statistics.median([0.224, 0.206, 0.210, 0.209, 0.209]))
    assert any("timestamps" in d for d in r.derived)
    assert r.measured["peak_memory_bytes"] == round(2.62 * GiB)  # MaxMemAllocated: bytes / 1024**3 (timer.py)
    assert r.measured["peak_memory_kind"] == "max_allocated"


def test_deepspeed_running_average_and_config_dump():
    r = ingest("deepspeed_cifar10_tutorial.log")
    assert (r.plan["global_batch"], r.plan["micro_batch"], r.plan["zero"], r.plan["dp"], r.gpus) == (4, 4, 0, 1, 1)
    assert r.measured["step_s"] == pytest.approx(4 / 1284.5698818883018)  # the last running average
    assert any("running average" in a for a in r.assumed)


def test_deepspeed_overflow_skips_are_reported():
    r = ingest("deepspeed_issue1825_samples_per_sec.log")
    assert r.measured["peak_memory_bytes"] == round(9.02 * GiB)
    assert any("skipped 2 steps" in a for a in r.assumed)
    assert r.measured["step_s"] == pytest.approx(15.145 / 10)  # 02:06:58,985 -> 02:07:14,130 over steps 40-50


# --- torchtitan -----------------------------------------------------------------------------------------------


def test_torchtitan_grad_norm_format_thousands_separators():
    r = ingest("torchtitan_pr3393_grad_norm.log")
    assert r.steps_left_out == {} and r.steps_used == 8  # steps 14-21: past the warm-up's 1-3
    assert r.measured["tokens_per_s_per_gpu"] == statistics.median([7282, 7334, 7313, 7282, 7322, 7309, 7272, 7304])
    assert r.measured["peak_memory_bytes"] == round(9.46 * GiB)
    assert r.measured["peak_memory_kind"] == "max_reserved"
    assert r.measured["mfu"] == pytest.approx(0.0017)
    longer = ingest("torchtitan_pr3393_grad_norm.log", warmup=16)  # iterations 1-16 as numbered: 14-16 are in it
    assert longer.steps_left_out == {"warm-up": 3}
    assert longer.measured["tokens_per_s_per_gpu"] == statistics.median([7282, 7322, 7309, 7272, 7304])


def test_a_torchtitan_peak_of_zero_is_no_measurement():
    """pytorch/torchtitan pull request #1437 (https://github.com/pytorch/torchtitan/pull/1437): every line prints
    "memory:  0.00GiB(0.00%)", what torchtitan prints where the device's memory stats hold no peak. It was a measured
    peak of 0 bytes; it is null, said, and the rest of the lines are read as before."""
    r = ingest("torchtitan_pr1437_zero_memory.log")
    assert (r.measured["peak_memory_bytes"], r.measured["peak_memory_kind"]) == (None, None)
    assert any(a.startswith("memory: 8 metrics lines print a peak of 0.00GiB") for a in r.assumed), r.assumed
    assert r.measured["tokens_per_s_per_gpu"] == statistics.median([35051, 34824, 34852, 34692, 34879, 33464, 34574])
    text = (LOGS / "torchtitan_pr1437_zero_memory.log").read_text()
    one_measured = text.replace("memory:  0.00GiB(0.00%)  tps: 34,574", "memory: 12.50GiB(13.10%)  tps: 34,574")
    r = read_log(one_measured, source="one-measured")
    assert r.measured["peak_memory_bytes"] == round(12.5 * GiB)  # the line that measured one is the peak
    assert any("7 metrics lines" in a and "null" not in a for a in r.assumed), r.assumed


def test_a_torchtitan_tps_of_zero_is_no_rate():
    """A log whose lines print "tps: 0" was ingested as a run of 0 tokens/s, which validate then refused as not a
    positive number (audit): 0 measures no rate (no tokens since the last log), as Megatron's reader drops a time of
    0; the other steps' rates are read as before."""
    text = (LOGS / "torchtitan_pr1437_zero_memory.log").read_text()
    zeroed = re.sub(r"tps: [\d,]+", "tps: 0", text)
    r = read_log(zeroed, source="zeroed")
    assert r.measured["tokens_per_s_per_gpu"] is None
    assert not any("logged steps of 'tps'" in d for d in r.derived), r.derived
    one = text.replace("tps: 34,574", "tps: 0")
    rates = [35051, 34824, 34852, 34692, 34879, 33464]
    assert read_log(one, source="one").measured["tokens_per_s_per_gpu"] == statistics.median(rates)


def test_torchtitan_step_time_from_timestamps():
    r = ingest("torchtitan_pr1287_profiler_gc.log")
    assert r.iterations == (200, 250)  # mid-run
    # (timestamp of step N - timestamp of step N-10) / 10 for N = 210 ... 250 (200 has no line before it)
    assert r.measured["step_s"] == pytest.approx(statistics.median([1.4648, 1.3964, 1.3961, 1.3974, 1.3977]))
    assert r.measured["tokens_per_s_per_gpu"] == statistics.median([5856, 5593, 5868, 5869, 5864, 5862])
    assert r.measured["mfu"] == pytest.approx(statistics.median([0.3429, 0.3275, 0.3436, 0.3437, 0.3434, 0.3433]))
    assert r.measured["tflops_per_gpu"] == pytest.approx(
        statistics.median([339.16, 323.92, 339.82, 339.88, 339.59, 339.48])
    )


def test_torchtitan_set_up_line_batch_and_sequence():
    r = ingest("torchtitan_issue1232_pp_setup.log", gpus=16)
    assert (r.plan["global_batch"], r.plan["seq_len"], r.plan["micro_batch"]) == (2, 4096, 2)
    assert r.iterations == (4, 4)  # steps 1-3 are the warm-up
    assert any(a.endswith("after the run's start, which its start line shows") for a in r.assumed), r.assumed
    # tps is printed rounded ("tps: 8"): the timestamps of steps 3 and 4 give the step, 21:15:40,293 -> 21:16:41,533
    assert r.measured["step_s"] == pytest.approx(61.240)
    assert r.measured["peak_memory_bytes"] == round(42.78 * GiB)
    assert r.measured["mfu"] == pytest.approx(0.0058)
    assert any("local batch size" in a for a in r.assumed)


@pytest.mark.parametrize(
    ("name", "schedule", "vpp"),
    [
        ("Interleaved1F1B", "interleaved", 2),
        ("Interleaved1F1B", "1f1b", 1),
        ("1F1B", "1f1b", 1),
        ("ZBVZeroBubble", None, 2),
    ],
)
def test_torchtitan_pipeline_schedule_line_states_schedule_virtual_stages_and_micro_batch(name, schedule, vpp):
    """'Using pipeline schedule S with N microbatches and M stages.' (torchtitan distributed/pipeline_parallel.py
    build_pipeline_schedule: N = local batch // pipeline_parallel_microbatch_size, M = pp x stages per rank) was not
    read: micro_batch and schedule stayed null at pp > 1. A schedule the planner does not model stays null."""
    text = (LOGS / "torchtitan_h200_llama3_8b.log").read_text()
    text = text.replace("Building 1-D device mesh with ['dp_shard'], [8]", "Building 2-D device mesh with ['pp', "
                        "'dp_shard'], [2, 4]").replace("local batch size 1, global batch size 8", "local batch size 8, "
                        "global batch size 32")  # fmt: skip
    line = f"    [rank0]:2025-02-13 11:33:29,300 - root - INFO - Using pipeline schedule {name} with 4 microbatches "
    text = text.replace("Applied FSDP to the model\n", f"Applied FSDP to the model\n{line}and {2 * vpp} stages.\n")
    r = read_log(text, source="pp")
    assert (r.plan["pp"], r.plan["dp"], r.plan["micro_batch"]) == (2, 4, 8 // 4)
    assert (r.plan["schedule"], r.plan["vpp"]) == (schedule, vpp)


def test_torchtitan_gradient_accumulation_start_line_and_the_local_batch_as_micro_batch():
    """torchtitan since 8570415c3 (PR #1238, 2025-06) prints "..., global batch size 64, gradient accumulation steps 1,
    sequence length 2048, ..." with no "with": batch and sequence length were lost. Its accumulation is global / (local
    x dp) steps of one local batch each (train.py l.205, l.421-424 @8570415c3): the micro-batch is the local batch,
    never local / accumulation. Excerpt: code-index id 39298784851 (torchtitan 2025-11-25, 8 x H200)."""
    r = ingest("torchtitan_2025_11_h200_ga_line.log")
    assert (r.plan["micro_batch"], r.plan["global_batch"], r.plan["seq_len"], r.plan["dp"]) == (8, 64, 2048, 8)
    assert (r.iterations, r.steps_left_out) == ((4, 6), {"warm-up": 3})  # the start line shows steps 1-3 are warm-up
    assert r.measured["tokens_per_s_per_gpu"] == statistics.median([347712, 338287, 317373])
    text = (LOGS / "torchtitan_2025_11_h200_ga_line.log").read_text()
    accumulating = text.replace("global batch size 64, gradient accumulation steps 1", "global batch size 256, with "
                                "gradient accumulation steps 4")  # fmt: skip
    plan = read_log(accumulating, source="ga4").plan  # the "with" form, 4 local batches of 8 a step
    assert (plan["micro_batch"], plan["global_batch"], plan["seq_len"]) == (8, 256, 2048)


def test_torchtitans_token_based_start_line_is_read_in_sequences_of_the_context_length():
    """torchtitan main (73aed7f6c, 2026-08, trainer.py) batches by tokens: "Trainer is initialized with N tokens per DP
    rank, M tokens per train step, gradient accumulation steps A, maximum context length C". No real log of it was
    found; the 2025-11 H200 excerpt's start line is rewritten in that format (the same run: 8 x 2048 tokens per DP
    rank, 64 x 2048 a step) and reads back as the same plan. Token counts that are no whole number of contexts
    leave the batch unstated."""
    text = (LOGS / "torchtitan_2025_11_h200_ga_line.log").read_text()
    old = "local batch size 8, global batch size 64, gradient accumulation steps 1, sequence length 2048"
    tokens = text.replace(old, "16384 tokens per DP rank, 131072 tokens per train step, gradient accumulation "
                               "steps 1, maximum context length 2048")  # fmt: skip
    r = read_log(tokens, source="tokens")
    assert (r.plan["micro_batch"], r.plan["global_batch"], r.plan["seq_len"], r.plan["dp"]) == (8, 64, 2048, 8)
    assert (r.iterations, r.steps_left_out) == ((4, 6), {"warm-up": 3})
    ragged = read_log(
        tokens.replace("16384 tokens per DP rank, 131072", "16000 tokens per DP rank, 128000"), source="r"
    )
    assert (ragged.plan["micro_batch"], ragged.plan["global_batch"], ragged.plan["seq_len"]) == (None, None, 2048)


def test_a_torchtitan_start_line_with_no_training_starts_line_still_shows_the_warm_up():
    """Two lines (the start line, step 10: code-index id 16855845858, Qwen3-30B-A3B on 8 x H200, "Exp 7"): the start
    line shows the run's start, so step 10's average (steps 2-10) reaches into the warm-up and is used only as the
    short log's fallback, and said so; its batch, sequence and micro-batch are read."""
    r = ingest("torchtitan_2025_12_qwen3moe_exp7.log", gpus=8)
    assert (r.plan["micro_batch"], r.plan["global_batch"], r.plan["seq_len"]) == (4, 32, 12288)
    assert r.iterations == (10, 10)
    assert any(a.startswith("no logged line lies wholly past the warm-up of 3") for a in r.assumed), r.assumed
    assert any(a.startswith("warm-up: the first 3 iterations after the run's start") for a in r.assumed), r.assumed
    assert r.measured["step_s"] == pytest.approx(32 * 12288 / (6260 * 8))  # no timestamps between lines: the rate's
    # the runs file says so, and validate and calibrate leave the run out: a warm-up step had been fitted as steady
    assert r.measured["from_warmup"] is True
    (entry,) = runs_entries([replace(r, model=load_model("qwen3-30b-a3b").model_dump(mode="json"), hardware="h200")])
    entry["plan"] = Plan(dp=8, zero=3, micro_batch=4, global_batch=32, seq_len=12288).model_dump(mode="json")
    run = parse_run(entry)
    assert isinstance(run, Run) and run.from_warmup
    with pytest.warns(UserWarning, match="left out of the fit: its step time averages warm-up iterations"):
        assert observations_from_runs([entry], None, "exp7.yaml") == []
    steady_all = ingest("torchtitan_2025_12_qwen3moe_exp7.log", gpus=8, warmup=0)  # asked: every step as steady
    assert "from_warmup" not in steady_all.measured


def test_torchtitan_model_arguments_and_features_from_set_up_lines():
    from planner.io.logs.torchtitan_log import read_torchtitan

    text = (LOGS / "torchtitan_pr1625_setup_only.log").read_text()
    config = read_torchtitan(text).config
    m = config["model"]
    # Llama 3 8B: FFN = 1024 * ceil(int(1.3 * int(2 * 4 * 4096 / 3)) / 1024) = 14336 (llama3 model.py FeedForward)
    assert (m["num_layers"], m["hidden_size"], m["num_kv_heads"], m["ffn_hidden_size"]) == (32, 4096, 8, 14336)
    assert (m["vocab_size"], m["max_seq_len"], m["name"]) == (128256, 8192, "llama3-8b")
    assert config["plan"]["recompute"] == "selective"
    with pytest.raises(PlannerError, match="setup-only: no step time or throughput"):
        read_log(text, source="setup-only", engine="torchtitan")
    with pytest.raises(PlannerError, match="setup-only: not a training log"):  # nothing to detect it by
        read_log(text, source="setup-only")


def test_torchtitan_reads_only_llama_model_args_as_a_llama():
    """A DeepSeek-V3 (or Qwen3) ModelArgs line holds MLA, experts or q/k norms a Llama reading drops: its model is
    not read, and the run says so."""
    from planner.io.logs.torchtitan_log import read_torchtitan

    text = (LOGS / "torchtitan_pr1625_setup_only.log").read_text()
    line = next(ln for ln in text.splitlines() if "Building llama3 8B with TransformerModelArgs" in ln)
    other = line.replace("llama3 8B with TransformerModelArgs", "deepseek_v3 16B with DeepSeekV3ModelArgs")
    config = read_torchtitan(text.replace(line, other)).config
    assert config["model"] is None
    assert any("deepseek_v3 16B's DeepSeekV3ModelArgs is not read" in note for note in config["assumed"])
    qwen = line.replace("llama3 8B", "qwen3 8B")  # the same args class, another family
    assert read_torchtitan(text.replace(line, qwen)).config["model"] is None


@pytest.mark.parametrize(
    ("converter", "precision"),
    [
        ("Float8 tensorwise scaled training active", "fp8"),  # v0.1.0-v0.2.2 float8.py: tensorwise, the profile's fp8
        ("Float8 training active", "fp8"),  # before v0.1.0 (pull request #812's log)
        ("MX training active with recipe mxfp8_cublas", "mxfp8"),  # v0.2.x mx.py
        ("Float8 training active with recipe mxfp8", "mxfp8"),  # v0.1.0 mx.py
        ("Converted Linear layers to NVFP4Linear", "nvfp4"),  # main's nvfp4.py
        ("Float8 training active with recipe rowwise", "fp8-rowwise"),  # 0.3.0's default (torchao ROWWISE)
        ("Float8 training active with recipe tensorwise", "fp8"),  # v0.2.2 with recipe_name tensorwise
        ("Float8 training active with recipe rowwise_with_gw_hp", "fp8-rowwise-gw-hp"),  # its wgrad in bf16
        ("Float8 training active with recipe all_axiswise", None),  # a name no precision is: unstated, said
        (None, "bf16"),
    ],
)
def test_torchtitan_reads_the_low_precision_recipe_its_converter_prints(converter, precision):
    """torchtitan's converters (components/quantization/float8.py, mx.py, nvfp4.py) print one line each; the plain
    tensorwise line once read as a bf16 run (audit), and a rowwise or MX recipe as tensorwise fp8; rowwise reads as
    fp8-rowwise, rowwise_with_gw_hp as fp8-rowwise-gw-hp, and a name no precision is is left unstated and said."""
    from planner.io.logs.torchtitan_log import read_torchtitan

    text = (LOGS / "torchtitan_h200_llama3_8b.log").read_text()
    mesh = next(ln for ln in text.splitlines() if "device mesh" in ln)
    if converter:
        text = text.replace(mesh, f"{mesh}\n    [rank0]:2025-02-13 11:33:29,100 - root - INFO - {converter}")
    config = read_torchtitan(text).config
    assert config["plan"]["precision"] == precision
    unstated = [n for n in config["assumed"] if n.startswith("precision: not stated")]
    assert bool(unstated) == (precision is None), config["assumed"]
    if precision is None:
        assert converter in unstated[0] and "give --plan" in unstated[0]
    said = config["assumed_notes"].get("precision", "")
    assert ("default mixed precision" in said) == (converter is None)


def test_torchtitan_hsdp_is_priced_over_every_data_parallel_rank_and_said():
    from planner.io.logs.torchtitan_log import read_torchtitan

    text = (LOGS / "torchtitan_h200_llama3_8b.log").read_text()
    hsdp = text.replace("Building 1-D device mesh with ['dp_shard'], [8]",
                        "Building 2-D device mesh with ['dp_replicate', 'dp_shard'], [2, 4]")  # fmt: skip
    config = read_torchtitan(hsdp).config
    assert (config["plan"]["dp"], config["plan"]["zero"]) == (8, 3)
    said = [n for n in config["assumed"] if "HSDP" in n]
    assert said and "dp_shard=4" in said[0] and "dp_replicate=2" in said[0], config["assumed"]
    assert not any("HSDP" in n for n in read_torchtitan(text).config["assumed"])


def test_torchtitan_every_rank_logging_takes_the_slowest():
    r = ingest("torchtitan_pr2389_all_ranks.log", warmup=0)
    assert r.steps_used == 2  # eight lines, two steps
    assert r.measured["tokens_per_s_per_gpu"] == statistics.median([10049, 10007])
    assert any("slowest" in a for a in r.assumed)


def test_a_short_torchtitan_log_is_not_averaged_with_its_compile_step():
    """torchtitan logs step 1 (the compile) and then every log_freq, each line averaging the steps since the last:
    step 10's interval (2-10) reaches into the warm-up, and nothing was left, so steps 1 and 10 were averaged
    (tokens/s 2,850, MFU 17%) and the rates' step time (24 s) overrode the timestamps' 0.73 s (audit D1)."""
    r = ingest("torchtitan_pr1884_cp2_all_ranks.log", gpus=4, given_plan={"global_batch": 2, "seq_len": 8192})
    assert (r.iterations, r.steps_left_out) == ((10, 10), {"warm-up": 1})
    assert r.measured["tokens_per_s_per_gpu"] == 5615  # step 10's (rank 2), not its mean with step 1's 86
    assert (r.measured["tflops_per_gpu"], r.measured["mfu"]) == (pytest.approx(325.20), pytest.approx(0.3288))
    # the slowest rank's step 1 at 10:37:01,391 to step 10 at 10:37:07,957, over 9 steps
    assert r.measured["step_s"] == pytest.approx(6.566 / 9)
    assert any(a.startswith("no logged line lies wholly past the warm-up of 3") for a in r.assumed), r.assumed


def test_warm_up_rates_never_override_the_timestamps():
    """Where the steps used are a short log's warm-up, their tokens/s hold the compile: the timestamps give the step
    time. Between steady lines, a disagreement means the time between them holds more than steps (an evaluation):
    the rate's is taken."""
    from dataclasses import replace

    from planner.io.logs.log_text import Selection, merge_ranks
    from planner.io.logs.step_times import derive_step_s
    from planner.io.logs.torchtitan_log import read_torchtitan

    facts = read_torchtitan((LOGS / "torchtitan_pr1884_cp2_all_ranks.log").read_text())
    warm = Selection(merge_ranks(facts.steps), {}, warmup_fallback=True)  # steps 1 and 10, as it used to fall back
    plan = {"global_batch": 2, "seq_len": 8192}
    step_s, how = derive_step_s(warm, facts, plan, 4)
    assert step_s == pytest.approx(6.566 / 9) and "timestamps" in how
    rates = [2 * 8192 / (tps * 4) for tps in (86, 5615)]  # the slowest rank's step 1, and step 10
    assert derive_step_s(replace(warm, warmup_fallback=False), facts, plan, 4)[0] == statistics.median(rates)


def test_torchtitan_model_and_gpus_from_options():
    from planner.io.catalog import load_model

    r = ingest("torchtitan_pr1287_profiler_gc.log", model=load_model("llama3-8b"), gpus=8)
    assert r.model is not None and r.model["num_layers"] == 32 and r.gpus == 8


# --- llm-foundry / Composer -----------------------------------------------------------------------------------


def test_composer_throughput_block_and_config():
    r = ingest("composer_rocm_mpt30b_16gpu.log")
    assert r.engine == "llm-foundry"
    assert r.gpus == 16  # num_gpus_per_node 8 x num_nodes 2
    assert r.plan["global_batch"] == 1024  # Train time/sample 4096 / Train time/batch 4
    assert r.measured["step_s"] == pytest.approx(1024 / 2.7330)
    assert r.measured["tokens_per_s_per_gpu"] == pytest.approx(1255.1776)
    # Composer's own lines, where no llm-foundry YAML is printed (review: "the log does not state ... precision"):
    # "Using precision Precision.AMP_FP16", the micro-batch metric, and the "Starting training..." start, after
    # which batch 4's windowed throughput still reaches into the 3 warm-up batches: said, and left out of a fit
    assert (r.plan["precision"], r.plan["micro_batch"]) == ("fp16", 8)
    assert not any("precision" in a or "micro_batch" in a for a in r.assumed if a.startswith("plan:")), r.assumed
    assert any("'Starting training...' line" in a for a in r.assumed) and r.measured.get("from_warmup") is True
    # llm-foundry's YAML says `auto` where the micro-batch is found at run time: the metric gives what it found
    text = (LOGS / "composer_rocm_mpt30b_16gpu.log").read_text()
    auto = read_log("device_train_microbatch_size: auto\n" + text, source="auto")
    assert auto.plan["micro_batch"] == 8


@pytest.mark.parametrize("name", ["composer_llm_shearing_issue24_memory.log", "llm_foundry_readme_no_throughput.log"])
def test_composer_logs_without_throughput_are_refused(name):
    with pytest.raises(PlannerError, match=f"{name}: no step time or throughput"):
        ingest(name)


# --- the shared rules -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("megatron_lm_gpt2_tp4_pp8.log", "megatron"),
        ("megatron_bridge_llama32_1b.log", "megatron"),
        ("nemo2_resiliency_demo.log", "megatron"),
        ("megatron_deepspeed_gpt2_tp4_pp16.log", "megatron-deepspeed"),
        ("deepspeed_cifar10_tutorial.log", "deepspeed"),
        ("torchtitan_pr2389_all_ranks.log", "torchtitan"),
        ("composer_rocm_mpt30b_16gpu.log", "llm-foundry"),
    ],
)
def test_detects_each_family(name, family):
    assert detect((LOGS / name).read_text()) == family


def test_ansi_codes_and_crlf_do_not_change_what_is_read():
    plain = (LOGS / "torchtitan_pr3393_grad_norm.log").read_text()
    # torchtitan's colours (components/metrics.py Color): red step, green loss, blue tps, magenta mfu, reset
    coloured = (
        plain.replace("step:", "\x1b[31mstep:")
        .replace("loss:", "\x1b[32mloss:")
        .replace("tps:", "\x1b[34mtps:")
        .replace("mfu:", "\x1b[35mmfu:")
        .replace("%\n", "%\x1b[39m\n")
        .replace("\n", "\r\n")
    )
    a, b = read_log(plain, source="plain"), read_log(coloured, source="coloured")
    assert a.measured == b.measured and a.steps_used == b.steps_used


def test_ranks_interleaved_by_launcher_prefix():
    lines = (LOGS / "torchtitan_pr3393_grad_norm.log").read_text().splitlines()
    other = [line.replace("[rank0]", "[rank1]").replace("tps: 7,", "tps: 6,") for line in lines]
    text = "\n".join(x for pair in zip(lines, other) for x in pair) + "\n"
    r = read_log(text, source="two-ranks", warmup=0)
    assert r.steps_used == 8
    assert r.measured["tokens_per_s_per_gpu"] == statistics.median(
        [6282, 6334, 6313, 6282, 6322, 6309, 6272, 6304]
    )  # the slower rank of each step


@pytest.mark.parametrize("prefix", ["0: ", "[default3]:", "[rank12]:", "stdout: ", "worker-0: "])
def test_launcher_prefixes(prefix):
    line = (LOGS / "megatron_lm_issue756_mixtral.log").read_text().splitlines()[0]
    r = read_log(prefix + line + "\n", source="prefixed", warmup=0)
    assert r.iterations == (43, 43) and r.measured["step_s"] == pytest.approx(5.4449)


def test_steady_state_rules_on_interval_lines():
    # lines every 10 iterations from iteration 10: the first covers 1-10 and holds the warm-up
    steps = [Step(step=10 * i, line=i, step_s=float(i)) for i in range(1, 6)]
    sel = steady(steps, warmup=3)
    assert [s.step for s in sel.used] == [20, 30, 40, 50]
    assert sel.left_out == {"warm-up": 1}
    assert [s.step for s in steady(steps, warmup=15).used] == [30, 40, 50]


def test_a_gpt_neox_log_is_refused_by_name_unless_an_engine_is_named():
    """deepspeedai/DeepSpeed issue #3742 (https://github.com/deepspeedai/DeepSpeed/issues/3742), a GPT-NeoX run: its
    " samples/sec: 7.799 | iteration 34/ 10000 | ... | approx flops per GPU: 112.9TFLOPS" line has Megatron's
    fields, and was read as a Megatron run without a word. GPT-NeoX is no engine the planner models: refused by name,
    read as the engine --engine names."""
    text = (LOGS / "gpt_neox_ds_issue3742.log").read_text()
    assert detect(text) == "gpt-neox"
    with pytest.raises(PlannerError, match=r"GPT-NeoX is not an engine the planner models: `planner ingest LOG"):
        read_log(text, source="neox")
    r = read_log(text, source="neox", engine="megatron-deepspeed")
    assert (r.engine, r.measured["step_s"], r.iterations) == ("megatron-deepspeed", pytest.approx(4.1031), (34, 34))
    # its own fields are read too: TFLOP/s in human_readable_flops's decimal units, samples/sec for the job
    assert r.measured["tflops_per_gpu"] == pytest.approx(112.9)
    gb = read_log(text, source="neox", engine="megatron", given_plan={"global_batch": 32})
    assert gb.measured["step_s"] == pytest.approx(4.1031)
    no_time = text.replace("elapsed time per iteration (ms): 4103.1 | ", "")
    prefixed = no_time.replace(" samples/sec:", "worker-0:  samples/sec:")  # pdsh's host prefix
    gb32 = {"global_batch": 32}
    assert read_log(prefixed, source="neox", engine="megatron", given_plan=gb32).measured["step_s"] == pytest.approx(
        32 / 7.799, rel=1e-3
    )
    step = read_log(no_time, source="neox", engine="megatron", given_plan={"global_batch": 32})
    assert step.measured["step_s"] == pytest.approx(32 / 7.799, rel=1e-3)
    kilo = read_log(no_time.replace("112.9TFLOPS", "512.0GFLOPS"), source="neox", engine="megatron",
                    given_plan={"global_batch": 32})  # fmt: skip
    assert kilo.measured["tflops_per_gpu"] == pytest.approx(0.512)


def test_a_configuration_or_progress_bar_without_steps_is_refused_by_name():
    """What a log without step lines is, said (both were "not a training log planner can read"): a DeepSpeed engine
    configuration that ends before the first step, and a Lightning progress bar whose s/it is the average since the
    epoch's start (795 steps in 9:07:58: 32,878 s / 795 = 41.36 s, as it prints), which is no step time."""
    config = (LOGS / "deepspeed_issue2899_config_only.log").read_text()
    with pytest.raises(PlannerError, match=r"a DeepSpeed engine configuration and no step line after it \(expected "
                       r"DeepSpeed 'SamplesPerSec="):  # fmt: skip
        read_log(config, source="ds2899")
    light = (LOGS / "deepspeed_cifar10_tutorial.log").read_text().split("SamplesPerSec")[0].rsplit("\n", 1)[0]
    with pytest.raises(PlannerError, match="a DeepSpeed engine configuration and no step line after it"):
        read_log(light + "\n", source="light")  # the engine's older name, DeepSpeedLight
    bar = (LOGS / "nemo1_launcher55_progress_bar.log").read_text()
    with pytest.raises(PlannerError, match=r"progress bar \('795/77225 \[9:07:58<878:01:48, 41.36s/it'\).*average "
                       "since the epoch's start"):  # fmt: skip
        read_log(bar, source="launcher55")
    with pytest.raises(PlannerError, match="not a training log planner can read"):  # a bar alone names no rate
        read_log("Epoch 0:   1%|          | 795/77225\n", source="bar")


def test_measured_values_carry_the_logs_digits_not_float_noise():
    """The runs file holds what the log printed: 14414.45 ms (a median of two lines) was written 14.414449999999999 s,
    and a step from microsecond timestamps 0.04900002479553223 s (seconds since the epoch hold ~2e-7 s of noise)."""
    megads = read_log((LOGS / "megads_alcf_polaris_gpt7b.log").read_text(), source="megads")
    assert repr(megads.measured["step_s"]) == "14.41445"
    titan = read_log((LOGS / "torchtitan_2025_11_h200_ga_line.log").read_text(), source="titan")
    assert repr(titan.measured["step_s"]) == "0.049"


def test_text_that_is_no_training_log_is_refused():
    with pytest.raises(PlannerError, match="not a training log planner can read"):
        read_log("hello\nworld\n", source="notes.txt")


# --- the command line -----------------------------------------------------------------------------------------


def test_cli_json_document():
    rc, out, err = run_planner("ingest", str(LOGS / "torchtitan_pr1287_profiler_gc.log"), "--json", "--gpus", "8")
    assert rc == 0, err
    doc = json.loads(out)
    run = doc["runs"][0]
    for key in ("id", "engine", "plan", "software", "measured", "assumed", "model", "hardware", "gpus", "source"):
        assert key in run
    assert set(run["measured"]) >= {"step_s", "tokens_per_s_per_gpu", "peak_memory_bytes", "peak_memory_kind"}
    assert run["measured"]["peak_memory_bytes"] == round(49.66 * GiB)
    assert run["engine"] == "torchtitan" and run["gpus"] == 8 and run["hardware"] is None


def test_cli_table_and_runs_file_that_validate_reads(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")  # the width the wrapping below is asserted at (it passed under xdist only)
    runs = tmp_path / "runs.yaml"
    rc, out, err = run_planner(
        "ingest",
        str(LOGS / "megatron_bridge_llama32_1b.log"),
        str(LOGS / "megatron_lm_gpt2_tp4_pp8.log"),
        "--gpus", "8", "--hardware", "H100", "-o", str(runs),
    )  # fmt: skip
    assert rc == 0, err
    assert "megatron_bridge_llama32_1b" in out and "4.65 s" in out and f"wrote 2 runs to {runs}" in out
    assert "megatron_bridge_llama32_1b: 8 x h100-sxm, plan" in out  # --hardware H100 is an alias: its profile said
    raws = load_runs(runs)
    assert [r["id"] for r in raws] == ["megatron_bridge_llama32_1b", "megatron_lm_gpt2_tp4_pp8"]
    assert raws[1]["gpus"] == 32  # the log's world size, not --gpus
    assert all(type(parse_run(r)).__name__ == "Run" for r in raws)
    rc, out, err = run_planner("validate", str(runs))
    assert rc == 0, err
    assert "megatron_bridge_llama32_1b" not in out  # a long id wraps at its underscores, every piece shown
    assert all(piece in out for piece in ("megatron_", "bridge_", "llama32_1b"))


def test_every_unreadable_log_of_a_list_is_named_and_nothing_is_written(tmp_path):
    """Ten logs with two bad ones: both named, one error line each, exit 2 and no runs file (ingest and calibrate
    stopped at the first, so fixing it showed the next)."""
    notes, runs = tmp_path / "notes.txt", tmp_path / "runs.yaml"
    notes.write_text("hello\nworld\n")
    good = str(LOGS / "megatron_lm_gpt2_tp4_pp8.log")
    rc, out, err = run_planner("ingest", str(notes), good, str(tmp_path / "absent.log"), "-o", str(runs))
    lines = err.strip().splitlines()
    assert rc == 2 and out == "" and not runs.exists(), (rc, out, err)
    assert len(lines) == 2 and all(line.startswith("error: ") for line in lines), err
    assert "notes.txt: not a training log" in lines[0] and "absent.log: no such file" in lines[1]
    rc, _, err = run_planner("calibrate", str(notes), str(tmp_path / "absent.log"), "--hardware", "h100-sxm")
    assert rc == 2 and err.count("error: ") == 2 and "notes.txt" in err and "absent.log" in err, err


def test_validate_shows_a_throughput_not_measured_blank_not_nan(tmp_path):
    """A run that measured its peak memory but no throughput: validate's measured tokens/s cell is blank, as the
    peak's is where none was measured, not "nan" (render/accuracy.py defaulted it to float('nan'))."""
    runs = tmp_path / "runs.yaml"
    rc, _, err = run_planner("ingest", str(LOGS / "megatron_lm_gpt2_tp4_pp8.log"), "--hardware", "v100-32gb", "-o",
                             str(runs))  # fmt: skip
    assert rc == 0, err
    (raw,) = load_runs(runs)
    for key in ("tokens_per_s_per_gpu", "step_s"):
        del raw["measured"][key]
    runs.write_text(yaml.safe_dump([raw]))
    rc, out, err = run_planner("validate", str(runs))
    assert rc == 0, err
    row = next(line for line in out.splitlines() if "megatron_lm_gpt2_tp4_pp8" in line)
    assert "nan" not in row.lower() and "26.2" in row  # the measured peak, 26880 MiB = 26.25 GiB, is still shown


def test_validate_reads_a_log_as_ingest_does(tmp_path):
    """A log given to validate is read as ingest reads it (as calibrate does), not parsed as YAML; what the log
    lacks is named with the option or the ingest step that supplies it, in one line, exit 2."""
    log = str(LOGS / "megatron_lm_gpt2_tp4_pp8.log")
    rc, out, err = run_planner("validate", log, "--hardware", "h100-sxm", "--json")
    assert rc == 0, err
    (run,) = json.loads(out)["runs"]
    assert run["id"] == "megatron_lm_gpt2_tp4_pp8" and run["predicted"]["tokens_per_s_per_gpu"] > 0
    rc, _, err = run_planner("validate", log)
    assert rc == 2 and err.count("\n") == 1 and "give --hardware" in err and "YAML" not in err
    bridge = str(LOGS / "megatron_bridge_llama32_1b.log")
    rc, _, err = run_planner("validate", bridge, "--hardware", "h100-sxm")
    assert rc == 2 and "does not state dp" in err and "give --gpus N" in err
    runs = tmp_path / "bridge.yaml"
    assert run_planner("ingest", bridge, "--hardware", "h100-sxm", "--gpus", "8", "-o", str(runs))[0] == 0
    rc, out, err = run_planner("validate", bridge, "--hardware", "h100-sxm", "--gpus", "8", "--json")
    assert rc == 0, err
    via_ingest = json.loads(run_planner("validate", str(runs), "--json")[1])["runs"]
    assert json.loads(out)["runs"] == via_ingest  # the log read as ingest reads it with the same --gpus
    rc, _, err = run_planner("validate", str(DATA / "calibration_runs.yaml"), "--gpus", "8")
    assert rc == 2 and "is a runs file" in err


def test_calibrate_takes_what_a_log_does_not_state_as_validate_does():
    """calibrate reads a log with --gpus and --plan as ingest and validate do: the Bridge log that states no dp is
    read with --gpus 8, as validate reads it; without, the one line names the option; a runs file states its
    plan and refuses them. Its one step line (iteration 10 of 10) averages the warm-up: validate compares it and
    says so, calibrate leaves it out and says why (it had been fitted as a steady step)."""
    bridge = str(LOGS / "megatron_bridge_llama32_1b.log")
    rc, _, err = run_planner("calibrate", bridge, "--hardware", "h100-sxm")
    assert rc == 2 and "does not state dp; give --gpus N" in err
    rc, out, err = run_planner("calibrate", bridge, "--hardware", "h100-sxm", "--gpus", "8", "--json")
    said = " ".join(err.split())
    assert rc == 2 and "run 'megatron_bridge_llama32_1b' is left out of the fit: its step time averages warm-up" in said
    rc, out, err = run_planner("validate", bridge, "--hardware", "h100-sxm", "--gpus", "8", "--json")
    (validated,) = json.loads(out)["runs"]
    assert rc == 0 and validated["id"] == "megatron_bridge_llama32_1b" and validated["predicted"], validated
    assert (
        "averages warm-up iterations (the log never passes its warm-up; a longer log has steady steps); its error"
        in (" ".join(err.split()))
    )
    rc, _, err = run_planner("calibrate", str(DATA / "calibration_runs.yaml"), "--plan", bridge)
    assert rc == 2 and "is a runs file" in err


def test_a_plan_mapping_without_cp_or_ep_leaves_nothing_the_count_or_model_decides_unstated(tmp_path):
    """A --plan mapping of tp, pp and dp that fill the GPUs, for a dense model, implies cp 1 and ep 1: they were
    written null, and validate and calibrate then refused the runs file (calibrate with 'no measured runs of any
    hardware', audit). Where neither the log nor the file can say, the refusal asks for the file, not for --plan
    again."""
    lines = tmp_path / "lines.log"  # the iteration lines alone: the log states no plan
    text = (LOGS / "megatron_lm_gpt2_tp4_pp8.log").read_text()
    lines.write_text("\n".join(ln for ln in text.splitlines() if " iteration " in ln))
    mapping = tmp_path / "plan.yaml"
    mapping.write_text("tp: 2\npp: 1\ndp: 4\nsp: true\nzero: 1\nrecompute: none\nmicro_batch: 1\nseq_len: 1024\n"
                       "precision: bf16\n")  # fmt: skip
    given = ("--model", "llama3-8b", "--gpus", "8", "--hardware", "h100-sxm", "--plan", str(mapping))
    runs = tmp_path / "runs.yaml"
    rc, _, err = run_planner("ingest", str(lines), *given, "-o", str(runs))
    assert rc == 0, err
    (raw,) = load_runs(runs)
    assert (raw["plan"]["cp"], raw["plan"]["ep"]) == (1, 1)
    assert any("cp 1 (tp x pp x dp = the 8 GPUs), ep 1 (a model without experts): implied" in a for a in raw["assumed"])
    assert run_planner("validate", str(runs))[0] == 0
    moe = (*given[:1], "mixtral-8x7b", *given[2:])  # experts: ep is the run's to say
    rc, _, err = run_planner("validate", str(lines), *moe)
    assert rc == 2 and "neither the log nor the --plan file states ep; add it to the plan file" in err, err
    raw["plan"]["cp"] = None  # a runs file left null: calibrate's refusal says which run and why
    runs.write_text(yaml.safe_dump([raw]))
    rc, _, err = run_planner("calibrate", str(runs))
    assert rc == 2 and "no measured runs of any hardware" in err and "leaves cp unstated" in err, err


def test_ingest_plan_file_fills_what_the_log_does_not_state(tmp_path):
    """A torchtitan log prints no plan: the plan file the run was launched from (search --save) gives its fields,
    model, hardware and GPUs, so the runs file is written and validate reads it; what the log does state wins."""
    saved = tmp_path / "plan.yaml"
    searched = ("search", "-m", "llama3-8b", "--gpus", "8", "--engine", "torchtitan", "--tp-overlap", "--compile")
    rc, _, err = run_planner(*searched, "--save", str(saved))  # async TP runs compiled only
    assert rc == 0, err
    runs = tmp_path / "runs.yaml"
    log = str(LOGS / "torchtitan_pr3393_grad_norm.log")
    rc, out, err = run_planner("ingest", log, "--plan", str(saved), "-o", str(runs))
    assert rc == 0, err
    (raw,) = load_runs(runs)
    plan = yaml.safe_load(saved.read_text())
    assert {k: raw["plan"][k] for k in ("dp", "tp", "zero", "seq_len")} == {
        k: plan["plan"][k] for k in ("dp", "tp", "zero", "seq_len")
    }
    assert (raw["model"]["name"], raw["hardware"], raw["gpus"]) == ("llama3-8b", "h100-sxm", 8)
    assert any("from --plan" in a for a in raw["assumed"])
    assert raw["software"] == {"engine": "torchtitan", **plan["training"]}  # the file's training settings
    assert plan["training"]["tp_overlap"] is True and plan["training"]["compile"] is True
    assert run_planner("validate", str(runs))[0] == 0
    rc, out, err = run_planner("validate", log, "--plan", str(saved), "--json")  # the log itself, with the plan
    assert rc == 0, err
    assert json.loads(out)["runs"] == json.loads(run_planner("validate", str(runs), "--json")[1])["runs"]
    bare = tmp_path / "bare.yaml"  # a mapping of plan fields; the Megatron log states tp 4 and pp 8 itself
    bare.write_text("tp: 2\nrecompute: full\n")
    rc, out, err = run_planner(
        "ingest", str(LOGS / "megatron_lm_gpt2_tp4_pp8.log"), "--plan", str(bare), "--json", "--hardware", "h100-sxm"
    )
    assert rc == 0, err
    (run,) = json.loads(out)["runs"]
    assert run["plan"]["tp"] == 4 and any("--plan's tp 2 not used" in a for a in run["assumed"])
    # a hand-written plan of the degrees alone: one pipeline stage implies vpp 1 and 1f1b, one TP rank no sp
    bare.write_text("dp: 8\ntp: 1\npp: 1\ncp: 1\nep: 1\nzero: 3\nrecompute: selective\nmicro_batch: 1\n"
                    "global_batch: 8\nseq_len: 8192\nprecision: bf16\n")  # fmt: skip
    rc, out, err = run_planner("ingest", log, "--plan", str(bare), "--json", "-m", "llama3-8b", "--hardware",
                               "h100-sxm", "--gpus", "8")  # fmt: skip
    assert rc == 0, err
    (run,) = json.loads(out)["runs"]
    assert (run["plan"]["vpp"], run["plan"]["schedule"], run["plan"]["sp"]) == (1, "1f1b", False)
    assert any("implied" in a for a in run["assumed"])
    rc, out, err = run_planner("validate", log, "--plan", str(bare), "-m", "llama3-8b", "--hardware", "h100-sxm",
                               "--gpus", "8", "--json")  # fmt: skip
    assert rc == 0 and json.loads(out)["runs"][0]["predicted"]["tokens_per_s_per_gpu"] > 0, err
    # where the log states neither dp nor its GPUs, --plan's dp and --gpus must agree (it said "--plan's dp 8 not
    # used: the log says otherwise" of the dp --gpus 16 made, and divided the tokens over 16 GPUs)
    rc, out, err = run_planner("ingest", log, "--plan", str(bare), "-m", "llama3-8b", "--hardware", "h100-sxm",
                               "--gpus", "16")  # fmt: skip
    assert rc == 2 and "--plan's dp 8 and --gpus 16 disagree" in err and out == "", err
    bare.write_text("tp: two\n")  # each field checked as a plan checks it, before anything is read or written
    rc, _, err = run_planner("ingest", log, "--plan", str(bare), "-o", str(tmp_path / "bad.yaml"))
    assert rc == 2 and "plan.tp: Input should be a valid integer (got 'two')" in err
    assert not (tmp_path / "bad.yaml").exists()


def test_cli_runs_file_needs_model_and_hardware(tmp_path):
    runs = tmp_path / "runs.yaml"
    rc, _, err = run_planner("ingest", str(LOGS / "torchtitan_pr3393_grad_norm.log"), "-o", str(runs))
    assert rc == 2 and not runs.exists()
    assert len(err.strip().splitlines()) == 1 and "--model and --hardware" in err


def _head_one_step(folder: Path) -> Path:
    lines = (LOGS / "megatron_lm_gpt2_tp4_pp8.log").read_text().splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if "elapsed time per iteration" in line)
    (folder / "cut.log").write_text("".join(lines[: first + 1]))
    return folder / "cut.log"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing.log", "no such file"),
        (lambda d: d, "is a folder"),
        (lambda d: (d / "b.log").write_bytes(b"\x00\x01\x02iteration") and d / "b.log", "not a text file"),
        (lambda d: (d / "e.log").write_text("") and d / "e.log", "e.log: is empty; give a training log"),
        (lambda d: LOGS / "llm_foundry_readme_no_throughput.log", "no step time or throughput"),
        (_head_one_step, "no step time, throughput or memory read from its steps (left out: 1 skipped)"),
        (lambda d: LOGS / "gpt_neox_ds_issue3742.log", "GPT-NeoX is not an engine the planner models"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(tmp_path, make, message):
    """The last: a Megatron log cut after its first step line, which is a skipped iteration (the audit's case: it
    was written as a run with every measurement null)."""
    path = make(tmp_path) or tmp_path / "e.log"
    rc, out, err = run_planner("ingest", str(path))
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err and "Traceback" not in err


def test_what_was_read_and_what_is_missing_is_said(tmp_path):
    """samples/s with no global batch to divide by said 'no step time, throughput or memory (left out: )'; step lines
    printing no time at all were told '--warmup 0 keeps the warm-up', which keeps nothing timed (audit D6)."""
    samples = LOGS / "deepspeed_pr849_no_batch.log"
    rc, out, err = run_planner("ingest", str(samples))
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "samples/s read from its steps, but no global batch" in err and "--plan" in err and "left out" not in err
    # with a memory reading the run is kept (exit 0), and the unused rate is said with what it needs, not as a
    # median the run was read from (audit)
    rc, out, err = run_planner("ingest", str(LOGS / "deepspeed_issue5779_memory_no_batch.log"), "--json")
    (run,) = json.loads(out)["runs"]
    assert rc == 0 and run["measured"]["step_s"] is None and run["measured"]["peak_memory_bytes"] == round(0.97 * GiB)
    assert run["derived"] == [
        "step_s: samples/s read (16.81, median), but no global batch to turn it into a step time: give --plan with "
        "global_batch"
    ]
    # DeepSpeed's samples/s are the whole job's (timer.py ThroughputTimer: the train batch over the step): with the
    # sequence length and the GPUs they give tokens/s per GPU, batch or not (audit of real logs)
    r = read_log(samples.read_text(), source=str(samples), gpus=4, given_plan={"seq_len": 1024})
    assert r.measured["step_s"] is None and r.measured["tokens_per_s_per_gpu"] == pytest.approx(6.302019 * 1024 / 4)
    (tmp_path / "gb.yaml").write_text("global_batch: 16\n")  # what the message asks for
    rc, out, err = run_planner("ingest", str(samples), "--plan", str(tmp_path / "gb.yaml"), "--json")
    assert rc == 0 and json.loads(out)["runs"][0]["measured"]["step_s"] == pytest.approx(16 / 6.302019280317165)
    rc, out, err = run_planner("ingest", str(LOGS / "nemo2_pr10128_no_timing.log"))
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "its step lines print no step time, throughput or memory" in err and "train_step_timing" in err
    assert "--warmup" not in err and "left out" not in err


def test_cli_unknown_engine():
    rc, _, err = run_planner("ingest", str(LOGS / "nemo2_resiliency_demo.log"), "--engine", "jax")
    assert rc == 2 and "--engine 'jax' is not one of auto, megatron" in err


@pytest.mark.parametrize(
    ("name", "family"), [("nemo", "megatron"), ("MEGATRON", "megatron"), ("Composer", "llm-foundry")]
)
def test_cli_engine_takes_catalog_aliases_in_any_case(name, family):
    """--engine resolves names as every --engine does (catalog aliases, case-insensitive, README "Your own
    catalog"): `nemo` is megatron, `Composer` llm-foundry; a catalog engine that is no log family is refused."""
    log = LOGS / ("composer_rocm_mpt30b_16gpu.log" if family == "llm-foundry" else "nemo2_resiliency_demo.log")
    rc, out, err = run_planner("ingest", str(log), "--engine", name, "--json")
    assert rc == 0, err
    assert json.loads(out)["runs"][0]["engine"] == family
    rc, _, err = run_planner("ingest", str(log), "--engine", "hai-llm")
    assert rc == 2 and "--engine 'hai-llm' is not one of auto" in err


@pytest.mark.parametrize("name", ["runs.json", "runs", "runs.txt"])
def test_cli_runs_file_must_be_named_as_validate_and_calibrate_read_it(tmp_path, name):
    """A runs file written as runs.json was YAML that calibrate then read as a launch profile (a .json) and failed
    on: a name validate and calibrate do not read as a runs file is refused in one line, before anything is read."""
    target = tmp_path / name
    args = ("ingest", str(LOGS / "megatron_lm_gpt2_tp4_pp8.log"), "--hardware", "v100-32gb", "-o", str(target))
    rc, out, err = run_planner(*args)
    assert rc == 2 and out == "" and not target.exists()
    assert len(err.strip().splitlines()) == 1 and "must end in .yaml or .yml" in err and "Traceback" not in err
    rc, _, err = run_planner(*args[:-1], str(tmp_path / "RUNS.YML"))
    assert rc == 0, err
    assert load_runs(tmp_path / "RUNS.YML")[0]["plan"]["tp"] == 4
    rc, out, err = run_planner("validate", str(tmp_path / "RUNS.YML"), "--json")  # read back as a runs file
    assert rc == 0 and json.loads(out)["runs"][0]["id"] == "megatron_lm_gpt2_tp4_pp8", err


def test_gigabytes_of_composer_memory_are_decimal():
    text = "[batch=20/40]:\n\t Train throughput/batches_per_sec: 0.5000\n\t Train memory/peak_reserved_mem: 51.3280\n"
    r = read_log(text, source="composer", warmup=0)
    assert r.measured["peak_memory_bytes"] == round(51.328 * GB)  # memory_monitor.py: bytes / 1.0e9
    assert r.measured["step_s"] == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("key", "was", "now", "needle"),
    [
        ("world_size", "32", "64", "world size 64, but dp 1 x tp 4 x pp 8 x cp 1 = 32"),
        ("micro_batch_size", "1", "3", "global batch 4 is not a multiple of micro-batch 3 x dp 1"),
    ],
)
def test_a_log_that_contradicts_itself_is_refused(key, was, now, needle):
    """A world size its degrees do not make, or a global batch its ranks' micro-batches cannot: one line naming
    both, rather than tokens/s per GPU off by the factor between them."""
    text = (LOGS / "megatron_lm_gpt2_tp4_pp8.log").read_text()
    line = next(ln for ln in text.splitlines() if ln.strip().startswith(f"{key} ."))
    assert line.endswith(f" {was}")
    with pytest.raises(PlannerError) as info:
        read_log(text.replace(line, line[: -len(was)] + now), source="edited")
    assert needle in str(info.value) and "contradicts itself" in str(info.value)
    # where the user's --plan is half of it, it is named, not the log (audit)
    bare = "\n".join(ln for ln in text.splitlines() if " iteration " in ln)  # the log states no plan
    with pytest.raises(PlannerError, match=r"the log, --plan and --gpus disagree: world size 8, but dp 4 x tp 3"):
        read_log(bare, source="lines", gpus=8, given_plan={"dp": 4, "tp": 3, "pp": 1, "cp": 1}, engine="megatron")


def test_megatron_argument_dump_states_its_fp8_recipe_and_memory_settings():
    """--fp8-recipe tensorwise is fp8-current (plain fp8 is Megatron's default, delayed), and the settings a dump
    states that change what the run holds and does go into the run's software block: fp8 parameter gather,
    bf16 gradient reduction, P2P overlap, the precision-aware optimizer with bf16 moments, recompute modules."""
    text = (LOGS / "megatron_lm_gpt2_tp4_pp8.log").read_text()
    fp16 = next(ln for ln in text.splitlines() if ln.strip().startswith("fp16 ."))
    extra = {
        "fp8": "hybrid", "fp8_recipe": "tensorwise", "fp8_param_gather": "True", "grad_reduce_in_bf16": "True",
        "overlap_p2p_comm": "True", "use_precision_aware_optimizer": "True", "exp_avg_dtype": "torch.bfloat16",
    }  # fmt: skip
    lines = [fp16.replace("True", "False")] + [f"  {k} {'.' * (48 - len(k))} {v}" for k, v in extra.items()]
    r = read_log(text.replace(fp16, "\n".join(lines)), source="fp8-dump")
    assert r.plan["precision"] == "fp8-current"
    assert r.software == {
        "engine": "megatron", "attention": "softmax", "p2p_overlap": True, "grad_dtype": "param",
        "fp8_param_gather": True, "precision_aware_optimizer": True, "optimizer_moment_dtype": "bf16",
    } | {k: v for k, v in r.software.items() if k == "tp_overlap"}  # fmt: skip
    delayed = read_log(text.replace(fp16, "\n".join(lines[:2])), source="default-recipe")
    assert delayed.plan["precision"] == "fp8"


def _titan_lines(seconds_per_line: int) -> str:
    """A torchtitan log (synthetic: the format of torchtitan_pr1287_profiler_gc.log) of 8 GPUs, local batch 2 x 8192,
    logging every 10 steps at 6,100 tokens/s per GPU (2.69 s a step), its lines `seconds_per_line` apart."""
    head = (
        "[rank0]:[titan] 2025-06-20 10:00:09,123 - root - INFO - Training starts at step 1, with local batch size 2, "
        "global batch size 16, sequence length 8192, total steps 80 (warmup 20)"
    )
    steps = [
        f"[rank0]:[titan] 2025-06-20 10:{(k * seconds_per_line) // 60:02d}:{(k * seconds_per_line) % 60:02d},123 - root"
        f" - INFO - step: {10 * k:>2}  loss: 9.0000  memory: 62.48GiB(65.77%)  tps: 6,100  tflops: 380.0  mfu: 38.40%"
        for k in range(1, 9)
    ]
    return "\n".join([head, *steps]) + "\n"


def test_a_step_time_is_taken_from_the_throughput_when_the_timestamps_hold_more_than_steps():
    """Lines 27 s apart for 10 steps agree with 6,100 tokens/s (2.69 s a step): the timestamps' finer figure is
    kept. Lines 60 s apart (evaluation or checkpoints between them) do not: the printed throughput's step is taken,
    and the run says what the timestamps gave."""
    agree = read_log(_titan_lines(27), source="agree", gpus=8, warmup=0)
    assert agree.measured["step_s"] == pytest.approx(2.7)
    apart = read_log(_titan_lines(60), source="apart", gpus=8, warmup=0)
    assert apart.measured["step_s"] == pytest.approx(16 * 8192 / (6100 * 8))
    assert any("timestamps give 6 s a step" in d for d in apart.derived)


def test_torchtitan_zero_stage_is_an_assumption_the_run_states():
    """torchtitan prints no fsdp_reshard_after_forward: ZeRO 2 under pipelining (3 without) is its default's choice,
    and an emitted plan may have set 'always' (ZeRO 3): the run says it assumed the default."""
    mesh = "[rank0]:[titan] 2025-06-20 10:00:01,123 - root - INFO - Building 1-D device mesh with ['dp_shard'], [8]\n"
    r = read_log(mesh + _titan_lines(27), source="fsdp", gpus=8, warmup=0)
    assert r.plan["zero"] == 3
    assert any(a.startswith("zero: 3") and "fsdp_reshard_after_forward" in a for a in r.assumed)


def _dump_with(extra: dict[str, str]) -> str:
    """The GPT-2 argument dump with `extra` arguments printed as Megatron prints them."""
    text = (LOGS / "megatron_lm_gpt2_tp4_pp8.log").read_text()
    fp16 = next(ln for ln in text.splitlines() if ln.strip().startswith("fp16 ."))
    lines = [fp16] + [f"  {k} {'.' * (48 - len(k))} {v}" for k, v in extra.items()]
    return text.replace(fp16, "\n".join(lines))


MOE_ARGS = {"num_experts": "8", "moe_router_topk": "2", "expert_model_parallel_size": "2"}


def test_megatron_argument_dump_states_its_moe_dispatch_offloads_and_cuda_graphs():
    """What changes a MoE run's time and memory goes into its software block, so calibration sees it: the DeepEP
    flex dispatcher, the all-to-all overlap, the host-memory shares of optimizer state and activations
    (--activation-offload-fraction defaults to 1.0), per-layer CUDA graphs (TransformerConfig, OptimizerConfig)."""
    extra = {
        **MOE_ARGS, "moe_token_dispatcher_type": "flex", "moe_flex_dispatcher_backend": "deepep",
        "overlap_moe_expert_parallel_comm": "True", "optimizer_cpu_offload": "True",
        "optimizer_offload_fraction": "0.5", "fine_grained_activation_offloading": "True",
        "offload_modules": "['core_attn', 'attn_proj', 'expert_fc1']", "cuda_graph_impl": "transformer_engine",
    }  # fmt: skip
    r = read_log(_dump_with(extra), source="moe-dump")
    assert r.plan["ep"] == 2
    stated = {k: r.software[k] for k in ("moe_dispatcher", "ep_overlap", "optimizer_offload", "activation_offload")}
    assert stated == {
        "moe_dispatcher": "deepep",
        "ep_overlap": True,
        "optimizer_offload": 0.5,
        "activation_offload": 1.0,
    }
    assert r.software["cuda_graphs"] is True
    assert r.software["offload_modules"] == ["core_attn", "attn_proj", "expert_fc1"]
    fused = read_log(_dump_with({**extra, "offload_modules": "['fused_group_mlp']"}), source="fused-dump")
    assert fused.software.get("offload_modules") is None  # a group the planner does not model: unstated, not another


def test_what_the_planner_does_not_price_is_left_unstated_not_read_as_something_else():
    """A flex dispatcher on HybridEP, a whole-iteration CUDA graph, offloading switched off with a fraction set,
    and a dispatcher named in a dense model's dump: none of them become software settings."""
    hybrid = {
        **MOE_ARGS, "moe_token_dispatcher_type": "flex", "moe_flex_dispatcher_backend": "hybridep",
        "cuda_graph_impl": "full_iteration", "optimizer_cpu_offload": "False", "optimizer_offload_fraction": "0.5",
    }  # fmt: skip
    r = read_log(_dump_with(hybrid), source="hybridep-dump")
    assert not {"moe_dispatcher", "cuda_graphs", "optimizer_offload", "ep_overlap"} & set(r.software)
    dense = read_log(_dump_with({"moe_token_dispatcher_type": "alltoall"}), source="dense-dump")
    assert "moe_dispatcher" not in dense.software
    allgather = read_log(_dump_with({**MOE_ARGS, "moe_token_dispatcher_type": "allgather"}), source="ag-dump")
    assert allgather.software["moe_dispatcher"] == "allgather"


def test_every_setting_a_log_can_state_is_one_a_runs_file_holds():
    """What the log readers put in a run's software block (given.LOG_SOFTWARE_KEYS) is written into runs files and
    read back by parse_run: each must be a runs-file software key (fit/runs.py SOFTWARE_KEYS)."""
    from planner.fit.runs import SOFTWARE_KEYS
    from planner.io.logs.given import LOG_SOFTWARE_KEYS

    assert set(LOG_SOFTWARE_KEYS) <= SOFTWARE_KEYS
    dump = read_log(_dump_with({**MOE_ARGS, "moe_token_dispatcher_type": "alltoall"}), source="keys")
    assert set(dump.software) - {"engine"} <= set(LOG_SOFTWARE_KEYS)


def _layers_of_dump() -> int:
    return read_log(_dump_with({}), source="plain").model["num_layers"]


def test_an_argument_dump_of_a_deepseek_style_model_reads_its_mla_mtp_and_moe_layers():
    """MLA (MLATransformerConfig's ranks and widths), MTP, the MoE layer list (arguments.py moe_freq_type: 1 for an
    expert layer) and group-limited routing, as transformer_config.py names them @d98e8a64. Before, the dump was
    read as plain multi-head attention with every layer MoE."""
    n = _layers_of_dump()
    freq = "[" + ", ".join(["0"] * 3 + ["1"] * (n - 3)) + "]"
    extra = {
        **MOE_ARGS, "multi_latent_attention": "True", "q_lora_rank": "1536", "kv_lora_rank": "512",
        "qk_head_dim": "128", "qk_pos_emb_head_dim": "64", "v_head_dim": "128", "mtp_num_layers": "1",
        "moe_layer_freq": freq, "moe_router_num_groups": "4", "moe_router_group_topk": "2",
        "normalization": "RMSNorm", "kv_channels": "128",
    }  # fmt: skip
    r = read_log(_dump_with(extra), source="mla-dump")
    assert r.model is not None
    spec = ModelSpec(**r.model)
    a = spec.attention
    assert spec.is_mla and (a.q_lora_rank, a.kv_lora_rank, a.qk_nope_head_dim, a.qk_rope_head_dim, a.v_head_dim) == (
        1536, 512, 128, 64, 128
    )  # fmt: skip
    assert spec.head_dim is None and spec.head_size == 192 and spec.mtp_layers == 1
    assert spec.num_moe_layers == n - 3 and not spec.is_moe_layer(2) and spec.is_moe_layer(3)
    assert (spec.moe.routing_groups, spec.moe.group_top_k) == (4, 2)


def test_an_argument_dump_reads_sliding_windows_sinks_and_qk_norms():
    """window_size (127, 0) is a 128-token window; window_attn_skip_freq 2 makes every second layer global
    (utils.py is_layer_window_attention, 1-based); softmax_type learnable is a sink per head; qk_layernorm on an
    RMSNorm model is the spec's rmsnorm q/k norm."""
    extra = {
        "window_size": "(127, 0)", "window_attn_skip_freq": "2", "softmax_type": "learnable", "qk_layernorm": "True",
        "normalization": "RMSNorm",
    }  # fmt: skip
    r = read_log(_dump_with(extra), source="swa-dump")
    a = ModelSpec(**r.model).attention
    n = _layers_of_dump()
    assert a.window == 128 and a.pattern == "SG" * (n // 2) and a.sinks and a.qk_norm == "rmsnorm"
    everywhere = read_log(_dump_with({"window_size": "(4095, 0)"}), source="all-swa")
    assert everywhere.model["attention"]["pattern"] == "S" * n
    full = read_log(_dump_with({"window_size": "(-1, -1)"}), source="no-window")  # infinite: full attention
    assert "attention" not in full.model


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"hybrid_override_pattern": "M-M*"}, "a hybrid layer pattern"),
        ({"softmax_type": "off-by-one"}, "softmax_type off-by-one"),
        ({"qk_layernorm": "True"}, "q/k LayerNorm"),
        ({"no_rope_freq": "4"}, "layers without RoPE"),
        ({"multi_latent_attention": "True", "kv_lora_rank": "512"}, "multi-latent attention without its"),
        ({"position_embedding_type": "relative"}, "position_embedding_type relative"),
        ({"squared_relu": "True"}, "a squared-ReLU MLP"),  # read as gelu before
    ],
)
def test_an_architecture_a_spec_cannot_hold_is_named_not_read_as_another_model(extra, named):
    """The dump's model is left out, and the run says why, rather than priced as the plain layers it would read as;
    a --model given stands in for it, and the run says so too."""
    r = read_log(_dump_with(extra), source="odd-dump")
    assert r.model is None
    assert any(named in note and "cannot represent" in note for note in r.assumed), r.assumed
    given = read_log(_dump_with(extra), source="odd-dump", model=load_model("gpt3-1.3b"))
    assert given.model is not None and given.model["num_layers"] == 24
    assert any("--model gpt3-1.3b stands in for it" in note for note in given.assumed), given.assumed


@pytest.mark.parametrize(("printed", "position"), [("alibi", "alibi"), ("PositionEmbeddingType.alibi", "alibi"),
                                                   ("PositionEmbeddingType.absolute", "learned")])  # fmt: skip
def test_alibi_positions_are_read_as_alibi(printed, position):
    """BigScience's Megatron-DeepSpeed (BLOOM's trainer) prints its --position-embedding-type as an enum; ALiBi was a
    type the spec could not hold (named and left out), and the catalog's BLOOM stood in as RoPE."""
    r = read_log(_dump_with({"position_embedding_type": printed}), source="bloom-dump")
    assert r.model is not None and r.model["position_embedding"] == position, r.assumed


# --- synthetic logs (the formats of the excerpts above, built here) ----------------------------------------------


def _megatron_line(iteration: int, ms: float, batch: int = 32) -> str:
    """One Megatron-LM iteration line as training_log prints it (megatron/training/training.py l.3598 @d98e8a64)."""
    return (
        f" [2025-06-20 10:00:00] iteration {iteration:8d}/     500 | consumed samples: {iteration * batch:12d} |"
        f" elapsed time per iteration (ms): {ms:.1f} | learning rate: 1.000000E-04 | global batch size: {batch:5d} |"
        " lm loss: 9.000000E+00 | loss scale: 1.0 | number of skipped iterations:   0 | number of nan iterations:   0 |"
    )


def _megatron_log(
    times_ms: list[float], batches: list[int] | None = None, *, args: dict[str, str] | None = None, first: int = 1
) -> str:
    """A Megatron-LM log (synthetic): an argument dump of `args`, then one iteration line per entry of `times_ms`,
    from iteration `first`."""
    dump = ["------------------------ arguments ------------------------"]
    dump += [f"  {k} {'.' * (48 - len(k))} {v}" for k, v in sorted((args or {}).items())]
    dump.append("-------------------- end of arguments ---------------------")
    lines = [_megatron_line(first + i, ms, (batches or [32] * len(times_ms))[i]) for i, ms in enumerate(times_ms)]
    return "\n".join([*(dump if args else []), *lines]) + "\n"


def _cut_off_cases() -> dict[str, tuple[str, str, dict[str, object]]]:
    """Per log family: (complete lines, the next step's line cut off mid-way with no newline, read_log options)."""
    titan_cut = (
        "[rank0]:[titan] 2025-06-20 10:04:03,123 - root - INFO - step: 90  loss: 9.0000  memory: 62.48GiB(65.77%)"
        "  tps: 7,3"
    )
    speed = "[2025-06-20 10:00:{0:02d},000] [INFO] [timer.py:264:stop] epoch=0/micro_step={0}/global_step={0}, "
    ds = "\n".join(speed.format(k) + "RunningAvgSamplesPerSec=8.0, CurrSamplesPerSec=8.0" for k in range(1, 9))
    composer = "".join(f"[batch={k}/100]:\n\t Train throughput/batches_per_sec: 0.5000\n" for k in range(1, 9))
    return {
        "megatron": (
            _megatron_log([550.0] * 8),
            _megatron_line(9, 5500.0)[: _megatron_line(9, 5500.0).index("(ms): 55") + 8],
            {},
        ),
        "torchtitan": (_titan_lines(27), titan_cut, {"gpus": 8}),
        "deepspeed": (ds + "\n", speed.format(9) + "RunningAvgSamplesPerSec=8.0, CurrSamplesPerSec=0.8", {}),
        "llm-foundry": (composer, "[batch=9/100]:\n\t Train throughput/batches_per_sec: 0.2", {}),
    }


@pytest.mark.parametrize("family", ["megatron", "torchtitan", "deepspeed", "llm-foundry"])
def test_a_last_line_cut_off_mid_way_is_not_read_as_a_step(family):
    """A log still being written ends in a line with no newline, its number cut ("(ms): 55" of 5500, "tps: 7,3" of
    7,300): every family's reader leaves that step out and counts it, rather than reading a 10x step."""
    complete, cut, options = _cut_off_cases()[family]
    before = read_log(complete, source=family, **options)  # type: ignore[arg-type]
    after = read_log(complete + cut, source=family, **options)  # type: ignore[arg-type]
    assert after.engine == family
    assert after.steps_left_out == before.steps_left_out | {"incomplete last line": 1}
    assert (after.steps_used, after.iterations, after.measured) == (
        before.steps_used,
        before.iterations,
        before.measured,
    )
    finished = read_log(complete + cut + "\n", source=family, **options)  # type: ignore[arg-type]
    assert finished.steps_used == before.steps_used + 1  # the same line, ended, is a step (the test sees one)
    assert "incomplete last line" not in finished.steps_left_out
    with pytest.raises(PlannerError, match=r"its one step line is its last, with no line end .* end the line if it"):
        read_log(cut, source=family, **options)  # type: ignore[arg-type]


def test_a_memory_report_on_a_last_line_with_no_line_end_is_said_left_out():
    """Megatron-LM PR 5662's iteration line and its memory report with no final newline: the report was dropped
    without a word (audit). It is left out, as a cut step line is (its numbers may be cut), and said."""
    line = (" [2025-07-01 10:00:00] iteration       20/      20 | consumed samples:          160 | elapsed time per "
            "iteration (ms): 744.0 | learning rate: 1.000000E-04 | global batch size:     8 | lm loss: 7.0E+00 | "
            "loss scale: 1.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n")  # fmt: skip
    memory = ("[Rank 0] (after 20 iterations) memory (MB) | allocated: 3270.16 | max allocated: 5670.39 | reserved: "
              "6406.00 | max reserved: 6406.00")  # fmt: skip
    ended = read_log(line + memory + "\n", source="ended", gpus=8, warmup=0)
    assert ended.measured["peak_memory_bytes"] == 6406 * MiB
    cut = read_log(line + memory, source="cut", gpus=8, warmup=0)
    assert cut.measured["peak_memory_bytes"] is None
    assert any(a.startswith("a memory reading on the log's last line, which has no line end") for a in cut.assumed)


# A Megatron-LM argument dump's plan (synthetic): 8 GPUs of data parallelism, micro-batch 1, final global batch 32.
PLAN_ARGS = {
    "tensor_model_parallel_size": "1", "pipeline_model_parallel_size": "1", "data_parallel_size": "8",
    "world_size": "8", "micro_batch_size": "1", "global_batch_size": "32", "seq_length": "1024",
    "rampup_batch_size": "['8', '8', '96']", "bf16": "True",
}  # fmt: skip
RAMP = [8, 8, 16, 16, 24, 24] + [32] * 6  # --rampup-batch-size 8 8 96: 8 more sequences every 96 samples


def test_a_batch_ramp_up_is_left_out_of_the_step_time():
    """The arguments print the final batch (32); the first iterations of a --rampup-batch-size run log smaller ones,
    and take shorter steps. Priced at 32 they made tokens/s 2-4x too high: those lines are left out, and said."""
    times = [140.0 * b / 8 for b in RAMP[:6]] + [550.0] * 6
    r = read_log(_megatron_log(times, RAMP, args=PLAN_ARGS), source="ramp")
    assert r.steps_left_out == {"ramp-up": 6}
    assert (r.steps_used, r.iterations) == (6, (7, 12))
    assert r.measured["step_s"] == pytest.approx(0.55)
    assert r.measured["tokens_per_s_per_gpu"] == pytest.approx(32 * 1024 / (0.55 * 8))
    assert any(a.startswith("ramp-up: 6 step lines") and "final 32" in a for a in r.assumed), r.assumed
    bare = read_log(_megatron_log(times, RAMP), source="no-dump", gpus=8)  # no dump: the last logged batch is final
    assert bare.plan["global_batch"] == 32 and bare.steps_left_out == {"ramp-up": 6}


def test_a_line_averaging_over_a_batch_change_is_part_of_the_ramp_up():
    """A line prints the batch of its last iteration and averages the time since the previous line: the first line
    at the final batch still covers iterations at the smaller one, unless it covers only its own."""
    every_2 = [Step(step=2 * k, line=k, step_s=1.0, global_batch=b) for k, b in enumerate([8, 16, 32, 32, 32], 1)]
    sel = steady(every_2, warmup=0, global_batch=32)
    assert [s.step for s in sel.used] == [8, 10] and sel.left_out == {"ramp-up": 3}
    every_1 = [Step(step=k, line=k, step_s=1.0, global_batch=b) for k, b in enumerate([8, 16, 32, 32], 1)]
    assert [s.step for s in steady(every_1, warmup=0, global_batch=32).used] == [3, 4]


def test_a_log_that_never_reaches_its_final_batch_is_refused():
    with pytest.raises(PlannerError, match="every step line ran at a global batch other than the run's 32"):
        read_log(_megatron_log([140.0] * 6, [8] * 6, args=PLAN_ARGS), source="ramp-only")


@pytest.mark.parametrize(
    ("key", "now", "named"),
    [("tensor_model_parallel_size", "2", "tp 1, then 2"), ("global_batch_size", "64", "global_batch 32, then 64")],
)
def test_two_runs_appended_to_one_log_that_disagree_are_refused(tmp_path, key, now, named):
    """A requeued job appends a second argument dump; one that states another plan used to replace the first, and
    run 1's timings were priced with run 2's plan. The log contradicts itself: one line naming the value, exit 2."""
    second = PLAN_ARGS | {key: now, "data_parallel_size": "4" if key.startswith("tensor") else "8"}
    text = _megatron_log([550.0] * 10, args=PLAN_ARGS) + _megatron_log([550.0] * 10, args=second, first=6)
    with pytest.raises(PlannerError, match="contradicts itself: its argument dumps disagree") as info:
        read_log(text, source="requeued")
    assert named in str(info.value)
    log, runs = tmp_path / "requeued.log", tmp_path / "runs.yaml"
    log.write_text(text)
    rc, out, err = run_planner("ingest", str(log), "--hardware", "h100-sxm", "--model", "gpt3-1.3b", "-o", str(runs))
    assert rc == 2 and out == "" and not runs.exists()
    assert len(err.strip().splitlines()) == 1 and named in err and "Traceback" not in err


def test_two_runs_of_the_same_arguments_each_leave_out_their_warm_up():
    """A restart with the same arguments repeats iterations 6-10 after its own warm-up (slow: CUDA graphs, NCCL
    set-up, a checkpoint load). They are not several ranks' lines for one step: each run's warm-up is left out, the
    steady steps of both are pooled, and the run says so."""
    restarted = [2000.0] * 3 + [550.0] * 7
    text = _megatron_log([550.0] * 10, args=PLAN_ARGS) + _megatron_log(restarted, args=PLAN_ARGS, first=6)
    r = read_log(text, source="restarted")
    assert r.steps_left_out == {"warm-up": 6}
    assert r.steps_used == 14 and r.iterations == (4, 15)
    assert r.measured["step_s"] == pytest.approx(0.55)
    assert not any("several lines per step" in a for a in r.assumed)
    assert any(a.startswith("the log holds 2 runs with the same arguments") for a in r.assumed), r.assumed
    # the restarted run's last line cut off mid-way: only that line goes, not the first run's line of the same
    # iteration (audit)
    short = _megatron_log([550.0] * 10, args=PLAN_ARGS) + _megatron_log([2000.0] * 3 + [550.0] * 2, args=PLAN_ARGS,
                                                                       first=6)  # fmt: skip
    whole = read_log(short, source="restarted")  # run 2 ends at iteration 10, which run 1 also logged
    cut = short.rstrip("\n").rsplit("elapsed time per iteration (ms):", 1)[0] + "elapsed time per iteration (ms): 5"
    r = read_log(cut, source="restarted")
    assert r.steps_used == whole.steps_used - 1 and r.steps_left_out.get("incomplete last line") == 1


@pytest.mark.parametrize(
    ("backend", "attention"),
    [("unfused", "softmax"), ("local", "softmax"), ("fused", "flash"), ("flash", "flash"), ("auto", "flash")],
)
def test_the_attention_backend_a_dump_names_is_the_kernel_it_prices(backend, attention):
    """--attention-backend unfused (TE's unfused attention) and local (Megatron-Core's own) keep the s x s scores:
    softmax; flash, fused (cuDNN) and auto are memory-efficient (enums.py AttnBackend). Any backend read as flash
    before."""
    r = read_log(_dump_with({"attention_backend": f"AttnBackend.{backend}"}), source="backend")
    assert r.software["attention"] == attention
    number = {"flash": 1, "fused": 2, "unfused": 3, "local": 4, "auto": 5}[backend]  # Megatron-Bridge: the value
    bridge = (LOGS / "megatron_bridge_llama32_1b.log").read_text()
    assert "  attention_backend:\n    _args_:\n    - 5\n" in bridge
    bridge = bridge.replace("    _args_:\n    - 5\n", f"    _args_:\n    - {number}\n", 1)
    assert read_log(bridge, source="bridge", gpus=8).software["attention"] == attention


def test_a_partial_block_recompute_is_left_unstated_and_said():
    """recompute_method block recomputes the first recompute_num_layers layers of each pipeline chunk
    (megatron/core/recompute.py): 2 of the GPT-2 dump's 6 per stage is no plan's recompute (it read as full); 6 of
    6 is full."""
    block = {"recompute_granularity": "full", "recompute_method": "block"}
    partial = read_log(_dump_with(block | {"recompute_num_layers": "2"}), source="block-2")
    assert partial.plan["recompute"] is None
    assert any("recomputes 2 of each pipeline chunk's 6 layers" in a for a in partial.assumed), partial.assumed
    every = read_log(_dump_with(block | {"recompute_num_layers": "6"}), source="block-6")
    assert every.plan["recompute"] == "full" and not any(a.startswith("recompute:") for a in every.assumed)


@pytest.mark.parametrize(
    ("strategy", "zero"), [("no_shard", 0), ("optim", 1), ("optim_grads", 2), ("optim_grads_params", 3), (None, 3)]
)
def test_megatron_fsdp_sharding_strategy_is_its_zero_stage(strategy, zero):
    """--data-parallel-sharding-strategy (arguments.py, default optim_grads_params) as ZeRO stages: every Megatron
    FSDP run read as ZeRO 3 before."""
    extra = {"use_megatron_fsdp": "True"} | ({"data_parallel_sharding_strategy": strategy} if strategy else {})
    run = read_log(_dump_with(extra), source="fsdp")
    assert run.plan["zero"] == zero
    # its zero 3 is priced as Megatron-FSDP, not torch FSDP2, though the model has no experts (comm.megatron_fsdp);
    # its other strategies are the distributed optimizer's stages
    assert run.software.get("megatron_fsdp") is (True if zero == 3 else None)
    # Megatron-Core 0.11-0.13 named it --use-custom-fsdp (d165a8548b .. af28b5a559), default strategy no_shard: its
    # runs were read as ZeRO 1 (audit)
    custom = {"use_custom_fsdp": "True", "use_distributed_optimizer": "True"}
    custom |= {"data_parallel_sharding_strategy": strategy} if strategy else {}
    old = read_log(_dump_with(custom), source="custom")
    assert old.plan["zero"] == (zero if strategy else 0)
    assert old.software.get("megatron_fsdp") is (True if strategy == "optim_grads_params" else None)


@pytest.mark.parametrize(
    ("extra", "precision", "said"),
    [
        ({"fp8": "hybrid", "fp8_recipe": "custom"}, None, "fp8_recipe custom is not a recipe"),  # was plain fp8
        ({"fp4": "e2m1"}, "nvfp4", None),  # fp4_recipe's default, nvfp4 (transformer_config.py)
        ({"fp4": "e2m1", "fp4_recipe": "nvfp4"}, "nvfp4", None),
        ({"fp4": "e2m1", "fp4_recipe": "custom"}, None, "fp4_recipe custom is not a recipe"),  # was fp16
    ],
)
def test_an_fp8_or_fp4_recipe_the_planner_does_not_price_is_stated_not_guessed(extra, precision, said):
    r = read_log(_dump_with(extra), source="recipe")
    assert r.plan["precision"] == precision
    assert any(said in a for a in r.assumed) if said else not any("_recipe" in a for a in r.assumed)


def test_expert_tensor_parallelism_and_the_capacity_factor_are_read(tmp_path):
    """expert_tensor_parallel_size is the plan's etp (tp where a dump does not say, arguments.py) and
    moe_expert_capacity_factor the model's (None or < 0: dropless): both were ignored, the run read as etp = tp and
    dropless. Padding to capacity, which a runs file cannot state, is said."""
    extra = MOE_ARGS | {"expert_tensor_parallel_size": "1", "moe_expert_capacity_factor": "1.25"}
    r = read_log(_dump_with(extra | {"moe_pad_expert_input_to_capacity": "True"}), source="etp", hardware="h100-sxm")
    assert (r.plan["tp"], r.plan["etp"]) == (4, 1)
    assert r.model["moe"]["capacity_factor"] == 1.25
    assert any("moe_pad_expert_input_to_capacity" in a for a in r.assumed)
    assert Plan(**runs_entries([r])[0]["plan"]).etp == 1  # the runs file carries it into the plan
    dropless = read_log(_dump_with(extra | {"moe_expert_capacity_factor": "-1.0"}), source="dropless")
    assert "capacity_factor" not in dropless.model["moe"]
    dense = read_log(_dump_with({"expert_tensor_parallel_size": "1"}), source="dense")
    assert "etp" not in dense.plan


def test_an_uneven_pipeline_split_is_read_into_the_plan_or_said_not_modelled():
    """--decoder-first/last-pipeline-num-layers put other layer counts on the first and last ranks: the plan states
    them (first_stage_layers, last_stage_layers) and the runs entry is priced with that split (48 layers on pp 8:
    3 / 7 x 6 / 3, where the planner's own is 6 each); a --pipeline-model-parallel-layout naming every stage is
    said not modelled."""
    r = read_log(
        _dump_with({"decoder_first_pipeline_num_layers": "3", "decoder_last_pipeline_num_layers": "3"}),
        source="pp",
        hardware="h100-sxm",
    )
    assert (r.plan["first_stage_layers"], r.plan["last_stage_layers"]) == (3, 3)
    assert not any(a.startswith("pipeline split:") for a in r.assumed)
    plan = Plan(**runs_entries([r])[0]["plan"])
    assert (plan.first_stage_layers, plan.last_stage_layers) == (3, 3)
    layout = read_log(_dump_with({"pipeline_model_parallel_layout": "Et*6|(t*6|)*6t*6L"}), source="layout")
    assert any("pipeline_model_parallel_layout" in a for a in layout.assumed)
    assert "first_stage_layers" not in layout.plan
    assert not any(a.startswith("pipeline split:") for a in read_log(_dump_with({}), source="even").assumed)


def test_a_stray_byte_of_another_encoding_does_not_unmake_a_log(tmp_path):
    """One Latin-1 byte in a line no reader looks at refused the whole log as 'not UTF-8' (audit); it reads as
    U+FFFD, and the steps are read as from the clean log. A NUL byte still says the file is no text."""
    clean = (LOGS / "megatron_lm_gpt2_tp4_pp8.log").read_bytes()
    (tmp_path / "latin1.log").write_bytes(b"caf\xe9 setting up\n" + clean)
    rc, out, err = run_planner("ingest", str(tmp_path / "latin1.log"), "--json")
    assert rc == 0, err
    rc, base, err = run_planner("ingest", str(LOGS / "megatron_lm_gpt2_tp4_pp8.log"), "--json")
    assert json.loads(out)["runs"][0]["measured"] == json.loads(base)["runs"][0]["measured"]


def test_a_torchtitan_job_restarted_into_its_log_is_read_as_two_runs(tmp_path):
    """A start line after step lines is a restart (Megatron's was read from a second argument dump only): with the
    same batch and sequence length its steps are pooled, each run's warm-up left out; with another, the log
    contradicts itself."""
    text = (LOGS / "torchtitan_issue1232_pp_setup.log").read_text()
    once = read_log(text, source="once", engine="torchtitan")
    twice = read_log(text + text, source="twice", engine="torchtitan")
    assert sum(twice.steps_left_out.values()) == 2 * sum(once.steps_left_out.values())
    assert any("2 runs with the same arguments" in note for note in twice.assumed)
    other = text.replace("global batch size 2,", "global batch size 4,")
    with pytest.raises(PlannerError, match="contradicts itself: global batch 2, then 4"):
        read_log(text + other, source="requeued", engine="torchtitan")


@pytest.mark.parametrize(
    "argv",
    [("validate", ""), ("validate", " "), ("calibrate", ""), ("ingest", ""),
     ("ingest", str(DATA / "logs" / "megatron_lm_gpt2_tp4_pp8.log"), " ")],
)  # fmt: skip
def test_an_empty_file_argument_is_refused_by_name(argv):
    """An empty path is no file: said as such (it read as '.', the folder it ran in, or as ' : no such file')."""
    code, out, err = run_planner(*argv)
    assert code == 2 and "is empty; give a name or a path" in err and out == "" and "Traceback" not in err


def test_one_line_from_mid_run_is_a_steady_step():
    """Iteration 182 alone (no run start shown) is past the warm-up of iterations 1-3: it was taken as warm-up
    (its interval read as reaching back to iteration 0)."""
    line = (LOGS / "megatron_llm_issue11_iter182.log").read_text().splitlines()[0]
    r = read_log(line + "\n", source="one")
    assert r.steps_used == 1 and not r.steps_left_out.get("warm-up")
    assert not any("no logged line lies wholly past" in a for a in r.assumed)


@pytest.mark.parametrize("value", ["nan", "n/a"])
def test_a_field_that_prints_no_number_is_refused_naming_it(tmp_path, value):
    """Megatron-SWIFT's memory(GiB) (or any number field) printing nan or n/a gave a traceback, exit 1."""
    log = tmp_path / "swift.log"
    log.write_text(f"[2026-01-20 08:42:14] iteration       10/     206 | elapsed time per iteration (ms): 99158.9 | "
                   f"memory(GiB): {value} | global batch size: 16 |\n")  # fmt: skip
    code, out, err = run_planner("ingest", str(log))
    assert code == 2 and out == "" and f"prints {value!r} where a finite number belongs" in err, err
    assert str(log) in err and "Traceback" not in err
    assert "line 1, 'memory(GiB)': the log prints" in err, err  # the field and the line it is in (audit item 1)


# --- AMD Primus (Megatron backend) ------------------------------------------------------------------------------


def test_primus_prints_this_step_then_the_running_mean_and_the_devices_memory():
    """Primus writes "this step/running mean" pairs (primus/modules/trainer/megatron/trainer.py @077c0ff0): the line
    was refused ("'13100.0/13240.9' where a finite number belongs"). The first of each pair is the step's; the world
    size is its loguru prefix's "[rank-7/8]"; "hip mem usage" is the device's memory in use (total - free, GiB
    printed as "GB"), no allocator peak: kind null. Excerpt: a Go test's expected string, code-index id 17640160469
    (tests/data/logs/SOURCES.md)."""
    r = ingest("primus_hip_mem_mi325x.log")
    assert r.engine == "megatron" and (r.gpus, r.plan["global_batch"]) == (8, 128)
    assert r.measured["step_s"] == pytest.approx(13.1)
    assert (r.measured["tokens_per_s_per_gpu"], r.measured["tflops_per_gpu"]) == (10005.5, 579.4)
    assert r.measured["peak_memory_bytes"] == round(153.81 * GiB) and r.measured["peak_memory_kind"] is None
    assert any("not an allocator peak" in d for d in r.derived), r.derived
    wide = ingest("primus_64rank_line.log")  # code-index id 17985206094: rank 63 of 64
    assert wide.gpus == 64 and wide.measured["step_s"] == pytest.approx(16.6013)
    assert wide.measured["peak_memory_bytes"] == round(253.38 * GiB)


def test_primus_loguru_timestamps_are_read():
    """ "[20251202 06:56:28]" (Primus's loguru "{time:YYYYMMDD HH:mm:ss}", primus/core/utils/logger.py) was no date."""
    from datetime import datetime, timezone

    from planner.io.logs.log_values import timestamp_s

    line = (LOGS / "primus_hip_mem_mi325x.log").read_text()
    assert timestamp_s(line) == datetime(2025, 12, 2, 6, 56, 28, tzinfo=timezone.utc).timestamp()
    assert timestamp_s("iteration 20251202 | step 06:56:28") is None


def test_primus_2026_inst_and_average_fields():
    """Primus since 2026 prints "compute per GPU (TFLOP/s/GPU): X (avg Y)" and "tokens/s/GPU inst/harmonic mean: X/Y"
    (primus/backends/megatron/patches/training_log/print_rank_last_patches.py @fd1eeabb). The values are a published
    run's (a benchmark note quoting rank-7's iteration 260, code-index id 66592417592: "elapsed time per iteration
    (ms): 1269.6/1328.4 ... tokens/s/GPU inst/harmonic mean: 25809.7/24667.5"); the note elides the other fields, so
    the line is laid out as the patch writes it."""
    line = (
        "[20260301 10:00:00][rank-7/8][INFO ] iteration      260/     260 | consumed samples:        16640 | "
        "elapsed time per iteration (ms): 1269.6/1328.4 | compute per GPU (TFLOP/s/GPU): 496.3 (avg 496.1)  | "
        "tokens/s/GPU inst/harmonic mean: 25809.7/24667.5 | global batch size:    64 | lm loss: 1.048341E-02 |\n"
    )
    r = read_log(line, source="primus-2026")
    assert r.measured["step_s"] == pytest.approx(1.2696)
    assert (r.measured["tokens_per_s_per_gpu"], r.measured["tflops_per_gpu"]) == (25809.7, 496.3)


# --- Megatron-DeepSpeed's throughput fields ---------------------------------------------------------------------


def test_megatron_deepspeed_actual_seqlen_and_the_world_size_its_tgs_implies():
    """Megatron-DeepSpeed prints 'actual seqlen', 'samples per second' and 'tokens per gpu per second (tgs)' =
    samples/s x seqlen / world size (megatron/training.py training_log); seq_len and gpus were left null. Excerpt: a
    GPT-3 175B guide on 64 GPUs (code-index id 4683963255; tests/data/logs/SOURCES.md); 4.457 x 2048 / 142.612 =
    64.006, 64 GPUs as the guide says."""
    r = ingest("megads_gpt3_175b_64gpu_tgs.log")
    assert (r.plan["seq_len"], r.gpus, r.plan["global_batch"]) == (2048, 64, 1536)
    assert any(d.startswith("gpus = 64: samples per second x actual seqlen") for d in r.derived), r.derived
    alcf = ingest("megads_alcf_polaris_gpt7b.log")  # argonne-lcf ALCF/README.md: 53.753 x 4096 / 1146.733 = 192.0
    assert (alcf.plan["seq_len"], alcf.gpus) == (4096, 192)


def test_a_throughput_ratio_that_is_no_whole_gpu_count_is_not_read():
    """The same lines with tgs moved by 1% (64.6 GPUs): no GPU count, and it is said; a seqlen that changes between
    lines (a sequence-length curriculum) is no run's seq_len."""
    text = (LOGS / "megads_gpt3_175b_64gpu_tgs.log").read_text()
    off = read_log(re.sub(r"\(tgs\): (\d+\.\d+)", lambda m: f"(tgs): {float(m[1]) / 1.01:.3f}", text), source="off")
    assert off.gpus is None and off.plan["seq_len"] == 2048
    assert any(a.startswith("gpus: samples per second x actual seqlen") for a in off.assumed), off.assumed
    ramp = read_log(text.replace("actual seqlen:  2048", "actual seqlen:  1024", 2), source="ramp")
    assert ramp.plan["seq_len"] is None and ramp.gpus is None
    assert any("runs from 1024 to 2048" in a for a in ramp.assumed), ramp.assumed


def test_deepspeeds_timer_memory_in_a_megatron_deepspeed_log_is_the_peak():
    """DeepSpeed's ThroughputTimer line between Megatron-DeepSpeed's iteration lines prints MaxMemAllocated, torch's
    max_memory_allocated in GiB printed "GB" (deepspeed/utils/timer.py: / 1024**3): it was ignored. Excerpt:
    argonne-lcf/Megatron-DeepSpeed ALCF/README.md (code-index id 5833402453; tests/data/logs/SOURCES.md)."""
    r = ingest("megads_alcf_polaris_gpt7b.log")
    assert r.engine == "megatron-deepspeed"
    assert r.measured["peak_memory_bytes"] == round(19.52 * GiB)
    assert r.measured["peak_memory_kind"] == "max_allocated"


# --- the device a log names -------------------------------------------------------------------------------------


def test_torchtitans_device_line_names_the_hardware_profile():
    """torchtitan prints "CUDA capacity: NVIDIA H200 with 139.83GiB memory" (torchtitan/components/metrics.py
    build_device_memory_monitor): ingest said "hardware: not in the log". One catalog profile's GPU is NVIDIA H200 with
    that memory (h200, 139.79 GiB): it is taken, and its node and network said to be the profile's. Excerpt: a
    benchmark notes page, code-index id 19093018932 (tests/data/logs/SOURCES.md)."""
    r = ingest("torchtitan_h200_llama3_8b.log")
    assert r.hardware == "h200" and r.gpus == 8
    assert any(a.startswith("hardware: h200, the catalog profile of that GPU") for a in r.assumed), r.assumed
    # --hardware naming another GPU than the log's device is refused: the run would be priced, and calibrate would
    # fit it, as a GPU it never ran on (an H100's factors moved onto the A100 and an MFU above 100%, audit)
    with pytest.raises(PlannerError, match=r"--hardware h100-sxm is NVIDIA H100 80GB HBM3 .* not the log's device "
                       r"\(NVIDIA H200 with 139.83 GiB\): give the profile of that GPU \(h200\)"):  # fmt: skip
        ingest("torchtitan_h200_llama3_8b.log", hardware="h100-sxm")
    same = ingest("torchtitan_h200_llama3_8b.log", hardware="h200")
    assert same.hardware == "h200" and not any("not the log's device" in a for a in same.assumed)
    code, _, err = run_planner("calibrate", str(LOGS / "torchtitan_h200_llama3_8b.log"), "--hardware", "a100-80gb")
    assert code == 2 and "--hardware a100-80gb is NVIDIA A100" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("line", "hardware", "said"),
    [
        # torchtitan 2026 log quoted in a public notes file (code-index id 58082006748): the SXM5 board's name
        ("[titan] 2026-01-16 02:41:33,634 - root - INFO - CUDA capacity: NVIDIA H100 80GB HBM3 with 79.18GiB memory",
         "h100-sxm", "hardware: h100-sxm, the catalog profile"),
        # tests/data/logs/torchtitan_pr1625_setup_only.log: an H100 whose name no profile's GPU has
        ((LOGS / "torchtitan_pr1625_setup_only.log").read_text(), None,
         "NVIDIA H100 with 94.99 GiB, no catalog profile's GPU by that name (the memory of h100-hbm2e-500w)"),
        # two profiles share the B200 (b200 and its 700 W cap): ambiguous, --hardware asked for
        ("CUDA capacity: NVIDIA B200 with 178.35GiB memory", None, "the GPU of b200, b200-700w: give --hardware"),
        ("CUDA capacity: NVIDIA H200 with 94.99GiB memory", None, "not the memory of h200: give --hardware"),
    ],
)  # fmt: skip
def test_a_device_maps_to_a_profile_only_where_one_profile_is_it(line, hardware, said):
    from planner.io.logs.devices import device_in, log_hardware

    found, note = log_hardware(device_in(line))
    assert found == hardware and said in note, note


# --- an argument dump cut off before its end ---------------------------------------------------------------------


def test_an_argument_dump_cut_off_is_partial_and_the_world_size_line_states_the_degrees():
    """Megatron-LM issue #1000's log as stored: the world-size line, then a dump cut off after async_save (no 'end of
    arguments' line), followed here by issue #756's iteration lines (both real, tests/data/logs/SOURCES.md). The cut
    dump was read as complete: everything it does not show took Megatron's default (zero 0, recompute none, fp32, sp
    false, vpp/ep 1), and the world-size line's degrees were not read. Megatron prints the dump sorted
    (arguments.py _print_args): what sorts before async_save and is absent is the default, what sorts after is not
    known."""
    head = (LOGS / "megatron_lm_issue1000_cut_dump.log").read_text()
    r = read_log(head + (LOGS / "megatron_lm_issue756_mixtral.log").read_text(), source="cut")
    assert (r.gpus, r.plan["tp"], r.plan["pp"], r.plan["dp"], r.plan["cp"]) == (16, 8, 2, 1, 1)
    unknown = ("vpp", "ep", "sp", "zero", "recompute", "schedule")
    assert all(r.plan[k] is None for k in unknown), r.plan
    assert r.plan["precision"] == "fp32"  # its "using torch.float32 for parameters" line, before the dump
    assert "attention" not in r.software and r.model is None
    assert any(a.startswith("argument dump: cut off after async_save") for a in r.assumed), r.assumed
    with pytest.raises(PlannerError, match="a Megatron argument dump and no step line after it"):
        read_log(head, source="dump only")  # it was 'not a training log planner can read'
    whole = head + "-------------------- end of arguments ---------------------\n"  # the same, ended: defaults hold
    ended = read_log(whole + (LOGS / "megatron_lm_issue756_mixtral.log").read_text(), source="ended")
    assert (ended.plan["zero"], ended.plan["recompute"], ended.plan["precision"]) == (0, "none", "fp32")


def test_the_parameters_dtype_line_states_the_precision_where_no_dump_does():
    """Megatron prints 'using torch.float16 for parameters ...' before its dump (arguments.py l.1252: params_dtype
    is bf16 with --bf16, half with --fp16, else float); a log that keeps that line and no dump said nothing of its
    precision. An fp8 recipe runs on 16-bit parameters, so the note says the line cannot show one."""
    text = (LOGS / "megatron_lm_gpt2_tp4_pp8.log").read_text()
    assert "using torch.float16 for parameters" in text
    lines = [ln for ln in text.splitlines() if ln.startswith("using torch.") or ln.lstrip().startswith("iteration")]
    r = read_log("\n".join(lines) + "\n", source="no dump")
    assert r.plan["precision"] == "fp16"
    assert any("'using torch.float16 for parameters'" in a and "fp8" in a for a in r.assumed), r.assumed
    bf16 = read_log("\n".join(lines).replace("torch.float16", "torch.bfloat16") + "\n", source="bf16")
    assert bf16.plan["precision"] == "bf16"


# --- precision from the loss scale ------------------------------------------------------------------------------


def test_a_loss_scale_other_than_one_says_fp16():
    """Megatron prints 'loss scale: 1.0' for bf16 and fp32 (no grad scaler: megatron/core/optimizer/__init__.py
    get_megatron_optimizer builds a dynamic one for fp16 only); this guide's run (code-index id 66011901751,
    tests/data/logs/SOURCES.md) prints 8388608 falling to 131072 with skipped iterations, and its precision was left
    null. Megatron-DeepSpeed's GPT-3 lines print 4294967296 (the guide says fp16); Primus's bf16 line prints 1.0."""
    r = ingest("megatron_mdk_7b_fp16_skipped.log")
    assert r.plan["precision"] == "fp16"
    assert any(a.startswith("precision: fp16, from the iteration lines' loss scale (131072 to 8388608)")
               for a in r.assumed), r.assumed  # fmt: skip
    assert ingest("megads_gpt3_175b_64gpu_tgs.log").plan["precision"] == "fp16"
    assert ingest("primus_hip_mem_mi325x.log").plan["precision"] is None  # 1.0: bf16 or fp32, not said which
    # a dump that states the precision wins, and nothing is said of the loss scale (bigscience's fp16 dump)
    stated = ingest("megatron_lm_gpt2_tp4_pp8.log")
    assert stated.plan["precision"] == "fp16" and not any("loss scale" in a for a in stated.assumed)


def test_a_log_ending_on_a_bare_argument_header_is_read_without_a_traceback(tmp_path):
    """A dump cut right after its '---- arguments ----' header (a requeued job) held no argument, and finding the
    last one shown raised ValueError (max of nothing): a traceback from ingest."""
    text = (LOGS / "megatron_lm_gpt2_tp4_pp8.log").read_text()
    (tmp_path / "cut.log").write_text(text + "------------------------ arguments ------------------------\n")
    rc, _out, err = run_planner("ingest", str(tmp_path / "cut.log"), "--json")
    assert "Traceback" not in err and rc in (0, 2), err


def test_a_stated_split_given_by_plan_fills_what_the_log_leaves_unstated():
    """--plan's first_stage_layers / last_stage_layers fill a log that does not state them, as its etp does (they
    were dropped without a word)."""
    from planner.io.logs.given import fill_plan

    plan = {"pp": 8, "tp": None}
    notes = fill_plan(plan, {"first_stage_layers": 4, "last_stage_layers": 1, "etp": 2})
    assert (plan["first_stage_layers"], plan["last_stage_layers"], plan["etp"]) == (4, 1, 2)
    assert notes and "first_stage_layers" in notes[0]


def test_plan_gives_what_a_torchtitan_log_only_assumes_and_not_what_it_states():
    """torchtitan prints FSDP applied, not fsdp_reshard_after_forward: its zero 3 (2 with pipelining) is the default's
    choice, assumed; --plan's zero 2 was dropped as "the log says otherwise" and the run kept the assumed 3. --plan
    now gives it (the assumption's note gone); a zero 0 (no FSDP) the log's FSDP line contradicts is not used, nor an
    fp8 its missing Float8 line contradicts."""
    assumed = ingest("torchtitan_h200_llama3_8b.log")
    assert assumed.plan["zero"] == 3 and any(n.startswith("zero: 3") for n in assumed.assumed)
    given = ingest("torchtitan_h200_llama3_8b.log", given_plan={"zero": 2, "precision": "fp32"})
    assert (given.plan["zero"], given.plan["precision"]) == (2, "fp32")
    assert not any(n.startswith(("zero: ", "precision: ")) for n in given.assumed), given.assumed
    assert any("zero, precision from --plan" in n for n in given.assumed), given.assumed
    contradicted = ingest("torchtitan_h200_llama3_8b.log", given_plan={"zero": 0, "precision": "fp8"})
    assert (contradicted.plan["zero"], contradicted.plan["precision"]) == (3, "bf16")
    assert any("--plan's zero 0, precision fp8 not used" in n for n in contradicted.assumed), contradicted.assumed


def test_a_micro_batch_group_other_than_the_priced_one_is_said_not_modelled():
    """An interleaved run on pp 8 with 16 micro-batches: Megatron's default group (pp) is the planner's, and says
    nothing; a run setting --microbatch-group-size-per-virtual-pipeline-stage 16 warms up more chunks than priced,
    which the entry says rather than import the run approximately."""
    base = _dump_with({}).replace("virtual_pipeline_model_parallel_size ............ None",
                                  "virtual_pipeline_model_parallel_size ............ 2")  # fmt: skip
    base = base.replace("global_batch_size ............................... 4",
                        "global_batch_size ............................... 16")  # fmt: skip
    base = base.replace("global batch size:     4 |", "global batch size:    16 |")  # the step lines say it too
    for stated, said in (("8", False), ("16", True)):
        line = f"  microbatch_group_size_per_vp_stage {'.' * 14} {stated}\n"
        r = read_log(base.replace("  num_layers ....", line + "  num_layers ....", 1), source=f"group{stated}")
        assert (r.plan["vpp"], r.plan["global_batch"], r.plan["pp"]) == (2, 16, 8)
        notes = [a for a in r.assumed if a.startswith("micro-batch group:")]
        assert bool(notes) == said, r.assumed
    assert "microbatch_group_size_per_vp_stage 16, which is not modelled; the planner prices 8" in notes[0]


def test_a_pipeline_engine_log_leaves_pp_unstated_and_reads_megatrons_memory_report():
    """deepspeedai/Megatron-DeepSpeed issue #199: DeepSpeed PipelineEngine step lines ("steps: 2 loss: 12.6157 iter
    time (s): 2.673") beside Megatron's "(after 1 iterations) memory (MB) | ... max reserved: 14718.0" reports. It was
    read with pp asserted 1 ("DeepSpeed without Megatron has no model parallelism": the PipelineEngine is a pipeline
    of a degree the log does not print) and its memory dropped."""
    r = ingest("megatron_deepspeed_issue199_pipe.log")
    assert r.plan["pp"] is None and r.plan["tp"] is None and r.gpus is None  # Megatron's tp is not printed either
    assert (r.measured["peak_memory_bytes"], r.measured["peak_memory_kind"]) == (round(14718.0 * 2**20), "max_reserved")
    assert any(a.startswith("cp, ep: 1; tp and pp not stated") for a in r.assumed), r.assumed
    # the report after an iteration DeepSpeed counts as skipped ("step=1, skipped=1") is no peak, as in Megatron's
    text = (LOGS / "megatron_deepspeed_issue199_pipe.log").read_text().replace("step=1, skipped=0", "step=1, skipped=1")
    skipped = read_log(text, source="skipped", warmup=0)
    assert skipped.measured["peak_memory_bytes"] is None
    assert any(a.startswith("memory: the report after 1 iterations is left out") for a in skipped.assumed)


def test_logs_of_two_engines_joined_into_one_file_are_refused():
    """The first family's lines were read and the other's dropped without a word; with --engine one is read."""
    megatron = (LOGS / "megatron_lm_gpt2_tp4_pp8.log").read_text()
    titan = (LOGS / "torchtitan_h200_llama3_8b.log").read_text()
    for text in (megatron + titan, titan + megatron):
        with pytest.raises(PlannerError, match="holds the step lines of megatron and torchtitan"):
            read_log(text, source="joined")
    assert read_log(megatron + titan, source="joined", engine="torchtitan").engine == "torchtitan"


_GPT_OSS_WIDTHS = {
    "num_layers": "24", "hidden_size": "2880", "num_attention_heads": "64", "ffn_hidden_size": "2880",
    "padded_vocab_size": "201088", "seq_length": "4096",
}  # fmt: skip


@pytest.mark.parametrize(
    ("stated", "gate"),
    [
        # argument dump: --quick-geglu --glu-linear-offset 1.0 --activation-func-clamp-value 7.0 (GPT-OSS)
        ({"quick_geglu": "True", "glu_linear_offset": "1.0", "activation_func_clamp_value": "7.0"}, (1.0, 7.0)),
        # Megatron-Bridge configuration: a gated unit on quick_gelu, no offset or clamp
        ({"model.gated_linear_unit": "True", "model.activation_func._target_": "megatron.core.fusions.fused_bias_geglu."
          "quick_gelu"}, (0.0, None)),
    ],
)  # fmt: skip
def test_megatron_quick_geglu_is_read_as_a_gated_mlp_with_its_gate(stated, gate):
    """Megatron's --quick-geglu (argument_utils.py: gated_linear_unit with quick_gelu) was read as a plain GELU MLP,
    two matrices where it trains three: it is the spec's swiglu with GPT-OSS's gate, its offset and clamp."""
    from planner.io.logs.megatron_args import config_from_args

    read = config_from_args(_GPT_OSS_WIDTHS | stated, deepspeed={})
    model = ModelSpec(name="read", **read["model"])
    assert model.mlp == "swiglu" and model.mlp_matrices == 3
    assert model.gate is not None and (model.gate.linear_offset, model.gate.clamp) == gate


@pytest.mark.parametrize(
    ("stated", "share"), [({"rotary_percent": "0.5"}, 0.5), ({"rotary_percent": "1.0"}, 1.0), ({}, 1.0)]
)
def test_megatron_rotary_percent_is_read_into_the_spec(stated, share):
    """--rotary-percent (arguments.py l.2420, default 1.0) was read past: a GLM-4.5 run's log imported a model that
    rotates whole heads."""
    from planner.io.logs.megatron_args import config_from_args

    rope = {"position_embedding_type": "rope"}
    read = config_from_args(_GPT_OSS_WIDTHS | rope | stated, deepspeed={})
    assert ModelSpec(name="read", **read["model"]).rotary_percent == share


def test_a_gated_mlp_on_another_activation_is_refused_by_name():
    """A gated unit on GELU (GeGLU) is no spec's MLP: the model is not read, and the reason names it."""
    from planner.io.logs.megatron_args import config_from_args

    stated = {"model.gated_linear_unit": "True", "model.activation_func._target_": "torch.nn.functional.gelu"}
    read = config_from_args(_GPT_OSS_WIDTHS | stated, deepspeed={})
    assert read["model"] is None and read["model_unrepresented"] == [
        "a gated MLP on gelu (a spec's gated MLP is SiLU or quick-GELU)"
    ]


def test_a_gpu_count_the_model_parallel_degrees_do_not_divide_is_refused(tmp_path):
    """--gpus 7 for a tp 2 plan left dp null and said "the log does not state dp" (exit 0); calibrate then blamed the
    log (audit). It is one line naming the count and the degrees, exit 2, nothing written."""
    plan, out = tmp_path / "plan.yaml", tmp_path / "runs.yaml"
    plan.write_text("tp: 2\npp: 1\ncp: 1\n")
    log = str(LOGS / "megatron_llm_issue11_iter182.log")
    code, _, err = run_planner("ingest", log, "-m", "llama3-8b", "--hardware", "h100-sxm", "--gpus", "7", "--plan",
                               str(plan), "-o", str(out))  # fmt: skip
    assert code == 2 and "--gpus 7 is not a multiple of tp 2 x pp 1 x cp 1 = 2" in err and not out.exists(), err
    assert len(err.strip().splitlines()) == 1


def test_a_step_time_that_changes_level_part_way_is_read_from_the_later_level():
    """Megatron-LLM issue 11's iterations 122-125 take 86.5-89.5 s and 182-185 take 125.6-130.6 s: their median,
    107.5 s, was a time no iteration had (audit). The later level is used and the change said; a log of one level,
    the 182-185 excerpt, is read as before."""
    r = ingest("megatron_llm_issue11_two_levels.log")
    assert r.measured["step_s"] == pytest.approx(statistics.median([126.9953, 125.5537, 127.8045, 130.5549]))
    assert (r.iterations, r.steps_left_out) == ((182, 185), {"before a change in step time": 4})
    said = next(a for a in r.assumed if a.startswith("the step time changes part-way"))
    assert "iterations 122-125 run at 88.47 s a step, 182-185 at 127.4 s a step" in said
    one = ingest("megatron_llm_issue11_iter182.log")
    assert one.measured["step_s"] == r.measured["step_s"] and not one.steps_left_out


def test_a_restart_whose_numbers_go_back_is_a_run_of_its_own_not_a_rank():
    """Megatron-LLM issue 11's lines 182-185, then 182-183 again (a job restarted from a checkpoint into the same log,
    no argument dump between; the restart's first step slow): the repeated numbers were merged as two ranks' lines,
    the slow restart step taken as iteration 182's time, and said as "several lines per step" (audit). The restart is
    a run of its own, its warm-up left out."""
    text = (LOGS / "megatron_llm_issue11_iter182.log").read_text()
    lines = text.splitlines(keepends=True)
    again = [lines[0].replace("126995.3", "400000.0"), *lines[1:]]
    r = read_log(text + "".join(again), source="restarted", warmup=1)
    assert r.steps_left_out == {"warm-up": 1} and r.steps_used == 7
    times = [126.9953, 125.5537, 127.8045, 130.5549]
    assert r.measured["step_s"] == pytest.approx(statistics.median(times + times[1:]))
    assert any(a.startswith("the iteration numbers go back at line 5 (iteration 185, then 182)") for a in r.assumed)
    assert not any("several lines per step" in a for a in r.assumed), r.assumed


def test_the_same_iteration_printed_days_later_is_another_run_not_a_rank():
    """Megatron-LM pull request 3067's two iteration-100 lines, 11 days apart (3300.5 ms, then 2559.1 ms): ranks
    print a step's line within a step of each other, so these were no ranks, yet they were merged as two ranks'
    lines and the slower taken. A line repeating a number more than a step's time after it is another run's,
    however short the stretches; lines of one step printed together stay ranks."""
    text = (LOGS / "megatron_pr3067_two_runs_iter100.log").read_text()
    r = read_log(text, source="two runs")
    note = next(a for a in r.assumed if a.startswith("the iteration numbers go back"))
    assert "line 2 (iteration 100, then 100, printed 11.1 d after iteration 100's line)" in note, note
    assert not any("several lines per step" in a for a in r.assumed), r.assumed
    assert r.steps_left_out == {"warm-up": 1} and r.measured["step_s"] == pytest.approx(3.3005)
    first = text.splitlines(keepends=True)[0]
    together = first + first.replace("21:53:58.402418", "21:53:59.902418").replace("3300.5", "3301.0")
    ranks = read_log(together, source="ranks")  # 1.5 s apart: within the step of 3.3 s
    assert any("several lines per step" in a for a in ranks.assumed) and ranks.measured["step_s"] == 3.301


def _titan_line(step: int, second: float, tps: int) -> str:
    """A torchtitan metrics line as v0.2 prints it (components/metrics.py), without a rank prefix."""
    return (f"[titan] 2026-02-24 19:46:{second:06.3f} - root - INFO - step: {step:2d}  loss:  7.62585  memory: "
            f"66.91GiB(37.51%)  tps: {tps:,}  tflops: 314.71  mfu: 13.99%\n")  # fmt: skip


@pytest.mark.parametrize("layout", ["one line behind", "in blocks"])
def test_every_ranks_lines_without_a_prefix_are_no_restart(layout):
    """Two ranks printing without a rank prefix, one a line behind the other or its output buffered in a block: the
    numbers go back, and had been read as eleven restarts, every step then warm-up and the run left out of the fit
    (read-through). A go-back is a restart only between long stretches, each printed after the line before it."""
    rank = [[_titan_line(i, 2.0 * i, 86 if i == 1 else 10_000 - r) for i in range(1, 13)] for r in (0, 1)]
    if layout == "in blocks":
        text = "".join(rank[0] + rank[1])
    else:
        text = "".join(line for pair in zip(rank[0], [rank[0][0], *rank[1][:-1]], strict=True) for line in pair)
    r = read_log(text, source=layout, gpus=2)
    assert not any(a.startswith("the iteration numbers go back") for a in r.assumed), r.assumed
    assert "from_warmup" not in r.measured and r.steps_left_out == {"warm-up": 3} and r.steps_used == 9
    restarted = read_log("".join(rank[0]) + "".join(_titan_line(i, 40.0 + i, 9_000) for i in range(6, 13)),
                         source="restarted", gpus=1)  # fmt: skip
    assert any(a.startswith("the iteration numbers go back at line 13 (iteration 12, then 6)") for a in
               restarted.assumed), restarted.assumed  # fmt: skip


def test_runs_appended_at_another_speed_are_not_pooled():
    """A restart at another speed (one line per step, ranks alike): the runs' steady steps were pooled into a
    median neither run had. Where their medians are further apart than a steady run varies (LEVEL_RATIO), the last
    run's steps are used and the others' left out; runs that agree stay pooled."""
    first = [_titan_line(i, 2.0 * i, 86 if i == 1 else 10_000) for i in range(1, 13)]
    again = [_titan_line(i, 30.0 + 2.0 * i, 86 if i == 1 else 6_000) for i in range(1, 13)]
    r = read_log("".join(first + again), source="two speeds", gpus=1)
    assert r.measured["tokens_per_s_per_gpu"] == 6_000 and r.steps_left_out["an earlier run at another speed"] == 9
    note = next(a for a in r.assumed if a.startswith("the runs appended to the log step at"))
    assert "10,000 tokens/s per GPU, 6,000 tokens/s per GPU (medians)" in note, note
    same = [_titan_line(i, 30.0 + 2.0 * i, 86 if i == 1 else 9_800) for i in range(1, 13)]
    assert read_log("".join(first).replace("19:46:24", "19:46:64"), source="second 64", gpus=1).steps_used == 9
    pooled = read_log("".join(first + same), source="agree", gpus=1)
    assert pooled.steps_used == 18 and not any(a.startswith("the runs appended") for a in pooled.assumed)


def test_two_slow_steps_at_the_end_of_a_steady_log_are_no_new_level():
    """30 steps at about 1 s, then two at 1.25 and 1.30 s: the last two had replaced the run's step time (1.275 s,
    read-through); the later level must hold a quarter of the steps."""
    text = (LOGS / "megatron_llm_issue11_iter182.log").read_text().splitlines(keepends=True)[0]
    steady = [text.replace(" 182/", f" {i}/").replace("126995.3", f"{1000 + 10 * (i % 3):.1f}") for i in range(10, 40)]
    tail = [text.replace(" 182/", f" {i}/").replace("126995.3", ms) for i, ms in ((40, "1250.0"), (41, "1300.0"))]
    r = read_log("".join(steady + tail), source="tail", warmup=0)
    assert r.steps_used == 32 and not r.steps_left_out and r.measured["step_s"] == pytest.approx(1.01)


def _timed_lines(times: list[str]) -> str:
    text = (LOGS / "megatron_llm_issue11_iter182.log").read_text().splitlines(keepends=True)[0]
    return "".join(text.replace(" 182/", f" {10 * (i + 1)}/").replace("126995.3", ms) for i, ms in enumerate(times))


def test_one_slow_line_of_a_short_log_is_no_level():
    """Seven steps at about 1.62 s and one at 9 s (an unnamed save): a 2-line later level, a steady line and the slow
    one, read the run at their mean, 5.31 s, a time no iteration had (review). The later level must hold a majority
    of its steps near its median (level_shift._steady)."""
    times = ["1622.7", "1623.5", "1624.1", "1622.9", "1623.8", "1623.1", "1626.0", "9000.0"]
    r = read_log(_timed_lines(times), source="slow", warmup=0)
    assert not any(a.startswith("the step time changes part-way") for a in r.assumed), r.assumed
    assert r.measured["step_s"] == pytest.approx(1.6235, rel=2e-3)


def test_a_warm_up_longer_than_the_warmup_still_gives_way_to_the_steady_level():
    """A warm-up still speeding up past --warmup (10 s down to 2.2 s) is no steady level, and need not be: the later
    steps are the level used (the read-through found the first fix of the slow-line case asking both sides)."""
    times = ["10000.0", "6000.0", "4000.0", "3000.0", "2500.0", "2200.0", *["1600.0"] * 6]
    r = read_log(_timed_lines(times), source="warm", warmup=0)
    assert any(a.startswith("the step time changes part-way") for a in r.assumed), r.assumed
    assert r.measured["step_s"] == pytest.approx(1.6)


def test_a_log_redirected_as_utf_16_reads_as_its_utf_8_copy(tmp_path):
    """Windows PowerShell's `>` writes UTF-16 with a byte-order mark: it was refused as "not a text file (NUL
    bytes)" (audit). Read with its byte-order mark, it gives what the UTF-8 file gives."""
    text = (LOGS / "megatron_llm_issue11_iter182.log").read_text()
    wide = tmp_path / "wide.log"
    wide.write_bytes(text.replace("\n", "\r\n").encode("utf-16"))
    assert wide.read_bytes()[:2] == b"\xff\xfe"
    code, out, err = run_planner("ingest", str(wide), "--json")
    assert code == 0, err
    assert json.loads(out)["runs"][0]["measured"] == ingest("megatron_llm_issue11_iter182.log").measured


@pytest.mark.parametrize("command", ["ingest", "validate", "calibrate"])
def test_a_binary_or_empty_log_is_refused_alike_by_every_command_that_reads_logs(tmp_path, command):
    binary, empty = tmp_path / "b.log", tmp_path / "e.log"
    binary.write_bytes(b"\x00\x01\x02iteration")
    empty.write_text(" \n")
    for path, said in ((binary, "not a text file (it contains NUL bytes)"), (empty, "is empty; give a training log")):
        code, out, err = run_planner(command, str(path))
        assert (
            code == 2
            and out == ""
            and err.strip() == f"error: {path}: {said}" + ("; give a training log" if path == binary else "")
        ), err


def test_an_mfu_torchtitan_printed_against_another_gpus_peak_is_left_out():
    """On a Tesla T4 torchtitan has no peak and uses the A100's (tools/utils.py get_peak_flops): its mfu (0.16%) was
    kept as the run's (audit). It is left out and said; the throughput stands."""
    r = ingest("torchtitan_pr3393_t4_peak_fallback.log")
    assert r.measured["mfu"] is None and r.measured["tokens_per_s_per_gpu"]
    assert "mfu: torchtitan has no peak for Tesla T4 and printed its MFU against the A100's: left out" in r.assumed
