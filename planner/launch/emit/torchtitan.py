"""A torchtitan 0.3.0 configuration (pure): a Python module whose function returns the plan's `Trainer.Config`.

torchtitan 0.3.0 (PyPI) has no TOML job files: a run is "a function that returns a complete Trainer.Config",
selected with `--module` (any importable module) and `--config` (the function); the `--section.option` flags "are
not the way to configure a run any more" (torchtitan/config/manager.py ConfigManager._load_config;
torchtitan/config/README.md). So the plan is written as such a function, derived from torchtitan's own recipe for
the model (torchtitan/models/llama3/config_registry.py llama3_8b / llama3_70b / llama3_405b), with every field the
plan decides set explicitly: torchtitan/config/configs.py ParallelismConfig and TrainingConfig,
distributed/activation_checkpoint.py (SelectiveAC / FullAC / None), components/quantization/float8.py.

The model must be one of torchtitan's: a catalog model is matched to a flavor by its architecture (Llama 3 by its
sizes; Qwen3 32B and 30B-A3B and GPT-OSS 20B and 120B field for field, from their config_registry.py) and refused
otherwise. These rules are shared with the v0.2.2 TOML (torchtitan_v02.py), which writes the Llama 3 flavors only:
the pipeline split (distributed/pipeline_parallel.py _get_pipeline_metadata, _generate_llm_fqn_per_model_part) and
the schedules are the same in both releases.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from planner.engine.split import torchtitan_split
from planner.launch.emit.common import catalog_match, engine_torchrun, eps_problems, node_gpus, plain_transformer
from planner.launch.emit.targets import Target, register
from planner.launch.emit.torchtitan_quantize import registry_converters
from planner.plan import STATED_SPLIT, Plan
from planner.precision import TENSORWISE_FP8, TORCHAO_FLOAT8_RECIPES
from planner.specs import ModelSpec

FILE_NAME = "torchtitan_plan.py"
WRITES = frozenset({"compile", "compiled_loss", "tp_overlap"})  # CompileConfig(enable, components, async TP)
MODULE = "torchtitan_plan"  # --module: the file's name on PYTHONPATH
CONFIG_FN = "planner_plan"  # --config: the function returning the Trainer.Config
RELEASE = "0.3.0"  # pinned in the file: main renamed the batch fields after it (73aed7f, 2026-08-20)
ROWWISE_ONLY = (  # what 0.3.0 runs otherwise than the profile (v0.2.2) prices: refused, and said
    "Float8LinearConverter scales rowwise only (components/quantization/float8.py recipe_name), not the tensorwise "
    "fp8 the plan is priced with: plan with --precision fp8-rowwise (or fp8-rowwise-gw-hp) for a file it runs"
)
CHUNKED_LOSS = (
    "recipes compute the output layer and loss in chunks (ChunkedLossWrapper, components/loss.py), never holding "
    "the whole logits the plan is priced with (v0.2.2's loss)"
)
SCHEDULES = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "Interleaved1F1B"}
# models/llama3/__init__.py _8b/_70b/_405b (the same shapes in v0.2.2's llama3_args): dim, n_layers, n_heads,
# n_kv_heads, FFN hidden (compute_ffn_hidden_dim), vocab; every flavor has RoPE theta 500000, untied embeddings,
# linears without biases (bias=False) and RMSNorm eps 1e-5 (ModelArgs norm_eps), which a job cannot change.
LLAMA3_FLAVORS = {
    "8B": (4096, 32, 32, 8, 14336, 128256),
    "70B": (8192, 80, 64, 8, 28672, 128256),
    "405B": (16384, 126, 128, 8, 53248, 128256),
}
LLAMA3_ROPE_THETA, LLAMA3_NORM_EPS = 500000.0, 1e-5
# Catalog models torchtitan 0.3.0 builds and has a recipe for, field for field: (model, flavor, recipe) -> catalog name.
# - models/qwen3/config_registry.py qwen3_32b and qwen3_30b_a3b, training model_registry("32B") and ("30B-A3B") of
#   models/qwen3/__init__.py: q/k RMSNorm, head width 128, RoPE theta 1e6, untied embeddings, the 30B-A3B's 128
#   experts of width 768, top 8. Its 8B and 235B-A22B flavors have no recipe there.
# - models/gpt_oss/config_registry.py gpt_oss_20b and gpt_oss_120b (model_registry("20b") and ("120b")): 64 heads of
#   64, 8 kv heads, a learned sink per head, a 128-token window on the even layers, 32 or 128 experts of width 2880,
#   top 4, biases, RoPE theta 150000 (with YaRN scaling the spec does not price).
# Its deepseek_v3 (no MTP) and kimi_k2_7 models are not written by this emitter yet.
CATALOG_FLAVORS = {
    ("qwen3", "32B", "qwen3_32b"): "qwen3-32b",
    ("qwen3", "30B-A3B", "qwen3_30b_a3b"): "qwen3-30b-a3b",
    ("gpt_oss", "20b", "gpt_oss_20b"): "gpt-oss-20b",
    ("gpt_oss", "120b", "gpt_oss_120b"): "gpt-oss-120b",
}
# Which configuration field carries each plan field.
PLAN_FIELDS = {
    "dp": "parallelism.data_parallel_replicate_degree / data_parallel_shard_degree",
    "zero": "parallelism.data_parallel_shard_degree + fsdp_reshard_after_forward",
    "tp": "parallelism.tensor_parallel_degree",
    "sp": "parallelism.enable_sequence_parallel (torchtitan shards norms on the sequence with tp)",
    "pp": "parallelism.pipeline_parallel_degree",
    "schedule": "parallelism.pipeline_parallel_schedule",
    "vpp": "parallelism.pipeline_parallel_layers_per_stage, first/last_stage_less_layers (pp*vpp stages; default 1 "
    "or 2 per rank)",
    "cp": "parallelism.context_parallel_degree",
    "ep": "parallelism.expert_parallel_degree",
    "etp": "none: torchtitan 0.3 runs expert tensor parallelism 1 (it removed the option)",
    "recompute": "activation_checkpoint (SelectiveAC.Config / FullAC.Config / None)",
    "micro_batch": "training.local_batch_size (pp=1) / parallelism.pipeline_parallel_microbatch_size (pp>1)",
    "global_batch": "training.global_batch_size",
    "seq_len": "training.seq_len",
    "precision": "training.mixed_precision_param (fp8: model_registry converters Float8LinearConverter)",
    **dict.fromkeys(STATED_SPLIT, "refused when stated: it needs parallelism.module_fqns_per_model_part"),
}


def flavor(model: ModelSpec, release: str = RELEASE) -> tuple[str, str, str] | None:
    """(model, flavor, the recipe function of its config_registry.py) of the torchtitan model with this
    architecture, or None: Llama 3 by its sizes (a plain transformer: emit/common.py), in this release also the
    catalog models of CATALOG_FLAVORS field for field."""
    if release == RELEASE and (match := catalog_match(model, CATALOG_FLAVORS)):
        return match
    if not plain_transformer(model) or model.mlp != "swiglu" or model.norm != "rmsnorm" or model.tied_embeddings:
        return None
    if model.position_embedding != "rope" or model.rope_theta not in (None, LLAMA3_ROPE_THETA) or model.linear_bias:
        return None
    m = model
    shape = (m.hidden_size, m.num_layers, m.num_attention_heads, m.kv_heads, m.ffn_hidden_size, m.vocab_size)
    return next((("llama3", n, f"llama3_{n.lower()}") for n, dims in LLAMA3_FLAVORS.items() if dims == shape), None)


def pipeline_fields(model: ModelSpec, plan: Plan) -> dict[str, int] | None:
    """The ParallelismConfig fields that cut the plan's stages as it was priced (None: none do)."""
    split = torchtitan_split(model.num_layers, plan.pp, plan.vpp)
    return None if split is None else split.config_fields()


