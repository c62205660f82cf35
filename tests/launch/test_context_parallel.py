"""Context parallelism (issue 4 item 8): refused on CPU with a clear reason, run on CUDA with ring attention.

CPU-only here: the mesh/layout, the pre-flight, the worker's CUDA-only decision, the dry run and the
worker's CP micro-step around the attention kernel (cp_probe.py, gloo) run everywhere. The real loss
parity of cp2 against the 1-process run needs CUDA and is skipped without one.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from planner.io.catalog import load_engine
from planner.launch.layout import coordinates, layout
from planner.launch.preflight import Environment, preflight
from planner.launch.worker_support import cp_problems, uses_context_parallel
from planner.plan import Plan
from tests.launch.conftest import COMMON, REPO, max_delta, run_probe, torchrun

CPU = Environment("cpu", 0, "x86_64", (), "2.13.0+cpu")
WORKER = load_engine("planner")
GPU4 = Environment("cuda", 4, "H100", (80e9,) * 4, "2.13.0")


def test_layout_puts_cp_between_dp_and_tp():
    plan = Plan(dp=2, cp=2, tp=2, global_batch=4, seq_len=64)
    assert [coordinates(r, plan) for r in range(8)] == [
        (0, 0, 0, 0),
        (0, 0, 0, 1),
        (0, 0, 1, 0),
        (0, 0, 1, 1),
        (0, 1, 0, 0),
        (0, 1, 0, 1),
        (0, 1, 1, 0),
        (0, 1, 1, 1),
    ]
    assert layout(plan, 4)[6].describe().startswith("rank 6: pp=0 dp=1 cp=1 tp=0")


_MESH_CHECK = """
import json, sys, torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore
from torch.distributed.device_mesh import init_device_mesh
from planner.launch.layout import MESH_DIMS, coordinates, mesh_shape
from planner.launch.parallelize import data_parallel_mesh
from planner.plan import Plan
plan = Plan(pp=2, dp=2, cp=2, tp=2, global_batch=4, seq_len=64)
out = []
for rank in range(plan.gpus):
    dist.init_process_group("fake", rank=rank, world_size=plan.gpus, store=FakeStore())
    mesh = init_device_mesh("cpu", mesh_shape(plan), mesh_dim_names=MESH_DIMS)
    out.append({"rank": rank, "mesh": list(mesh.get_coordinate()), "layout": list(coordinates(rank, plan)),
                "cp_group": mesh["cp"].mesh.tolist(), "dp_cp_group": data_parallel_mesh(mesh, cp=2).mesh.tolist()})
    dist.destroy_process_group()
