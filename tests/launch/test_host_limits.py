"""A launch that protects the machine (issue 22, item 3): the world, the predicted memory and the devices against
what this host has, checked before anything starts. Nothing here starts a process: the host is a fixed
Environment, and run_torchrun fails the test if it is ever reached."""

from __future__ import annotations

import json

import pytest
import yaml

from planner.io.catalog import load_engine, load_hardware, load_model
from planner.launch.machine import WORKER_RUNTIME_BYTES, Host, HostNeed
from planner.launch.preflight import Environment, Preflight, host_refusal, preflight
from planner.launch.pricing_here import hardware_check
from planner.plan import Plan
from planner.units import GiB
from tests.launch.conftest import launch_cli as _launch

CPU_BOX = Environment("cpu", 0, "x86_64", (), "2.13.0+cpu", Host(cores=2, available_bytes=23.4 * GiB))
GPU_BOX = Environment("cuda", 4, "NVIDIA H100", (70e9,) * 4, "2.13.0", Host(cores=32, available_bytes=400 * GiB))
WORKER = load_engine("planner")
# What `planner search --model llama3-70b --gpus 256 --engine torchtitan --save best.yaml` writes.
BEST = {
    "model": "llama3-70b",
    "hardware": "h100-sxm",
    "engine": "torchtitan",
    "gpus": 256,
    "plan": {
        "dp": 128, "tp": 2, "pp": 1, "vpp": 1, "cp": 1, "ep": 1, "sp": True, "zero": 3, "recompute": "selective",
        "micro_batch": 1, "global_batch": 512, "seq_len": 8192, "precision": "bf16", "schedule": "1f1b",
    },
}  # fmt: skip


@pytest.fixture
def best(tmp_path) -> str:
    path = tmp_path / "best.yaml"
    path.write_text(yaml.safe_dump(BEST))
    return str(path)


@pytest.fixture
def box(monkeypatch):
    """This machine is CPU_BOX, and no worker may start."""

    def refuse(*args, **kwargs):
        raise AssertionError("run_torchrun was reached: a refused plan started workers")

    monkeypatch.setattr("planner.cli.launch.probe_environment", lambda: CPU_BOX)
    monkeypatch.setattr("planner.cli.launch_here.run_torchrun", refuse)


def test_the_256_process_plan_is_refused_with_its_numbers(capsys, box, best, tmp_path):
    code, out, err = _launch(capsys, "--plan", best, "--profile-out", str(tmp_path / "p.json"))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    line = err.strip()
    for words in ("256 processes on 2 cores", "23.40 GiB available", "at most 4 processes", "TiB", "--rehearse"):
        assert words in line, line
    assert "--emit slurm|k8s|torchrun" in line and not (tmp_path / "p.json").exists()


def test_force_does_not_lift_the_host_limits(capsys, box, best):
    code, _, err = _launch(capsys, "--plan", best, "--force")
    assert code == 2 and "256 processes on 2 cores" in err


def test_the_dry_run_of_the_256_process_plan_fails_its_host_checks(capsys, box, best):
    code, out, _ = _launch(capsys, "--plan", best, "--dry-run")
    assert code == 1, out
    assert "[FAIL] processes: 256 on 2 cores: at most 4 here (2 per core)" in out
    assert "[FAIL] host memory: needs 256 x" in out and "TiB" in out
    code, out, _ = _launch(capsys, "--plan", best, "--dry-run", "--json")
    doc = json.loads(out)
    failed = {c["name"] for c in doc["checks"] if not c["ok"]}
    # priced on this machine's cpu profile (not the file's h100-sxm), 70B at 8k tokens would also run for days here
    assert code == 1 and doc["ok"] is False and failed == {"processes", "host memory", "run time"}
    assert all(c["host"] and not c["forceable"] for c in doc["checks"] if c["name"] in {"processes", "host memory"})


def test_cpu_memory_per_process_is_the_estimate_plus_the_measured_runtime(box):
    model, plan = load_model("llama3-70b"), Plan(**BEST["plan"])
    from planner.launch.host_memory import host_need

    need = host_need(model, plan, WORKER, CPU_BOX, nproc_per_node=256)
    # the optimizer step's copies: torch's single-tensor AdamW, two fp32 temporaries of the largest local
    # parameter (the 128,256 x 8,192 embedding, split over tp and, its state sharded, over dp)
    step = need.step_temporary_bytes
    assert step == 2 * 4 * 128_256 * 8192 / (plan.tp * plan.dp * plan.cp if plan.zero >= 1 else plan.tp)
    assert need.processes == 256
    assert need.bytes_per_process == need.tensor_bytes_per_process + step + WORKER_RUNTIME_BYTES
    assert need.tensor_bytes_per_process > 10 * GiB  # seq 8192, 70B sharded 256 ways: tens of GiB per rank
    assert host_need(model, plan, WORKER, GPU_BOX, nproc_per_node=4).tensor_bytes_per_process == 0  # on the GPUs