def release_problems(model: ModelSpec, plan: Plan, release: str) -> list[str]:
    """What a torchtitan configuration of this release cannot say for this plan."""
    found = flavor(model, release)  # then its model's norm epsilon, which no configuration of it sets
    out = eps_problems(model, CATALOG_FLAVORS.get(found) or LLAMA3_NORM_EPS, f"torchtitan {release}") if found else []
    if found is None:
        written = [f"llama3 {f}" for f in LLAMA3_FLAVORS] + [
            f"{m} {f}" for m, f, _ in (CATALOG_FLAVORS if release == RELEASE else {})
        ]
        out.append(
            f"the planner writes torchtitan {release} configurations for {', '.join(written)} (RoPE theta "
            f"{LLAMA3_ROPE_THETA:g}, no linear biases for llama3), and {model.name} is none of them"
        )
    elif model.moe is not None and plan.expert_tp != (etp := 1 if plan.ep > 1 else plan.tp):
        how = (
            "with ep > 1 without tensor parallelism (expert tensor parallel degree 1)"
            if plan.ep > 1
            else "without ep on the dense layers' tp axis (models/common/moe_sharding.py expert_param_placement_dense)"
        )
        out.append(f"etp={plan.expert_tp}: torchtitan {release} runs its experts {how}; give --etp {etp}")
    if plan.precision == "fp16":
        out.append("precision=fp16: torchtitan trains in bfloat16 or float32 (training.mixed_precision_param)")
    if plan.pp > 1:
        if plan.schedule == "interleaved" and plan.vpp < 2:
            out.append("schedule=interleaved needs vpp >= 2 in torchtitan (multi-stage schedules)")
        elif plan.schedule != "interleaved" and plan.vpp != 1:
            out.append(
                f"schedule={plan.schedule} runs one stage per rank in torchtitan; vpp={plan.vpp} needs interleaved"
            )
        elif pipeline_fields(model, plan) is None:
            out.append(
                f"torchtitan cannot cut {model.num_layers} layers (+ embedding and output) into exactly "
                f"pp x vpp = {plan.pp * plan.vpp} stages with pipeline_parallel_layers_per_stage and "
                "first/last_stage_less_layers of 0 or 1"
            )
    return out


