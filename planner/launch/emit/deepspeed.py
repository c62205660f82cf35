"""A DeepSpeed config (JSON) (pure)."""

from __future__ import annotations

import json

from planner.plan import Plan
from planner.specs import ModelSpec

FILE_NAME = "deepspeed.json"


def format_problems(model: ModelSpec, plan: Plan) -> list[str]:
    """What a DeepSpeed config cannot say beyond the engine's rules (none: pipelines need PipelineModule code,
    which the config's notes say)."""
    return []


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
        "planner": {
            "plan": plan.model_dump(),
            "model": model.name,
            "notes": "dp = world / (tp*pp*cp); vpp, schedule, sp (Megatron-style) and ep need "
            "Megatron-DeepSpeed / PipelineModule code, not config keys",
        },
    }
    m = {
        "global_batch": "train_batch_size",
        "micro_batch": "train_micro_batch_size_per_gpu",
        "dp": "gradient_accumulation_steps = global_batch / (dp*micro_batch); dp implied by world size",
        "zero": "zero_optimization.stage",
        "precision": "bf16.enabled / fp16.enabled",
        "tp": "tensor_parallel.autotp_size",
        "cp": "sequence_parallel_size (Ulysses)",
        "recompute": "activation_checkpointing",
        "pp": "pipeline.stages",
        "seq_len": "planner.plan.seq_len (set by the data loader)",
        "vpp": "planner.plan.vpp (no DeepSpeed key)",
        "schedule": "planner.plan.schedule (DeepSpeed pipelines run 1F1B)",
        "sp": "planner.plan.sp (no key)",
        "ep": "planner.plan.ep (MoE layer argument ep_size)",
    }
    return cfg, m


def deepspeed_file(model: ModelSpec, plan: Plan) -> str:
    return json.dumps(deepspeed_config(model, plan)[0], indent=2) + "\n"
