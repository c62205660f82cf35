"""Pure pieces of the launcher: rank layout, worker/torchrun argv, pre-flight check (no processes)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from planner.cost.stages import layer_layout
from planner.io.catalog import load_engine
from planner.launch.command import RunConfig, plan_argv, torchrun_argv, worker_argv
from planner.launch.layout import coordinates, layout
from planner.launch.preflight import Environment, preflight
from planner.plan import Plan

CPU = Environment("cpu", 0, "x86_64", (), "2.13.0+cpu")
WORKER = load_engine("planner")


def test_coordinates_are_row_major_pp_dp_cp_tp():
    plan = Plan(pp=2, dp=2, tp=2, global_batch=8)
    assert [coordinates(r, plan) for r in (0, 1, 2, 5, 7)] == [
        (0, 0, 0, 0),
        (0, 0, 0, 1),
        (0, 1, 0, 0),
        (1, 0, 0, 1),
        (1, 1, 0, 1),
    ]


def test_interleaved_layout_places_stage_r_plus_k_pp_on_rank_r():
    plan = Plan(pp=2, vpp=2, global_batch=4, schedule="interleaved")
    ranks = layout(plan, 8)
    assert ranks[0].stages == (0, 2) and ranks[1].stages == (1, 3)
    assert ranks[0].layers == ((0, 1), (4, 5)) and ranks[1].layers == ((2, 3), (6, 7))
    assert "stage 2: layers 4-5" in ranks[0].describe()


@pytest.mark.parametrize("layers,pp,vpp", [(4, 2, 1), (7, 2, 2), (126, 16, 1), (5, 4, 1)])
def test_every_layer_on_exactly_one_stage(layers, pp, vpp):
    chunks = layer_layout(layers, pp, vpp).chunks
    assert len(chunks) == pp * vpp
    assert [i for c in chunks for i in c.layers] == list(range(layers))
    assert [c.embedding for c in chunks] == [True] + [False] * (len(chunks) - 1)
    assert [c.loss for c in chunks] == [False] * (len(chunks) - 1) + [True]


def test_plan_argv_round_trips_through_the_worker_parser():
    from planner.launch.worker import parse_args  # imports torch; the parser itself is pure argparse

    plan = Plan(
        dp=2,
        tp=2,
        pp=2,
        vpp=2,
        sp=True,
        zero=3,
        recompute="selective",
        micro_batch=2,
        global_batch=16,
        seq_len=64,
        precision="fp32",
        schedule="interleaved",
    )
    args = parse_args(["--model", "tiny", *plan_argv(plan)])
    assert Plan(**{k: getattr(args, k) for k in Plan.model_fields}) == plan
    assert parse_args(["--model", "tiny", *plan_argv(Plan(sp=False))]).sp is False


def test_single_node_uses_standalone_and_no_fixed_port():
    cfg = RunConfig(
        model="tiny", plan=Plan(dp=2, global_batch=2), checkpoint_dir="/ck", checkpoint_every=2, resume=True
    )
    argv = torchrun_argv(cfg, nproc_per_node=2, max_restarts=1)
    assert argv[:2] == ["torchrun", "--standalone"]
    assert "--master-port" not in argv and "--max-restarts" in argv
    assert argv[argv.index("-m") + 1] == "planner.launch.worker"
    assert {"--resume", "--checkpoint-dir", "--checkpoint-every"} <= set(worker_argv(cfg))


def test_multi_node_uses_c10d_rendezvous():
    cfg = RunConfig(model="tiny", plan=Plan(dp=4, global_batch=4))
    argv = torchrun_argv(cfg, nproc_per_node=2, nnodes=2, rdzv_endpoint="$MASTER_ADDR:29500")
    assert "--standalone" not in argv
    assert argv[argv.index("--rdzv-backend") + 1] == "c10d"


def test_preflight_passes_a_good_plan(tiny):
    pf = preflight(
        tiny, Plan(dp=2, tp=2, sp=True, zero=2, global_batch=4, seq_len=64), WORKER, CPU, nproc_per_node=4, nnodes=1
    )
    assert not pf.failures(), pf.lines()


def test_preflight_names_world_size_mismatch(tiny):
    pf = preflight(tiny, Plan(dp=2, tp=2, global_batch=4, seq_len=64), WORKER, CPU, nproc_per_node=2, nnodes=1)
    assert [c.name for c in pf.failures()] == ["world size", "divisibility and support"]
    assert "= 4" in pf.failures()[0].detail


def test_preflight_refuses_cp_on_cpu_with_a_clear_message(tiny):
    pf = preflight(tiny, Plan(cp=2, global_batch=2, seq_len=64), WORKER, CPU, nproc_per_node=2, nnodes=1)
    (fail,) = pf.failures()
    assert "cp=2" in fail.detail and "CPU" in fail.detail


def test_memory_refusal_shows_numbers_and_force_overrides(tiny):
    gpu = Environment("cuda", 2, "H100", (10 * 2**30, 8 * 2**30), "2.13.0")
    pf = preflight(
        tiny,
        Plan(dp=2, global_batch=2, seq_len=64),
        WORKER,
        gpu,
        nproc_per_node=2,
        nnodes=1,
        predicted_peak_bytes=9 * 2**30,
    )
    (fail,) = pf.failures()
    assert fail.name == "memory" and "9.00 GiB" in fail.detail and "8.00 GiB" in fail.detail
    assert pf.failures(force=True) == []


def test_preflight_checks_gpu_count_and_torch_version(tiny):
    old = Environment("cuda", 1, "A100", (80e9,), "2.4.1")
    pf = preflight(tiny, Plan(dp=2, global_batch=2, seq_len=64), WORKER, old, nproc_per_node=2, nnodes=1)
    names = {c.name for c in pf.failures()}
    assert names == {"devices", "torch"}
    assert "FSDP2" in next(c.detail for c in pf.checks if c.name == "torch")


def test_pure_modules_do_not_import_torch():
    import subprocess

    code = (
        "import sys, planner.cli, planner.launch.command, planner.launch.layout, planner.launch.emit, "
        "planner.launch.runner, planner.cli.launch; assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("args", [("--model", "nosuch"), ("--model", "tiny", "--engine", "nosuch"),
                                  ("--model", "tiny", "--hardware", "nosuch")])  # fmt: skip
def test_a_misspelt_name_is_refused_before_torch_is_imported(args):
    """`launch --model nosuch` took 2-5 s to say so: this machine was probed (importing torch) before the names the
    command line gives were looked up."""
    import subprocess

    code = (
        "import sys; from planner.cli import main\n"
        f"try:\n    main({['launch', *args]!r})\nexcept SystemExit as e:\n    assert e.code == 2, e.code\n"
        "assert 'torch' not in sys.modules"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "unknown" in done.stderr, done.stderr


def test_what_loading_a_model_says_is_said_once_by_launch(tmp_path):
    """launch looks the names up before probing the machine, then resolves them: a model's import warning was printed
    twice (the audit)."""
    from helpers import run_planner

    config = str(Path(__file__).parents[1] / "data" / "hf_configs" / "llama3.1_8b.json")
    code, _, err = run_planner("launch", "--model", config, "--emit", "torchrun", "--tp", "8", "--hardware", "h100-sxm",
                               "--out", str(tmp_path / "out"), "--dry-run")  # fmt: skip
    assert code == 0 and err.count("read past") == 1, err
