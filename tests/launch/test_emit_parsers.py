"""The emitted files read by the engines' own code (issue 22, item 5), where the engine installs on CPU:
`pip install -e ".[engines]"` (torchtitan 0.3.0, DeepSpeed 0.19.8, megatron-core 0.16.1, the last release for
Python 3.11). Without them these tests skip; test_emit_engines.py checks the same files against the project's own
reading of the engines' rules, everywhere.

- torchtitan: its ConfigManager imports the emitted module and parses it (tyro; Trainer.Config.__post_init__),
  ParallelDims validates the degrees and pipeline_parallel.py counts the stages and splits the layers.
- DeepSpeed: DeepSpeedConfig parses the JSON (pydantic models with extra="forbid") and asserts the batch.
- megatron-core: TransformerConfig (with ModelParallelConfig) is built from the emitted flags, each flag mapped to
  its field the way Megatron-LM's argument_utils.py ArgumentGroupFactory derives flags from those fields, and runs
  its __post_init__ validation. Megatron-LM's own parse_args is not on PyPI (megatron/training is not in the wheel).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import typing
from pathlib import Path

import pytest

from planner.engine.split import torchtitan_chunk_sizes
from planner.io.catalog import load_model
from planner.launch.emit import torchtitan as titan
from planner.plan import Plan
from tests.launch.test_emit_engines import PLANS, _emit, _megatron_args

CASES = range(len(PLANS))


def _emitted(tmp_path: Path, target: str, case: int) -> tuple[Path, Plan]:
    model_name, fields = PLANS[case]
    result = _emit(tmp_path, target, model_name, fields)
    if isinstance(result, str):
        pytest.skip(f"refused (test_emit_engines.py checks the reason): {result[:80]}")
    return result, Plan(**fields)


@pytest.mark.parametrize("case", CASES)
def test_torchtitan_reads_the_configuration(tmp_path, monkeypatch, case):
    config = pytest.importorskip("torchtitan.config", reason="pip install -e '.[engines]'")
    from torchtitan.distributed.parallel_dims import ParallelDims
    from torchtitan.distributed.pipeline_parallel import _generate_llm_fqn_per_model_part, _get_pipeline_metadata

    path, plan = _emitted(tmp_path, "torchtitan", case)
    model = load_model(PLANS[case][0])
    monkeypatch.syspath_prepend(str(path.parent))
    monkeypatch.delitem(sys.modules, titan.MODULE, raising=False)
    argv = ["--module", titan.MODULE, "--config", titan.CONFIG_FN]
    if plan.precision.startswith("fp8-rowwise") or model.num_layers == 126:
        # The float8 converter is built with the config (torchao and an SM89+ GPU), and torchtitan's own 405B recipe,
        # which the configuration starts from, builds one whatever the plan's precision.
        with pytest.raises((ImportError, ValueError), match=r"torchao is not installed|float8 is only supported on"):
            config.ConfigManager().parse_args(argv)
        return
    cfg = config.ConfigManager().parse_args(argv)
    assert (cfg.training.global_batch_size, cfg.training.seq_len) == (plan.global_batch, plan.seq_len)
    dims = ParallelDims.from_config(cfg.parallelism, world_size=plan.gpus)  # asserts the product is the world
    assert (dims.dp_replicate * dims.dp_shard, dims.tp, dims.pp, dims.cp) == (plan.dp, plan.tp, plan.pp, plan.cp)
    assert cfg.parallelism.enable_sequence_parallel == (plan.sp and plan.tp > 1)
    if plan.pp > 1:
        stages, layers, first, last = _get_pipeline_metadata(dims, cfg.parallelism, cfg.model_spec.model)
        assert stages == plan.pp * plan.vpp
        parts = _generate_llm_fqn_per_model_part(stages, layers, first, last)
        per_chunk = [sum(name.startswith("layers.") for name in part) for part in parts]
        assert per_chunk == list(torchtitan_chunk_sizes(layers, plan.pp, plan.vpp) or [])


class _DataParallel:
    """The one thing DeepSpeedConfig asks the model-parallel unit: the data-parallel size."""

    def __init__(self, dp: int):
        self.dp = dp

    def get_data_parallel_world_size(self) -> int:
        return self.dp


@pytest.mark.parametrize("case", CASES)
def test_deepspeed_reads_the_config(tmp_path, monkeypatch, case):
    ds_config = pytest.importorskip("deepspeed.runtime.config", reason="pip install -e '.[engines]'")
    path, plan = _emitted(tmp_path, "deepspeed", case)
    # DeepSpeedConfig asks deepspeed.comm for this rank (none without a process group, and then it takes world
    # size 1); rank 0 lets it take the data-parallel size from the model-parallel unit, as it does in a run.
    monkeypatch.setattr(ds_config.dist, "get_rank", lambda: 0)
    cfg = ds_config.DeepSpeedConfig(str(path), mpu=_DataParallel(plan.dp))  # _batch_assertion, ZeRO pydantic models
    assert (cfg.train_batch_size, cfg.train_micro_batch_size_per_gpu) == (plan.global_batch, plan.micro_batch)
    assert cfg.gradient_accumulation_steps == plan.num_microbatches
    assert cfg.zero_optimization_stage == plan.zero and cfg.pipeline["stages"] == plan.pp
    assert cfg.bfloat16_config.enabled == (plan.precision in ("bf16", "fp8"))
    if plan.zero:
        assert cfg.zero_config.reduce_bucket_size == 5e8 and cfg.zero_config.overlap_comm == (plan.zero == 3)


# Flags of Megatron-LM's own argument groups (megatron/training/arguments.py), not TransformerConfig fields.
MEGATRON_LM_ONLY = {
    "--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
    "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers", "--use-distributed-optimizer",
    "--overlap-grad-reduce", "--overlap-param-gather", "--use-torch-fsdp2", "--no-gradient-accumulation-fusion",
    "--ckpt-format", "--micro-batch-size", "--global-batch-size", "--seq-length", "--max-position-embeddings",
    "--position-embedding-type", "--rotary-base", "--swiglu", "--untie-embeddings-and-output-weights",
    "--group-query-attention", "--tokenizer-type", "--vocab-size", "--make-vocab-size-divisible-by",
    "--num-experts", "--moe-aux-loss-coeff", "--window-size", "--window-attn-skip-freq", "--quick-geglu",
    "--rotary-percent", "--use-megatron-fsdp", "--data-parallel-sharding-strategy",
}  # fmt: skip


def _flag_fields(cls: type) -> dict[str, tuple[str, object]]:
    """flag -> (field, value a bare flag sets), as argument_utils.py ArgumentGroupFactory names them: `--field-name`
    or the field's argparse_meta arg_names; a bool defaulting to True becomes `--no-` / `--disable-` (store_false)."""
    out: dict[str, tuple[str, object]] = {}
    for f in dataclasses.fields(cls):
        meta = f.metadata.get("argparse_meta", {})
        names = meta.get("arg_names") or ["--" + f.name.replace("_", "-")]
        store = f.default is not True  # store_true, or store_false for a True default
        if f.default is True and not meta.get("arg_names"):
            names = ["--no-" + f.name.replace("_", "-"), "--disable-" + f.name.replace("_", "-")]
        out |= {n: (f.name, store if isinstance(f.default, bool) else None) for n in names}
    return out


