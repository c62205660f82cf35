"""A DeepSpeed config (JSON) (pure), complete for the plan: batch, ZeRO stage with its communication settings,
precision, activation checkpointing, AutoTP and the pipeline.

Keys and defaults from DeepSpeed (deepspeed/runtime/config.py DeepSpeedConfig, runtime/zero/config.py
DeepSpeedZeroConfig, runtime/activation_checkpointing/config.py, runtime/tensor_parallel/config.py TPTrainingConfig,
runtime/fp16 loss scaler keys), validated against 0.19.8. The ZeRO communication settings are written out at the
values the cost model priced (engine_profiles/deepspeed.yaml: DeepSpeed's defaults), so the file runs the plan that
was estimated rather than whatever a later default becomes.
"""

from __future__ import annotations

import json

from planner.launch.emit.targets import Target, register
from planner.plan import STATED_SPLIT, Plan
from planner.specs import ModelSpec

FILE_NAME = "deepspeed.json"
# runtime/zero/config.py: reduce_bucket_size and allgather_bucket_size default 5e8 elements (the profile's
# comm.dp_bucket_params); stage3_prefetch_bucket_size 5e7, stage3_param_persistence_threshold 1e5,
# stage3_max_live_parameters and stage3_max_reuse_distance 1e9.
BUCKET_ELEMENTS = 500_000_000
STAGE3_PREFETCH_ELEMENTS = 50_000_000
STAGE3_PERSISTENCE_ELEMENTS = 100_000
STAGE3_LIVE_ELEMENTS = 1_000_000_000
GRADIENT_CLIPPING = 1.0  # the clipping every engine's recipes use (Megatron --clip-grad 1.0, torchtitan max_norm)
# Which key carries each plan field (those DeepSpeed has no key for are kept under "planner").
PLAN_FIELDS = {
    "global_batch": "train_batch_size (AutoTP without a pipeline: derived, see autotp_batch)",
    "micro_batch": "train_micro_batch_size_per_gpu",
    "dp": "gradient_accumulation_steps = global_batch / (dp*micro_batch); dp implied by world size",
    "zero": "zero_optimization.stage (+ its buckets and overlap_comm)",
    "precision": "bf16.enabled / fp16.enabled",
    "tp": "tensor_parallel.autotp_size",
    "cp": "sequence_parallel_size (Ulysses)",
    "recompute": "activation_checkpointing, pipeline.activation_checkpoint_interval",
    "pp": "pipeline.stages",
    "seq_len": "planner.plan.seq_len (set by the data loader)",
    "vpp": "planner.plan.vpp (no DeepSpeed key)",
    "schedule": "planner.plan.schedule (DeepSpeed pipelines run 1F1B)",
    "sp": "planner.plan.sp (no key)",
    "ep": "planner.plan.ep (MoE layer argument ep_size)",
    "etp": "planner.plan.etp (DeepSpeed's expert tensor parallelism is tp: enable_expert_tensor_parallelism)",
    **dict.fromkeys(STATED_SPLIT, "refused when stated: PipelineModule partitions by method, not per-rank counts"),
}


def format_problems(model: ModelSpec, plan: Plan) -> list[str]:
    """What a DeepSpeed config cannot say beyond the engine's rules (none: pipelines need PipelineModule code, which
    the config's notes say; AutoTP beside a pipeline is the engine profile's rule, zero_pp excludes)."""
    return []


def zero_config(plan: Plan) -> dict:
    """zero_optimization: the stage, and the communication the cost model priced: gradients reduced in
    5e8-element buckets; overlap_comm as DeepSpeed defaults it (on for stage 3 only: zero/config.py
    overlap_comm_valid), which is what engine_profiles/deepspeed.yaml prices (comm.grad_overlap, zero.3)."""
    z: dict = {"stage": plan.zero}
    if plan.zero == 0:
        return z
    z |= {
        "overlap_comm": plan.zero == 3,
        "contiguous_gradients": True,
        "reduce_scatter": True,
        "reduce_bucket_size": BUCKET_ELEMENTS,
    }
    if plan.zero in (1, 2):
        z |= {"allgather_partitions": True, "allgather_bucket_size": BUCKET_ELEMENTS}
    else:
        z |= {
            "stage3_prefetch_bucket_size": STAGE3_PREFETCH_ELEMENTS,
            "stage3_param_persistence_threshold": STAGE3_PERSISTENCE_ELEMENTS,
            "stage3_max_live_parameters": STAGE3_LIVE_ELEMENTS,
            "stage3_max_reuse_distance": STAGE3_LIVE_ELEMENTS,
        }
    return z


