"""The planner worker's own behaviour on GPUs, fitted to its launches on two GPUs lent to sessions
(benchmarks/results/h100-2026-11-25/launch: one H100 SXM; benchmarks/results/h200-2026-11-26/launch: one H200;
14 single-GPU plans each, measured median steps): it transfers from one GPU to the other, it applies on GPUs
only, and a fit on published runs does not erase it."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_planner as run

from planner.cost.coster import Coster
from planner.cost.fitted_factors import behaviour_on
from planner.fit.crossval import cross_validate
from planner.fit.observations import load_observations
from planner.fit.step_tables import build_tables
from planner.io.catalog import load_engine, load_hardware, load_model
from planner.plan import Plan

REPO = Path(__file__).resolve().parent.parent
LAUNCHES = {
    "h100-sxm": sorted(str(p) for p in (REPO / "benchmarks/results/h100-2026-11-25/launch").glob("*.json")),
    "h200": sorted(str(p) for p in (REPO / "benchmarks/results/h200-2026-11-26/launch").glob("*.json")),
}


@pytest.fixture(scope="module")
def tables():
    return build_tables(load_observations(LAUNCHES["h100-sxm"] + LAUNCHES["h200"], None))


def test_the_worker_behaviour_fitted_on_one_gpu_predicts_the_other(tables):
    """Leave-one-GPU-out on the worker's own launches: fitted on the H100's 14, the H200's are predicted within
    5.5% median (9.4% the other way round), where the GPUs' physics alone was 47% and 55% off
    (benchmarks/launch_transfer.py). The issue's target for a held-out GPU is a median within 15%."""
    folds = {f.fold: f for f in cross_validate(tables, "gpu")}
    assert set(folds) == {"h100-sxm", "h200"}
    for gpu, fold in folds.items():
        assert fold.runs == 14, gpu
        assert fold.median_abs_pct <= 15.0, (gpu, fold.median_abs_pct)


def test_the_shipped_worker_profile_is_fitted_on_those_launches_and_predicts_them(tables):
    b = load_engine("planner").behaviour
    assert b is not None and b.runs == 28 and set(b.domain.gpus) == {"h100-sxm", "h200"}
    # the eager worker's host time per layer of a micro-batch, exposed: under the 3.6 ms a llama3-8b layer's
    # forward and backward take to launch when the GPU waits on nothing else (benchmarks/results/
    # h200-2026-11-26/graphs.json, 1 x 128 tokens, eager minus CUDA-graphed)
    assert 0.0 < b.host_layer_s.value < 3.6e-3
    errors = []
    for o in tables.obs:
        step = Coster(o.model, o.hardware, load_engine("planner")).estimate(o.plan).time.step_s
        errors.append(abs(o.measured_step_s / step - 1))
    errors.sort()
    assert errors[len(errors) // 2] < 0.10  # in-sample median 6% (35% and 32% with no behaviour)


def test_engine_behaviour_applies_on_gpus_and_not_on_a_cpu():
    """The behaviour is fitted to GPU runs, whose host time is what the GPU waits on; on a CPU the cpu profile's
    own fitted dispatch and step costs are the host's, so the worker's CPU predictions stay what they were."""
    engine, bare = load_engine("planner"), load_engine("planner").model_copy(update={"behaviour": None, "fitted": {}})
    model, plan = load_model("gpt3-125m"), Plan(micro_batch=2, global_batch=4, seq_len=256)
    cpu, gpu = load_hardware("cpu"), load_hardware("h200")
    assert behaviour_on(cpu, engine) is None and behaviour_on(gpu, engine) is engine.behaviour
    step = {
        (hw.name, e is bare): Coster(model, hw, e).estimate(plan).time.step_s
        for hw in (cpu, gpu)
        for e in (engine, bare)
    }
    assert step[("cpu", False)] == step[("cpu", True)]
    assert step[("h200", False)] > 1.5 * step[("h200", True)]  # host time per layer and step: a small model waits


def test_calibrate_behaviour_on_one_gpu_says_what_it_cannot_cross_validate(tmp_path):
    code, out, err = run("calibrate", *LAUNCHES["h200"], "--behaviour", "--engine-out", str(tmp_path))
    assert code == 0, err
    assert "not cross-validated by gpu, engine, family, year: the runs have one of each" in " ".join(out.split())
    assert load_engine(str(tmp_path / "planner.yaml")).behaviour.runs == 14


def test_a_fit_on_published_runs_keeps_the_worker_behaviour_fitted_on_its_launches(tmp_path):
    code, _, err = run("calibrate", str(REPO / "tests/data/runs_2024_2026.yaml"), "--behaviour", "--engine-out",
                       str(tmp_path))  # fmt: skip
    assert code == 0, err
    refit, shipped = load_engine(str(tmp_path / "planner.yaml")), load_engine("planner")
    assert refit.behaviour == shipped.behaviour and refit.fitted == shipped.fitted
    assert load_engine(str(tmp_path / "deepspeed.yaml")).behaviour.runs == 0  # no runs anywhere: the engines' mean


def test_the_worker_fp8_steps_are_priced_with_the_host_time_of_their_casts():
    """The worker's five fp8 launches on one H200 (benchmarks/results/h200-2026-11-26-casts/launch-fp8-static,
    casts compiled per shape). Each linear makes five cast calls a micro-batch, 98.5 us of host each
    (cast-variants.txt, engine kernels.cast_host_s): with them the five steps are within 20% of the prediction, 7.2%
    at the median; without, GPT-3 1.3B's 2048-wide linears were predicted 33% short (measured +48.7%). The bf16
    launches beside them make no such calls."""
    from planner.io.readers import load_json
    from planner.specs import ModelSpec

    folder = REPO / "benchmarks/results/h200-2026-11-26-casts/launch-fp8-static"
    engine, hw = load_engine("planner"), load_hardware("h200")
    without = engine.model_copy(update={"kernels": engine.kernels.model_copy(update={"cast_host_s": 0.0})})
    errors, errors_without = {}, {}
    for path in sorted(folder.glob("*.json")):
        profile = load_json(path)
        model, plan = ModelSpec(**profile["model"]), Plan(**profile["plan"])
        with_s = Coster(model, hw, engine).estimate(plan).time.step_s
        without_s = Coster(model, hw, without).estimate(plan).time.step_s
        if plan.precision == "bf16":
            assert with_s == without_s, path.name
            continue
        errors[path.stem] = profile["median_step_s"] / with_s - 1
        errors_without[path.stem] = profile["median_step_s"] / without_s - 1
    assert len(errors) == 5
    assert max(map(abs, errors.values())) < 0.20 and sorted(map(abs, errors.values()))[2] < 0.10, errors
    assert errors_without["g13-mb4-fp8"] > 0.40  # the narrow model the calls were exposed on