def _typed(hint: object, value: str) -> object:
    """A flag's value as argparse's `type` (ArgumentGroupFactory._extract_type) gives it: Optional unwrapped, int or
    float, a list expression for the MoE layer pattern (moe_freq_type), else the string (Literal choices)."""
    options = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
    if value.startswith("["):
        return json.loads(value)
    for kind in (int, float):
        if kind in options:
            return kind(value)
    return value


@pytest.mark.parametrize("case", CASES)
def test_megatron_core_builds_the_transformer_config(tmp_path, case):
    tc = pytest.importorskip("megatron.core.transformer.transformer_config", reason="pip install -e '.[engines]'")
    import torch
    import torch.nn.functional as F
    from megatron.core.fusions.fused_bias_geglu import quick_gelu  # argument_utils.py l.279 imports this one

    path, plan = _emitted(tmp_path, "megatron", case)
    model = load_model(PLANS[case][0])
    args, _ = _megatron_args(path.read_text())
    # arguments.py core_transformer_config_from_args: MLA's fields are MLATransformerConfig's
    config_class = tc.MLATransformerConfig if "--multi-latent-attention" in args else tc.TransformerConfig
    hints = typing.get_type_hints(config_class)
    flags = _flag_fields(config_class) | _flag_fields(tc.TransformerConfig)  # the flags are TransformerConfig's
    kw: dict[str, object] = {}
    for flag, value in args.items():
        if flag in MEGATRON_LM_ONLY:
            continue
        assert flag in flags, f"{flag} is neither a TransformerConfig field nor a Megatron-LM argument"
        name, bare = flags[flag]
        if value is True:
            kw[name] = bare
            continue
        kw[name] = _typed(hints[name], value)
    # arguments.py core_transformer_config_from_args: the flags that set fields under other names
    if "--swiglu" in args:
        kw |= {"gated_linear_unit": True, "activation_func": F.silu, "bias_activation_fusion": False}
    if "--quick-geglu" in args:  # argument_utils.py: gated quick_gelu; bias_activation_fusion = bias_gelu_fusion, on
        kw |= {"gated_linear_unit": True, "activation_func": quick_gelu, "bias_activation_fusion": True}
    if "--num-experts" in args:
        kw["num_moe_experts"] = int(args["--num-experts"])
        kw["moe_aux_loss_coeff"] = float(args["--moe-aux-loss-coeff"])
    if "--window-size" in args:  # arguments.py tuple_type and moe_freq_type
        kw["window_size"] = tuple(int(x) for x in str(args["--window-size"]).split(","))
        if "--window-attn-skip-freq" in args:
            kw["window_attn_skip_freq"] = json.loads(str(args["--window-attn-skip-freq"]))
    if plan.precision in ("bf16", "fp8"):
        kw["params_dtype"] = torch.bfloat16
    if plan.pp > 1:
        kw["pipeline_dtype"] = kw.get("params_dtype", torch.float32)
    if plan.vpp > 1:
        kw["virtual_pipeline_model_parallel_size"] = plan.vpp
    if "--decoder-first-pipeline-num-layers" in args:
        kw["num_layers_in_first_pipeline_stage"] = int(args["--decoder-first-pipeline-num-layers"])
        kw["num_layers_in_last_pipeline_stage"] = int(args["--decoder-last-pipeline-num-layers"])
    kw.pop("fp8", None)  # the fp8 recipe needs Transformer Engine, not installable on CPU
    cfg = config_class(**kw)  # __post_init__: every cross-field rule of megatron-core
    assert (cfg.num_layers, cfg.hidden_size, cfg.num_attention_heads) == (
        model.num_layers,
        model.hidden_size,
        model.num_attention_heads,
    )
    if model.is_mla:
        a = model.attention
        assert (cfg.kv_lora_rank, cfg.qk_head_dim + cfg.qk_pos_emb_head_dim, cfg.v_head_dim) == (
            a.kv_lora_rank, model.head_size, a.v_head_dim
        )  # fmt: skip
    else:
        assert (cfg.num_query_groups or cfg.num_attention_heads, cfg.kv_channels) == (model.kv_heads, model.head_size)
    assert cfg.mtp_num_layers == (model.mtp_layers or None)
    assert cfg.gated_linear_unit == (model.mlp == "swiglu") and cfg.add_bias_linear == model.has_bias
    if model.gate is not None:  # GPT-OSS: (x_linear + 1) * quick_gelu(x_glu), both halves clamped at 7
        assert cfg.activation_func is quick_gelu
        assert (cfg.glu_linear_offset, cfg.activation_func_clamp_value) == (model.gate.linear_offset, model.gate.clamp)
    assert cfg.layernorm_epsilon == (model.norm_eps or 1e-5) and cfg.hidden_dropout == cfg.attention_dropout == 0.0
    assert (cfg.tensor_model_parallel_size, cfg.sequence_parallel) == (plan.tp, plan.sp)


