"""What a local run asks of this host's memory: on CPU its workers' tensors, as the planner prices the plan on the
cpu profile, and the optimizer step's working copies beside them (machine.py adds the runtimes and the limit)."""

from __future__ import annotations

from planner.engine import Engine
from planner.launch.machine import HostNeed
from planner.launch.preflight import Environment
from planner.plan import Plan
from planner.precision import FP32_BYTES
from planner.specs import ModelSpec


def host_need(model: ModelSpec, plan: Plan, engine: Engine, env: Environment, *, nproc_per_node: int) -> HostNeed:
    """What the run asks of this host. On CPU the workers' tensors live in its memory: the planner's estimate of
    the plan priced on the cpu profile, without the profile's assumed runtime reserve (machine.py adds the
    measured one). On GPUs the tensors are the devices' (the memory check); the host holds the runtimes."""
    if env.device_type == "cuda":
        return HostNeed(nproc_per_node, 0.0)
    from planner.cost.coster import Coster
    from planner.io.catalog import load_hardware

    stages = Coster(model, load_hardware("cpu"), engine).memory(plan).stages
    tensors = max(s.breakdown.total_bytes - s.breakdown.reserved_bytes for s in stages)
    return HostNeed(nproc_per_node, tensors, optimizer_step_bytes(model, plan, engine))


# torch's single-tensor Adam/AdamW (torch/optim/adam.py _single_tensor_adam, what the worker's optimizer runs on CPU
# tensors: foreach and fused are CUDA defaults) builds each parameter's denominator as
# (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps): two fp32 temporaries of the parameter's size alive at once.
ADAM_TEMPORARIES = 2


def optimizer_step_bytes(model: ModelSpec, plan: Plan, engine: Engine) -> float:
    """The optimizer step's working copies on one worker: ADAM_TEMPORARIES of its largest local parameter, one
    parameter at a time (the embedding, the output layer or the widest weight matrix, split by tp and, where
    the ZeRO stage shards parameters or optimizer state, by dp·cp as FSDP2 shards dim 0). Measured on 2 CPU
    workers, gpt3-125m at 8 layers, fp32, DDP: 0.33 GiB a worker beyond the tensors, where this gives 0.29 GiB."""
    h = model.hidden_size
    widest = max(model.vocab_size, model.ffn_hidden_size, model.num_attention_heads * model.head_size) * h
    shards = plan.tp * (plan.dp * plan.cp if "optimizer" in engine.zero_stage(plan).shards else 1)
    return ADAM_TEMPORARIES * FP32_BYTES * widest / shards