print(json.dumps(out))
"""


def test_device_mesh_agrees_with_layout_and_dp_cp_flattens():
    """The worker's real DeviceMesh (fake backend, one process) gives layout.coordinates for every rank,
    and gradients average over the dp×cp ranks that share pp and tp coordinates."""
    proc = subprocess.run(
        [sys.executable, "-c", _MESH_CHECK], capture_output=True, text=True, timeout=120, cwd=REPO, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    for row in rows:
        assert row["mesh"] == row["layout"], row
    by_rank = {r["rank"]: r for r in rows}
    assert by_rank[0]["cp_group"] == [0, 2] and by_rank[0]["dp_cp_group"] == [0, 2, 4, 6]
    assert by_rank[13]["cp_group"] == [13, 15] and by_rank[13]["dp_cp_group"] == [9, 11, 13, 15]


def test_preflight_refuses_cp_on_cpu_naming_cp_device_and_cuda(tiny):
    pf = preflight(tiny, Plan(cp=2, global_batch=2, seq_len=64), WORKER, CPU, nproc_per_node=2, nnodes=1)
    (fail,) = pf.failures()
    assert "cp=2 needs CUDA, and this device is CPU" in fail.detail and "cp=1" in fail.detail


def test_preflight_allows_cp_on_cuda(tiny):
    pf = preflight(tiny, Plan(cp=2, dp=2, zero=2, global_batch=4, seq_len=64), WORKER, GPU4, nproc_per_node=4, nnodes=1)
    assert not pf.failures(), pf.lines()


@pytest.mark.parametrize(
    "plan,needle",
    [
        (Plan(cp=4, zero=2, seq_len=36), "seq_len=36 must be a multiple of 2 x cp = 8"),
        (Plan(cp=2, pp=2, zero=2, global_batch=2, seq_len=64), "cp=2 with pp=2"),
        (Plan(cp=2, tp=4, sp=True, zero=2, seq_len=52), "sp: tp=4 must divide seq_len/cp = 26"),
    ],
)
def test_preflight_cp_rules_on_cuda(tiny, plan, needle):
    pf = preflight(tiny, plan, WORKER, GPU4, nproc_per_node=plan.gpus, nnodes=1)
    assert any(needle in c.detail for c in pf.failures()), pf.lines()


def test_cp_problems_are_empty_without_cp():
    assert cp_problems(Plan(seq_len=3), "cpu") == [] and cp_problems(Plan(seq_len=3), "cuda") == []


def test_worker_selects_ring_attention_only_on_cuda():
    assert uses_context_parallel(1, "cpu") is False and uses_context_parallel(1, "cuda") is False
    assert uses_context_parallel(2, "cuda") is True
    with pytest.raises(ValueError, match="cp=2 needs CUDA, and this device is CPU"):
        uses_context_parallel(2, "cpu")


def test_cp_joins_the_fsdp_group():
    from planner.launch.parallelize import data_parallel_kind

    def kind(zero: int = 0, **kw: int) -> str:
        return data_parallel_kind(WORKER.rules.zero[zero], **{"dp": 1, **kw})

    assert kind() == "none" and kind(dp=2) == "ddp"
    assert kind(cp=2, zero=2) == "fsdp-noreshard" and kind(dp=2, cp=2, zero=1) == "fsdp-noreshard"
    assert kind(cp=2, zero=3) == "fsdp"


def _launch(capsys, monkeypatch, env, *argv):
    from planner.cli import main

    monkeypatch.setattr("planner.cli.launch.probe_environment", lambda: env)
    try:
        main(["launch", *argv])
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    return code, capsys.readouterr().out


def test_dry_run_shows_the_cp_axis_and_the_cpu_refusal(capsys, monkeypatch, tiny_path):
    code, out = _launch(
        capsys,
        monkeypatch,
        CPU,
        "--model",
        tiny_path,
        "--dp",
        "2",
        "--cp",
        "2",
        "--zero",
        "2",
        "--micro-batch",
        "2",
        "--seq-len",
        "64",
        "--dry-run",
    )
    assert code == 1  # a dry run that finds a failing check exits 1 (README, "Exit codes")
    assert "mesh: pp=1 x dp=2 x cp=2 x tp=1" in out
    assert "rank 1: pp=0 dp=0 cp=1 tp=0" in out and "rank 2: pp=0 dp=1 cp=0 tp=0" in out
    assert "[FAIL] divisibility and support: cp=2 needs CUDA, and this device is CPU" in out


def test_dry_run_on_cuda_passes_cp(capsys, monkeypatch, tiny_path):
    code, out = _launch(
        capsys,
        monkeypatch,
        GPU4,
        "--model",
        tiny_path,
        "--dp",
        "2",
        "--cp",
        "2",
        "--zero",
        "2",
        "--micro-batch",
        "2",
        "--seq-len",
        "64",
        "--precision",
        "fp32",
        "--dry-run",
        "--json",
    )
    doc = json.loads(out)
    assert code == 0 and doc["mesh"] == {"pp": 1, "dp": 2, "cp": 2, "tp": 1}
    assert "--cp 2" in doc["command"]
    assert all(c["ok"] for c in doc["checks"] if c["name"] != "memory"), doc["checks"]


def test_rope_uses_global_positions():
    """A cp rank's slice of q, rotated with its global positions, equals that slice of the full rotation."""
    import torch

    from planner.launch.model import rope

    q = torch.randn(2, 16, 4, 8)
    assert torch.equal(rope(q, positions=torch.arange(16).expand(2, 16)), rope(q))
    idx = torch.tensor([0, 1, 2, 3, 12, 13, 14, 15])  # head-tail chunks of rank 0 at cp=2
    torch.testing.assert_close(rope(q[:, idx], positions=idx.expand(2, -1)), rope(q)[:, idx], rtol=0, atol=1e-6)