def test_megatron_core_takes_each_named_precision_recipe():
    """Every flag and value --emit megatron writes for a named recipe is a TransformerConfig field and one of its
    Literal choices (--fp8-format, --fp8-recipe, --fp4-format, --fp4-recipe)."""
    tc = pytest.importorskip("megatron.core.transformer.transformer_config", reason="pip install -e '.[engines]'")
    from planner.launch.emit.megatron_settings import PRECISION_FLAGS

    hints, flags = typing.get_type_hints(tc.TransformerConfig), _flag_fields(tc.TransformerConfig)
    for precision in ("fp8-delayed", "fp8-current", "fp8-blockwise", "mxfp8", "nvfp4"):
        bare, *words = PRECISION_FLAGS[precision]
        assert bare == "--bf16" and "--bf16" in flags  # training in bf16 around the recipe's GEMMs
        for flag, value in zip(words[::2], words[1::2], strict=True):
            assert flag in flags, (precision, flag)
            choices = [a for a in typing.get_args(hints[flags[flag][0]]) if a is not type(None)]
            literal = typing.get_args(choices[0]) if choices else ()
            assert value in literal, (precision, flag, value, literal)


# The recipe options' flags that are Megatron-LM arguments setting OptimizerConfig fields (arguments.py l.2918-2923,
# l.3667-3684), and the field each sets.
OPTIMIZER_FLAGS = {
    "--use-precision-aware-optimizer": "use_precision_aware_optimizer", "--exp-avg-dtype": "exp_avg_dtype",
    "--exp-avg-sq-dtype": "exp_avg_sq_dtype", "--optimizer-cpu-offload": "optimizer_cpu_offload",
    "--optimizer-offload-fraction": "optimizer_offload_fraction",
}  # fmt: skip


