"""A torchtitan job config (TOML) for torchtitan v0.2.2 (pure): `--emit torchtitan-v0.2` (0.3.0 dropped TOML for
Python configurations: torchtitan.py).

Every key written exists in v0.2.2's JobConfig (torchtitan/config/job_config.py; unknown keys are an error,
config/manager.py _dict_to_dataclass). The model must be one of torchtitan's own: `[model] name` and `flavor`
select it (train.py: model_args[flavor]; an unset flavor trains the 6-layer debug model), so a catalog model
is matched to a flavor by its architecture, and refused when torchtitan has none (GPT-3, Mixtral).
"""

from __future__ import annotations

from collections.abc import Mapping

from planner.launch.emit.common import engine_torchrun, node_gpus
from planner.launch.emit.targets import Target, register
from planner.launch.emit.torchtitan import (
    SCHEDULES,
    WRITES,  # the same settings: [compile] and enable_async_tensor_parallel here
    compile_components,
    data_parallel,
    flavor,
    local_batch,
    pipeline_fields,
    release_problems,
)
from planner.launch.emit.torchtitan_quantize import V02_RELEASE, v02_converters, v02_sections
from planner.plan import STATED_SPLIT, Plan
from planner.precision import TORCHAO_FLOAT8_RECIPES
from planner.specs import ModelSpec

FILE_NAME = "torchtitan.toml"
RELEASE = V02_RELEASE
# Which key carries each plan field.
PLAN_FIELDS = {
    "dp": "parallelism.data_parallel_replicate_degree / data_parallel_shard_degree",
    "zero": "parallelism.data_parallel_shard_degree + fsdp_reshard_after_forward",
    "tp": "parallelism.tensor_parallel_degree",
    "sp": "implied by tensor_parallel_degree (always on)",
    "pp": "parallelism.pipeline_parallel_degree",
    "schedule": "parallelism.pipeline_parallel_schedule",
    "vpp": "parallelism.pipeline_parallel_layers_per_stage, first/last_stage_less_layers (pp*vpp stages; default 1 "
    "or 2 per rank)",
    "cp": "parallelism.context_parallel_degree",
    "ep": "parallelism.expert_parallel_degree",
    "etp": "parallelism.expert_tensor_parallel_degree",
    "recompute": "activation_checkpoint.mode",
    "micro_batch": "training.local_batch_size (pp=1) / parallelism.pipeline_parallel_microbatch_size (pp>1)",
    "global_batch": "training.global_batch_size",
    "seq_len": "training.seq_len",
    "precision": "training.mixed_precision_param (fp8, fp8-current, fp8-rowwise, fp8-rowwise-gw-hp: converters "
    "quantize.linear.float8, its recipe_name; mxfp8: quantize.linear.mx)",
    **dict.fromkeys(STATED_SPLIT, "refused when stated: it needs parallelism.module_fqns_per_model_part"),
}


def format_problems(model: ModelSpec, plan: Plan) -> list[str]:
    """What a torchtitan v0.2.2 config cannot say for this plan (the same rules as 0.3.0's)."""
    return release_problems(model, plan, RELEASE)


def _compile_lines(settings: Mapping[str, object]) -> list[str]:
    """The [compile] section where the plan is priced compiled (the model, the loss: job_config.py Compile)."""
    parts = compile_components(settings)
    if not parts:
        return []
    return ["[compile]", "enable = true", "components = [" + ", ".join(f'"{c}"' for c in parts) + "]", ""]


def _parallelism_lines(model: ModelSpec, plan: Plan) -> list[str]:
    """The [parallelism] section."""
    dp = data_parallel(plan)
    cut = (pipeline_fields(model, plan) or {}) if plan.pp > 1 else {}
    return [
        "[parallelism]",
        f"data_parallel_replicate_degree = {dp.replicate}",
        f"data_parallel_shard_degree = {dp.shard}",
        f'fsdp_reshard_after_forward = "{dp.reshard}"',
        f"tensor_parallel_degree = {plan.tp}",
        f"pipeline_parallel_degree = {plan.pp}",
        f'pipeline_parallel_schedule = "{SCHEDULES[plan.schedule] if plan.pp > 1 else "1F1B"}"',
        f"pipeline_parallel_microbatch_size = {plan.micro_batch}",
        *[f"{k} = {n}" for k, n in cut.items()],
        f"context_parallel_degree = {plan.cp}",
        f"expert_parallel_degree = {plan.ep}",
        f"expert_tensor_parallel_degree = {plan.expert_tp}",
    ]


