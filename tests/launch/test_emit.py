"""Cluster launch files and engine exports: content, shell syntax, YAML/TOML/JSON, every plan field mapped."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import tomllib
import yaml

from planner.launch.command import RunConfig
from planner.launch.emit import write_target
from planner.launch.emit.deepspeed import deepspeed_config
from planner.launch.emit.k8s import k8s_manifest
from planner.launch.emit.megatron import megatron_args
from planner.launch.emit.slurm import slurm_script
from planner.launch.emit.torchrun import torchrun_script
from planner.launch.emit.torchtitan import torchtitan_toml
from planner.plan import Plan
from planner.specs import ModelSpec

PLAN = Plan(
    dp=2,
    tp=2,
    pp=2,
    vpp=2,
    sp=True,
    zero=1,
    recompute="selective",
    micro_batch=2,
    global_batch=32,
    seq_len=2048,
    precision="bf16",
    schedule="interleaved",
)
GQA = ModelSpec(
    name="m",
    num_layers=8,
    hidden_size=512,
    num_attention_heads=8,
    num_kv_heads=2,
    ffn_hidden_size=1024,
    mlp="swiglu",
    vocab_size=32000,
    max_seq_len=4096,
    tied_embeddings=False,
    position_embedding="rope",
    norm="rmsnorm",
)
CFG = RunConfig(model="m", plan=PLAN, steps=20, checkpoint_dir="/ckpt", checkpoint_every=10)


def test_slurm_script_has_nodes_gpus_env_and_worker_args(tmp_path):
    text = slurm_script(CFG, nnodes=2, nproc_per_node=4, max_restarts=2)
    for needle in (
        "#SBATCH --nodes=2",
        "#SBATCH --gpus-per-node=4",
        "#SBATCH --ntasks-per-node=1",
        "export TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1",
        "export OMP_NUM_THREADS=1",
        "srun ",
        "--rdzv-backend c10d",
        "--max-restarts 2",
        "-m planner.launch.worker",
        "--tp 2",
        "--vpp 2",
        "--schedule interleaved",
        "--checkpoint-dir /ckpt",
        '"plan (all fields)"'.strip('"'),
    ):
        assert needle in text, needle
    path = write_target("slurm", CFG, GQA, tmp_path, nnodes=2, per_node=4)
    subprocess.run(["bash", "-n", str(path)], check=True)


def test_torchrun_script_is_valid_bash_with_c10d():
    text = torchrun_script(CFG, nnodes=3, nproc_per_node=8)
    assert "--nnodes 3" in text and "--nproc-per-node 8" in text and '"$MASTER_ADDR:29500"' in text
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)


def test_k8s_manifest_parses_and_carries_the_plan(tmp_path):
    path = write_target("k8s", CFG, GQA, tmp_path, nnodes=3, per_node=8, image="registry.example/planner:1")
    doc = yaml.safe_load(path.read_text())
    assert doc["kind"] == "PyTorchJob" and doc["apiVersion"] == "kubeflow.org/v1"
    specs = doc["spec"]["pytorchReplicaSpecs"]
    assert specs["Master"]["replicas"] == 1 and specs["Worker"]["replicas"] == 2
    container = specs["Worker"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert container["command"][:2] == ["torchrun", "--nnodes"] and "planner.launch.worker" in container["command"]
    assert json.loads(doc["metadata"]["annotations"]["planner/plan"]) == PLAN.model_dump()
    assert {"name": "TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "value": "1"} in container["env"]
    assert container["image"] == "registry.example/planner:1"
    one = k8s_manifest(CFG, nnodes=1, nproc_per_node=8, image="x")
    assert "Worker" not in one["spec"]["pytorchReplicaSpecs"]


def _flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_megatron_maps_every_plan_field():
    args, mapping = megatron_args(GQA, PLAN)
    assert set(mapping) == set(Plan.model_fields)
    assert _flag(args, "--tensor-model-parallel-size") == "2" and _flag(args, "--pipeline-model-parallel-size") == "2"
    assert _flag(args, "--num-layers-per-virtual-pipeline-stage") == "2"  # 8 layers / (pp 2 * vpp 2)
    assert _flag(args, "--context-parallel-size") == "1" and _flag(args, "--expert-model-parallel-size") == "1"
    assert "--sequence-parallel" in args and "--use-distributed-optimizer" in args and "--bf16" in args
    assert _flag(args, "--recompute-granularity") == "selective"
    assert (_flag(args, "--micro-batch-size"), _flag(args, "--global-batch-size"), _flag(args, "--seq-length")) == (
        "2",
        "32",
        "2048",
    )
    assert _flag(args, "--num-query-groups") == "2" and "--swiglu" in args
    assert "--untie-embeddings-and-output-weights" in args
    full, _ = megatron_args(
        GQA,
        PLAN.model_copy(
            update={"recompute": "full", "zero": 0, "sp": False, "vpp": 1, "schedule": "1f1b", "precision": "fp32"}
        ),
    )
    assert _flag(full, "--recompute-granularity") == "full" and "--use-distributed-optimizer" not in full
    assert "--sequence-parallel" not in full and "--bf16" not in full


def test_torchtitan_toml_maps_every_plan_field():
    text, mapping = torchtitan_toml(GQA, PLAN.model_copy(update={"zero": 2}))
    assert set(mapping) == set(Plan.model_fields)
    doc = tomllib.loads(text)
    par, tr = doc["parallelism"], doc["training"]
    assert (par["data_parallel_shard_degree"], par["data_parallel_replicate_degree"]) == (2, 1)
    assert par["fsdp_reshard_after_forward"] == "never"  # zero 2 -> no reshard
    assert (
        par["tensor_parallel_degree"],
        par["pipeline_parallel_degree"],
        par["context_parallel_degree"],
        par["expert_parallel_degree"],
    ) == (2, 2, 1, 1)
    # Interleaved1F1B runs 2 stages per rank by default: vpp 2 needs no layers_per_stage (pipeline_parallel.py)
    assert par["pipeline_parallel_schedule"] == "Interleaved1F1B" and "pipeline_parallel_layers_per_stage" not in par
    assert par["pipeline_parallel_microbatch_size"] == 2
    assert (tr["global_batch_size"], tr["local_batch_size"], tr["seq_len"]) == (32, 16, 2048)
    assert tr["mixed_precision_param"] == "bfloat16" and doc["activation_checkpoint"]["mode"] == "selective"
    ddp = tomllib.loads(torchtitan_toml(GQA, PLAN.model_copy(update={"zero": 0}))[0])["parallelism"]
    assert (ddp["data_parallel_replicate_degree"], ddp["data_parallel_shard_degree"]) == (2, 1)
    z3 = tomllib.loads(torchtitan_toml(GQA, PLAN.model_copy(update={"zero": 3}))[0])["parallelism"]
    assert z3["fsdp_reshard_after_forward"] == "always"


def test_deepspeed_json_maps_every_plan_field():
    cfg, mapping = deepspeed_config(GQA, PLAN)
    assert set(mapping) == set(Plan.model_fields)
    cfg = json.loads(json.dumps(cfg))
    assert cfg["train_batch_size"] == 32 and cfg["train_micro_batch_size_per_gpu"] == 2
    assert cfg["gradient_accumulation_steps"] == 8  # 32 / (dp 2 * mb 2)
    assert cfg["zero_optimization"]["stage"] == 1 and cfg["bf16"]["enabled"] and not cfg["fp16"]["enabled"]
    assert cfg["tensor_parallel"]["autotp_size"] == 2 and cfg["pipeline"]["stages"] == 2
    assert cfg["planner"]["plan"] == PLAN.model_dump()


@pytest.mark.parametrize(
    "kind,name", [("megatron", "megatron_args.sh"), ("torchtitan", "torchtitan.toml"), ("deepspeed", "deepspeed.json")]
)
def test_engine_files_are_written(tmp_path, kind, name):
    path = write_target(kind, CFG, GQA, tmp_path, nnodes=1, per_node=8)
    assert path.name == name and path.read_text()
    if kind == "megatron" and shutil.which("bash"):
        subprocess.run(["bash", "-n", str(path)], check=True)