def format_problems(model: ModelSpec, plan: Plan) -> list[str]:
    fp8 = [f"torchtitan {RELEASE}'s {ROWWISE_ONLY}"] if plan.precision in TENSORWISE_FP8 else []
    return release_problems(model, plan, RELEASE) + fp8


def format_notes(_model: ModelSpec, _plan: Plan) -> list[str]:
    return [f"torchtitan {RELEASE}'s {CHUNKED_LOSS}"]


@dataclass(frozen=True)
class DataParallel:
    """How the plan's data parallelism is spelled in torchtitan. ZeRO 0: replicate (DDP, dp_shard 1); 2: FSDP
    without resharding after forward; 3: FSDP resharding."""

    replicate: int  # data_parallel_replicate_degree
    shard: int  # data_parallel_shard_degree
    reshard: str  # fsdp_reshard_after_forward


def data_parallel(plan: Plan) -> DataParallel:
    replicate, shard = (plan.dp, 1) if plan.zero == 0 else (1, plan.dp)
    return DataParallel(replicate, shard, {0: "default", 2: "never", 3: "always"}.get(plan.zero, "default"))


def local_batch(plan: Plan) -> int:
    """training.local_batch_size: a data-parallel rank's sequences per gradient-accumulation step. Without
    pipelining that is the micro-batch (accumulation makes up the global batch); with it, the rank's whole step,
    which the schedule splits into pipeline_parallel_microbatch_size pieces (trainer.py)."""
    return plan.global_batch // plan.dp if plan.pp > 1 else plan.micro_batch


def _parallelism_lines(model: ModelSpec, plan: Plan) -> list[str]:
    """The ParallelismConfig of the configuration function."""
    dp = data_parallel(plan)
    cut = (pipeline_fields(model, plan) or {}) if plan.pp > 1 else {}
    schedule = SCHEDULES[plan.schedule] if plan.pp > 1 else "1F1B"
    return [
        "    config.parallelism = ParallelismConfig(",
        f"        data_parallel_replicate_degree={dp.replicate},",
        f"        data_parallel_shard_degree={dp.shard},",
        f'        fsdp_reshard_after_forward="{dp.reshard}",',
        f"        tensor_parallel_degree={plan.tp},",
        f"        enable_sequence_parallel={plan.sp and plan.tp > 1},",  # as priced: no sequence to split at tp 1
        f"        pipeline_parallel_degree={plan.pp},",
        f'        pipeline_parallel_schedule="{schedule}",',
        f"        pipeline_parallel_microbatch_size={plan.micro_batch},",
        *[f"        {k}={n}," for k, n in cut.items()],
        f"        context_parallel_degree={plan.cp},",
        f"        expert_parallel_degree={plan.ep},",
        "    )",
    ]


def compile_components(settings: Mapping[str, object]) -> list[str]:
    """What torchtitan compiles as the plan was priced: the model where it says compile, the loss where it says
    compiled_loss (both releases' compile components)."""
    return [c for c, key in (("model", "compile"), ("loss", "compiled_loss")) if settings.get(key) is True]


def compile_line(settings: Mapping[str, object]) -> str:
    """CompileConfig as the plan was priced: eager unless it compiles something (compile_components), with async
    TP where it says tp_overlap (torchtitan config/configs.py CompileConfig)."""
    parts = compile_components(settings)
    if not parts:
        return "    config.compile = CompileConfig(enable=False)  # the plan is priced eager (kernels.compile)"
    async_tp = ", enable_async_tensor_parallel=True" if settings.get("tp_overlap") is True else ""
    return f"    config.compile = CompileConfig(enable=True, components={parts!r}{async_tp})  # as the plan is priced"