def run_comment(plan: Plan, nodes: int, per_node: int | None) -> str:
    """How to run the job config: run_train.sh on one node, else torchrun on every node (as torchtitan.py's)."""
    per = node_gpus(plan, nodes, per_node)
    folder = "# from a torchtitan checkout, JOB set to the folder this file is in:\n# JOB=/path/to/this/folder\n"
    if nodes == 1:
        return f"{folder}# run: NGPU={per} CONFIG_FILE=$JOB/torchtitan.toml ./run_train.sh"
    line = engine_torchrun(nodes, per, "-m torchtitan.train --job.config_file $JOB/torchtitan.toml")
    return f"{folder}# run on each of the {nodes} nodes, MASTER_ADDR set to one node's address:\n# {line}"


def torchtitan_toml(
    model: ModelSpec,
    plan: Plan,
    settings: Mapping[str, object] | None = None,
    *,
    nodes: int = 1,
    per_node: int | None = None,
) -> tuple[str, dict[str, str]]:
    """The job config. ZeRO 0: replicate (DDP, only as 1-D parallelism); 2: FSDP without resharding after
    forward; 3: FSDP resharding (with pipelining, torchtitan's FSDP keeps the stage gathered either way).
    Local batch: the micro-batch without pipelining (gradient accumulation makes up the global batch); with
    pipelining, every micro-batch of a data-parallel rank's step, split by pipeline_parallel_microbatch_size."""
    name, flav, _recipe = flavor(model, RELEASE) or ("llama3", "?", "?")
    ac = {"none": "none", "selective": "selective", "full": "full"}[plan.recompute]
    dtype = "float32" if plan.precision == "fp32" else "bfloat16"
    converters = v02_converters(model, plan, compiled="model" in compile_components(settings or {}))
    lines = [
        f"# torchtitan {RELEASE} job config written by `planner launch --emit torchtitan-v0.2`",
        f"# plan: {plan.headline()}",
        run_comment(plan, nodes, per_node),
        "[job]",
        f'description = "planner plan {plan.summary()}"',
        "",
        "[model]",
        f"# {model.name}: {model.num_layers} layers, hidden {model.hidden_size}, {model.num_attention_heads} heads",
        f'name = "{name}"',
        f'flavor = "{flav}"',
        "# hf_assets_path: point it at the downloaded tokenizer (scripts/download_hf_assets.py)",
        "converters = [" + ", ".join(f'"{c}"' for c in converters) + "]",
        "",
        "[training]",
        f"local_batch_size = {local_batch(plan)}",
        f"global_batch_size = {plan.global_batch}",
        f"seq_len = {plan.seq_len}",
        f'mixed_precision_param = "{dtype}"',
        'mixed_precision_reduce = "float32"',
        "",
        *_parallelism_lines(model, plan),
        *(["enable_async_tensor_parallel = true"] if (settings or {}).get("tp_overlap") is True else []),
        "",
        *_compile_lines(settings or {}),
        "[activation_checkpoint]",
        f'mode = "{ac}"',
        'selective_ac_option = "op"',
    ]
    return "\n".join(lines + v02_sections(converters, plan.precision)) + "\n", dict(PLAN_FIELDS)


register(
    Target(
        "torchtitan-v0.2",
        6,
        FILE_NAME,
        lambda o: torchtitan_toml(o.model, o.cfg.plan, o.settings, nodes=o.nodes, per_node=o.per_node)[0],
        engine="torchtitan",
        writes=WRITES,
        precisions=frozenset(TORCHAO_FLOAT8_RECIPES) - {"fp8"} | {"mxfp8"},
        format_problems=format_problems,
    )
)
