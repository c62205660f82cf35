"""The plan in the engines users already run: Megatron-LM arguments, a torchtitan TOML, a DeepSpeed JSON (pure).

Each exporter returns the file text and ``mapping``: for every Plan field, the engine key it became or
why the engine has none. Tests assert that every Plan field appears in every mapping.
"""

from __future__ import annotations

import json
from pathlib import Path

from planner.plan import Plan
from planner.specs import ModelSpec

TITAN_SCHEDULES = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "Interleaved1F1B"}
TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp8": "bfloat16"}


def megatron_args(model: ModelSpec, plan: Plan) -> tuple[list[str], dict[str, str]]:
    """Arguments for Megatron-LM's pretrain_gpt.py. dp is implied: world / (tp·pp·cp)."""
    m: dict[str, str] = {}
    a = ["--tensor-model-parallel-size", str(plan.tp), "--pipeline-model-parallel-size", str(plan.pp),
         "--context-parallel-size", str(plan.cp), "--expert-model-parallel-size", str(plan.ep)]
    m.update(tp="--tensor-model-parallel-size", pp="--pipeline-model-parallel-size",
             cp="--context-parallel-size", ep="--expert-model-parallel-size",
             dp=f"implied: world size {plan.gpus} / (tp*pp*cp)")
    if plan.vpp > 1:
        a += ["--num-layers-per-virtual-pipeline-stage", str(model.num_layers // (plan.pp * plan.vpp))]
        m["vpp"] = "--num-layers-per-virtual-pipeline-stage"
    else:
        m["vpp"] = "vpp=1: no virtual stages"
    m["schedule"] = ("interleaved: set by --num-layers-per-virtual-pipeline-stage" if plan.schedule == "interleaved"
                     else f"{plan.schedule}: Megatron always runs 1F1B (gpipe has no flag)")
    if plan.sp:
        a.append("--sequence-parallel")
    m["sp"] = "--sequence-parallel"
    if plan.zero >= 1:
        a.append("--use-distributed-optimizer")
    if plan.zero == 3:
        a += ["--use-torch-fsdp2"]
    m["zero"] = "--use-distributed-optimizer (ZeRO-1/2); zero=3: --use-torch-fsdp2"
    if plan.recompute == "selective":
        a += ["--recompute-granularity", "selective"]
    elif plan.recompute == "full":
        a += ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
    m["recompute"] = "--recompute-granularity"
    a += ["--micro-batch-size", str(plan.micro_batch), "--global-batch-size", str(plan.global_batch),
          "--seq-length", str(plan.seq_len)]
    m.update(micro_batch="--micro-batch-size", global_batch="--global-batch-size", seq_len="--seq-length")
    a += {"fp32": [], "bf16": ["--bf16"], "fp16": ["--fp16"], "fp8": ["--bf16", "--fp8-format", "hybrid"]}[plan.precision]
    m["precision"] = "--bf16 / --fp16 / --fp8-format hybrid (fp32: no flag)"
    a += ["--num-layers", str(model.num_layers), "--hidden-size", str(model.hidden_size),
          "--num-attention-heads", str(model.num_attention_heads), "--ffn-hidden-size", str(model.ffn_hidden_size),
          "--max-position-embeddings", str(model.max_seq_len),
          "--position-embedding-type", "rope" if model.position_embedding == "rope" else "learned_absolute",
          "--normalization", "RMSNorm" if model.norm == "rmsnorm" else "LayerNorm"]
    if model.num_kv_heads and model.num_kv_heads < model.num_attention_heads:
        a += ["--group-query-attention", "--num-query-groups", str(model.num_kv_heads)]
    if model.mlp == "swiglu":
        a.append("--swiglu")
    if not model.tied_embeddings:
        a.append("--untie-embeddings-and-output-weights")
    if not model.has_bias:
        a.append("--disable-bias-linear")
    return a, m


def torchtitan_toml(model: ModelSpec, plan: Plan) -> tuple[str, dict[str, str]]:
    """A torchtitan job config. ZeRO: 0 → replicate (DDP), 1/2 → shard without resharding, 3 → shard."""
    replicate, shard = (plan.dp, 1) if plan.zero == 0 else (1, plan.dp)
    reshard = {0: "default", 1: "never", 2: "never", 3: "always"}[plan.zero]
    ac = {"none": "none", "selective": "selective", "full": "full"}[plan.recompute]
    text = f"""# torchtitan job config written by `planner launch --emit torchtitan`
# plan: {plan.summary()}
[job]
description = "planner plan {plan.summary()}"

[model]
# {model.name}: {model.num_layers} layers, hidden {model.hidden_size}, {model.num_attention_heads} heads
name = "llama3"

[training]
local_batch_size = {plan.global_batch // plan.dp}
global_batch_size = {plan.global_batch}
seq_len = {plan.seq_len}
mixed_precision_param = "{TORCH_DTYPES[plan.precision]}"
mixed_precision_reduce = "float32"

[parallelism]
data_parallel_replicate_degree = {replicate}
data_parallel_shard_degree = {shard}
fsdp_reshard_after_forward = "{reshard}"
tensor_parallel_degree = {plan.tp}
# torchtitan always uses sequence parallelism with TP (plan sp={str(plan.sp).lower()})
pipeline_parallel_degree = {plan.pp}
pipeline_parallel_schedule = "{TITAN_SCHEDULES[plan.schedule] if plan.pp > 1 else '1F1B'}"
pipeline_parallel_microbatch_size = {plan.micro_batch}
pipeline_parallel_layers_per_stage = {max(1, model.num_layers // (plan.pp * plan.vpp))}
context_parallel_degree = {plan.cp}
expert_parallel_degree = {plan.ep}

[activation_checkpoint]
mode = "{ac}"
selective_ac_option = "op"
"""
    if plan.precision == "fp8":
        text += '\n[quantize.linear.float8]\nrecipe_name = "tensorwise"\n'
    m = dict(dp="parallelism.data_parallel_replicate_degree / data_parallel_shard_degree",
             zero="parallelism.data_parallel_shard_degree + fsdp_reshard_after_forward",
             tp="parallelism.tensor_parallel_degree", sp="implied by tensor_parallel_degree (always on)",
             pp="parallelism.pipeline_parallel_degree", schedule="parallelism.pipeline_parallel_schedule",
             vpp="parallelism.pipeline_parallel_layers_per_stage (pp*vpp stages)",
             cp="parallelism.context_parallel_degree", ep="parallelism.expert_parallel_degree",
             recompute="activation_checkpoint.mode", micro_batch="parallelism.pipeline_parallel_microbatch_size",
             global_batch="training.global_batch_size", seq_len="training.seq_len",
             precision="training.mixed_precision_param (fp8: quantize.linear.float8)")
    return text, m


def deepspeed_config(model: ModelSpec, plan: Plan) -> tuple[dict, dict[str, str]]:
    """A DeepSpeed config. Fields DeepSpeed has no key for are kept under "planner" for reference."""
    cfg: dict = {
        "train_batch_size": plan.global_batch,
        "train_micro_batch_size_per_gpu": plan.micro_batch,
        "gradient_accumulation_steps": plan.num_microbatches,
        "zero_optimization": {"stage": plan.zero},
        "bf16": {"enabled": plan.precision in ("bf16", "fp8")},
        "fp16": {"enabled": plan.precision == "fp16"},
        "tensor_parallel": {"autotp_size": plan.tp},
        "sequence_parallel_size": plan.cp,
        "activation_checkpointing": {
            "partition_activations": plan.recompute != "none" and plan.tp > 1,
            "contiguous_memory_optimization": False,
            "number_checkpoints": model.num_layers if plan.recompute == "full" else None,
        },
        "pipeline": {"stages": plan.pp, "partition": "uniform"},
        "planner": {"plan": plan.model_dump(), "model": model.name,
                    "notes": "dp = world / (tp*pp*cp); vpp, schedule, sp (Megatron-style) and ep need "
                             "Megatron-DeepSpeed / PipelineModule code, not config keys"},
    }
    m = dict(global_batch="train_batch_size", micro_batch="train_micro_batch_size_per_gpu",
             dp="gradient_accumulation_steps = global_batch / (dp*micro_batch); dp implied by world size",
             zero="zero_optimization.stage", precision="bf16.enabled / fp16.enabled",
             tp="tensor_parallel.autotp_size", cp="sequence_parallel_size (Ulysses)",
             recompute="activation_checkpointing", pp="pipeline.stages",
             seq_len="planner.plan.seq_len (set by the data loader)", vpp="planner.plan.vpp (no DeepSpeed key)",
             schedule="planner.plan.schedule (DeepSpeed pipelines run 1F1B)", sp="planner.plan.sp (no key)",
             ep="planner.plan.ep (MoE layer argument ep_size)")
    return cfg, m


def write_engine_file(kind: str, model: ModelSpec, plan: Plan, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    if kind == "megatron":
        args, _ = megatron_args(model, plan)
        path = out / "megatron_args.sh"
        body = " \\\n  ".join(args)
        path.write_text(f"# Megatron-LM arguments for pretrain_gpt.py; plan: {plan.summary()}\n"
                        f"MEGATRON_ARGS=(\n  {body}\n)\n")
    elif kind == "torchtitan":
        path = out / "torchtitan.toml"
        path.write_text(torchtitan_toml(model, plan)[0])
    elif kind == "deepspeed":
        path = out / "deepspeed.json"
        path.write_text(json.dumps(deepspeed_config(model, plan)[0], indent=2) + "\n")
    else:
        raise ValueError(kind)
    return path
