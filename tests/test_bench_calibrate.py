"""bench-hardware writes a loadable profile; the fixed costs the CPU calibration fits, what it identifies and reads.

The bench-hardware test is marked slow. Calibrating `cpu` on launched plans and predicting held-out ones is a
timing measurement, so it is a benchmark: benchmarks/bench_calibrate_cpu.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import make_engine

from planner.cost.schedule import step_time
from planner.fit.calibrate import apply_params, fit, predict_step_s, step_stat
from planner.hardware import Efficiency
from planner.io.catalog import load_hardware, load_model
from planner.plan import Plan

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _planner() -> list[str]:
    exe = shutil.which("planner", path=str(Path(sys.executable).parent)) or shutil.which("planner")
    return [exe] if exe else [sys.executable, "-m", "planner"]


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_bench_hardware_quick_writes_a_loadable_profile(tmp_path: Path) -> None:
    out = tmp_path / "bench.yaml"
    t0 = time.perf_counter()
    r = subprocess.run(
        [*_planner(), "bench-hardware", "--quick", "--out", str(out), "--json"],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=360,
    )
    wall = time.perf_counter() - t0
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout)
    hw = load_hardware(out)
    assert hw.gpu.hbm_bandwidth_bytes_per_s > 0 and hw.gpu.hbm_bytes > 0
    assert all(v > 0 for v in hw.gpu.peak_flops.values())
    assert hw.intra_node.bandwidth_bytes_per_s > 0 and hw.intra_node.latency_s >= 0
    assert hw.inter_node == hw.intra_node  # one host
    ar = res["fits"]["all_reduce"]
    assert ar["bandwidth_bytes_per_s"] > 0 and ar["latency_s"] >= 0
    assert all(0 < p.efficiency <= 1 for p in hw.efficiency.matmul)
    text = out.read_text()
    assert "CPU FIGURES" in text and "measured by bench-hardware" in text
    # a CPU profile prices DTensor dispatch as measured here (it was left at 0: TP rehearsals priced 2-3x fast)
    dt = res["dtensor"]
    assert dt["ops"] > 100 and dt["dtensor_step_s"] > dt["plain_step_s"] > 0
    assert hw.efficiency.dtensor_op_overhead_s == pytest.approx(dt["op_s"], rel=1e-3) and dt["op_s"] > 0
    sac = res["sac"]  # and selective checkpointing's dispatch, unless this box's noise hid it (then said, and 0)
    assert sac["ops"] == 288 and hw.efficiency.sac_op_overhead_s == pytest.approx(sac["op_s"], rel=1e-3)
    print(
        f"\nbench-hardware --quick: {wall:.1f} s; peak fp32 {hw.peak('fp32') / 1e9:.1f} GFLOP/s, "
        f"bf16 {hw.peak('bf16') / 1e9:.1f} GFLOP/s; copy {hw.gpu.hbm_bandwidth_bytes_per_s / 1e9:.2f} GB/s; "
        f"all-reduce {ar['bandwidth_bytes_per_s'] / 1e9:.2f} GB/s, {ar['latency_s'] * 1e6:.0f} us/hop"
    )


def _profile_of(res: dict):
    """The profile bench-hardware writes from these measurements (one device: links copied from h100-sxm)."""
    import yaml

    from planner.bench.curves import profile_yaml
    from planner.hardware import HardwareProfile

    text = profile_yaml(res, "box", "2026-11-28 00:00 UTC", links=load_hardware("h100-sxm"))
    return HardwareProfile.model_validate(yaml.safe_load(text)), text


def test_bench_hardware_prices_dtensor_dispatch_on_a_cpu_only() -> None:
    """On a GPU the dispatch runs ahead of the kernels: bench-hardware times it only on a CPU, and says why not."""
    peak = dict.fromkeys(("fp32", "bf16", "fp16", "fp8"), 1e14)
    gpu = {
        "host": "box", "device": "cuda", "device_name": "GPU", "hbm_bytes": 8e10, "hbm_note": "torch.cuda",
        "memory": {"bytes_per_s": 3e12}, "peak_flops": peak, "matmul_fp8": [], "curve_precision": "bf16",
        "matmul_curve": [(1e9, 0.5), (1e12, 1.0)], "matmul_fp8_curve": [], "rss_bytes": 5e8,
        "checkpoint": {"bytes_per_s": 1e9},
    }  # fmt: skip
    hw, text = _profile_of(gpu)
    assert hw.efficiency.dtensor_op_overhead_s == 0.0 and "dispatch runs ahead of its kernels" in text
    timed = {"ops": 151, "plain_step_s": 2.5e-3, "dtensor_step_s": 8.7e-3, "op_s": 4.1e-5}
    hw, text = _profile_of({**gpu, "device": "cpu", "dtensor": {**timed, "why": None}})
    assert hw.efficiency.dtensor_op_overhead_s == 4.1e-5 and "151 DTensor ops" in text
    untimed = {"ops": 0, "plain_step_s": None, "dtensor_step_s": None, "op_s": 0.0, "why": "gloo could not start"}
    hw, text = _profile_of({**gpu, "device": "cpu", "dtensor": untimed})
    assert hw.efficiency.dtensor_op_overhead_s == 0.0 and "not timed: gloo could not start" in text
    # and selective checkpointing's dispatch likewise: timed on a CPU, said where it could not be
    sac = {"ops": 288, "plain_step_s": 25.5e-3, "sac_step_s": 34.3e-3, "op_s": 1.5e-5, "why": None}
    hw, text = _profile_of({**gpu, "device": "cpu", "dtensor": {**timed, "why": None}, "sac": sac})
    assert hw.efficiency.sac_op_overhead_s == 1.5e-5 and "288 ops" in text
    hw, text = _profile_of({**gpu, "device": "cpu", "dtensor": untimed, "sac": {**sac, "op_s": 0.0, "why": "noise"}})
    assert hw.efficiency.sac_op_overhead_s == 0.0 and "not timed: noise" in text
    assert _profile_of(gpu)[0].efficiency.sac_op_overhead_s == 0.0
    # a CPU's profile says so: priced as the cpu profile is (no GPU engine behaviour), emitted with no GPUs asked
    assert hw.runs_on_cpu and hw.gpu.architecture == "cpu" and not _profile_of(gpu)[0].runs_on_cpu


def test_dtensor_dispatch_left_untimed_where_gloo_cannot_start_keeps_the_bench() -> None:
    """A host where gloo finds no interface: the DTensor timing says why it is 0 instead of ending bench-hardware
    in a traceback (the GEMM and memory sweeps before it were thrown away)."""
    pytest.importorskip("torch")
    code = "import json; from planner.bench.dtensor import dtensor_op_s; print(json.dumps(dtensor_op_s()))"
    env = {**ENV, "GLOO_SOCKET_IFNAME": "no-such-interface0"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["op_s"] == 0.0 and out["why"].startswith("gloo could not start"), out


def _without_fixed_costs(hw):
    return hw.model_copy(
        update={
            "efficiency": apply_params(
                hw.efficiency, dict.fromkeys(("step_overhead_s", "kernel_overhead_s", "collective_overhead_s"), 0.0)
            )
        }
    )


def test_fixed_costs_add_per_kernel_and_per_call_and_default_to_no_change() -> None:
    model, tr = load_model("tiny"), make_engine()
    shipped = load_hardware("cpu")
    hw = _without_fixed_costs(shipped)
    # Defaults are zero: GPU profiles that never set them predict as before these terms existed.
    assert (
        Efficiency.model_fields["kernel_overhead_s"].default
        == 0.0
        == Efficiency.model_fields["collective_overhead_s"].default
    )
    assert load_hardware("h100-sxm").efficiency.kernel_overhead_s == 0.0
    plans = [
        Plan(micro_batch=2, global_batch=8),
        Plan(dp=2, zero=3, micro_batch=2, global_batch=4, recompute="full"),
        Plan(tp=2, micro_batch=2, global_batch=2),
        Plan(dp=2, micro_batch=2, global_batch=4),
    ]
    for p in plans:  # the shipped cpu profile's fitted fixed costs only ever add time
        assert step_time(model, shipped, p, tr).step_s > step_time(model, hw, p, tr).step_s
    k = hw.model_copy(update={"efficiency": apply_params(hw.efficiency, {"kernel_overhead_s": 1e-4})})
    c = hw.model_copy(update={"efficiency": apply_params(hw.efficiency, {"collective_overhead_s": 1e-3})})
    one = Plan(micro_batch=2, global_batch=2)
    four = Plan(micro_batch=2, global_batch=8)
    dk1 = step_time(model, k, one, tr).step_s - step_time(model, hw, one, tr).step_s
    dk4 = step_time(model, k, four, tr).step_s - step_time(model, hw, four, tr).step_s
    assert dk1 > 0 and dk4 == pytest.approx(4 * dk1)  # paid per kernel, every micro-batch
    full = Plan(micro_batch=2, global_batch=2, recompute="full")
    assert step_time(model, k, full, tr).step_s - step_time(model, hw, full, tr).step_s > dk1  # forward again
    assert step_time(model, c, one, tr).step_s == step_time(model, hw, one, tr).step_s  # no collectives
    ddp, fsdp = Plan(dp=2, micro_batch=2, global_batch=4), Plan(dp=2, zero=3, micro_batch=2, global_batch=4)
    tp = Plan(tp=2, micro_batch=2, global_batch=2)
    assert step_time(model, c, ddp, tr).step_s - step_time(model, hw, ddp, tr).step_s == pytest.approx(1e-3)
    layers = model.num_layers
    assert step_time(model, c, fsdp, tr).step_s - step_time(model, hw, fsdp, tr).step_s == pytest.approx(
        3 * (layers + 1) * 1e-3
    )  # gather, re-gather, reduce-scatter per FSDP unit
    assert step_time(model, c, tp, tr).step_s - step_time(model, hw, tp, tr).step_s == pytest.approx(
        4 * layers * 1e-3
    )  # 2 all-reduces forward, 2 backward per layer
    tp_sp = Plan(tp=2, sp=True, micro_batch=2, global_batch=2)
    assert step_time(model, c, tp_sp, tr).step_s - step_time(model, hw, tp_sp, tr).step_s == pytest.approx(
        8 * layers * 1e-3
    )  # SP: each all-reduce is a reduce-scatter and an all-gather, two calls


def test_dtensor_ops_pay_their_host_cost_where_the_engine_holds_dtensors() -> None:
    """A tensor-parallel worker on CPU measured 2.6x its prediction: each op on a DTensor pays DTensor's host
    dispatch (cost/dtensor_host.py; benchmarks/dtensor_ops.py counts and times them). Per micro-batch every TP
    linear (6 + 11 ops), the embedding (1 + 2); per step AdamW's 8 ops on each DTensor parameter: under FSDP2 all
    39 of tiny's, under TP its 30 sharded ones. Nothing where the engine's tensors are plain (Megatron) or at tp 1
    without FSDP, and nothing on a profile that sets no cost (GPUs)."""
    from planner.cost.compute import fitted_compute
    from planner.cost.dtensor_host import OPS_PER_EMBEDDING, OPS_PER_LINEAR, OPS_PER_TENSOR_STEP, OPS_RECOMPUTED

    model, worker, megatron = load_model("tiny"), make_engine("planner"), make_engine("megatron")
    hw = load_hardware("cpu")
    assert hw.efficiency.dtensor_op_overhead_s > 0 and load_hardware("h100-sxm").efficiency.dtensor_op_overhead_s == 0
    x = 1e-4
    on = hw.model_copy(update={"efficiency": apply_params(hw.efficiency, {"dtensor_op_overhead_s": x})})
    off = hw.model_copy(update={"efficiency": apply_params(hw.efficiency, {"dtensor_op_overhead_s": 0.0})})

    def extra(plan: Plan, engine=worker) -> float:
        return step_time(model, on, plan, engine).step_s - step_time(model, off, plan, engine).step_s

    f, linears = fitted_compute(hw, worker), model.num_layers * 7 + 1  # q, k, v, o, w1, w2, w3 per layer; output
    per_microbatch = f * x * (linears * sum(OPS_PER_LINEAR) + sum(OPS_PER_EMBEDDING))
    one, two = Plan(tp=2, micro_batch=2, global_batch=2), Plan(tp=2, micro_batch=2, global_batch=4)
    assert extra(two) - extra(one) == pytest.approx(per_microbatch)
    assert extra(one) == pytest.approx(per_microbatch + OPS_PER_TENSOR_STEP * (linears + 1) * x)
    assert extra(Plan(dp=2, zero=3, micro_batch=2, global_batch=4)) == pytest.approx(OPS_PER_TENSOR_STEP * 39 * x)
    assert extra(Plan(dp=2, micro_batch=2, global_batch=4)) == 0.0  # DDP: plain tensors
    assert extra(Plan(micro_batch=2, global_batch=2)) == 0.0
    assert extra(Plan(tp=2, sp=True, micro_batch=2, global_batch=2)) > extra(one)  # the norms too under SP
    assert extra(one, megatron) == 0.0
    # a recomputed forward dispatches its ops again, under op-level selective recompute too (measured: 252 more
    # on tiny, 264 under full); it had been priced for full recompute only, at the forward's count
    again = f * x * model.num_layers * 7 * OPS_RECOMPUTED[0]
    for rc in ("selective", "full"):
        assert extra(one.model_copy(update={"recompute": rc})) - extra(one) == pytest.approx(again), rc


def test_step_stat_reads_min_p25_median_of_the_timed_steps() -> None:
    times = [0.9, 0.5, 0.4, 0.2, 0.3, 0.6]  # the first is warm-up
    doc = {
        "median_step_s": 0.4,
        "step_times_s": [{"step": i + 1, "time_s": t, "warmup": i == 0} for i, t in enumerate(times)],
    }
    assert step_stat(doc) == 0.4 and step_stat(doc, "min") == 0.2
    assert step_stat(doc, "p25") == pytest.approx(0.3)
    with pytest.raises(Exception, match="unknown step statistic"):
        step_stat(doc, "mean")


# The four parameters the CPU calibration fits (benchmarks/bench_calibrate_cpu.py fits them on launched plans).
FIT_PARAMS = ("matmul_scale", "step_overhead_s", "kernel_overhead_s", "collective_overhead_s")


# ---- what calibrate can identify, and what it reads (issue 22 item 2) ---------------------------------------
SYNTHETIC = [  # the launched plans above, as plans (tiny: seq 64; micro-batches x dp x accumulation)
    Plan(micro_batch=1, global_batch=1, seq_len=64),
    Plan(micro_batch=2, global_batch=2, seq_len=32),
    Plan(micro_batch=8, global_batch=8, seq_len=64),
    Plan(micro_batch=2, global_batch=8, seq_len=64),
    Plan(micro_batch=4, global_batch=4, seq_len=64, recompute="full"),
    Plan(dp=2, micro_batch=1, global_batch=2, seq_len=64),
    Plan(dp=2, micro_batch=4, global_batch=8, seq_len=64),
    Plan(dp=2, zero=3, micro_batch=2, global_batch=4, seq_len=64),
    Plan(dp=2, zero=3, micro_batch=2, global_batch=4, seq_len=64, recompute="full"),
]


def test_the_cpu_fit_identifies_its_four_parameters_and_recovers_them() -> None:
    """Runs made by the cost model itself with the shipped cpu profile's fixed costs: fitted from none, calibrate
    chooses all four parameters the slow launched test fits (each pinned by a different group of plans) and
    recovers them."""
    import dataclasses

    from planner.fit.observations import Observation

    model, engine, shipped = load_model("tiny"), make_engine("planner"), load_hardware("cpu")
    obs = [
        Observation(
            f"p{i}",
            model,
            p,
            shipped,
            engine,
            predict_step_s(Observation(f"p{i}", model, p, shipped, engine, 1.0, "x"), shipped.efficiency),
            "x",
        )
        for i, p in enumerate(SYNTHETIC)
    ]
    base = _without_fixed_costs(shipped)
    res = fit([dataclasses.replace(o, hardware=base) for o in obs], base, names=FIT_PARAMS)
    assert {m.name.split()[-1] for m in res.moves} == set(FIT_PARAMS) and not res.unidentified
    for name in ("step_overhead_s", "kernel_overhead_s", "collective_overhead_s"):
        assert res.values[name] == pytest.approx(getattr(shipped.efficiency, name), rel=0.15), name
    assert res.median_after_pct < 1.0


def test_calibrate_reads_logs_and_launch_profiles_with_the_hardware_they_name(tmp_path: Path) -> None:
    from helpers import run_planner

    log = "tests/data/logs/megatron_lm_gpt2_tp4_pp8.log"  # Megatron-LM GPT-2 on V100s (tests/data/logs/SOURCES.md)
    code, out, err = run_planner("calibrate", log, "--hardware", "v100-32gb", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert [m["name"] for m in doc["moves"]] == ["compute of megatron on v100-32gb"]
    assert doc["unidentified"] == ["overhead_s of megatron on v100-32gb: 1 run can move at most 1 parameter"]
    assert abs(doc["runs"][0]["after_pct"]) < abs(doc["runs"][0]["before_pct"])
    code, _, err = run_planner("calibrate", log)
    assert code == 2 and "--hardware" in err and "Traceback" not in err
    profiles = _synthetic_profiles(tmp_path)
    code, out, err = run_planner("calibrate", *profiles, "--json")  # no --hardware: the profiles name theirs
    assert code == 0, err
    assert {m["name"] for m in json.loads(out)["moves"]} >= {"compute of planner on cpu"}


def test_a_group_fit_starting_on_its_bounds_recovers_compute_and_overhead() -> None:
    """An engine on a GPU it has no fitted entry for starts at compute 1 and 0 s of overhead, the overhead's
    lower bound. Fitted to runs the cost model made with compute 1.1 and 0.15 s per step, calibrate must recover
    both: started on the bound, the trust region stopped after a 1e-12 step and fitted nothing (the 14 H100
    launch profiles of benchmarks/results/h100-2026-11-25 stayed at 35.5% median error)."""
    from planner.engine import Fitted
    from planner.fit.observations import Observation

    model, hw = load_model("gpt3-1.3b"), load_hardware("h100-sxm")
    engine = make_engine("planner")
    truth = engine.model_copy(update={"fitted": {hw.name: Fitted(compute=1.1, overhead_s=0.15)}})
    plans = [Plan(micro_batch=m, global_batch=g, seq_len=2048) for m, g in ((1, 2), (2, 8), (4, 16), (2, 32))]
    obs = [
        Observation(f"p{i}", model, p, hw, engine, predict_step_s(Observation(f"p{i}", model, p, hw, truth, 1.0, "x"),
                    hw.efficiency), "x")
        for i, p in enumerate(plans)
    ]  # fmt: skip
    res = fit(obs, hw, names=("compute", "overhead_s"))
    (group,) = res.groups.values()
    assert group.fitted.compute == pytest.approx(1.1, rel=0.02)
    assert group.fitted.overhead_s == pytest.approx(0.15, rel=0.05)
    assert res.median_after_pct < 1.0 < res.median_before_pct


def test_bench_hardware_refuses_its_options_before_measuring(tmp_path: Path, monkeypatch) -> None:
    """The output and the process count are checked before minutes of measuring (the audit: a folder or an
    unwritable --out failed only at the end, and --nproc had no upper bound on a CPU host)."""
    import typer

    from planner.cli.bench import bench_hardware
    from planner.errors import PlannerError

    def measured(*_: object) -> None:
        raise AssertionError("measured before its options were checked")

    monkeypatch.setattr("planner.bench.run.run_bench", measured)
    (tmp_path / "folder.yaml").mkdir()
    (tmp_path / "file.yaml").write_text("")
    (tmp_path / "notes.yaml").write_text("my notes: keep them\n")
    for kwargs, said in (
        ({"out": tmp_path / "folder.yaml"}, "that is a folder"),
        ({"out": tmp_path / "file.yaml" / "x.yaml"}, "file.yaml is a file"),
        ({"out": tmp_path / "ok.yaml", "nproc": 100000}, "--nproc 100000: at most"),
        # a file of something else is never replaced (it was, without a word); the profile is YAML, never .json
        ({"out": tmp_path / "notes.yaml"}, "not a hardware profile this command wrote"),
        ({"out": tmp_path / "ok.json"}, "give a .yaml name"),
        # --like stands in for links no collective timed: with collectives timed it threw the measurements away
        ({"out": tmp_path / "ok.yaml", "like": "h100-sxm"}, "--like h100-sxm: the link tiers"),
    ):
        with pytest.raises((PlannerError, typer.Exit), match=said):
            bench_hardware(**{"nproc": 2, "quick": True, "like": None, "name": None, "json_": False, **kwargs})
    assert not (tmp_path / "ok.yaml").exists() and (tmp_path / "notes.yaml").read_text() == "my notes: keep them\n"


@pytest.mark.parametrize(
    ("change", "said"),
    [({"median_step_s": 10**400}, "not a `planner launch` profile"),  # too large for a float: it raised
     ({"plan": {"dp": 1, "micro_batch": 2**31, "global_batch": 8, "seq_len": 64}}, "its plan cannot run"),
     ({"ranks_per_core": 0.5}, "ranks_per_core 0.5 is not a number of at least 1"),
     # a CPU launch of a plan file's GPU profile: fitted, it replaced the H100's 14 runs with one CPU step
     ({"hardware": "h100-sxm", "device": "cpu"}, "ran on CPU processes, which the h100-sxm profile does not price"),
     ({"device": "NVIDIA H100 80GB HBM3"}, "ran on NVIDIA H100 80GB HBM3, which the cpu profile does not price")],
)  # fmt: skip
def test_a_launch_profile_that_cannot_be_read_is_refused_in_one_line(tmp_path, change, said):
    """A profile whose step time is no float, or whose plan breaks the rules a runs file's plan is held to (a
    micro-batch above the global batch gave no micro-batches and a division by zero), is refused by name."""
    from helpers import run_planner

    doc = {"model": "tiny", "plan": {"dp": 1, "micro_batch": 1, "global_batch": 8, "seq_len": 64},
           "median_step_s": 0.02, "hardware": "cpu", **change}  # fmt: skip
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    code, out, err = run_planner("calibrate", str(path), "--json")
    assert code == 2 and out == "" and said in err and "Traceback" not in err and str(path) in err


def test_a_launch_of_ranks_that_shared_cores_is_read_as_launch_priced_it():
    """launch prices 4 ranks on 2 cores at twice the profile's step (shared cores); calibrate and validate re-priced
    the same profile without it and saw the run 2x slow. The worker records ranks_per_core; the step is read as
    the one each rank would take with a core of its own, which is what the profile predicts."""
    from planner.fit.observations import observation_from_profile

    doc = {"model": "tiny", "plan": {"dp": 4, "micro_batch": 1, "global_batch": 4, "seq_len": 64},
           "median_step_s": 0.2, "hardware": "cpu"}  # fmt: skip
    hw = load_hardware("cpu")
    alone = observation_from_profile(doc, hw, "a.json")
    shared = observation_from_profile({**doc, "ranks_per_core": 2.0}, hw, "b.json")
    assert alone.measured_step_s == 0.2 and shared.measured_step_s == pytest.approx(0.1)


def test_calibrate_prints_the_paths_it_wrote_as_text(tmp_path):
    """A path is text, never markup: `-o '[/]x'` wrote its profile and then crashed printing the path (rich read
    '[/]' as a closing tag)."""
    from helpers import run_planner

    profiles = _synthetic_profiles(tmp_path)
    out_dir = tmp_path / "[b]" / "[/]x"
    code, out, err = run_planner("calibrate", *profiles, "-o", str(out_dir))
    assert code == 0 and "Traceback" not in err, err
    assert "[/]x" in " ".join(out.split()).replace(" ", "") and any(out_dir.iterdir())


def _synthetic_profiles(folder: Path) -> list[str]:
    """Three launch profiles of tiny on the cpu profile, SYNTHETIC's first plans, 20, 40 and 60 ms a step."""
    profiles = []
    for i, p in enumerate(SYNTHETIC[:3]):
        path = folder / f"p{i}.json"
        plan = {"dp": p.dp, "micro_batch": p.micro_batch, "global_batch": p.global_batch, "seq_len": p.seq_len}
        path.write_text(json.dumps({"model": "tiny", "plan": plan, "median_step_s": 0.02 * (i + 1), "hardware": "cpu"}))
        profiles.append(str(path))
    return profiles


