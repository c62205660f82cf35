"""The project's own reading of torchtitan's rules, for both configuration formats (no torchtitan import).

v0.2.2: torchtitan/config/job_config.py, config/manager.py, distributed/parallel_dims.py,
distributed/pipeline_parallel.py, train.py (tag v0.2.2). 0.3.0 (the PyPI wheel): config/configs.py
ParallelismConfig and TrainingConfig, trainer.py (Trainer.Config.__post_init__ and _validate_cuda_graphs, the
batch checks and the sequence divisor in Trainer.__init__), distributed/parallel_dims.py _validate,
distributed/pipeline_parallel.py _get_pipeline_metadata, models/llama3/__init__.py llama3_configs.
"""

from __future__ import annotations

import ast
import math

import tomllib

from planner.plan import Plan
from planner.specs import ModelSpec

# ---- torchtitan v0.2.2 -------------------------------------------------------------------------------------
TORCHTITAN_KEYS = {  # config/job_config.py at v0.2.2: the fields the emitter may use (unknown keys raise)
    "job": {"description", "dump_folder", "print_config"},
    "model": {"name", "flavor", "hf_assets_path", "converters", "print_after_conversion"},
    "training": {
        "local_batch_size",
        "global_batch_size",
        "seq_len",
        "mixed_precision_param",
        "mixed_precision_reduce",
        "steps",
        "dtype",
        "max_norm",
        "dataset",
    },
    "parallelism": {
        "data_parallel_replicate_degree",
        "data_parallel_shard_degree",
        "fsdp_reshard_after_forward",
        "tensor_parallel_degree",
        "disable_loss_parallel",
        "enable_async_tensor_parallel",
        "pipeline_parallel_degree",
        "pipeline_parallel_schedule",
        "pipeline_parallel_microbatch_size",
        "pipeline_parallel_layers_per_stage",
        "pipeline_parallel_first_stage_less_layers",
        "pipeline_parallel_last_stage_less_layers",
        "context_parallel_degree",
        "expert_parallel_degree",
        "expert_tensor_parallel_degree",
        "module_fqns_per_model_part",
    },
    "activation_checkpoint": {"mode", "selective_ac_option"},
    "compile": {"enable", "components"},
    "quantize": {"linear"},
}
TORCHTITAN_FLAVORS = {"llama3": {"debugmodel", "8B", "70B", "405B"}}
SINGLE_STAGE = {"1F1B", "GPipe"}


def _stages(model: ModelSpec, pp: int, sched: str, par: dict) -> tuple[int, int]:
    """The stages torchtitan builds and its effective layers: L plus what the embedding and the output weigh
    (pipeline_parallel.py pipeline_llm; first/last_stage_less_layers default 1), ceil(effective / layers per
    stage) where that is set, else one per rank for single-stage schedules, two for the others."""
    first = par.get("pipeline_parallel_first_stage_less_layers", 1)
    last = par.get("pipeline_parallel_last_stage_less_layers", 1)
    effective = model.num_layers + first + last
    lps = par.get("pipeline_parallel_layers_per_stage")
    stages = math.ceil(effective / lps) if lps else pp * (1 if sched in SINGLE_STAGE else 2)
    return stages, effective


