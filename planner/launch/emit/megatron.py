"""Megatron-LM arguments for pretrain_gpt.py (pure)."""

from __future__ import annotations

from planner.cost.stages import layer_layout
from planner.launch.emit.common import layers_per_chunk
from planner.plan import Plan
from planner.specs import ModelSpec

FILE_NAME = "megatron_args.sh"


def megatron_args(model: ModelSpec, plan: Plan) -> tuple[list[str], dict[str, str]]:
    """Arguments for Megatron-LM's pretrain_gpt.py. dp is implied: world / (tp·pp·cp)."""
    m: dict[str, str] = {}
    a = [
        "--tensor-model-parallel-size",
        str(plan.tp),
        "--pipeline-model-parallel-size",
        str(plan.pp),
        "--context-parallel-size",
        str(plan.cp),
        "--expert-model-parallel-size",
        str(plan.ep),
    ]
    m.update(
        tp="--tensor-model-parallel-size",
        pp="--pipeline-model-parallel-size",
        cp="--context-parallel-size",
        ep="--expert-model-parallel-size",
        dp=f"implied: world size {plan.gpus} / (tp*pp*cp)",
    )
    if plan.vpp > 1:
        a += [
            "--num-layers-per-virtual-pipeline-stage",
            str(layers_per_chunk(layer_layout(model.num_layers, plan.pp, plan.vpp), "megatron")),
        ]
        m["vpp"] = "--num-layers-per-virtual-pipeline-stage"
    else:
        m["vpp"] = "vpp=1: no virtual stages"
    m["schedule"] = (
        "interleaved: set by --num-layers-per-virtual-pipeline-stage"
        if plan.schedule == "interleaved"
        else f"{plan.schedule}: Megatron always runs 1F1B (gpipe has no flag)"
    )
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
    a += [
        "--micro-batch-size",
        str(plan.micro_batch),
        "--global-batch-size",
        str(plan.global_batch),
        "--seq-length",
        str(plan.seq_len),
    ]
    m.update(micro_batch="--micro-batch-size", global_batch="--global-batch-size", seq_len="--seq-length")
    a += {"fp32": [], "bf16": ["--bf16"], "fp16": ["--fp16"], "fp8": ["--bf16", "--fp8-format", "hybrid"]}[
        plan.precision
    ]
    m["precision"] = "--bf16 / --fp16 / --fp8-format hybrid (fp32: no flag)"
    a += [
        "--num-layers",
        str(model.num_layers),
        "--hidden-size",
        str(model.hidden_size),
        "--num-attention-heads",
        str(model.num_attention_heads),
        "--ffn-hidden-size",
        str(model.ffn_hidden_size),
        "--max-position-embeddings",
        str(model.max_seq_len),
        "--position-embedding-type",
        "rope" if model.position_embedding == "rope" else "learned_absolute",
        "--normalization",
        "RMSNorm" if model.norm == "rmsnorm" else "LayerNorm",
    ]
    if model.num_kv_heads and model.num_kv_heads < model.num_attention_heads:
        a += ["--group-query-attention", "--num-query-groups", str(model.num_kv_heads)]
    if model.mlp == "swiglu":
        a.append("--swiglu")
    if not model.tied_embeddings:
        a.append("--untie-embeddings-and-output-weights")
    if not model.has_bias:
        a.append("--disable-bias-linear")
    return a, m


def megatron_file(model: ModelSpec, plan: Plan) -> str:
    args, _ = megatron_args(model, plan)
    body = " \\\n  ".join(args)
    return f"# Megatron-LM arguments for pretrain_gpt.py; plan: {plan.summary()}\nMEGATRON_ARGS=(\n  {body}\n)\n"
