"""Every file `--emit megatron|megatron-bridge|torchtitan|torchtitan-v0.2|deepspeed` writes passes the project's own
reading of that engine's rules (issue 11, item 5; issue 22, item 4), and says the whole model.

The validators restate each engine's rules independently of the emitters, from the engine source: Megatron-LM
megatron/training/arguments.py validate_args and megatron/core/transformer/transformer_config.py
(NVIDIA/Megatron-LM @d98e8a64), Megatron-Bridge training/config.py ConfigContainer.validate and
training/utils/omegaconf_utils.py (@067f987d, 0.6.2), torchtitan 0.3.0 and v0.2.2 (torchtitan_rules.py) and DeepSpeed
(deepspeed/runtime/config.py _batch_assertion, runtime/zero/config.py, runtime/pipe/engine.py). A plan either emits a
file that passes them, or is refused with the engine's rule; the shipped plans cover both. The engines' own parsers
read the same files in test_emit_parsers.py.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from planner.errors import PlannerError
from planner.io.catalog import load_engine, load_hardware, load_model
from planner.launch.command import RunConfig
from planner.launch.emit import emit
from planner.plan import Plan
from planner.specs import ModelSpec
from tests.launch.torchtitan_rules import torchtitan_v02_violations, torchtitan_violations

# (model, plan fields): plans a new user would try, across the catalog.
PLANS = [
    ("llama3-8b", {"dp": 8, "zero": 3, "global_batch": 64, "seq_len": 8192, "recompute": "selective"}),
    ("llama3-8b", {"dp": 4, "tp": 2, "sp": True, "zero": 1, "global_batch": 64, "seq_len": 8192}),
    ("llama3-8b", {"dp": 2, "tp": 2, "sp": True, "pp": 2, "zero": 2, "global_batch": 32, "seq_len": 8192}),
    (
        "llama3-70b",
        {
            "dp": 8,
            "tp": 8,
            "sp": True,
            "pp": 4,
            "vpp": 5,
            "zero": 1,
            "global_batch": 256,
            "seq_len": 8192,
            "schedule": "interleaved",
        },
    ),
    (
        "llama3-70b",
        {
            "dp": 32,
            "tp": 8,
            "sp": True,
            "zero": 3,
            "global_batch": 512,
            "seq_len": 8192,
            "recompute": "full",
            "precision": "fp8",
        },
    ),
    (
        "llama3-405b",
        {
            "dp": 1,
            "tp": 8,
            "sp": True,
            "pp": 16,
            "vpp": 8,
            "zero": 1,
            "global_batch": 128,
            "seq_len": 8192,
            "schedule": "interleaved",
        },
    ),
    ("llama3-405b", {"dp": 8, "tp": 8, "sp": True, "pp": 16, "zero": 1, "global_batch": 512, "seq_len": 8192}),
    (
        "llama3-405b",
        {
            "dp": 2,
            "tp": 8,
            "sp": True,
            "pp": 8,
            "vpp": 2,
            "zero": 3,
            "global_batch": 64,
            "seq_len": 8192,
            "schedule": "interleaved",
        },
    ),
    (
        "gpt3-175b",
        {"dp": 16, "tp": 8, "sp": True, "pp": 8, "zero": 1, "global_batch": 1536, "seq_len": 2048, "recompute": "full"},
    ),
    (
        "gpt3-175b",
        {
            "dp": 32,
            "tp": 2,
            "sp": True,
            "pp": 16,
            "vpp": 3,
            "zero": 1,
            "global_batch": 1536,
            "seq_len": 2048,
            "schedule": "interleaved",
        },
    ),
    ("gpt3-175b", {"dp": 1024, "zero": 3, "global_batch": 1024, "seq_len": 2048, "recompute": "full"}),
    ("mixtral-8x7b", {"dp": 8, "ep": 8, "tp": 2, "sp": True, "zero": 1, "global_batch": 64, "seq_len": 4096}),
    ("mixtral-8x7b", {"dp": 16, "ep": 4, "pp": 4, "zero": 1, "global_batch": 128, "seq_len": 4096}),
    (
        "llama3-8b",
        {"dp": 1, "tp": 8, "sp": True, "cp": 4, "zero": 3, "global_batch": 8, "seq_len": 131072, "recompute": "full"},
    ),
    ("llama3-8b", {"dp": 8, "zero": 2, "global_batch": 64, "seq_len": 8192, "recompute": "full"}),
    ("llama3-70b", {"dp": 8, "pp": 8, "zero": 1, "global_batch": 256, "seq_len": 4096, "recompute": "full"}),
    ("qwen3-8b", {"dp": 4, "tp": 2, "sp": True, "zero": 1, "global_batch": 64, "seq_len": 4096}),
    ("qwen3-30b-a3b", {"dp": 16, "ep": 16, "zero": 1, "global_batch": 64, "seq_len": 4096}),
    # MLA, MTP and group-limited routing; sliding windows and sinks; a hybrid Mamba model Megatron's
    # pretrain_gpt.py cannot build (refused)
    ("deepseek-v3", {"dp": 64, "pp": 16, "ep": 64, "zero": 1, "global_batch": 1024, "seq_len": 4096}),
    # torchtitan 0.3.0's own Qwen3 recipes (models/qwen3/config_registry.py)
    ("qwen3-32b", {"dp": 4, "tp": 4, "sp": True, "pp": 2, "zero": 3, "global_batch": 64, "seq_len": 4096}),
    ("qwen3-30b-a3b", {"dp": 8, "ep": 8, "etp": 1, "zero": 3, "global_batch": 64, "seq_len": 4096}),
    ("gpt-oss-20b", {"dp": 8, "ep": 4, "etp": 1, "zero": 3, "global_batch": 64, "seq_len": 4096}),
    ("gpt-oss-120b", {"dp": 8, "ep": 8, "zero": 1, "global_batch": 64, "seq_len": 4096}),
    ("nemotron-h-56b", {"dp": 8, "tp": 8, "sp": True, "zero": 1, "global_batch": 64, "seq_len": 4096}),
    (
        "qwen3-235b-a22b",
        {
            "dp": 2,
            "tp": 4,
            "sp": True,
            "pp": 16,
            "cp": 2,
            "ep": 4,
            "etp": 1,
            "zero": 1,
            "global_batch": 256,
            "seq_len": 4096,
        },
    ),
]
# Megatron-Bridge's recipes for the 2026 MoE models (issue: the megatron search ranked them, no file ran them)
# torchao's rowwise fp8, the float8 recipe torchtitan 0.3.0 runs (Float8LinearConverter's default)
PLANS.append(
    ("llama3-70b", {"dp": 32, "tp": 8, "sp": True, "zero": 3, "global_batch": 512, "seq_len": 8192,
                    "recompute": "full", "precision": "fp8-rowwise"})
)  # fmt: skip
PLANS.append(("llama3-8b", {"dp": 8, "zero": 3, "global_batch": 64, "seq_len": 8192, "precision": "fp8-rowwise-gw-hp"}))
PLANS.append(
    ("kimi-k2", {"dp": 32, "tp": 2, "sp": True, "pp": 8, "ep": 32, "zero": 1, "global_batch": 1024, "seq_len": 4096})
)
# 6 micro-batches interleaved over pp 4: Megatron-Core takes them in one group of 6 per virtual stage
PLANS.append(
    ("llama3-70b", {"dp": 2, "tp": 8, "sp": True, "pp": 4, "vpp": 5, "zero": 1, "global_batch": 12, "seq_len": 8192,
                    "schedule": "interleaved"})
)  # fmt: skip
TARGETS = ("megatron", "megatron-bridge", "torchtitan", "torchtitan-v0.2", "deepspeed")


def _emit(tmp_path: Path, target: str, model_name: str, fields: dict) -> Path | str:
    model, plan = load_model(model_name), Plan(**fields)
    cfg = RunConfig(model=model_name, plan=plan, hardware="h100-sxm")
    try:
        return emit(
            target,
            cfg,
            model,
            tmp_path,
            engine=load_engine("planner"),
            hardware=load_hardware("h100-sxm"),
            hardware_ref="h100-sxm",
        )
    except PlannerError as e:
        return str(e)


# ---- Megatron-LM: arguments.py validate_args, transformer_config.py __post_init__ ---------------------------
def _megatron_args(text: str) -> tuple[dict[str, str | bool], dict[str, str]]:
    env = {}
    for line in text.splitlines():
        if line.startswith("export "):
            k, _, v = line[len("export ") :].split("#")[0].strip().partition("=")
            env[k] = v
    body = text[text.index("MEGATRON_ARGS=(") + len("MEGATRON_ARGS=(") : text.rindex(")")]
    words = shlex.split(body)
    args: dict[str, str | bool] = {}
    for i, w in enumerate(words):
        if w.startswith("--"):
            nxt = words[i + 1] if i + 1 < len(words) else ""
            args[w] = nxt if nxt and not nxt.startswith("--") else True
    return args, env


def _architecture_violations(a: dict[str, str | bool], model: ModelSpec) -> list[str]:
    """Megatron builds the model the spec describes (transformer_config.py @d98e8a64 fields; what it cannot build
    is refused before a file is written)."""
    out, spec = [], model.attention
    if model.layer_pattern is not None or (spec is not None and "C" in spec.pattern) or model.sandwich_norm:
        out.append("an architecture pretrain_gpt.py cannot build was written")
    if model.is_mla:
        assert spec is not None
        want = {"--kv-lora-rank": spec.kv_lora_rank, "--qk-head-dim": spec.qk_nope_head_dim,
                "--qk-pos-emb-head-dim": spec.qk_rope_head_dim, "--v-head-dim": spec.v_head_dim,
                "--q-lora-rank": spec.q_lora_rank}  # fmt: skip
        if "--multi-latent-attention" not in a or any(str(v) != a.get(k, "None") for k, v in want.items()):
            out.append("MLA built as multi-head attention, or with other ranks or widths")
        if "--group-query-attention" in a:  # arguments.py l.1973-1974
            out.append("group-query attention with MLA")
    if int(a.get("--mtp-num-layers", 0)) != model.mtp_layers:
        out.append("multi-token-prediction layers dropped or added")
    qk = {"none": None, "rmsnorm": "--qk-layernorm", "l2": "--qk-l2-norm"}[spec.qk_norm if spec else "none"]
    if any(f in a for f in ("--qk-layernorm", "--qk-l2-norm") if f != qk) or (qk is not None and qk not in a):
        out.append("q/k norms dropped or of another kind")
    if (a.get("--softmax-type") == "learnable") != bool(spec and spec.sinks):
        out.append("attention sinks dropped or added")
    sliding = [k.attention == "sliding" for k in model.layer_kinds if k.has_attention]
    if any(sliding) != ("--window-size" in a):
        out.append("sliding windows dropped or added")
    return out


def megatron_violations(text: str, model: ModelSpec, plan: Plan) -> list[str]:
    a, env = _megatron_args(text)
    num = lambda k, d=0: int(a.get(k, d))  # noqa: E731
    out = []
    tp, pp, cp, ep = (num(f"--{n}-model-parallel-size", 1) for n in ("tensor", "pipeline", "context", "expert"))
    cp = num("--context-parallel-size", 1)
    world = plan.gpus
    if world % (tp * pp * cp):  # arguments.py l.423-447
        out.append("world size not divisible by tp*pp*cp")
    dp = world // (tp * pp * cp)
    if num("--global-batch-size") % (num("--micro-batch-size") * dp):  # num_microbatches_calculator.py
        out.append("global batch not divisible by micro batch x dp")
    heads, groups = num("--num-attention-heads"), num("--num-query-groups", num("--num-attention-heads"))
    if heads % tp or (groups % tp and tp % groups):  # transformer_config.py l.1446-1468
        out.append("heads or query groups do not split over tp")
    if model.moe is not None and "--num-experts" not in a:  # a dense model would be built
        out.append("MoE model without --num-experts")
    if ep > 1 and ("--num-experts" not in a or num("--num-experts") % ep):  # arguments.py l.1654-1658
        out.append("ep needs --num-experts divisible by ep")
    vpp_flags = [
        k for k in ("--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank") if k in a
    ]
    if len(vpp_flags) > 1:  # arguments.py l.928-938
        out.append("two virtual-pipeline flags")
    layers = num("--num-layers")
    first, last = num("--decoder-first-pipeline-num-layers"), num("--decoder-last-pipeline-num-layers")
    emb, loss = "--account-for-embedding-in-pipeline-split" in a, "--account-for-loss-in-pipeline-split" in a
    eff = layers + emb + loss
    if "--num-layers-per-virtual-pipeline-stage" in a:  # arguments.py l.953-977
        per = num("--num-layers-per-virtual-pipeline-stage")
        if first or last or eff % pp or (eff // pp) % per:
            out.append("--num-layers-per-virtual-pipeline-stage does not split the layers")
        vpp = eff // pp // per
    else:
        vpp = num("--num-virtual-stages-per-pipeline-rank", 1)
    if (first or last) and (emb or loss):  # transformer_config.py l.2241-2258
        out.append("uneven first/last combined with account-for flags")
    if first or last:  # transformer_config.py l.2294-2370
        middle = pp - (first > 0) - (last > 0)
        rest = layers - first - last
        if first % vpp or last % vpp or (middle and (rest % middle or (rest // middle) % vpp)) or (not middle and rest):
            out.append("uneven first/last stages do not divide")
    elif pp > 1 and eff % (pp * vpp):  # arguments.py l.985-998
        out.append("layers (+ embedding/loss) not divisible by pp*vpp")
    fsdp = "--use-torch-fsdp2" in a
    if "--use-megatron-fsdp" in a and (fsdp or a.get("--ckpt-format") != "fsdp_dtensor"):  # arguments.py l.1118-1176
        out.append("Megatron-FSDP with torch FSDP2 or without fsdp_dtensor checkpoints")
    if fsdp and (
        pp > 1
        or ep > 1
        or "--use-distributed-optimizer" in a
        or "--no-gradient-accumulation-fusion" not in a
        or "--untie-embeddings-and-output-weights" not in a
    ):  # arguments.py l.1031-1049
        out.append("torch FSDP2 with pp/ep/dist-opt/grad-accum fusion/tied embeddings")
    fsdp = fsdp or "--use-megatron-fsdp" in a
    if fsdp and env.get("CUDA_DEVICE_MAX_CONNECTIONS") == "1":  # arguments.py l.1166-1167
        out.append("FSDP with CUDA_DEVICE_MAX_CONNECTIONS=1")
    if not fsdp and (tp > 1 or cp > 1) and env.get("CUDA_DEVICE_MAX_CONNECTIONS") != "1":  # l.1449-1479
        out.append("tp/cp > 1 without CUDA_DEVICE_MAX_CONNECTIONS=1")
    if "--overlap-param-gather" in a and not ("--use-distributed-optimizer" in a and "--overlap-grad-reduce" in a):
        out.append("--overlap-param-gather without the distributed optimizer and --overlap-grad-reduce")  # l.1024
    if cp > 1 and num("--seq-length") % (2 * cp):  # arguments.py l.1335
        out.append("seq length not divisible by 2*cp")
    m = num("--global-batch-size") // (num("--micro-batch-size") * dp)
    group = num("--microbatch-group-size-per-virtual-pipeline-stage", pp)  # model_parallel_config.py: default pp
    if vpp > 1 and not group_runs(m, pp, group):
        out.append("interleaving needs a micro-batch group in [pp, m] leaving a last group of 0 or >= pp")
    out += _architecture_violations(a, model)
    if num("--max-position-embeddings") < num("--seq-length"):
        out.append("max position embeddings below seq length")
    if a.get("--recompute-granularity") == "full" and a.get("--recompute-method") not in ("uniform", "block"):
        out.append("full recompute without a recompute method")  # transformer_config.py recompute checks
    if "--fp8-format" in a and not ("--bf16" in a or "--fp16" in a):
        out.append("fp8 without bf16/fp16")  # arguments.py: fp8 needs a 16-bit base
    return out + megatron_model_violations(a, model)


def megatron_model_violations(a: dict[str, str | bool], model: ModelSpec) -> list[str]:
    """Does pretrain_gpt.py build this model? Each flag as arguments.py / TransformerConfig reads it; what is
    absent takes Megatron's default (rotary base 10000, dropout 0.1, tied embeddings, gelu, biases, MHA)."""
    out = []
    rope = a.get("--position-embedding-type") == "rope"
    if rope != (model.position_embedding == "rope"):
        out.append("position embedding type")
    if rope and int(a.get("--rotary-base", 10000)) != model.rope_theta:
        out.append(f"--rotary-base {a.get('--rotary-base', 10000)} but rope_theta={model.rope_theta}")
    if rope and float(a.get("--rotary-percent", 1.0)) != model.rotary_percent:  # arguments.py: default 1.0
        out.append(f"--rotary-percent {a.get('--rotary-percent', 1.0)} but rotary_percent={model.rotary_percent}")
    if model.norm_eps is not None and float(a.get("--norm-epsilon", 1e-5)) != model.norm_eps:
        out.append("--norm-epsilon differs from norm_eps")
    if a.get("--normalization") != ("RMSNorm" if model.norm == "rmsnorm" else "LayerNorm"):
        out.append("normalization")
    gate = model.gate
    if ("--swiglu" in a) != (model.mlp == "swiglu" and gate is None) or ("--quick-geglu" in a) != (gate is not None):
        out.append("--swiglu / --quick-geglu")  # argument_utils.py: gated SiLU, or GPT-OSS's gated quick_gelu
    if gate is not None and (
        float(a.get("--glu-linear-offset", 0.0)) != gate.linear_offset
        or a.get("--activation-func-clamp-value") != (None if gate.clamp is None else f"{gate.clamp:g}")
    ):
        out.append("the gate's linear offset or clamp")  # glu_linear_offset, activation_func_clamp_value
    if ("--untie-embeddings-and-output-weights" in a) == model.tied_embeddings:
        out.append("tied/untied embeddings")
    if ("--disable-bias-linear" in a) == model.has_bias:
        out.append("linear biases")
    groups = int(a.get("--num-query-groups", model.num_attention_heads))
    if groups != model.kv_heads or ("--num-query-groups" in a) != ("--group-query-attention" in a):
        out.append("query groups")  # arguments.py: --num-query-groups is read with --group-query-attention
    kv_channels = int(a.get("--kv-channels", model.hidden_size // model.num_attention_heads))
    if kv_channels != model.head_size and not model.is_mla:  # arguments.py: hidden / heads unless given (MLA: its own)
        out.append("--kv-channels")
    if a.get("--tokenizer-type") != "NullTokenizer" or int(a.get("--vocab-size", 0)) != model.vocab_size:
        out.append("vocabulary")  # null_tokenizer.py: exactly --vocab-size tokens
    if int(a.get("--make-vocab-size-divisible-by", 128)) != 128:
        out.append("vocab padding differs from the cost model's 128 x tp")
    if float(a.get("--hidden-dropout", 0.1)) or float(a.get("--attention-dropout", 0.1)):
        out.append("dropout on (the plan is priced without)")
    if (int(a.get("--num-experts", 0)) or None) != (model.moe.num_experts if model.moe else None):
        out.append("--num-experts")
    if model.moe is not None:
        m = model.moe
        if (int(a.get("--moe-router-topk", 2)), int(a.get("--moe-ffn-hidden-size", 0))) != (
            m.top_k,
            m.expert_ffn_hidden_size,
        ):
            out.append("router top-k or expert FFN width")
        shared = int(a.get("--moe-shared-expert-intermediate-size", 0))
        if shared != m.num_shared_experts * m.expert_ffn_hidden_size:
            out.append("shared experts")
        freq = str(a.get("--moe-layer-freq", "1"))  # arguments.py moe_freq_type: an int or a list expression
        layers = [int(x) for x in freq.strip("[]").split(",")] if "[" in freq else [1] * model.num_layers
        if layers != [int(model.is_moe_layer(i)) for i in range(model.num_layers)]:
            out.append("MoE layer pattern")
        if float(a.get("--moe-aux-loss-coeff", 0.0)) <= 0.0:
            out.append("no load-balancing loss (--moe-aux-loss-coeff defaults to 0)")
    return out


# ---- DeepSpeed: runtime/config.py, runtime/pipe/engine.py ----------------------------------------------------
def deepspeed_violations(text: str, model: ModelSpec, plan: Plan) -> list[str]:
    cfg = json.loads(text)
    out = []
    dp = plan.gpus // (plan.tp * plan.pp * plan.cp)
    per_dp = cfg["train_micro_batch_size_per_gpu"] * cfg["gradient_accumulation_steps"]
    if per_dp * dp != plan.global_batch:
        out.append("micro * grad_acc * dp is not the global batch")
    if "train_batch_size" not in cfg:  # derived by DeepSpeed: only under AutoTP without a pipeline (no mpu there)
        if not (plan.tp > 1 and plan.pp == 1):
            out.append("no train_batch_size outside AutoTP")
    elif cfg["train_batch_size"] != per_dp * dp:
        out.append("train_batch_size != micro * grad_acc * dp (config.py _batch_assertion)")
    stage = cfg["zero_optimization"]["stage"]
    if plan.pp > 1 and stage >= 2:  # pipe/engine.py: "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism"
        out.append("ZeRO-2/3 with pipeline parallelism")
    if stage == 3 and cfg.get("tensor_parallel", {}).get("autotp_size", 1) > 1:  # engine.py _configure_tensor_parallel
        out.append("AutoTP with ZeRO-3")
    if cfg["bf16"]["enabled"] and cfg["fp16"]["enabled"]:
        out.append("bf16 and fp16 both enabled")
    if plan.precision != "fp32" and not (cfg["bf16"]["enabled"] or cfg["fp16"]["enabled"]):
        out.append(f"precision={plan.precision} but neither bf16 nor fp16 enabled")
    z = cfg["zero_optimization"]
    zero_keys = {  # runtime/zero/config.py DeepSpeedZeroConfig (extra="forbid"), the fields the emitter may set
        "stage", "overlap_comm", "contiguous_gradients", "reduce_scatter", "reduce_bucket_size",
        "allgather_partitions", "allgather_bucket_size", "stage3_prefetch_bucket_size",
        "stage3_param_persistence_threshold", "stage3_max_live_parameters", "stage3_max_reuse_distance",
    }  # fmt: skip
    out += [f"unknown zero_optimization key {k}" for k in z if k not in zero_keys]
    if stage and z.get("reduce_bucket_size") != 5e8:  # engine_profiles/deepspeed.yaml comm.dp_bucket_params
        out.append("reduce bucket differs from the priced 5e8 elements")
    if stage and z.get("overlap_comm") != (stage == 3):  # the profile prices DeepSpeed's default overlap
        out.append("overlap_comm differs from what the plan is priced with")
    if ("tensor_parallel" in cfg) != (plan.tp > 1):  # TPTrainingConfig.autotp_size 0/absent: AutoTP off
        out.append("AutoTP block present without tp > 1, or missing with it")
    if plan.recompute == "full" and cfg["activation_checkpointing"]["number_checkpoints"] != model.num_layers:
        out.append("full recompute should checkpoint every layer")
    return out


# ---- Megatron-Bridge: training/config.py ConfigContainer, utils/omegaconf_utils.py --------------------------------
BRIDGE_SECTIONS = {  # the ConfigContainer fields the emitter may set (struct mode: any other key is an error)
    "model": {  # megatron-core TransformerConfig / ModelParallelConfig fields (the model provider's)
        "tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size",
        "context_parallel_size", "expert_model_parallel_size", "expert_tensor_parallel_size", "sequence_parallel",
        "pipeline_model_parallel_layout", "account_for_embedding_in_pipeline_split",
        "account_for_loss_in_pipeline_split", "num_layers_in_first_pipeline_stage",
        "num_layers_in_last_pipeline_stage", "seq_length", "recompute_granularity", "recompute_method",
        "recompute_num_layers", "recompute_modules", "hidden_dropout", "attention_dropout",
        "gradient_accumulation_fusion", "overlap_p2p_comm", "batch_p2p_comm",  # model_parallel_config.py l.385-392
        "microbatch_group_size_per_vp_stage",  # model_parallel_config.py l.431-436
        "moe_token_dispatcher_type", "moe_flex_dispatcher_backend", "moe_shared_expert_overlap", "moe_grouped_gemm",
        "moe_expert_capacity_factor", "moe_pad_expert_input_to_capacity",  # transformer_config.py l.717-921
        "overlap_moe_expert_parallel_comm", "cuda_graph_impl",  # model_parallel_config.py l.343; l.1075
        "mtp_num_layers", "make_vocab_size_divisible_by",  # transformer_config.py l.68; Bridge gpt_provider.py l.141
        "layernorm_epsilon",  # megatron-core 0.16.1 transformer_config.py l.150 (default 1e-5)
    },
    "optimizer": {  # optimizer_config.py l.187-209
        "use_distributed_optimizer", "use_precision_aware_optimizer", "optimizer", "main_params_dtype",
        "main_grads_dtype", "exp_avg_dtype", "exp_avg_sq_dtype",
    },
    "ddp": {
        "use_distributed_optimizer", "overlap_grad_reduce", "overlap_param_gather", "grad_reduce_in_fp32",
        "use_megatron_fsdp", "data_parallel_sharding_strategy",  # megatron-core distributed_data_parallel_config.py
    },
    "dist": {"use_torch_fsdp2", "use_megatron_fsdp"},  # Bridge config.py DistributedInitConfig
    "checkpoint": {"ckpt_format"},
    "train": {"global_batch_size", "micro_batch_size"},
    "dataset": {"seq_length"},
    "tokenizer": {"vocab_size"},
}  # fmt: skip
BRIDGE_TOP = {"comm_overlap", "mixed_precision"}
BRIDGE_PRECISIONS = {"null", "bf16_mixed", "fp16_mixed", "bf16_with_fp8_delayed_scaling_mixed"}  # mixed_precision.py


def group_runs(m: int, pp: int, group: int) -> bool:
    """Megatron-Core's interleaved schedule runs m micro-batches in groups of `group` per virtual stage
    (megatron/core/pipeline_parallel/schedules.py l.1160-1180: pp <= group <= m, and a last group of 0 or >= pp)."""
    return pp <= group <= m and (m % group == 0 or m % group >= pp)


def bridge_overrides(text: str) -> dict[str, str]:
    body = text[text.index("BRIDGE_OVERRIDES=(") + len("BRIDGE_OVERRIDES=(") : text.rindex(")")]
    return dict(w.split("=", 1) for w in shlex.split(body))


def bridge_violations(text: str, model: ModelSpec, plan: Plan) -> list[str]:
    o = bridge_overrides(text)
    out = []
    for key in o:
        section, _, field = key.partition(".")
        if (field and field not in BRIDGE_SECTIONS.get(section, set())) or (not field and key not in BRIDGE_TOP):
            out.append(f"{key}: not a ConfigContainer field the recipes have")
    num = lambda k, d=1: d if o.get(k, "null") == "null" else int(o[k])  # noqa: E731
    tp, pp, cp = (
        num("model.tensor_model_parallel_size"),
        num("model.pipeline_model_parallel_size"),
        num("model.context_parallel_size"),
    )
    if plan.gpus % (tp * pp * cp):
        out.append("world size not divisible by tp*pp*cp")
    dp = plan.gpus // (tp * pp * cp)
    gbs, mbs = num("train.global_batch_size"), num("train.micro_batch_size")
    if gbs % (mbs * dp):
        out.append("global batch not divisible by micro batch x dp")
    if o["ddp.use_distributed_optimizer"] != o["optimizer.use_distributed_optimizer"]:  # config.py: synced
        out.append("ddp and optimizer disagree on the distributed optimizer")
    if o["dist.use_torch_fsdp2"] == "true" and (pp > 1 or o["ddp.use_distributed_optimizer"] == "true"):
        out.append("torch FSDP2 with pp or the distributed optimizer")  # Megatron arguments.py l.1031-1049
    mfsdp = o.get("ddp.use_megatron_fsdp") == "true" or o.get("dist.use_megatron_fsdp") == "true"
    if mfsdp and o["dist.use_torch_fsdp2"] == "true":  # config.py l.1481-1482
        out.append("use_megatron_fsdp and use_torch_fsdp2 are mutually exclusive")
    if o.get("checkpoint.ckpt_format") != ("fsdp_dtensor" if mfsdp else None):
        out.append("fsdp_dtensor checkpoints go with Megatron-FSDP only, and it needs them")  # l.1107, l.1531
    if cp > 1 and num("model.seq_length") % (2 * cp):  # config.py: seq_length % (2 * cp)
        out.append("seq length not divisible by 2*cp")
    if o["model.seq_length"] != o["dataset.seq_length"]:
        out.append("model and dataset sequence lengths differ")
    vpp = num("model.virtual_pipeline_model_parallel_size")
    m = gbs // (mbs * dp)
    if o.get("model.overlap_p2p_comm") == "true" and (o.get("model.batch_p2p_comm") != "false" or vpp == 1):
        out.append("overlap_p2p_comm needs batch_p2p_comm off and virtual stages")  # schedules.py l.1086, l.2181
    group = num("model.microbatch_group_size_per_vp_stage", pp)  # null: megatron-core's default, pp
    if vpp > 1 and (pp == 1 or not group_runs(m, pp, group)):
        out.append("interleaving needs pp > 1 and a micro-batch group in [pp, m] leaving a last group of 0 or >= pp")
    if o["model.recompute_granularity"] == "full" and o.get("model.recompute_method") not in ("uniform", "block"):
        out.append("full recompute without a method")
    if o["mixed_precision"] not in BRIDGE_PRECISIONS:
        out.append(f"mixed_precision {o['mixed_precision']} is not a registered recipe")
    if int(o["tokenizer.vocab_size"]) != model.vocab_size:
        out.append("vocabulary size")
    if "RECIPE=" not in text or "--recipe" not in text:
        out.append("no recipe named")
    layout = o.get("model.pipeline_model_parallel_layout", "null") != "null"
    split_flags = ("model.account_for_embedding_in_pipeline_split", "model.account_for_loss_in_pipeline_split")
    if any(k not in o for k in split_flags):  # a recipe's own would stay (the Qwen3-235B-A22B recipe sets both)
        out.append("pipeline split flags left to the recipe")
    if layout and any(o.get(k) == "true" for k in split_flags):  # transformer_config.py l.2241-2258
        out.append("a pipeline layout with the split flags")
    if o.get("optimizer.optimizer") != "adam":  # the Kimi-K2 recipe trains with Muon (optimizer "dist_muon")
        out.append("the recipe's optimizer left on, not the AdamW the plan is priced with")
    dtypes = ("main_params_dtype", "main_grads_dtype", "exp_avg_dtype", "exp_avg_sq_dtype")
    if any(o.get(f"optimizer.{k}") != "fp32" for k in dtypes):  # optimizer_config.py l.468-480 asserts fp32 without
        out.append("optimizer dtypes left to the recipe (DeepSeek-V3: bf16 moments)")  # the precision-aware one
    if o.get("model.make_vocab_size_divisible_by") != "128":  # the profile's vocab_padding; DeepSeek-V3/Kimi: 1280
        out.append("vocabulary padding left to the recipe")
    if o.get("model.mtp_num_layers") != (str(model.mtp_layers) if model.mtp_layers else "null"):
        out.append("multi-token-prediction layers dropped or added")
    if model.moe is not None:
        if o.get("model.expert_model_parallel_size") != str(plan.ep):
            out.append("expert parallelism left to the recipe")
        if (
            o.get("model.moe_token_dispatcher_type") != "alltoall"
            or o.get("model.moe_flex_dispatcher_backend") != "null"
        ):
            out.append("dispatcher left to the recipe (DeepEP / HybridEP), not the all-to-all the plan is priced with")
        if o.get("model.expert_tensor_parallel_size") != str(plan.etp or plan.tp):
            out.append("expert tensor parallelism left to the recipe")
        if o.get("optimizer.use_precision_aware_optimizer") != "false" or o.get("model.cuda_graph_impl") != "none":
            out.append("the recipe's precision-aware optimizer or CUDA graphs left on")
    return out


VALIDATORS = {
    "megatron": megatron_violations,
    "megatron-bridge": bridge_violations,
    "torchtitan": torchtitan_violations,
    "torchtitan-v0.2": torchtitan_v02_violations,
    "deepspeed": deepspeed_violations,
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", range(len(PLANS)))
def test_emitted_files_pass_the_engines_own_checks(tmp_path, target, case):
    model_name, fields = PLANS[case]
    result = _emit(tmp_path, target, model_name, fields)
    if isinstance(result, str):  # refused: with the engine's rule (or the file's, for Bridge's fp8), nothing written
        bridge_fp8 = target == "megatron-bridge" and fields.get("precision") in ("fp8", "fp8-delayed")
        no_recipe = f"has no {fields.get('precision')} training recipe; emit a target whose engine runs it"
        assert (
            f"--emit {target}: {target} would refuse this plan:" in result
            or no_recipe in result
            or (bridge_fp8 and "price the plan as it runs" in result)
        ), result
        assert not list(tmp_path.iterdir())
        return
    violations = VALIDATORS[target](result.read_text(), load_model(model_name), Plan(**fields))
    assert not violations, f"{target} {model_name} {fields}: {violations}"


def test_the_plans_cover_emitted_and_refused_files(tmp_path):
    """Each target writes some of the plans and refuses others (so neither branch above is vacuous)."""
    for target in TARGETS:
        outcomes = [isinstance(_emit(tmp_path / f"{target}{i}", target, m, f), Path) for i, (m, f) in enumerate(PLANS)]
        assert any(outcomes) and not all(outcomes), target


def test_issue_cases():
    """The files the issue found rejected or misread are now right or refused."""
    cases = {  # (target, model, fields) -> what the file or the refusal must say
        ("torchtitan-v0.2", "llama3-8b", (("dp", 8), ("zero", 3), ("global_batch", 64), ("seq_len", 8192))): (
            'flavor = "8B"'
        ),
        ("torchtitan", "llama3-8b", (("dp", 8), ("zero", 3), ("global_batch", 64), ("seq_len", 8192))): (
            'model_registry("8B"'
        ),
        # issue 22: Llama 3's RoPE base reaches Megatron (it trained with 10000 before), and Bridge gets a recipe
        ("megatron", "llama3-8b", (("dp", 8), ("zero", 1), ("global_batch", 64))): "--rotary-base 500000",
        ("megatron-bridge", "llama3-70b", (("dp", 8), ("tp", 8), ("sp", True), ("zero", 1), ("global_batch", 64))): (
            "RECIPE=llama3_70b_pretrain_config"
        ),
        ("megatron-bridge", "mixtral-8x7b", (("dp", 8), ("ep", 8), ("zero", 1), ("global_batch", 64))): "no recipe",
        ("megatron", "bloom-176b", (("dp", 8), ("zero", 1), ("global_batch", 64))): "ALiBi attention biases",
        ("torchtitan", "gpt3-175b", (("dp", 8), ("zero", 3), ("global_batch", 64))): "is none of them",
        ("torchtitan", "mixtral-8x7b", (("dp", 8), ("zero", 3), ("global_batch", 64))): "is none of them",
        ("torchtitan", "qwen3-32b", (("dp", 8), ("zero", 3), ("global_batch", 64))): "config = qwen3_32b()",
        ("torchtitan", "qwen3-30b-a3b", (("dp", 8), ("ep", 8), ("etp", 1), ("zero", 3), ("global_batch", 64))): (
            'model_registry("30B-A3B"'
        ),
        ("torchtitan", "qwen3-8b", (("dp", 8), ("zero", 3), ("global_batch", 64))): "qwen3 32B, qwen3 30B-A3B",
        ("torchtitan-v0.2", "qwen3-32b", (("dp", 8), ("zero", 3), ("global_batch", 64))): "llama3 405B (RoPE theta",
        ("megatron", "mixtral-8x7b", (("dp", 8), ("ep", 8), ("zero", 1), ("global_batch", 64))): "--num-experts 8",
        # 2026 architectures, once written as plain multi-head GPT layers: now built, or refused by name
        ("megatron", "deepseek-v3", (("dp", 8), ("zero", 1), ("global_batch", 64))): "--kv-lora-rank 512",
        ("megatron", "kimi-k2", (("dp", 8), ("zero", 1), ("global_batch", 64))): "--multi-latent-attention",
        ("megatron", "gpt-oss-20b", (("dp", 8), ("zero", 1), ("global_batch", 64))): "--window-size 127,0",
        ("megatron", "qwen3-8b", (("dp", 8), ("zero", 1), ("global_batch", 64))): "--qk-layernorm",
        ("megatron", "nemotron-h-8b", (("dp", 8), ("zero", 1), ("global_batch", 64))): "hybrid layer pattern",
        ("megatron", "llama4-scout", (("dp", 8), ("zero", 1), ("global_batch", 64))): "no chunked attention",
        ("megatron", "gemma3-27b", (("dp", 8), ("zero", 1), ("global_batch", 64))): "sandwich_norm",
        (
            "megatron",
            "llama3-405b",
            (("dp", 8), ("tp", 8), ("sp", True), ("pp", 16), ("zero", 1), ("global_batch", 512)),
        ): "--account-for-loss-in-pipeline-split",
        (
            "deepspeed",
            "llama3-8b",
            (("dp", 4), ("pp", 2), ("zero", 2), ("global_batch", 64)),
        ): "zero=2 does not run with pipeline",
    }
    import tempfile

    for (target, model, fields), says in cases.items():
        with tempfile.TemporaryDirectory() as d:
            result = _emit(Path(d), target, model, dict(fields))
            text = result if isinstance(result, str) else result.read_text()
            assert says in text, (target, model, text[:300])


def test_the_validators_catch_what_the_issue_found(tmp_path):
    """Each validator fails the defects issue 22 found (so a passing file means something): Megatron without the
    RoPE base, torchtitan 0.3.0 with CUDA graphs under pipelining, a Bridge key no ConfigContainer has, a ZeRO key
    DeepSpeed does not know."""
    llama, plan = load_model("llama3-8b"), Plan(**PLANS[1][1])
    mega = _emit(tmp_path / "m", "megatron", "llama3-8b", PLANS[1][1])
    assert isinstance(mega, Path)
    text = mega.read_text().replace("--rotary-base 500000", "")
    assert any("--rotary-base 10000" in v for v in megatron_violations(text, llama, plan))
    pp_plan = {"dp": 2, "tp": 2, "sp": True, "pp": 2, "zero": 2, "global_batch": 32, "seq_len": 8192}
    titan = _emit(tmp_path / "t", "torchtitan", "llama3-8b", pp_plan)
    assert isinstance(titan, Path)
    text = titan.read_text().replace("disable_cuda_graphs = True", "disable_cuda_graphs = False")
    assert "CUDA graphs with pipeline parallelism" in torchtitan_violations(text, llama, Plan(**pp_plan))
    bridge = _emit(tmp_path / "b", "megatron-bridge", "llama3-8b", PLANS[1][1])
    assert isinstance(bridge, Path)
    text = bridge.read_text().replace("model.sequence_parallel=", "model.sequence_paralel=")
    assert any("sequence_paralel" in v for v in bridge_violations(text, llama, Plan(**PLANS[1][1])))
    ds = _emit(tmp_path / "d", "deepspeed", "llama3-8b", PLANS[14][1])
    assert isinstance(ds, Path)
    cfg = json.loads(ds.read_text())
    cfg["zero_optimization"]["bucket_size"] = 1
    violations = deepspeed_violations(json.dumps(cfg), llama, Plan(**PLANS[14][1]))
    assert "unknown zero_optimization key bucket_size" in violations


def test_megatron_pins_one_device_connection_before_blackwell_only(tmp_path):
    """Megatron asserts CUDA_DEVICE_MAX_CONNECTIONS=1 with tp > 1 only where get_device_arch_version() < 10
    (arguments.py l.1452-1479 @d98e8a64: the requirement "no longer exists since the Blackwell architecture"), so a
    GB200 file leaves it to the driver and an H100 file sets it."""
    model = load_model("llama3-8b")
    plan = Plan(dp=4, tp=2, sp=True, zero=1, global_batch=16, seq_len=4096)
    pins = {}
    for gpu in ("h100-sxm", "gb200-nvl72", "mi300x"):
        path = emit(
            "megatron", RunConfig(model="llama3-8b", plan=plan, hardware=gpu), model, tmp_path / gpu,
            engine=load_engine("planner"), hardware=load_hardware(gpu), hardware_ref=gpu,
        )  # fmt: skip
        pins[gpu] = "CUDA_DEVICE_MAX_CONNECTIONS=1" in path.read_text()
    assert pins == {"h100-sxm": True, "gb200-nvl72": False, "mi300x": True}  # MI300X (gfx942) reports major 9


# (model, plan fields, the recipe, the config.json it loads): each recipe's own layout, dispatcher, optimizer and
# padding differ from the plan's (megatron_bridge.py, bridge_recipes.py)
BRIDGE_MOE = [
    ("deepseek-v3", dict(PLANS)["deepseek-v3"], "deepseek_v3_pretrain_config", "deepseek_v3"),
    (
        "deepseek-v3",
        {"dp": 32, "pp": 4, "vpp": 2, "ep": 32, "zero": 1, "global_batch": 1024, "seq_len": 4096,
         "schedule": "interleaved"},
        "deepseek_v3_pretrain_config",
        "deepseek_v3",
    ),
    ("kimi-k2", dict(PLANS)["kimi-k2"], "kimi_k2_pretrain_config", "kimi_k2_instruct"),
    ("gpt-oss-20b", {"dp": 8, "ep": 4, "etp": 1, "zero": 1, "global_batch": 64, "seq_len": 4096},
     "gpt_oss_20b_pretrain_config", "gpt_oss_20b"),
    ("gpt-oss-120b", dict(PLANS)["gpt-oss-120b"], "gpt_oss_120b_pretrain_config", "gpt_oss_120b"),
]  # fmt: skip


@pytest.mark.parametrize(("model_name", "fields", "recipe_name", "hf_config"), BRIDGE_MOE)
def test_bridge_runs_the_2026_moe_recipes_as_priced(tmp_path, model_name, fields, recipe_name, hf_config):
    """DeepSeek-V3, Kimi-K2 and GPT-OSS 20B/120B are written for the Bridge recipe that loads their config.json
    (which imports to the catalog model), with the plan's expert degrees, the all-to-all dispatcher, AdamW with fp32
    moments, MTP as priced and the plan's pipeline split in place of the recipe's layout."""
    from planner.launch.emit.megatron_bridge import recipe

    config = Path(__file__).resolve().parents[1] / "data" / "hf_configs" / f"{hf_config}.json"
    assert recipe(load_model(config)) == recipe_name
    model, plan = load_model(model_name), Plan(**fields)
    result = _emit(tmp_path, "megatron-bridge", model_name, fields)
    assert isinstance(result, Path), result
    text = result.read_text()
    assert f"RECIPE={recipe_name}" in text and f"--recipe {recipe_name}" in text
    o = bridge_overrides(text)
    assert o["model.expert_model_parallel_size"] == str(plan.ep)
    assert o["model.expert_tensor_parallel_size"] == str(plan.etp or plan.tp)
    assert (o["model.moe_token_dispatcher_type"], o["model.moe_flex_dispatcher_backend"]) == ("alltoall", "null")
    assert o["model.mtp_num_layers"] == (str(model.mtp_layers) if model.mtp_layers else "null")
    assert o["optimizer.optimizer"] == "adam" and o["optimizer.exp_avg_dtype"] == "fp32"
    assert o["model.pipeline_model_parallel_layout"] != "null" or plan.vpp == 1  # the layout names the stages
    assert not bridge_violations(text, model, plan)


def test_a_llama4_plan_the_megatron_search_ranks_says_where_it_runs(tmp_path):
    """The megatron search ranks Llama 4 Maverick plans (the profile's model_features: all), but neither
    pretrain_gpt.py nor Megatron-Bridge @067f987d builds chunked attention (Bridge has no Llama 4 recipe and removed
    its Llama4ModelProvider): both refusals name NeMo 2's Llama 4 recipes instead of sending the user to the other."""
    from planner.api import run_search

    result = run_search("llama4-maverick", gpus=128, hardware="b200", engine="megatron", top=1)
    fields = result.top[0].plan.model_dump()
    for target in ("megatron-bridge", "megatron"):
        said = _emit(tmp_path / target, target, "llama4-maverick", fields)
        assert isinstance(said, str) and "nemo llm pretrain --factory llama4_e16` or `llama4_e128`" in said, said
        assert "emit megatron for its full arguments" not in said


def test_megatron_files_state_the_microbatch_group_the_plan_was_priced_with(tmp_path):
    """Interleaved with 6 micro-batches on pp 4: the default group (pp) would leave a last group of 2 and Megatron
    would raise (schedules.py l.1160-1180), so both Megatron files state the group of 6 the memory was priced with
    (plan.py microbatch_group); the validators fail either file without it."""
    model_name, fields = PLANS[-1]
    plan, model = Plan(**fields), load_model(model_name)
    assert plan.num_microbatches == 6 and plan.pp == 4
    mega = _emit(tmp_path / "m", "megatron", model_name, fields)
    assert isinstance(mega, Path) and "--microbatch-group-size-per-virtual-pipeline-stage 6" in mega.read_text()
    text = mega.read_text().replace("--microbatch-group-size-per-virtual-pipeline-stage 6", "")
    assert any("micro-batch group" in v for v in megatron_violations(text, model, plan))
    bridge = _emit(tmp_path / "b", "megatron-bridge", model_name, fields)
    key = "model.microbatch_group_size_per_vp_stage"
    assert isinstance(bridge, Path) and bridge_overrides(bridge.read_text())[key] == "6"
    text = bridge.read_text().replace(f"{key}=6", f"{key}=null")
    assert any("micro-batch group" in v for v in bridge_violations(text, model, plan))


@pytest.mark.parametrize("target", ["torchtitan", "torchtitan-v0.2", "megatron-bridge"])
def test_an_engines_stock_model_is_not_written_for_a_model_it_is_not(tmp_path, target):
    """Llama 3 8B with biases on every linear matched Llama 3 8B's flavor and recipe by its sizes and was written as
    the stock model, biases gone, without a word (audit): refused. A norm epsilon a torchtitan file cannot set is
    refused too (it was written with a warning: review); Megatron-Bridge's file sets it (model.layernorm_epsilon)."""
    llama = load_model("llama3-8b")
    plan = Plan(dp=8, zero=3, global_batch=64, seq_len=8192)

    def written(model: ModelSpec, out: Path) -> Path:
        return emit(
            target, RunConfig(model="custom", plan=plan, hardware="h100-sxm"), model, out,
            engine=load_engine("megatron" if target == "megatron-bridge" else "torchtitan"),
            hardware=load_hardware("h100-sxm"), hardware_ref="h100-sxm",
        )  # fmt: skip

    with pytest.raises(PlannerError, match=r"is none of them|has no recipe building"):
        written(llama.model_copy(update={"linear_bias": True}), tmp_path / "bias")
    assert not (tmp_path / "bias").exists() or not any((tmp_path / "bias").iterdir())
    eps = llama.model_copy(update={"norm_eps": 1e-6})
    if target == "megatron-bridge":
        assert "model.layernorm_epsilon=1e-06" in written(eps, tmp_path / "eps").read_text()
    else:
        with pytest.raises(PlannerError, match=r"normalises with eps 1e-05, not llama3-8b.s norm_eps 1e-06"):
            written(eps, tmp_path / "eps")
        assert not (tmp_path / "eps").exists() or not any((tmp_path / "eps").iterdir())


@pytest.mark.parametrize("target", ["torchtitan", "torchtitan-v0.2"])
def test_torchtitan_files_cut_stages_the_default_weights_cannot(tmp_path, target):
    """Llama 3 70B on pp 4 x vpp 4: 16 stages need pipeline_parallel_layers_per_stage 5 with the embedding and
    output weighing no layer (first/last_stage_less_layers 0, engine/split.py torchtitan_split); the file says so,
    passes torchtitan's checks, and without the two weights would build 17 stages."""
    fields = {"dp": 2, "pp": 4, "vpp": 4, "zero": 3, "global_batch": 16, "seq_len": 8192, "schedule": "interleaved"}
    written = _emit(tmp_path, target, "llama3-70b", fields)
    assert isinstance(written, Path), written
    text, llama = written.read_text(), load_model("llama3-70b")
    weights = [line for line in text.splitlines() if "stage_less_layers" in line]
    assert len(weights) == 2 and all(line.rstrip(",").endswith("0") for line in weights)
    assert not VALIDATORS[target](text, llama, Plan(**fields))
    stripped = "\n".join(line for line in text.splitlines() if line not in weights)
    assert "17 stages, not the plan's pp*vpp = 16" in VALIDATORS[target](stripped, llama, Plan(**fields))


def test_a_dense_plan_priced_on_megatron_fsdp_is_written_as_it(tmp_path):
    """--megatron-fsdp runs a dense model's ZeRO-3 as Megatron-FSDP (comm.megatron_fsdp), as Megatron-Bridge's Llama 3
    70B GB200 recipe does (perf_recipes/llama/gb200/llama3.py, ddp.use_megatron_fsdp): both Megatron files say so,
    and pass the engines' checks; without the flag the dense plan stays on torch FSDP2 (the test above)."""
    from helpers import run_planner

    fields = {"dp": 8, "zero": 3, "global_batch": 64}
    args = ["-m", "llama3-8b", "--dp", "8", "--zero", "3", "--global-batch", "64", "--megatron-fsdp"]
    for target, check in (("megatron", megatron_violations), ("megatron-bridge", bridge_violations)):
        rc, _, err = run_planner("launch", *args, "--emit", target, "--out", str(tmp_path / target))
        assert rc == 0, err
        (written,) = (tmp_path / target).iterdir()
        text = written.read_text()
        assert not check(text, load_model("llama3-8b"), Plan(**fields)), check(
            text, load_model("llama3-8b"), Plan(**fields)
        )
        assert ("--use-megatron-fsdp" in text) if target == "megatron" else ("ddp.use_megatron_fsdp=true" in text)
        assert "--use-torch-fsdp2" not in text and "dist.use_torch_fsdp2=true" not in text


def test_megatron_files_run_zero3_with_ep_as_megatron_fsdp(tmp_path):
    """ZeRO-3 with ep > 1 is Megatron-FSDP (engine_profiles/megatron.yaml rules.zero.3.with_ep): the
    Megatron-LM script says --use-megatron-fsdp with optim_grads_params and fsdp_dtensor checkpoints (arguments.py
    l.1118-1176), the Bridge overrides ddp/dist.use_megatron_fsdp as its DeepSeek-V3 GB300 perf recipe does; the
    checks catch the file without its checkpoint format, and a dense ZeRO-3 plan stays on torch FSDP2."""
    qwen, fields = load_model("qwen3-30b-a3b"), {"dp": 8, "ep": 8, "etp": 1, "zero": 3, "global_batch": 64}
    mega = _emit(tmp_path / "m", "megatron", "qwen3-30b-a3b", fields)
    assert isinstance(mega, Path), mega
    args, _ = _megatron_args(mega.read_text())
    assert args.get("--use-megatron-fsdp") is True and "--use-torch-fsdp2" not in args
    assert "--no-gradient-accumulation-fusion" in args  # as its functional tests (the fusion needs TE 2.10)
    assert args["--data-parallel-sharding-strategy"] == "optim_grads_params" and args["--ckpt-format"] == "fsdp_dtensor"
    tampered = mega.read_text().replace("--ckpt-format fsdp_dtensor", "--ckpt-format torch_dist")
    assert "Megatron-FSDP with torch FSDP2 or without fsdp_dtensor checkpoints" in megatron_violations(
        tampered, qwen, Plan(**fields)
    )
    bridge = _emit(tmp_path / "b", "megatron-bridge", "qwen3-30b-a3b", fields)
    assert isinstance(bridge, Path), bridge
    o = bridge_overrides(bridge.read_text())
    assert (o["ddp.use_megatron_fsdp"], o["dist.use_torch_fsdp2"], o["ddp.use_distributed_optimizer"]) == (
        "true", "false", "true",
    )  # fmt: skip
    assert "unset CUDA_DEVICE_MAX_CONNECTIONS" in bridge.read_text()  # Bridge config.py l.1110 refuses 1
    assert o["model.gradient_accumulation_fusion"] == "false"
    untold = (
        bridge.read_text()
        .replace("'checkpoint.ckpt_format=fsdp_dtensor'", "")
        .replace("checkpoint.ckpt_format=fsdp_dtensor", "")
    )
    assert "fsdp_dtensor checkpoints go with Megatron-FSDP only, and it needs them" in bridge_violations(
        untold, qwen, Plan(**fields)
    )
    dense = _emit(tmp_path / "d", "megatron", "llama3-8b", {"dp": 8, "zero": 3, "global_batch": 64})
    assert isinstance(dense, Path) and "--use-torch-fsdp2" in dense.read_text()
    assert "--use-megatron-fsdp" not in dense.read_text()