def run_lines(plan: Plan, nodes: int, per_node: int | None) -> list[str]:
    """How to run the configuration: run_train.sh on one node (its NGPU is the node's GPUs), else the torchrun
    line torchtitan's multinode_trainer.slurm runs on every node (torchtitan/run_train.sh, multinode_trainer.slurm)."""
    program = f"-m torchtitan.train --module {MODULE} --config {CONFIG_FN}"
    per = node_gpus(plan, nodes, per_node)
    if nodes == 1:
        return [
            f"Run it from a torchtitan checkout, with JOB set to the folder this file is in (--module {MODULE}):",
            "",
            "    JOB=/path/to/this/folder",
            f"    PYTHONPATH=$JOB:$PYTHONPATH NGPU={per} MODULE={MODULE} CONFIG={CONFIG_FN} ./run_train.sh",
        ]
    return [
        f"Run it on each of the {nodes} nodes of {per} GPUs from a torchtitan checkout, with JOB set to the folder",
        "this file is in and MASTER_ADDR to one node's address (multinode_trainer.slurm runs this line under srun):",
        "",
        "    JOB=/path/to/this/folder",
        f"    PYTHONPATH=$JOB:$PYTHONPATH {engine_torchrun(nodes, per, program)}",
    ]


def torchtitan_config(
    model: ModelSpec,
    plan: Plan,
    settings: Mapping[str, object] | None = None,
    *,
    nodes: int = 1,
    per_node: int | None = None,
) -> tuple[str, dict[str, str]]:
    """The configuration module: a template whose lines mirror the file it writes; how to run it on `nodes`
    nodes of `per_node` GPUs (default: the plan's GPUs on one node)."""
    name, flav, base = flavor(model) or ("llama3", "?", "?")
    ac_class = {"selective": "SelectiveAC", "full": "FullAC"}.get(plan.recompute)  # none: no checkpointing
    dtype = "float32" if plan.precision == "fp32" else "bfloat16"
    imports, converters = registry_converters(plan, compiled="model" in compile_components(settings or {}))
    lines = [
        f'"""torchtitan {RELEASE} configuration of the plan {plan.headline()} ({model.name}), written by',
        f"`planner launch --emit torchtitan` for torchtitan {RELEASE} (pip install torchtitan=={RELEASE}, or that",
        "release's source: later main renamed training.local_batch_size and its kin).",
        *run_lines(plan, nodes, per_node),
        '"""',
        "",
        *imports,
        "from torchtitan.config import CompileConfig, ParallelismConfig",
        *([f"from torchtitan.distributed.activation_checkpoint import {ac_class}"] if ac_class else []),
        f"from torchtitan.models.{name} import model_registry",
        f"from torchtitan.models.{name}.config_registry import {base}",
        "from torchtitan.trainer import Trainer",
        "",
        "",
        f"def {CONFIG_FN}() -> Trainer.Config:",
        f"    config = {base}()  # torchtitan's {name} {flav} recipe: optimizer, data, checkpoints, metrics",
        f'    config.model_spec = model_registry("{flav}", converters={converters})',  # tensorwise refused: above
        f"    config.training.local_batch_size = {local_batch(plan)}",
        f"    config.training.global_batch_size = {plan.global_batch}",
        f"    config.training.seq_len = {plan.seq_len}",
        f'    config.training.mixed_precision_param = "{dtype}"',
        '    config.training.mixed_precision_reduce = "float32"',
        "    # priced without CUDA graphs" + " (torchtitan's do not run with pipelining: trainer.py)" * (plan.pp > 1),
        "    config.training.disable_cuda_graphs = True",
        *_parallelism_lines(model, plan),
        f"    config.activation_checkpoint = {f'{ac_class}.Config()' if ac_class else None}",
        compile_line(settings or {}),
        "    return config",
    ]
    return "\n".join(lines) + "\n", dict(PLAN_FIELDS)


register(
    Target(
        "torchtitan",
        5,
        FILE_NAME,
        lambda o: torchtitan_config(o.model, o.cfg.plan, o.settings, nodes=o.nodes, per_node=o.per_node)[0],
        engine="torchtitan",
        writes=WRITES,
        precisions=frozenset(TORCHAO_FLOAT8_RECIPES) - {"fp8"},  # fp8-current refused by name: ROWWISE_ONLY
        format_problems=format_problems,
        format_notes=format_notes,
    )
)