def torchtitan_v02_violations(text: str, model: ModelSpec, plan: Plan) -> list[str]:
    doc = tomllib.loads(text)
    out = [f"unknown key {s}.{k}" for s, keys in doc.items() for k in keys if k not in TORCHTITAN_KEYS.get(s, set())]
    md, tr, par = doc.get("model", {}), doc.get("training", {}), doc.get("parallelism", {})
    if md.get("flavor") not in TORCHTITAN_FLAVORS.get(md.get("name", "llama3"), set()):  # train.py 138
        out.append(f"flavor {md.get('flavor')!r} is not a torchtitan flavor (unset: the debug model)")
    rep, shard = par.get("data_parallel_replicate_degree", 1), par.get("data_parallel_shard_degree", -1)
    tp, pp, cp = (par.get(f"{n}_parallel_degree", 1) for n in ("tensor", "pipeline", "context"))
    if rep * shard * cp * tp * pp != plan.gpus:  # parallel_dims.py _validate
        out.append("dp_replicate*dp_shard*cp*tp*pp != world size")
    ep = par.get("expert_parallel_degree", 1)
    if (shard * cp * tp) % ep:  # parallel_dims.py: efsdp = dp_shard * cp * tp // ep
        out.append("ep does not divide dp_shard*cp*tp")
    if tr["seq_len"] % (tp * 2 * cp):  # parallel_dims.py seq_len_divisor
        out.append("seq_len not divisible by tp*2*cp")
    local, gbs = tr["local_batch_size"], tr["global_batch_size"]
    if gbs % (local * rep * shard):  # train.py 196-215
        out.append("global batch not a multiple of local batch x data-parallel degree")
    if rep > 1 and shard == 1 and rep != plan.gpus:  # llama3 parallelize.py 148-151
        out.append("DDP has not supported > 1D parallelism")
    if tr.get("mixed_precision_param", "bfloat16") not in ("bfloat16", "float32"):
        out.append("mixed_precision_param must be bfloat16 or float32")
    if plan.precision in (
        "fp8",
        "fp8-current",
        "fp8-rowwise",
        "fp8-rowwise-gw-hp",
    ) and "quantize.linear.float8" not in md.get("converters", []):
        out.append("fp8 without the quantize.linear.float8 converter")
    out += _float8_section_violations(doc.get("quantize", {}).get("linear", {}).get("float8"), plan)
    if pp > 1:
        mbs, sched = par.get("pipeline_parallel_microbatch_size", 1), par.get("pipeline_parallel_schedule", "1F1B")
        if local % mbs:  # pipeline_parallel.py build_pipeline_schedule
            out.append("local batch not divisible by the pipeline micro-batch")
        stages, effective = _stages(model, pp, sched, par)
        if stages % pp or stages > effective:  # pipeline_parallel.py 75-109, 269-296
            out.append("pipeline stages do not divide over pp")
        per_rank = stages // pp
        if (sched in SINGLE_STAGE) != (per_rank == 1):
            out.append(f"{sched} with {per_rank} stages per rank")
        if stages != plan.pp * plan.vpp:
            out.append(f"{stages} stages, not the plan's pp*vpp = {plan.pp * plan.vpp}")
        n = local // mbs
        if sched == "Interleaved1F1B" and n % max(1, n // pp):  # torch pipelining/schedules.py
            out.append("Interleaved1F1B micro-batches not a multiple of the rounds")
    return out


# ---- torchtitan 0.3.0 -------------------------------------------------------------------------------------
# The flavors the release's models build, by their sizes (dim, layers, heads, kv heads, FFN or expert width,
# experts, top-k, vocab): models/llama3/__init__.py llama3_configs, models/qwen3/__init__.py qwen3_configs.
FLAVORS_0_3 = {
    "llama3": {
        "8B": (4096, 32, 32, 8, 14336, 0, 0, 128256),
        "70B": (8192, 80, 64, 8, 28672, 0, 0, 128256),
        "405B": (16384, 126, 128, 8, 53248, 0, 0, 128256),
    },
    "qwen3": {
        "8B": (4096, 36, 32, 8, 12288, 0, 0, 151936),
        "32B": (5120, 64, 64, 8, 25600, 0, 0, 151936),
        "30B-A3B": (2048, 48, 32, 4, 768, 128, 8, 151936),
    },
    "gpt_oss": {  # models/gpt_oss/__init__.py gptoss_configs
        "20b": (2880, 24, 64, 8, 2880, 32, 4, 201088),
        "120b": (2880, 36, 64, 8, 2880, 128, 4, 201088),
    },
}


def _sizes(model: ModelSpec) -> tuple[int, ...]:
    moe = model.moe
    width = moe.expert_ffn_hidden_size if moe else model.ffn_hidden_size
    experts = (moe.num_experts, moe.top_k) if moe else (0, 0)
    return (model.hidden_size, model.num_layers, model.num_attention_heads, model.kv_heads, width, *experts,
            model.vocab_size)  # fmt: skip


def read_config_module(text: str) -> dict:
    """What the emitted 0.3.0 module sets, read with `ast`: model_registry's flavor and converters, the training
    fields assigned, ParallelismConfig's keywords, the activation checkpointing and compile configs."""
    tree = ast.parse(text)
    out: dict = {"training": {}, "parallelism": {}, "imports": set()}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            out["imports"] |= {f"{node.module}.{a.name}" for a in node.names}
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ParallelismConfig":
            out["parallelism"] = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "model_registry":
            out["flavor"] = ast.literal_eval(node.args[0])
            out["converters"] = ast.unparse(node.keywords[0].value) if node.keywords else "None"
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Attribute):
            target = ast.unparse(node.targets[0])
            if target.startswith("config.training."):
                out["training"][target.rsplit(".", 1)[1]] = ast.literal_eval(node.value)
            elif target in ("config.activation_checkpoint", "config.compile"):
                out[target.split(".")[1]] = ast.unparse(node.value)
    return out


