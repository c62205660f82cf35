"""`planner launch --rehearse`: the plan's parallel shape on this machine (rehearse.py, pure; the CLI dry run).

The rehearsal must keep which axes are parallel, the schedule, ZeRO, recompute and sp; shrink degrees, model and
batch until the world fits the host's process limit; and pass every check the worker's pre-flight makes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from planner.engine import plan_problems
from planner.errors import PlannerError
from planner.io.catalog import list_models, load_engine, load_model
from planner.launch.machine import Host
from planner.launch.preflight import Environment, worker_limits
from planner.launch.rehearse import rehearse
from planner.launch.worker_support import architecture_limits
from planner.plan import Plan
from tests.launch.conftest import launch_cli as _launch

WORKER = load_engine("planner")
CPU = Environment("cpu", 0, "x86_64", (), "2.13.0+cpu")
GPT3_PLAN = Plan(dp=32, tp=4, pp=8, vpp=4, sp=True, zero=1, global_batch=1536, seq_len=2048, schedule="interleaved")


def _runs_here(r, device_type: str = "cpu") -> list[str]:
    env = CPU if device_type == "cpu" else Environment("cuda", 8, "H100", (80e9,) * 8, "2.13.0")
    return [str(p) for p in plan_problems(r.model, r.plan, WORKER, r.plan.gpus)] + worker_limits(r.model, r.plan, env)


def test_gpt3_3d_plan_on_four_processes_drops_dp_and_keeps_the_rest():
    r = rehearse(load_model("gpt3-175b"), GPT3_PLAN, WORKER, device_type="cpu", max_processes=4)
    p = r.plan
    assert (p.dp, p.tp, p.pp, p.vpp, p.cp) == (1, 2, 2, 2, 1) and p.gpus == 4
    assert (p.schedule, p.sp, p.zero, p.recompute, p.precision) == ("interleaved", True, 1, "none", "bf16")
    assert r.lines()[0].startswith("rehearsal: dp 32 -> 1, tp 4 -> 2, pp 8 -> 2, vpp 4 -> 2")
    for change in ("layers 96 -> 8", "hidden 12288 -> 64", "heads 96 -> 4", "vocab 50257 -> 256", "seq len 2048 -> 64"):
        assert change in r.changes
    assert r.notes == ("dp 32 -> 1: 8 processes exceed the 4 this machine runs; zero=1 shards nothing without dp",)
    assert _runs_here(r) == []


def test_with_room_for_eight_every_axis_stays():
    r = rehearse(load_model("gpt3-175b"), GPT3_PLAN, WORKER, device_type="cpu", max_processes=8)
    assert (r.plan.dp, r.plan.tp, r.plan.pp, r.plan.vpp) == (2, 2, 2, 2) and not r.notes and _runs_here(r) == []


def test_gqa_stays_grouped_and_the_ffn_keeps_its_ratio():
    plan = Plan(dp=128, tp=2, sp=True, zero=3, recompute="selective", global_batch=512, seq_len=8192)
    r = rehearse(load_model("llama3-70b"), plan, WORKER, device_type="cpu", max_processes=4)
    m = r.model
    assert (m.num_attention_heads, m.kv_heads, m.hidden_size) == (4, 2, 64)
    assert m.ffn_hidden_size == 224  # 28672 / 8192 = 3.5 x 64, a multiple of 8 x tp
    assert (r.plan.dp, r.plan.tp, r.plan.zero, r.plan.recompute, r.plan.num_microbatches) == (2, 2, 3, "selective", 2)
    assert _runs_here(r) == []


def test_what_cannot_run_on_cpu_is_dropped_with_a_note():
    plan = Plan(dp=2, cp=4, tp=2, zero=3, precision="fp8", global_batch=8, seq_len=4096)
    r = rehearse(load_model("llama3-8b"), plan, WORKER, device_type="cpu", max_processes=8)
    assert (r.plan.cp, r.plan.precision) == (1, "bf16")
    assert any(n.startswith("cp 4 -> 1: context parallelism needs CUDA") for n in r.notes)
    assert any(n.startswith("precision fp8 -> bf16") for n in r.notes)
    on_gpu = rehearse(load_model("llama3-8b"), plan, WORKER, device_type="cuda", max_processes=8)
    assert on_gpu.plan.cp == 2 and _runs_here(on_gpu, "cuda") == []


def test_ddp_with_tensor_parallelism_drops_dp():
    """The worker's zero=0 is DDP, which cannot wrap tensor-parallel parameters."""
    plan = Plan(dp=8, tp=4, zero=0, global_batch=64, seq_len=2048)
    r = rehearse(load_model("llama3-8b"), plan, WORKER, device_type="cpu", max_processes=8)
    assert (r.plan.dp, r.plan.tp) == (1, 2) and "DDP" in r.notes[0] and _runs_here(r) == []


