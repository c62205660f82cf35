"""What the launch worker can build and run (pure): the model architectures its GPT has, and where it runs context
parallelism (ring attention on CUDA only). preflight.py checks a plan against them before any process starts; the
worker (trainer.py) refuses the same plans again when it starts."""

from __future__ import annotations

from planner.engine.architectures import FEATURE_NAMES, model_features
from planner.plan import Plan
from planner.precision import TENSORWISE_FP8, is_low_precision
from planner.specs import ModelSpec

# The precisions the worker runs in fp8: per-tensor dynamic scaling (launch/float8.py), which plain fp8 is on the
# worker, as on torchtitan.
FP8 = TENSORWISE_FP8
FP8_CAPABILITY = (8, 9)  # fp8 tensor cores: Ada (8.9), Hopper (9.0), Blackwell (10.x); torch._scaled_mm checks it
FP8_DIM_MULTIPLE = 16  # cuBLASLt fp8 GEMMs need every dimension a multiple of 16 (launch/float8.py)


def architecture_limits(model: ModelSpec) -> list[str]:
    """What of the model the worker's GPT (launch/model.py: pre-norm attention and MLP blocks, GQA, RoPE or learned
    positions, GELU or SwiGLU) cannot build, by name: it would train a different model. Mixture-of-experts layers
    are refused with the plan's ep (preflight.worker_limits); the planner engine's rules list the same features
    (engine_profiles/planner.yaml model_features: none)."""
    return [
        f"{model.name}: the launch worker has no {FEATURE_NAMES[f]} yet" for f in model_features(model) if f != "moe"
    ]


def cp_problems(plan: Plan, device_type: str) -> list[str]:
    """Why the worker cannot run this plan's context parallelism here (empty: it can, or cp == 1)."""
    cp = plan.cp
    if cp == 1:
        return []
    if device_type != "cuda":
        return [cp_device_refusal(cp, device_type)]
    out = []
    if plan.seq_len % (2 * cp):
        out.append(
            f"cp={cp}: seq_len={plan.seq_len} must be a multiple of 2 x cp = {2 * cp} "
            "(load-balanced causal sharding cuts each sequence into 2·cp chunks)"
        )
    if plan.pp > 1:
        out.append(
            f"cp={cp} with pp={plan.pp}: the worker does not combine context and pipeline parallelism "
            "(token positions are not carried between stages); use pp=1 with cp > 1"
        )
    return out


def uses_context_parallel(cp: int, device_type: str) -> bool:
    """The worker's choice: ring attention (``context_parallel``) only for cp > 1 on CUDA.

    cp > 1 anywhere else raises ValueError rather than silently running every rank on the full sequence.
    """
    if cp <= 1:
        return False
    if device_type != "cuda":
        raise ValueError(cp_device_refusal(cp, device_type))
    return True


def cp_device_refusal(cp: int, device_type: str) -> str:
    return (
        f"cp={cp} needs CUDA, and this device is {device_type.upper()}: torch's context-parallel ring "
        "attention is registered only for the CUDA SDPA kernels (flash, efficient, cudnn), not the CPU "
        f"one; run cp={cp} on a CUDA machine, or rehearse here with cp=1"
    )


def fp8_problems(
    model: ModelSpec, plan: Plan, device_type: str, capability: tuple[int, int] | None = None
) -> list[str]:
    """Why the worker cannot run this plan's low precision here (empty: it can, or the plan is 16/32-bit)."""
    p = plan.precision
    if not is_low_precision(p):
        return []
    if p not in FP8:
        return [
            f"precision={p}: the launch worker runs fp8 only as per-tensor dynamic scaling (fp8-current, launch/"
            "float8.py); launch with --precision fp8-current or bf16"
        ]
    out = []
    if plan.tp > 1:
        out.append(
            f"precision={p} with tp={plan.tp}: the worker's fp8 linears take whole weights, not tensor-parallel "
            "shards; launch with tp=1 or --precision bf16"
        )
    if device_type != "cuda":
        return out  # torch._scaled_mm runs on CPU at any size
    if capability is not None and capability < FP8_CAPABILITY:
        have, need = ".".join(map(str, capability)), ".".join(map(str, FP8_CAPABILITY))
        out.append(f"precision={p} needs fp8 tensor cores (compute capability {need}+); this GPU is {have}")
    tokens = plan.micro_batch * plan.seq_len // plan.cp
    dims = {
        "hidden_size": model.hidden_size,
        "ffn_hidden_size": model.ffn_hidden_size,
        "attention heads x head_size": model.num_attention_heads * model.head_size,
        "kv heads x head_size": model.kv_heads * model.head_size,
        "micro_batch x seq_len / cp": tokens,
    }
    odd = [f"{name}={value}" for name, value in dims.items() if value % FP8_DIM_MULTIPLE]
    if odd:
        verb = "is" if len(odd) == 1 else "are"
        out.append(f"precision={p}: fp8 GEMMs need multiples of {FP8_DIM_MULTIPLE}, and {', '.join(odd)} {verb} not")
    return out
