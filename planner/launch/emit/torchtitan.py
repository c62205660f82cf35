"""A torchtitan job config (TOML) for torchtitan v0.2.2 (pure).

Every key written exists in v0.2.2's JobConfig (torchtitan/config/job_config.py; unknown keys are an error,
config/manager.py _dict_to_dataclass). The model must be one of torchtitan's own: `[model] name` and `flavor`
select it (train.py: model_args[flavor]; an unset flavor trains the 6-layer debug model), so a catalog model
is matched to a flavor by its architecture, and refused when torchtitan has none (GPT-3, Mixtral).
"""

from __future__ import annotations

from planner.engine.split import torchtitan_chunk_sizes
from planner.plan import Plan
from planner.specs import ModelSpec

FILE_NAME = "torchtitan.toml"
RELEASE = "v0.2.2"
SCHEDULES = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "Interleaved1F1B"}
# torchtitan v0.2.2 models/llama3/__init__.py llama3_args (dim, n_layers, n_heads, n_kv_heads, FFN hidden, vocab).
LLAMA3_FLAVORS = {
    "8B": (4096, 32, 32, 8, 14336, 128256),
    "70B": (8192, 80, 64, 8, 28672, 128256),
    "405B": (16384, 126, 128, 8, 53248, 128256),
}


def flavor(model: ModelSpec) -> tuple[str, str] | None:
    """(name, flavor) of the torchtitan model with this architecture, or None."""
    if model.moe is not None or model.mlp != "swiglu" or model.norm != "rmsnorm" or model.tied_embeddings:
        return None
    shape = (
        model.hidden_size,
        model.num_layers,
        model.num_attention_heads,
        model.kv_heads,
        model.ffn_hidden_size,
        model.vocab_size,
    )
    for name, dims in LLAMA3_FLAVORS.items():
        if shape == dims and model.position_embedding == "rope":
            return "llama3", name
    return None


