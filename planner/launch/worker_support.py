"""What the launch worker can build and run (pure): the model architectures its GPT has, and where it runs context
parallelism (ring attention on CUDA only). preflight.py checks a plan against them before any process starts; the
worker (trainer.py) refuses the same plans again when it starts."""

from __future__ import annotations

from planner.plan import Plan
from planner.specs import ModelSpec


def architecture_limits(model: ModelSpec) -> list[str]:
    """What of the model the worker's GPT (launch/model.py: pre-norm attention and MLP blocks, GQA, RoPE or learned
    positions, GELU or SwiGLU) cannot build, by name: it would train a different model."""
    kinds = {k.mixer for k in model.layer_kinds} | {k.attention for k in model.layer_kinds if k.attention}
    a = model.attention
    missing = [
        ("multi-head latent attention", "mla" in kinds),
        ("Mamba-2 / hybrid layer patterns", model.layer_pattern is not None),
        ("sliding-window or chunked attention", bool(kinds & {"sliding", "chunked"})),
        ("attention sinks", a is not None and a.sinks),
        ("q/k norms", a is not None and a.qk_norm != "none"),
        ("sandwich norms", model.sandwich_norm),
        ("multi-token prediction", model.mtp_layers > 0),
        ("position_embedding none", model.position_embedding == "none"),
    ]
    return [f"{model.name}: the launch worker has no {what} yet" for what, has in missing if has]


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
