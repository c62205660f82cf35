"""Issue 21 item 7: what the tuned runs' optimisations remove. TP overlap hides what the GEMMs cover but for the
engine's fitted exposed share (cost/overlap.py tp_overlap_s); CUDA graphs remove the per-layer host time (cost/
behaviour.py host_layers); torchtitan's async-TP runs and their vanilla-TP twins (the same plan in the same file)
pin the share."""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

import pytest

from planner.cost.coster import Coster
from planner.cost.fitted_factors import host_overhead_s
from planner.cost.overlap import tp_overlap_s
from planner.engine import Engine, Parameter
from planner.fit.runs import Run, load_runs, parse_run
from planner.io.catalog import load_engine, load_hardware, load_model
from planner.plan import Plan

DATA = Path(__file__).parent / "data"
RUNS = (DATA / "calibration_runs.yaml", DATA / "runs_2024_2026.yaml")


def _share(engine: Engine, share: float) -> Engine:
    assert engine.behaviour is not None
    p = Parameter(value=share, bounds=(0.0, 1.0), mechanism="test", source="test")
    return engine.model_copy(update={"behaviour": engine.behaviour.model_copy(update={"tp_overlap_exposed": p})})


def test_tp_overlap_hides_what_the_gemms_cover_but_the_exposed_share():
    """By hand: 1.0 s of TP comm beside 0.6 s of GEMMs; a share of 0.4 hides 0.6 x 0.6 = 0.36 s, exposing 0.64 s.
    Share 0 is the ideal overlap max(0, tp - gemm); share 1 is no overlap."""
    tt = load_engine("torchtitan")
    assert tp_overlap_s(1.0, 0.6, _share(tt, 0.4)) == pytest.approx(0.64)
    assert tp_overlap_s(1.0, 0.6, _share(tt, 0.0)) == pytest.approx(0.4)
    assert tp_overlap_s(1.0, 0.6, _share(tt, 1.0)) == pytest.approx(1.0)
    assert tp_overlap_s(0.5, 2.0, _share(tt, 0.4)) == pytest.approx(0.2)  # all coverable: only the share shows


def test_an_exposed_share_of_one_is_no_overlap_and_the_step_is_linear_in_it():
    """Llama 3 70B, tp 8 over FSDP 4 on 32 H100s: with the whole share exposed the step is the step without TP
    overlap; half the share gives half the saving (the fit tabulates the step at 0 and 1 and relies on it)."""
    model, hw = load_model("llama3-70b"), load_hardware("h100-sxm")
    plan = Plan(tp=8, dp=4, sp=True, zero=3, recompute="full", micro_batch=2, global_batch=8, seq_len=8192)
    base = load_engine("torchtitan").configured(tp_overlap=True)
    off = Coster(model, hw, base.configured(tp_overlap=False)).step(plan)
    steps = {s: Coster(model, hw, _share(base, s)).step(plan) for s in (0.0, 0.5, 1.0)}
    assert steps[1.0].step_s == pytest.approx(off.step_s, rel=1e-9)
    assert steps[0.0].exposed_comm_s["tp"] < off.exposed_comm_s["tp"]
    assert steps[0.5].step_s == pytest.approx((steps[0.0].step_s + steps[1.0].step_s) / 2, rel=1e-9)


def test_cuda_graphs_remove_the_per_layer_host_time_and_keep_the_rest():
    """host = step + m x (micro-batch + layers x layer); captured layers replay with one launch: m x layers x layer
    goes, the per-step and per-micro-batch host time stays."""
    hw = load_hardware("h100-sxm")
    eng = load_engine("llm-foundry")  # fitted host time per layer > 0
    b = eng.behaviour
    assert b is not None and b.host_layer_s.value > 0
    plan = Plan(dp=8, zero=3, micro_batch=1, global_batch=32, seq_len=2048)  # 4 micro-batches
    eager = host_overhead_s(hw, eng, plan, layers=32)
    graphed = eng.model_copy(update={"kernels": eng.kernels.model_copy(update={"cuda_graphs": True})})
    graphs = host_overhead_s(hw, graphed, plan, layers=32)
    assert eager - graphs == pytest.approx(4 * 32 * b.host_layer_s.value)
    assert graphs >= b.host_step_s.value + 4 * b.host_microbatch_s.value - 1e-12


def _twins() -> list[tuple[Run, Run]]:
    """Runs of one publication (the source up to its first parenthesis: the same benchmark file) with the same
    model, plan, GPU and engine, one with TP overlap and one without."""
    groups: dict[str, dict[bool, Run]] = defaultdict(dict)
    for path in RUNS:
        for raw in load_runs(path):
            run = parse_run(raw)
            if isinstance(run, Run) and run.plan.tp > 1 and "tokens_per_s_per_gpu" in run.measured:
                what = (run.source.split(" (")[0], run.model.model_dump_json(), run.plan.model_dump_json())
                key = "|".join((*what, run.hardware.name, run.engine.name))
                assert run.engine.comm.tp_overlap not in groups[key], run.id  # one run per setting
                groups[key][run.engine.comm.tp_overlap] = run
    return [(g[False], g[True]) for g in groups.values() if len(g) == 2]


def _speedup(vanilla: Run, overlapped: Run) -> tuple[float, float]:
    def rate(r: Run) -> float:
        return Coster(r.model, r.hardware, r.engine).step(r.plan).tokens_per_s_per_gpu

    measured = overlapped.measured["tokens_per_s_per_gpu"] / vanilla.measured["tokens_per_s_per_gpu"]
    return rate(overlapped) / rate(vanilla), measured


def test_async_tp_speeds_up_its_vanilla_twin_as_measured():
    """torchtitan runs the same plan with and without async TP in one publication, five times (the 2025 async-TP
    benchmark's 8B and 70B rows, the Dec 2024 Table 4 70B rows, the 2024 405B float8 rows): measured speedups
    1.05-1.16. With the whole coverable TP comm hidden the model said 1.19-1.28 (1.00 for the 8B pair, whose TP
    overlap was not stated), |predicted - measured| median 0.12; with the fitted exposed share the median is 0.04
    and every pair within 0.10 (the 2024 pairs, on an older async TP, gain least)."""
    pairs = _twins()
    assert len(pairs) >= 5
    gaps = []
    for vanilla, overlapped in pairs:
        predicted, measured = _speedup(vanilla, overlapped)
        assert predicted > 1.0, overlapped.id
        assert predicted == pytest.approx(measured, abs=0.10), (overlapped.id, predicted, measured)
        gaps.append(abs(predicted - measured))
    assert statistics.median(gaps) <= 0.05


def test_shipped_profiles_name_and_bound_the_tp_overlap_exposed_share():
    for name in ("megatron", "torchtitan"):
        b = load_engine(name).behaviour
        assert b is not None and b.tp_overlap_exposed is not None, name
        p = b.tp_overlap_exposed
        assert p.bounds == (0.0, 1.0) and p.bounds[0] <= p.value <= p.bounds[1] and p.mechanism and p.source
    tt = load_engine("torchtitan").behaviour
    assert tt is not None and tt.tp_overlap_exposed is not None and 0.2 <= tt.tp_overlap_exposed.value <= 0.7