def _pf(env: Environment, plan: Plan, nproc: int, tensor_bytes: float = 1e6, peak: float = 1e9):
    need = HostNeed(nproc, tensor_bytes)
    pf = preflight(
        load_model("tiny"), plan, WORKER, env, nproc_per_node=nproc, nnodes=1, predicted_peak_bytes=peak,
        host_need=need,
    )  # fmt: skip
    return pf, need


def test_four_processes_run_on_two_cores_five_do_not():
    ok, _ = _pf(CPU_BOX, Plan(dp=4, global_batch=8, seq_len=64), 4)
    assert not ok.failures() and any(c.name == "processes" and c.ok for c in ok.checks)
    over, need = _pf(CPU_BOX, Plan(dp=5, global_batch=10, seq_len=64), 5)
    assert [c.name for c in over.failures(force=True)] == ["processes"]
    assert "5 processes on 2 cores" in (host_refusal(over, CPU_BOX, need) or "")


def test_host_memory_is_not_forceable():
    pf, need = _pf(CPU_BOX, Plan(dp=2, global_batch=8, seq_len=64), 2, tensor_bytes=20 * GiB)
    assert [c.name for c in pf.failures(force=True)] == ["host memory"]
    assert "the plan needs ~40.8" in (host_refusal(pf, CPU_BOX, need) or "")


def test_gpus_one_process_each_and_free_memory_forceable():
    pf, need = _pf(GPU_BOX, Plan(dp=8, global_batch=8, seq_len=64), 8, peak=75e9)
    assert {c.name for c in pf.failures()} == {"devices", "memory"}
    assert [c.name for c in pf.failures(force=True)] == ["devices"]  # --force lifts the free-memory check only
    assert "8 processes on 4 x NVIDIA H100" in (host_refusal(pf, GPU_BOX, need) or "")
    fits, need = _pf(GPU_BOX, Plan(dp=4, global_batch=8, seq_len=64), 4, peak=75e9)
    assert host_refusal(fits, GPU_BOX, need) is None and [c.name for c in fits.failures()] == ["memory"]


def test_no_host_no_host_checks():
    """--emit's targets are not this machine: their checks are the plan's and the profile's only."""
    pf, need = _pf(Environment("cpu", 0, "x86_64", (), "2.13.0+cpu"), Plan(dp=64, global_batch=64, seq_len=64), 64)
    assert not {"processes", "host memory"} & {c.name for c in pf.checks}
    assert host_refusal(pf, Environment("cpu", 0, "x86_64"), need) is None


def test_command_line_degrees_win_over_the_plan_file(capsys, box, best):
    """launch has no --gpus: `--model tiny --dp 2` over a 256-GPU plan file is a 4-process run (the file's tp 2)."""
    code, out, err = _launch(
        capsys, "--plan", best, "--model", "tiny", "--dp", "2", "--seq-len", "64", "--global-batch", "8",
        "--dry-run", "--json",
    )  # fmt: skip
    doc = json.loads(out)
    assert code == 0, err
    assert doc["mesh"] == {"pp": 1, "dp": 2, "cp": 1, "tp": 2} and "--nproc-per-node 4" in doc["command"]
    assert "--zero 3" in doc["command"] and "--recompute selective" in doc["command"]  # the rest is the file's
    code, out, err = _launch(capsys, "--plan", best, "--model", "tiny", "--dp", "2", "--dry-run")
    assert code == 1 and "--gpus" not in out + err and "seq_len=8192 exceeds max_seq_len=64 of tiny" in out
    code, out, _ = _launch(capsys, "--plan", best, "--tp", "1", "--dry-run", "--json")  # the file's dp 128
    assert code == 1 and json.loads(out)["mesh"]["dp"] == 128


def test_a_cpu_without_bf16_units_is_named_before_a_bf16_run(tmp_path) -> None:
    """/proc/cpuinfo's flags say whether bf16 GEMMs run natively; without AVX512_BF16 or AMX the dry run says they
    are emulated (measured ~15x slower than fp32 on an AVX2-only box) and that fp32 runs faster."""
    from planner.launch.machine import cpu_bf16_units

    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n")
    assert cpu_bf16_units(info) is False
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16\n")
    assert cpu_bf16_units(info) is True
    assert cpu_bf16_units(tmp_path / "absent") is None
    model, plan = load_model("tiny"), Plan(dp=2, micro_batch=1, global_batch=2)

    def noted(units: bool | None, p: Plan) -> bool:
        host = Host(cores=2, available_bytes=23.4 * GiB, bf16_units=units)
        env = Environment("cpu", 0, "x86_64", (), "2.13.0+cpu", host)
        return any("no bf16 units" in n for n in preflight(model, p, WORKER, env, nproc_per_node=2, nnodes=1).notes)

    assert noted(False, plan) and not noted(True, plan) and not noted(None, plan)
    assert not noted(False, plan.model_copy(update={"precision": "fp32"}))