def test_experts_are_refused_by_name():
    with pytest.raises(PlannerError, match=r"mixtral-8x7b has 8 experts per MoE layer.*no expert layers"):
        rehearse(
            load_model("mixtral-8x7b"), Plan(dp=8, ep=8, global_batch=8), WORKER, device_type="cpu", max_processes=4
        )


def test_a_machine_too_small_for_any_axis_is_refused():
    with pytest.raises(PlannerError, match=r"at most 1 worker process.*tp=8"):
        rehearse(load_model("llama3-8b"), Plan(tp=8, global_batch=8), WORKER, device_type="cpu", max_processes=1)


DENSE = [m for m in list_models() if load_model(m).moe is None and not architecture_limits(load_model(m))]
SHAPES = [
    Plan(dp=64, zero=3, global_batch=256, seq_len=4096),
    Plan(dp=16, tp=8, sp=True, zero=1, recompute="full", global_batch=512),
    Plan(dp=4, tp=4, pp=8, vpp=2, zero=1, global_batch=1024, schedule="interleaved"),
    Plan(dp=8, pp=4, zero=2, micro_batch=2, global_batch=128, schedule="gpipe"),
]


@pytest.mark.parametrize("model", DENSE)
def test_every_dense_catalog_model_rehearses_every_shape(model):
    spec = load_model(model)
    for plan in SHAPES:
        plan = plan.model_copy(update={"seq_len": min(plan.seq_len, spec.max_seq_len)})
        r = rehearse(spec, plan, WORKER, device_type="cpu", max_processes=4)
        assert r.plan.gpus <= 4 and r.model.num_layers <= 8 and r.model.hidden_size <= 64
        kept = {a for a in ("tp", "pp") if getattr(plan, a) > 1}
        assert kept == {a for a in ("tp", "pp") if getattr(r.plan, a) > 1}, (plan, r.plan)
        assert (r.plan.zero, r.plan.recompute, r.plan.schedule) == (plan.zero, plan.recompute, plan.schedule)
        assert _runs_here(r) == [], (model, plan.summary())


