"""A torchtitan job config (TOML) (pure)."""

from __future__ import annotations

from planner.cost.stages import layer_layout
from planner.launch.emit.common import layers_per_chunk
from planner.plan import Plan
from planner.specs import ModelSpec

FILE_NAME = "torchtitan.toml"
TITAN_SCHEDULES = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "Interleaved1F1B"}
TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp8": "bfloat16"}


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
pipeline_parallel_schedule = "{TITAN_SCHEDULES[plan.schedule] if plan.pp > 1 else "1F1B"}"
pipeline_parallel_microbatch_size = {plan.micro_batch}
pipeline_parallel_layers_per_stage = {layers_per_chunk(layer_layout(model.num_layers, plan.pp, plan.vpp), "torchtitan")}
context_parallel_degree = {plan.cp}
expert_parallel_degree = {plan.ep}

[activation_checkpoint]
mode = "{ac}"
selective_ac_option = "op"
"""
    if plan.precision == "fp8":
        text += '\n[quantize.linear.float8]\nrecipe_name = "tensorwise"\n'
    m = {
        "dp": "parallelism.data_parallel_replicate_degree / data_parallel_shard_degree",
        "zero": "parallelism.data_parallel_shard_degree + fsdp_reshard_after_forward",
        "tp": "parallelism.tensor_parallel_degree",
        "sp": "implied by tensor_parallel_degree (always on)",
        "pp": "parallelism.pipeline_parallel_degree",
        "schedule": "parallelism.pipeline_parallel_schedule",
        "vpp": "parallelism.pipeline_parallel_layers_per_stage (pp*vpp stages)",
        "cp": "parallelism.context_parallel_degree",
        "ep": "parallelism.expert_parallel_degree",
        "recompute": "activation_checkpoint.mode",
        "micro_batch": "parallelism.pipeline_parallel_microbatch_size",
        "global_batch": "training.global_batch_size",
        "seq_len": "training.seq_len",
        "precision": "training.mixed_precision_param (fp8: quantize.linear.float8)",
    }
    return text, m