def deepspeed_config(model: ModelSpec, plan: Plan) -> tuple[dict, dict[str, str]]:
    """A DeepSpeed config. Fields DeepSpeed has no key for are kept under "planner" for reference."""
    checkpointing = plan.recompute != "none"
    cfg: dict = {
        "train_batch_size": plan.global_batch,
        "train_micro_batch_size_per_gpu": plan.micro_batch,
        "gradient_accumulation_steps": plan.num_microbatches,
        "gradient_clipping": GRADIENT_CLIPPING,
        "zero_optimization": zero_config(plan),
        "bf16": {"enabled": plan.precision in ("bf16", "fp8")},
        "fp16": {"enabled": False},
        "activation_checkpointing": {  # read by deepspeed.checkpointing.configure; the model calls checkpoint()
            # off: not priced (each TP rank's checkpoints are counted whole), and it asks an mpu for the TP group,
            # which AutoTP does not give (activation_checkpointing/checkpointing.py, deepspeed/__init__.py)
            "partition_activations": False,
            "cpu_checkpointing": False,
            "contiguous_memory_optimization": False,
            "number_checkpoints": model.num_layers if plan.recompute == "full" else None,
            "synchronize_checkpoint_boundary": False,
            "profile": False,
        },
        "pipeline": {"stages": plan.pp, "partition": "uniform", "activation_checkpoint_interval": int(checkpointing)},
        "steps_per_print": 10,
        "wall_clock_breakdown": False,
        "planner": {
            "plan": plan.model_dump(),
            "model": model.name,
            "notes": "dp = world / (tp*pp*cp); vpp, schedule, sp (Megatron-style) and ep need "
            "Megatron-DeepSpeed / PipelineModule code, not config keys; pipeline.stages and partition are for "
            "reference: the engine reads neither (pipe/engine.py), so build PipelineModule(num_stages=pp, "
            "partition_method='uniform'), the split priced",
        },
    }
    if plan.precision == "fp16":  # dynamic loss scaling (loss_scale 0), DeepSpeed's documented defaults
        cfg["fp16"] = {
            "enabled": True,
            "loss_scale": 0,
            "initial_scale_power": 16,
            "loss_scale_window": 1000,
            "hysteresis": 2,
            "min_loss_scale": 1,
        }
    if plan.tp > 1:  # TPTrainingConfig.autotp_size: 0 (absent) disables AutoTP; never beside a pipeline
        autotp(cfg, plan.tp)
    if plan.cp > 1:
        cfg["sequence_parallel_size"] = plan.cp
    return cfg, dict(PLAN_FIELDS)


def autotp(cfg: dict, tp: int) -> None:
    """AutoTP of `tp` ranks: the groups (engine.py _configure_tensor_parallel builds only them; the layers split
    where the model is built through deepspeed.tp_model_init), said in the notes, and the batch left to derive."""
    cfg["tensor_parallel"] = {"autotp_size": tp}
    autotp_batch(cfg)
    cfg["planner"]["notes"] += (
        "; autotp_size makes the TP groups: the layers split only where the model is built through "
        "deepspeed.tp_model_init (or Hugging Face's integration), else each TP rank holds the whole model"
    )


def autotp_batch(cfg: dict) -> None:
    """Leave train_batch_size for DeepSpeed to derive under AutoTP: without an mpu, DeepSpeedConfig counts every
    rank of the world as data parallel (runtime/config.py DeepSpeedConfig.__init__ world_size; deepspeed.initialize
    builds it before AutoTP makes its groups), so the plan's global batch fails its _batch_assertion (train = micro
    x accumulation x world); with an mpu it counts dp. Micro-batch and accumulation mean the same either way
    (_set_batch_related_parameters derives the rest)."""
    del cfg["train_batch_size"]
    cfg["planner"]["notes"] += (
        "; train_batch_size is left for DeepSpeed to derive (micro x accumulation x the data-parallel world it sees: "
        "every rank without an mpu, so each TP rank's copy counts once)"
    )


def deepspeed_file(model: ModelSpec, plan: Plan) -> str:
    return json.dumps(deepspeed_config(model, plan)[0], indent=2) + "\n"


register(
    Target(
        "deepspeed",
        7,
        FILE_NAME,
        lambda o: deepspeed_file(o.model, o.cfg.plan),
        engine="deepspeed",
        format_problems=format_problems,
        run_line=False,  # a ds_config.json: the deepspeed launcher's hostfile and --num_gpus place the job
    )
)