def torchtitan_violations(text: str, model: ModelSpec, plan: Plan) -> list[str]:
    doc = read_config_module(text)
    out = []
    tr, par = doc["training"], doc["parallelism"]
    fields = {  # config/configs.py: the dataclass fields (kw_only, slots: any other name is a TypeError)
        "data_parallel_replicate_degree", "data_parallel_shard_degree", "fsdp_reshard_after_forward",
        "tensor_parallel_degree", "enable_sequence_parallel", "pipeline_parallel_degree",
        "pipeline_parallel_schedule", "pipeline_parallel_microbatch_size", "pipeline_parallel_layers_per_stage",
        "pipeline_parallel_first_stage_less_layers", "pipeline_parallel_last_stage_less_layers",
        "context_parallel_degree", "expert_parallel_degree",
    }  # fmt: skip
    out += [f"unknown ParallelismConfig field {k}" for k in par if k not in fields]
    out += [f"unknown TrainingConfig field {k}" for k in tr if k not in TRAINING_FIELDS_0_3]
    family = next((m.split(".")[2] for m in doc["imports"] if m.endswith(".model_registry")), None)  # llama3 ...
    flavor = str(doc.get("flavor"))
    if flavor not in FLAVORS_0_3.get(str(family), {}):
        out.append(f"flavor {flavor!r} is not a torchtitan {family} flavor")
    elif FLAVORS_0_3[str(family)][flavor] != _sizes(model):
        out.append(f"{family} {flavor} is not {model.name}'s architecture")
    base = f"torchtitan.models.{family}.config_registry.{family}_{flavor.lower().replace('-', '_').replace('.', '_')}"
    if base not in doc["imports"]:
        out.append(f"the recipe {base} is not imported")
    rep, shard = par.get("data_parallel_replicate_degree", 1), par.get("data_parallel_shard_degree", -1)
    tp, pp, cp = (par.get(f"{n}_parallel_degree", 1) for n in ("tensor", "pipeline", "context"))
    if rep * shard * cp * tp * pp != plan.gpus:  # parallel_dims.py _validate
        out.append("dp_replicate*dp_shard*cp*tp*pp != world size")
    ep = par.get("expert_parallel_degree", 1)
    if (shard * cp * tp) % ep:  # parallel_dims.py: efsdp = dp_shard * cp * tp // ep
        out.append("ep does not divide dp_shard*cp*tp")
    divisor = (tp if par.get("enable_sequence_parallel", True) else 1) * (2 * cp if cp > 1 else 1)
    if tr["seq_len"] % divisor:  # trainer.py: "Training sequence length ... must be divisible by"
        out.append(f"seq_len not divisible by {divisor}")
    local, gbs = tr["local_batch_size"], tr["global_batch_size"]
    if gbs % (local * rep * shard):  # trainer.py: global batch a multiple of local batch x data-parallel degree
        out.append("global batch not a multiple of local batch x data-parallel degree")
    if tr.get("mixed_precision_param") not in ("bfloat16", "float32"):  # configs.py Literal
        out.append("mixed_precision_param must be bfloat16 or float32")
    out += _converter_violations(plan, doc.get("converters", "None"))
    if (
        doc.get("activation_checkpoint")
        != {"none": "None", "selective": "SelectiveAC.Config()", "full": "FullAC.Config()"}[plan.recompute]
    ):
        out.append(f"activation_checkpoint {doc.get('activation_checkpoint')} for recompute={plan.recompute}")
    if pp > 1:
        if not tr.get("disable_cuda_graphs"):  # trainer.py _validate_cuda_graphs
            out.append("CUDA graphs with pipeline parallelism")
        out += _pipeline_violations(model, plan, local, par)
    return out