def test_dry_run_of_a_rehearsal_prints_what_changed(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(
        "planner.cli.launch.probe_environment",
        lambda: Environment("cpu", 0, "x86_64", (), "2.13.0+cpu", Host(cores=2, available_bytes=20 * 2**30)),
    )
    saved = tmp_path / "g.yaml"
    plan = {**GPT3_PLAN.model_dump(), "precision": "bf16"}
    saved.write_text(yaml.safe_dump({"model": "gpt3-175b", "hardware": "a100-80gb", "gpus": 1024, "plan": plan}))
    code, out, err = _launch(capsys, "--plan", str(saved), "--rehearse", "--dry-run")
    assert code == 0, out + err
    assert out.startswith("rehearsal: dp 32 -> 1, tp 4 -> 2, pp 8 -> 2, vpp 4 -> 2")
    assert "rehearsal note: dp 32 -> 1" in out and "--hardware cpu --engine planner" in out
    assert "--nproc-per-node 4" in out and "[ok] processes: 4 on 2 cores" in out
    code, out, _ = _launch(capsys, "--plan", str(saved), "--rehearse", "--dry-run", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["ok"] and doc["rehearsal"]["model"]["num_layers"] == 8
    assert "tp 4 -> 2" in doc["rehearsal"]["changes"] and not (tmp_path / "planner-launch-profile.model.yaml").exists()


@pytest.mark.parametrize("extra", [["--emit", "torchrun", "--out", "o"], ["--layers", "2"]])
def test_rehearse_takes_no_shrinking_of_its_own(capsys, extra):
    code, _, err = _launch(capsys, "--model", "tiny", "--rehearse", *extra)
    assert code == 2 and "--rehearse" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_rehearsal_runs_here(tmp_path):
    """GPT-3 175B at tp 4 x pp 8 x vpp 4 (32 GPUs) rehearsed for real: 4 workers on any host of 2 cores or more."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("a 4-process rehearsal needs 2 cores")
    saved = tmp_path / "g.yaml"
    plan = {**GPT3_PLAN.model_dump(), "dp": 1, "global_batch": 64}
    saved.write_text(yaml.safe_dump({"model": "gpt3-175b", "hardware": "a100-80gb", "gpus": 32, "plan": plan}))
    profile = tmp_path / "p.json"
    argv = [sys.executable, "-m", "planner", "launch", "--plan", str(saved), "--rehearse", "--steps", "3",
            "--warmup", "1", "--profile-out", str(profile), "--json"]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rehearsal: tp 4 -> 2, pp 8 -> 2, vpp 4 -> 2, global batch 64 -> 4" in proc.stderr
    doc = json.loads(profile.read_text())
    assert doc["world_size"] == 4 and doc["model"]["name"] == "gpt3-175b-rehearsal" and doc["model"]["num_layers"] == 8
    assert (doc["plan"]["schedule"], doc["plan"]["vpp"], doc["plan"]["sp"]) == ("interleaved", 2, True)
    assert len(doc["losses"]) == 3 and (tmp_path / "p.model.yaml").exists()


@pytest.mark.parametrize("model", ["gemma3-27b", "nemotron-h-8b", "deepseek-v3", "gpt-oss-20b"])
def test_an_architecture_the_worker_cannot_build_is_refused_by_name(model):
    spec = load_model(model)
    with pytest.raises(PlannerError, match="the launch worker has no"):
        rehearse(
            spec, Plan(dp=8, global_batch=16, seq_len=1024), load_engine("planner"), device_type="cpu", max_processes=4
        )


def test_fewer_layers_keep_the_first_layers_patterns_and_moe_layers():
    """--layers N keeps the first N layers as the model has them: a hybrid pattern's first N letters, the attention
    pattern's windows layer by layer, the MoE layers among them; a model left with no MoE layer is refused by
    name with the count that keeps one (DeepSeek-V3's first three layers are dense)."""
    from planner.launch.spec import shrink

    nemotron = load_model("nemotron-h-8b")
    assert shrink(nemotron, layers=4, hidden=None).layer_pattern == nemotron.layer_pattern[:4]
    scout = shrink(load_model("llama4-scout"), layers=2, hidden=None)
    assert scout.attention.pattern == "CC" and scout.num_moe_layers == 2
    assert shrink(load_model("gpt-oss-20b"), layers=3, hidden=None).attention.pattern == "SGS"
    assert shrink(load_model("deepseek-v3"), layers=5, hidden=None).num_moe_layers == 2
    with pytest.raises(PlannerError, match=r"--layers 2 keeps none of deepseek-v3's MoE layers .*--layers 4 or more"):
        shrink(load_model("deepseek-v3"), layers=2, hidden=None)


@pytest.mark.parametrize("name", ["nemotron-h-8b", "gemma3-27b"])
def test_a_model_the_worker_cannot_rehearse_points_only_to_targets_that_write_it(name):
    """The refusal named --emit megatron|torchtitan, both of which refuse these models (audit): it names the engine
    targets whose engine has the model's layers and whose file can say it, each checked to accept it."""
    from planner.launch.emit import ENGINE_TARGETS, target
    from planner.launch.emit.checks import targets_writing

    model, plan = load_model(name), Plan(dp=2, global_batch=8, seq_len=1024)
    with pytest.raises(PlannerError, match="--rehearse") as said:
        rehearse(model, plan, load_engine("planner"), device_type="cpu", max_processes=4)
    named = str(said.value).split("--emit ")[1].rstrip(")").split("|")
    assert named == targets_writing([t for n in ENGINE_TARGETS if (t := target(n))], model, plan)
    for t in named:
        found = target(t)
        assert found is not None and not (found.format_problems and found.format_problems(model, plan))
    assert "megatron" not in named and "torchtitan" not in named
