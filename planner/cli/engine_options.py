"""The engine settings on the command line, declared once (name, type, range, help): the per-run choices of the
training stack (optimizer, attention kernel, overlap, MoE dispatch) and the recipe memory and speed options, which
`Engine.configured` applies (engine/settings.py) and cli/options.py groups as ENGINE_SETTINGS."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from planner.cli.callbacks import finite
from planner.specs import MAX_LAYERS

OptimizerOpt = Annotated[Optional[str], typer.Option("--optimizer", help="adamw | adam | sgd (default: the engine's)")]
SelectivePolicyOpt = Annotated[
    Optional[str],
    typer.Option(
        "--selective-policy",
        help="op (torchtitan per-op SAC) | attention (Korthikanti/Megatron) (default: the engine's)",
    ),
]
NoFlashOpt = Annotated[bool, typer.Option("--no-flash", help="attention without a fused kernel (s x s scores kept)")]
TpOverlapOpt = Annotated[
    Optional[bool],
    typer.Option("--tp-overlap/--no-tp-overlap", help="TP communication overlapped with GEMMs (default: the engine's)"),
]
P2pOverlapOpt = Annotated[
    Optional[bool],
    typer.Option(
        "--p2p-overlap/--no-p2p-overlap",
        help="pipeline sends posted asynchronously under the interleaved schedule (Megatron's "
        "--overlap-p2p-communication; default: the engine's)",
    ),
]
MegatronFsdpOpt = Annotated[
    Optional[bool],
    typer.Option(
        "--megatron-fsdp/--no-megatron-fsdp",
        help="ZeRO-3 as Megatron-FSDP (--use-megatron-fsdp) where ep is 1 too, not torch FSDP2; with ep > 1 it is "
        "Megatron-FSDP either way (default: the engine's)",
    ),
]
Zero3GatherOpt = Annotated[
    Optional[str],
    typer.Option(
        "--zero3-gather",
        help="bucketed | per_parameter_sync: how ZeRO-3 gathers weights (per_parameter_sync: DeepSpeed 0.3.12-0.5.10, "
        "one all-gather per tensor after a device sync; default: the engine's)",
    ),
]
EdgeGroupsOpt = Annotated[
    Optional[str],
    typer.Option(
        "--fsdp-edge-groups",
        help="root | own: whether ZeRO-3/FSDP gathers the embedding and the output layer together in the root unit "
        "(torchtitan before 2025-07-28) or each in its own unit (own: torchtitan since; default: the engine's)",
    ),
]
RmsnormOpt = Annotated[
    Optional[str],
    typer.Option(
        "--rmsnorm",
        help="fused | composite | cast: the eager RMSNorm an engine version runs (fused: nn.RMSNorm on GPUs from "
        "torch 2.9, one kernel; composite: nn.RMSNorm before torch 2.9 or on CPU, fp32 through the weight's multiply; "
        "cast: casts back first, torchtitan before 2025-03 and HF Llama; default: the engine's)",
    ),
]
MasterCopyOpt = Annotated[
    Optional[bool],
    typer.Option(
        "--master-copy/--no-master-copy",
        help="an fp32 master copy of the weights beside the optimizer moments (--no-master-copy: the optimizer "
        "steps the weights in their own dtype, as NeMo's bf16 optimizer state; default: the engine's)",
    ),
]
CompiledLossOpt = Annotated[
    Optional[bool],
    typer.Option(
        "--compiled-loss/--no-compiled-loss",
        help="the cross entropy runs under torch.compile and keeps no fp32 copy of the logits (torchtitan with "
        "--compile since 2025-04; default: the engine's)",
    ),
]
GradDtypeOpt = Annotated[
    Optional[str],
    typer.Option(
        "--grad-dtype",
        help="param (gradients reduced in the weights' dtype, as NeMo's performance recipes) | fp32 "
        "(Megatron-LM's main grads) (default: the engine's)",
    ),
]
MoeDispatcherOpt = Annotated[
    Optional[str],
    typer.Option(
        "--moe-dispatcher", help="alltoall | allgather | deepep: how MoE tokens are dispatched (default: the engine's)"
    ),
]
EpOverlapOpt = Annotated[
    Optional[bool],
    typer.Option(
        "--ep-overlap/--no-ep-overlap",
        help="hide the MoE all-to-alls behind another micro-batch (Megatron's 1F1B A2A overlap; default: the engine's)",
    ),
]
MoeImbalanceOpt = Annotated[
    Optional[float],
    typer.Option(
        "--moe-imbalance",
        callback=finite(1, 64),
        help="tokens the busiest expert-parallel rank gets over the mean, in its expert time and activations; at "
        "most ep·min(top_k, E/ep)/top_k, 1 at ep 1 (default: the engine's, 1.0 = balanced)",
    ),
]
MoeDispatchDtypeOpt = Annotated[
    Optional[str],
    typer.Option("--moe-dispatch-dtype", help="bf16 | fp8: the dispatched tokens (default: the engine's)"),
]
# The recipe memory and speed options (engine settings; which engine offers which: its rules.options).
RecomputeModulesOpt = Annotated[
    Optional[str],
    typer.Option(
        "--recompute-modules",
        help="what --recompute selective re-runs, comma list: core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, "
        "shared_experts (Megatron's --recompute-modules; default core_attn)",
    ),
]
ActivationOffloadOpt = Annotated[
    Optional[float],
    typer.Option(
        "--activation-offload",
        callback=finite(0, 1),
        help="share of the offload groups of --offload-modules held in host memory, 0-1, the first in forward "
        "order (Megatron's fine-grained offloading, --activation-offload-fraction)",
    ),
]
OffloadModulesOpt = Annotated[
    Optional[str],
    typer.Option(
        "--offload-modules",
        help="whose saved inputs --activation-offload moves, comma list: attn_norm, qkv_linear, core_attn, attn_proj, "
        "mlp_norm, expert_fc1, moe_act (Megatron's --offload-modules; default: all the model has; alone: all groups)",
    ),
]
OffloadLayersOpt = Annotated[
    Optional[int],
    typer.Option(
        "--offload-layers",
        min=0,
        max=MAX_LAYERS,
        help="the first N transformer layers' saved activations held in host memory, layer by layer (Megatron's "
        "--cpu-offloading-num-layers; pipeline 1, no recompute)",
    ),
]
OptimizerOffloadOpt = Annotated[
    Optional[float],
    typer.Option(
        "--optimizer-offload",
        callback=finite(0, 1),
        help="share of the optimizer state kept and stepped on the CPU, 0-1 (needs --precision-aware-optimizer)",
    ),
]
PrecisionAwareOpt = Annotated[
    Optional[bool],
    typer.Option(
        "--precision-aware-optimizer/--no-precision-aware-optimizer",
        help="Megatron's precision-aware optimizer: fp32 master as 16-bit remainders, fp32 under Megatron-FSDP "
        "(default: the engine's)",
    ),
]
MomentDtypeOpt = Annotated[
    Optional[str], typer.Option("--optimizer-moment-dtype", help="fp32 | bf16: Adam moments' storage dtype")
]
Fp8ParamGatherOpt = Annotated[
    Optional[bool],
    typer.Option(
        "--fp8-param-gather/--no-fp8-param-gather",
        help="weights kept and all-gathered quantized, no 16-bit copy (a named recipe, zero 1)",
    ),
]
CudaGraphsOpt = Annotated[
    Optional[bool], typer.Option("--cuda-graphs/--no-cuda-graphs", help="capture each layer in a CUDA graph")
]
CompileOpt = Annotated[
    Optional[bool], typer.Option("--compile/--no-compile", help="torch.compile (default: the engine's)")
]