def test_a_hardware_profile_that_makes_a_step_time_overflow_is_refused_by_name(tmp_path):
    """A latency of 1e308 s is a finite float the profile accepts, but the step times it prices overflow: calibrate
    names the run and the hardware in one line (the fit's least squares raised LinAlgError)."""
    import yaml
    from helpers import run_planner

    doc = yaml.safe_load((Path(__file__).resolve().parents[1] / "hardware_profiles" / "cpu.yaml").read_text())
    doc["intra_node"]["latency_s"] = 1e308
    hw = tmp_path / "slow.yaml"
    hw.write_text(yaml.safe_dump(doc))
    profiles = []
    for i, p in enumerate(SYNTHETIC[5:8]):  # dp 2: a step that communicates
        path = tmp_path / f"p{i}.json"
        plan = p.model_dump(include={"dp", "zero", "micro_batch", "global_batch", "seq_len"})
        path.write_text(json.dumps({"model": "tiny", "plan": plan, "median_step_s": 0.02 * (i + 1), "hardware": "cpu"}))
        profiles.append(str(path))
    code, out, err = run_planner("calibrate", *profiles, "--hardware", str(hw), "-o", str(tmp_path / "fit.yaml"),
                                 "--params", "compute,overhead_s")  # fmt: skip
    assert code == 2 and out == "" and "Traceback" not in err, err
    assert "not a finite number of seconds" in err and "cpu" in err and not (tmp_path / "fit.yaml").exists()