@pytest.mark.parametrize("model_name", ["llama3-8b", "mixtral-8x7b"])
def test_megatron_core_takes_the_recipe_options(model_name):
    """The recipe options --emit megatron writes build megatron-core 0.16.1's TransformerConfig (recompute modules,
    CUDA graphs and their scope, through __post_init__'s checks) and name OptimizerConfig fields."""
    tc = pytest.importorskip("megatron.core.transformer.transformer_config", reason="pip install -e '.[engines]'")
    from megatron.core.optimizer import OptimizerConfig

    from planner.launch.emit.megatron import recompute_args
    from planner.launch.emit.megatron_settings import recipe_option_args

    model = load_model(model_name)
    plan = Plan(dp=8, ep=8 if model.moe else 1, zero=1, global_batch=64, recompute="selective", precision="bf16")
    settings = {"recompute_modules": ["core_attn", "layernorm"], "precision_aware_optimizer": True,
                "optimizer_moment_dtype": "bf16", "optimizer_offload": 0.5, "cuda_graphs": True,
                "activation_offload": 1.0}  # fmt: skip
    words = recompute_args(plan, settings) + recipe_option_args(model, plan, settings)
    flags: dict[str, list[str]] = {}
    for w in words:
        if w.startswith("--"):
            flags[w] = []
        else:
            flags[next(reversed(flags))].append(w)
    optimizer = {f.name for f in dataclasses.fields(OptimizerConfig)}
    assert {OPTIMIZER_FLAGS[f] for f in flags if f in OPTIMIZER_FLAGS} <= optimizer
    assert flags["--exp-avg-dtype"] == ["bf16"]  # arguments.py choices fp32, fp16, bf16, fp8
    fields = _flag_fields(tc.TransformerConfig)
    kw: dict[str, object] = {
        "num_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "attention_dropout": 0.0,
        "hidden_dropout": 0.0,
    }  # as the file writes them
    if model.moe is not None:
        kw |= {"num_moe_experts": 8, "moe_grouped_gemm": True}
    for flag, values in flags.items():
        if flag in OPTIMIZER_FLAGS:
            continue
        name, bare = fields[flag]
        lists = ("recompute_modules", "cuda_graph_scope", "offload_modules")
        kw[name] = values if name in lists else values[0] if values else bare
    cfg = tc.TransformerConfig(**kw)  # __post_init__: recompute modules and CUDA-graph scope rules
    assert cfg.recompute_granularity == "selective" and list(cfg.recompute_modules) == ["core_attn", "layernorm"]
    assert cfg.cuda_graph_impl == "transformer_engine"
    scope = [str(getattr(s, "name", s)) for s in (cfg.cuda_graph_scope or [])]
    assert scope == (["attn", "moe_router"] if model.moe else [])  # the offload guide's scope for MoE layers
    offloaded = ["qkv_linear", "core_attn", "attn_proj", *(["expert_fc1", "moe_act"] if model.moe else [])]
    assert cfg.fine_grained_activation_offloading and list(cfg.offload_modules) == offloaded  # no norms under graphs