TRAINING_FIELDS_0_3 = {  # config/configs.py TrainingConfig at 0.3.0
    "local_batch_size", "global_batch_size", "seq_len", "max_norm", "steps", "enable_cpu_offload",
    "disable_cuda_graphs", "dtype", "mixed_precision_param", "mixed_precision_reduce", "gc_freq", "gc_debug",
}  # fmt: skip


def _pipeline_violations(model: ModelSpec, plan: Plan, local: int, par: dict) -> list[str]:
    """trainer.py (local batch % pipeline micro-batch) and pipeline_parallel.py _get_pipeline_metadata (stages)."""
    out = []
    pp = par["pipeline_parallel_degree"]
    mbs, sched = par.get("pipeline_parallel_microbatch_size", 1), par.get("pipeline_parallel_schedule", "1F1B")
    if local % mbs:
        out.append("local batch not divisible by the pipeline micro-batch")
    stages, effective = _stages(model, pp, sched, par)
    if stages % pp or stages > effective:
        out.append("pipeline stages do not divide over pp")
    if (sched in SINGLE_STAGE) != (stages // pp == 1):
        out.append(f"{sched} with {stages // pp} stages per rank")
    if stages != plan.pp * plan.vpp:
        out.append(f"{stages} stages, not the plan's pp*vpp = {plan.pp * plan.vpp}")
    return out


FLOAT8_CONFIG_0_3 = {"recipe_name", "filter_fqns", "emulate", "model_compile_enabled"}  # float8.py Config at 0.3.0


def _converter_violations(plan: Plan, converters: str) -> list[str]:
    """0.3.0's Float8LinearConverter.Config (components/quantization/float8.py): rowwise or rowwise_with_gw_hp
    recipes only, kw-only fields; the output layer is `lm_head` (models/common/decoder.py)."""
    want = {"fp8-rowwise": "rowwise", "fp8-rowwise-gw-hp": "rowwise_with_gw_hp"}.get(plan.precision)
    if (want is not None) != ("Float8LinearConverter" in converters):
        return ["a rowwise fp8 recipe and the Float8LinearConverter go together"]
    if converters == "None":
        return []
    (call,) = ast.parse(converters).body[0].value.elts  # type: ignore[attr-defined]
    given = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    out = [f"unknown Float8LinearConverter.Config field {k}" for k in given if k not in FLOAT8_CONFIG_0_3]
    if given.get("recipe_name", "rowwise") != want:
        out.append(f"recipe_name {given.get('recipe_name')!r} for precision={plan.precision}")
    if given.get("filter_fqns") != ["lm_head"]:
        out.append("the output layer (lm_head) is not filtered: it would run in fp8, priced in bf16")
    return out


def _float8_section_violations(float8: dict | None, plan: Plan) -> list[str]:
    """v0.2.2's [quantize.linear.float8] (job_config.py l.731-752 Float8Linear): a recipe_name its Literal has that
    scales as the plan is priced (no section, or no name, is tensorwise: float8.py l.84-100), and the output layer
    filtered under a named recipe, which prices it in bf16."""
    want = {"fp8": "tensorwise", "fp8-current": "tensorwise", "fp8-rowwise": "rowwise",
            "fp8-rowwise-gw-hp": "rowwise_with_gw_hp"}.get(plan.precision)  # fmt: skip
    if float8 is None:
        return [f"no [quantize.linear.float8] for precision={plan.precision}"] if want else []
    out = [f"unknown key quantize.linear.float8.{k}" for k in float8 if k not in ("recipe_name", "filter_fqns")]
    if float8.get("recipe_name", "tensorwise") != want:
        out.append(f"float8 recipe_name {float8.get('recipe_name')!r} for precision={plan.precision}")
    if (plan.precision != "fp8") != ("output" in float8.get("filter_fqns", [])):
        out.append(f"the output layer is {'not ' * (plan.precision != 'fp8')}filtered, priced in bf16 only when named")
    return out