@pytest.mark.parametrize(
    ("name", "sp", "tensors"),
    [("gpt3-125m", False, 26), ("gpt3-125m", True, 36), ("tiny", False, 16), ("tiny", True, 21)],
)
def test_the_optimizer_steps_every_dtensor_parameter_the_worker_holds(name, sp, tensors):
    """The worker's model at 2 layers under apply_tp (launch/tensor_parallel.py) holds these many DTensor parameters
    (counted on a mesh of one: gpt3-125m's biases and LayerNorm biases are DTensors too; the position table is not).
    The optimizer's per-tensor host cost counted weights only: 14 of gpt3-125m's 26."""
    from planner.cost.compute import plan_stage_shapes
    from planner.cost.dtensor_host import OPS_PER_TENSOR_STEP, optimizer_s

    model = load_model(name).model_copy(update={"num_layers": 2})
    hw, engine = load_hardware("cpu"), make_engine("planner")
    plan = Plan(tp=2, sp=sp, micro_batch=1, global_batch=1, seq_len=64)
    shape = plan_stage_shapes(model, plan, engine)[0]
    host_s = optimizer_s(model, hw, plan, engine, mix=shape.mix, first=shape.first, last=shape.last)
    assert host_s / (OPS_PER_TENSOR_STEP * hw.efficiency.dtensor_op_overhead_s) == pytest.approx(tensors)


def test_calibrate_reads_back_a_launch_on_a_profile_file(tmp_path):
    """A launch profile names a user's hardware file by its path (what launch records): calibrate fits it there."""
    import yaml
    from helpers import run_planner

    doc = yaml.safe_load((Path(__file__).resolve().parents[1] / "hardware_profiles" / "cpu.yaml").read_text())
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump({**doc, "name": "mine"}))
    profiles = _synthetic_profiles(tmp_path)
    for p in profiles:
        Path(p).write_text(Path(p).read_text().replace('"hardware": "cpu"', f'"hardware": "{mine}"'))
    code, out, err = run_planner("calibrate", *profiles, "--json", "-o", str(tmp_path / "cal"))
    assert code == 0, err
    assert {m["name"] for m in json.loads(out)["moves"]} >= {"compute of planner on mine"}
    assert (tmp_path / "cal" / "mine.yaml").is_file()