def test_ranks_that_share_a_core_are_priced_sharing_it(capsys, tiny_path, monkeypatch):
    """The cpu profile prices each rank on a core of its own: 4 processes on the 2-core box measured 2.4x their
    prediction (the README's rehearsal). Where the processes outnumber the cores, the step is priced that many
    times longer, and said; on GPUs, or with a core each, nothing changes."""
    from planner.launch.runner import shared_cores

    assert shared_cores(CPU_BOX, 4) == 2.0 and shared_cores(CPU_BOX, 2) == 1.0 and shared_cores(GPU_BOX, 4) == 1.0
    assert shared_cores(CPU_BOX, 256) == 1.0  # refused by the processes check, not priced
    args = ("--model", tiny_path, "--dp", "2", "--tp", "2", "--sp", "--zero", "3", "--seq-len", "64", "--dry-run")
    steps = {}
    for cores in (2, 4):
        box = Environment("cpu", 0, "x86_64", (), "2.13.0+cpu", Host(cores=cores, available_bytes=23.4 * GiB))
        monkeypatch.setattr("planner.cli.launch.probe_environment", lambda box=box: box)
        code, out, err = _launch(capsys, *args, "--json")
        doc = json.loads(out)
        assert code == 0 and doc["ok"], err
        steps[cores] = doc["predicted"]["step_time_s"]
        shared = [n for n in doc["notes"] if "share" in n]
        assert shared == (["4 processes share 2 cores: the step is priced 2x the cpu profile's, which gives each rank "
                           "a core of its own"] if cores == 2 else []), err  # fmt: skip
    assert steps[2] == pytest.approx(2 * steps[4])


def test_a_plan_files_gpu_profile_does_not_price_cpu_processes(capsys, box, best):
    """Run here, a plan file's h100-sxm priced the CPU run as an H100 (+2,113% measured against predicted) and its
    profile named h100-sxm, so calibrate fitted a CPU step as the H100's: this machine's profile prices it, and a
    note says so; a GPU profile given by name fails the hardware check (forceable: a deliberate comparison)."""
    small = ("--model", "tiny", "--dp", "2", "--seq-len", "64", "--global-batch", "8", "--dry-run", "--json")
    code, out, err = _launch(capsys, "--plan", best, *small)
    doc = json.loads(out)
    assert code == 0, err
    assert {c["name"]: c["ok"] for c in doc["checks"]}["hardware"] and "--hardware cpu" in doc["command"]
    assert any("priced on cpu, its profile, not the plan file's h100-sxm" in n for n in doc["notes"])
    code, out, _ = _launch(capsys, *small, "--hardware", "h100-sxm")
    failed = [c for c in json.loads(out)["checks"] if not c["ok"]]
    assert code == 1 and [c["name"] for c in failed] == ["hardware"] and failed[0]["forceable"]
    assert "pass --hardware cpu" in failed[0]["detail"]
    code, _, err = _launch(capsys, *small, "--hardware", "h100-sxm", "--force")
    assert code == 0, err


def test_a_plan_files_profile_prices_a_gpu_the_name_table_does_not_know(tmp_path):
    """The plan file's mi355x priced a run on an MI355X until this machine's profile was named first, from a table
    that knows no MI355X: `launch --plan` refused it ('no hardware profile matches this GPU')."""
    from planner.io.planfile import read_plan_file
    from planner.launch.pricing_here import priced_on

    path = tmp_path / "mi.yaml"
    path.write_text(yaml.safe_dump({**BEST, "hardware": "mi355x"}))
    mi355x = Environment("cuda", 8, "AMD Instinct MI355X", (200e9,) * 8, "2.13.0")
    assert priced_on(None, read_plan_file(str(path)), mi355x, rehearse_=False) == ("mi355x", [])
    pf = Preflight()
    hardware_check(pf, mi355x, load_hardware("cpu"))  # named nowhere: the check says what to give, not a refusal
    assert not pf.checks[0].ok and "NAME|PATH of this GPU's profile" in pf.checks[0].detail


def test_a_profile_file_is_recorded_by_its_path_for_calibrate(capsys, box, tmp_path, monkeypatch):
    """A launch on a user's profile file recorded the profile's name (`mine`), which calibrate then looked up in the
    catalog ('unknown hardware "mine"'): the worker is told the file's absolute path, as it is told the model's."""
    doc = yaml.safe_load(_cpu_yaml())
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump({**doc, "name": "mine"}))
    monkeypatch.chdir(tmp_path)
    small = ("--model", "tiny", "--dp", "2", "--seq-len", "64", "--global-batch", "8", "--dry-run", "--json")
    code, out, err = _launch(capsys, *small, "--hardware", "mine.yaml")
    assert code == 0, err
    assert f"--hardware {tmp_path.resolve() / 'mine.yaml'}" in json.loads(out)["command"]
    code, out, err = _launch(capsys, *small, "--hardware", "cpu")
    assert code == 0 and "--hardware cpu " in json.loads(out)["command"], err


def _cpu_yaml() -> str:
    from planner.io.catalog import catalog_root

    return (catalog_root() / "hardware_profiles" / "cpu.yaml").read_text()