def layers_per_stage(model: ModelSpec, plan: Plan) -> int | None:
    """pipeline_parallel_layers_per_stage giving exactly pp·vpp stages (None: the default stage count does:
    one per rank for 1F1B/GPipe, two for Interleaved1F1B; pipeline_parallel.py pipeline_llm)."""
    stages = plan.pp * plan.vpp
    default = 2 if plan.schedule == "interleaved" else 1
    if plan.vpp == default:
        return None
    effective = model.num_layers + 2  # the embedding and the output each weigh one layer
    per = -(-effective // stages)
    return per if -(-effective // per) == stages else -1


def format_problems(model: ModelSpec, plan: Plan) -> list[str]:
    """What a torchtitan v0.2.2 config cannot say for this plan."""
    out = []
    if flavor(model) is None:
        flavors = ", ".join(f"llama3 {f}" for f in LLAMA3_FLAVORS)
        out.append(
            f"torchtitan {RELEASE} has no model with the architecture of {model.name} (its dense models with a "
            f"pipeline split are {flavors}; GPT-3 and Mixtral have none): emit megatron or deepspeed instead"
        )
    if plan.precision == "fp16":
        out.append("precision=fp16: torchtitan trains in bfloat16 or float32 (training.mixed_precision_param)")
    if plan.pp > 1:
        if plan.schedule == "interleaved" and plan.vpp < 2:
            out.append("schedule=interleaved needs vpp >= 2 in torchtitan (multi-stage schedules)")
        elif plan.schedule != "interleaved" and plan.vpp != 1:
            out.append(
                f"schedule={plan.schedule} runs one stage per rank in torchtitan; vpp={plan.vpp} needs interleaved"
            )
        elif layers_per_stage(model, plan) == -1:
            out.append(
                f"torchtitan cannot cut {model.num_layers} layers (+ embedding and output) into exactly "
                f"pp x vpp = {plan.pp * plan.vpp} stages with one pipeline_parallel_layers_per_stage"
            )
        elif torchtitan_chunk_sizes(model.num_layers, plan.pp, plan.vpp) is None:
            out.append(f"torchtitan needs at most num_layers + 2 = {model.num_layers + 2} stages")
    return out


def torchtitan_toml(model: ModelSpec, plan: Plan) -> tuple[str, dict[str, str]]:
    """The job config. ZeRO 0: replicate (DDP, only as 1-D parallelism); 2: FSDP without resharding after
    forward; 3: FSDP resharding (with pipelining, torchtitan's FSDP keeps the stage gathered either way).
    Local batch: the micro-batch without pipelining (gradient accumulation makes up the global batch); with
    pipelining, every micro-batch of a data-parallel rank's step, split by pipeline_parallel_microbatch_size."""
    name, flav = flavor(model) or ("llama3", "?")
    replicate, shard = (plan.dp, 1) if plan.zero == 0 else (1, plan.dp)
    reshard = {0: "default", 2: "never", 3: "always"}.get(plan.zero, "default")
    ac = {"none": "none", "selective": "selective", "full": "full"}[plan.recompute]
    local = plan.global_batch // plan.dp if plan.pp > 1 else plan.micro_batch
    dtype = "float32" if plan.precision == "fp32" else "bfloat16"
    converters = '["quantize.linear.float8"]' if plan.precision == "fp8" else "[]"
    lines = [
        f"# torchtitan {RELEASE} job config written by `planner launch --emit torchtitan`",
        f"# plan: {plan.summary()}; run: NGPU={plan.gpus} CONFIG_FILE=torchtitan.toml ./run_train.sh (multi-node: "
        "torchrun --nnodes ... -m torchtitan.train --job.config_file torchtitan.toml)",
        "[job]",
        f'description = "planner plan {plan.summary()}"',
        "",
        "[model]",
        f"# {model.name}: {model.num_layers} layers, hidden {model.hidden_size}, {model.num_attention_heads} heads",
        f'name = "{name}"',
        f'flavor = "{flav}"',
        "# hf_assets_path: point it at the downloaded tokenizer (scripts/download_hf_assets.py)",
        f"converters = {converters}",
        "",
        "[training]",
        f"local_batch_size = {local}",
        f"global_batch_size = {plan.global_batch}",
        f"seq_len = {plan.seq_len}",
        f'mixed_precision_param = "{dtype}"',
        'mixed_precision_reduce = "float32"',
        "",
        "[parallelism]",
        f"data_parallel_replicate_degree = {replicate}",
        f"data_parallel_shard_degree = {shard}",
        f'fsdp_reshard_after_forward = "{reshard}"',
        f"tensor_parallel_degree = {plan.tp}",
        f"pipeline_parallel_degree = {plan.pp}",
        f'pipeline_parallel_schedule = "{SCHEDULES[plan.schedule] if plan.pp > 1 else "1F1B"}"',
        f"pipeline_parallel_microbatch_size = {plan.micro_batch}",
    ]
    lps = layers_per_stage(model, plan) if plan.pp > 1 else None
    if lps and lps > 0:
        lines.append(f"pipeline_parallel_layers_per_stage = {lps}")
    lines += [
        f"context_parallel_degree = {plan.cp}",
        f"expert_parallel_degree = {plan.ep}",
        "",
        "[activation_checkpoint]",
        f'mode = "{ac}"',
        'selective_ac_option = "op"',
    ]
    if plan.precision == "fp8":
        lines += ["", "[quantize.linear.float8]", 'recipe_name = "tensorwise"']
    m = {
        "dp": "parallelism.data_parallel_replicate_degree / data_parallel_shard_degree",
        "zero": "parallelism.data_parallel_shard_degree + fsdp_reshard_after_forward",
        "tp": "parallelism.tensor_parallel_degree",
        "sp": "implied by tensor_parallel_degree (always on)",
        "pp": "parallelism.pipeline_parallel_degree",
        "schedule": "parallelism.pipeline_parallel_schedule",
        "vpp": "parallelism.pipeline_parallel_layers_per_stage (pp*vpp stages; default 1 or 2 per rank)",
        "cp": "parallelism.context_parallel_degree",
        "ep": "parallelism.expert_parallel_degree",
        "recompute": "activation_checkpoint.mode",
        "micro_batch": "training.local_batch_size (pp=1) / parallelism.pipeline_parallel_microbatch_size (pp>1)",
        "global_batch": "training.global_batch_size",
        "seq_len": "training.seq_len",
        "precision": "training.mixed_precision_param (fp8: model.converters quantize.linear.float8)",
    }
    return "\n".join(lines) + "\n", m