@pytest.mark.parametrize("pos_emb", ["rope", "learned"])
def test_model_positions_default_to_arange(tiny, pos_emb):
    import torch

    from planner.launch.model import GPT

    torch.manual_seed(0)
    model = GPT(tiny.model_copy(update={"position_embedding": pos_emb}))
    x = torch.randint(0, tiny.vocab_size, (2, 16))
    assert torch.equal(model(x, positions=torch.arange(16).expand(2, 16)), model(x))


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_worker_cp_step_shards_sequence_and_averages_over_cp(tmp_path):
    """The worker's own CP micro-step on gloo, with an attention-free model (no CPU ring attention):
    head-tail load-balanced slices, matching tokens and positions, and cp-mean loss/grads = full ones."""
    run_probe("cp_probe.py", tmp_path)
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert r0["positions"][0] == [*range(0, 8), *range(24, 32)]  # chunks 0 and 3 of 4
    assert r1["positions"][0] == list(range(8, 24))  # chunks 1 and 2
    for r in (r0, r1):
        assert r["tokens_match"] and r["inputs_untouched"] and r["local_len"] == 16
        assert abs(r["loss_cp_mean"] - r["loss_full"]) < 1e-6 and r["grad_max_err"] < 1e-6


def _cuda_devices() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


CUDA_CP_LAYOUTS = {
    "cp2": (2, ["--cp", "2", "--zero", "2", "--micro-batch", "4"]),
    "cp2-sdpa-selective-ac": (2, ["--cp", "2", "--zero", "2", "--micro-batch", "4", "--recompute", "selective"]),
    "dp2xcp2-zero3": (4, ["--dp", "2", "--cp", "2", "--zero", "3", "--micro-batch", "2"]),
    "cp2xtp2-sp": (4, ["--cp", "2", "--tp", "2", "--sp", "--zero", "2", "--micro-batch", "4"]),
}


@pytest.mark.skipif(not _cuda_devices(), reason="context parallelism needs CUDA (no CPU ring-attention kernel)")
@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", list(CUDA_CP_LAYOUTS))
def test_cuda_context_parallel_loss_parity(name, tiny_path, reference, tmp_path):
    """Ring attention over cp ranks gives the 1-process run's per-step losses (fp32, CUDA/NCCL)."""
    nproc, flags = CUDA_CP_LAYOUTS[name]
    if _cuda_devices() < nproc:
        pytest.skip(f"needs {nproc} CUDA devices, {_cuda_devices()} visible")
    run = torchrun(
        nproc, ["--model", tiny_path, *COMMON, "--steps", "6", "--warmup", "1", *flags], tmp_path, timeout_s=240
    )
    assert run.rc == 0, run.output[-4000:]
    assert run.profile["context_parallel"] == "ring-allgather" and run.profile["backend"] == "nccl"
    delta = max_delta(run.losses(), reference)
    print(f"{name}: max |dloss| = {delta:.2e}")
    # Not measured yet (no GPU where this was written): CPU layouts agree to 9.5e-7; ring attention merges
    # per-chunk softmax statistics in fp32, so allow 10x the CPU tolerance.
    assert delta <= 1e-4, (run.losses(), reference)
