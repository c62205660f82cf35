"""How an engine runs a plan: which kernels compute the layer, which collectives run when and what overlaps, and how
mixture-of-experts layers run (the `kernels:`, `comm:` and `moe:` blocks of engine_profiles/NAME.yaml, each field
with the engine source it comes from; what memory holds: memory_settings.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from planner.engine.settings import (
    Attention,
    DispatchDtype,
    Dispatcher,
    RecomputeModule,
    RMSNormImpl,
    SelectivePolicy,
    Zero3Gather,
)
from planner.plan import Schedule
from planner.precision import Architecture
from planner.specs import Frozen


class Kernels(Frozen):
    """Which kernels compute the layer: they decide what activations are kept and how fast it runs."""

    attention: Attention = Field(
        "flash",
        description="flash: a fused attention kernel, the s×s scores are never stored (Dao et al. "
        "2022); softmax: 2021-22 Megatron's fused scale-mask-softmax that keeps them",
    )
    flash_kernel: Literal["flash2", "fused"] = Field(
        "flash2",
        description="which fused kernel `flash` is in this stack: flash2 (FlashAttention-2, "
        "PyTorch SDPA) or fused (cuDNN / FlashAttention-3 through Transformer Engine); "
        "the hardware profile says how fast each runs",
    )
    elementwise: Literal["fused", "eager"] = Field(
        "fused",
        description="fused: one kernel per norm, activation, rotary and bias-dropout-add (Megatron/TE, "
        "Apex); eager: PyTorch ops, whose RMSNorm is the one `rmsnorm` names, whose SwiGLU keeps the "
        "SiLU output, whose rotary runs in fp32",
    )
    rmsnorm: RMSNormImpl = Field(
        "composite",
        description="which eager RMSNorm the model runs (elementwise: eager, no compile): fused = nn.RMSNorm on GPUs "
        "from torch 2.9, one kernel keeping its 16-bit input; composite = nn.RMSNorm before torch 2.9 or on CPU, fp32 "
        "through the weight's multiply (keeps an fp32 input and an fp32 normalised value); cast = the Llama "
        "reference RMSNorm, its normalised value cast back to the activation dtype before the weight's multiply "
        "(keeps an fp32 input and a 16-bit normalised value: torchtitan's models/norms.py RMSNorm until 3b39d7a, "
        "2025-03-19; HF LlamaRMSNorm)",
    )
    compile: bool = Field(False, description="torch.compile: eager elementwise ops fused into a few kernels")
    tp_gathered_inputs: bool = Field(
        False,
        description="with sequence parallelism, each column-parallel linear keeps for its weight gradient the "
        "all-gathered, whole-sequence input it multiplied: DTensor tensor parallelism, whose PrepareModuleInput "
        "redistributes the norm's sequence shard to Replicate before ColwiseParallel (torchtitan's "
        "models/*/infra/parallelize.py; the worker's launch/parallelize.py; counted on CPU by "
        "tests/launch/test_tp_activations.py); false: it keeps its sequence shard and all-gathers it again in "
        "backward (Korthikanti et al. 2022 section 4.2.2; Megatron's LinearWithGradAccumulationAndAsyncCommunication)",
    )
    tp_fp8_inputs: bool = Field(
        False,
        description="under a per-tensor fp8 recipe (plain fp8, fp8-current) with tp > 1, the column-parallel "
        "linears' input is cast to fp8 before its all-gather and kept so (torchao's PrepareFloat8ModuleInput and "
        "Float8ColwiseParallel, which torchtitan's apply_tp uses for tensorwise float8: "
        "enable_float8_tensorwise_tp)",
    )
    dropout: bool = Field(False, description="dropout masks kept for backward (GPT-2/3 era recipes)")
    moe_combine_fp32: bool = Field(
        False,
        description="the MoE combine weighs the k routed outputs in fp32 and keeps that fp32 copy for backward, "
        "4·k·h bytes per token (torchtitan models/moe/moe.py MoE.forward, v0.2.2: bmm(top_scores, "
        "routed_output_unsorted.float()); scoring before the experts, the fp32 routed input instead)",
    )
    selective_recompute: SelectivePolicy = Field(
        "op",
        description="what recompute=selective recomputes: 'attention' = only the attention core "
        "(Korthikanti et al. 2022, Megatron's core_attn); 'op' = per-op checkpointing that "
        "keeps the attention output and every other matmul output (torchtitan)",
    )
    recompute_modules: tuple[RecomputeModule, ...] | None = Field(
        None,
        description="the modules recompute=selective re-runs under the 'attention' policy (Megatron's "
        "--recompute-modules); null: core_attn, the policy's default",
    )
    cuda_graphs: bool = Field(
        False,
        description="each layer's kernels captured in CUDA graphs (Megatron --cuda-graph-impl): one launch "
        "replays them, the graphs' private memory pool is held",
    )
    dtensor: bool = Field(
        False,
        description="the engine's parallel parameters are DTensors (torch parallelize_module for TP, fully_shard "
        "for FSDP2): each op on them pays the hardware's dtensor_op_overhead_s of host dispatch "
        "(cost/dtensor_host.py). false: plain tensors and explicit collectives (Megatron, DeepSpeed, FSDP1)",
    )
    cast_host_s: float = Field(
        0.0, ge=0.0, le=1e-3,
        description="host time of each quantization call a low-precision linear makes on its own, the GPU waiting "
        "on it: two per linear in the forward (input, weight), three in the backward (output gradient, weight, "
        "input); 0: the casts are fused into the compiled model or the GEMMs (Transformer Engine, torchao compiled)",
    )  # fmt: skip

    @property
    def flash(self) -> bool:
        return self.attention == "flash"

    @property
    def fused(self) -> bool:
        """Elementwise work runs fused: by the stack's own kernels, or compiled."""
        return self.elementwise == "fused" or self.compile


class Comm(Frozen):
    tp_overlap: bool = Field(
        False,
        description="TP communication overlapped with the GEMMs (Megatron --tp-comm-overlap, torchtitan async TP)",
    )
    grad_overlap: bool = Field(
        True,
        description="gradient reduction overlapped with the backward, the last "
        "bucket exposed (DDP, FSDP, Megatron --overlap-grad-reduce)",
    )
    param_gather_overlap: bool = Field(
        False,
        description="the all-gather of updated weights after the optimizer step hidden behind the next "
        "forward (Megatron --overlap-param-gather)",
    )
    p2p_overlap_schedules: tuple[Schedule, ...] = Field(
        (),
        description="the schedules under which the engine can overlap pipeline sends and receives",
    )
    p2p_overlap: bool = Field(
        False,
        description="pipeline sends and receives overlapped with the other direction's compute under "
        "p2p_overlap_schedules (Megatron --overlap-p2p-communication; cost/pipeline_p2p.py)",
    )
    collective_launch_s: float = Field(
        0.0,
        ge=0,
        allow_inf_nan=False,
        description="host-side cost of issuing one collective (framework dispatch, stream sync), exposed",
    )
    dp_bucket_params: float = Field(
        4e7,
        gt=0,
        allow_inf_nan=False,
        description="parameters per gradient-reduction call of a replicated or optimizer-sharded stage (Megatron "
        "ddp bucket, DDP bucket_cap_mb, DeepSpeed reduce_bucket_size); FSDP-style stages reduce per unit",
    )
    dp_bucket_params_per_rank: float = Field(
        0.0,
        ge=0,
        allow_inf_nan=False,
        description="the bucket grows with the data-parallel size: max(dp_bucket_params, this x dp·cp) (Megatron)",
    )

    megatron_fsdp: bool = Field(
        False,
        description="ZeRO-3 runs as Megatron-FSDP (--use-megatron-fsdp, rules.zero.3.with_ep) for every plan, not "
        "torch FSDP2 where that runs (ep 1); with ep > 1 it is Megatron-FSDP either way",
    )
    zero3_gather: Zero3Gather = Field(
        "bucketed",
        description="how a stage that gathers weights every micro-batch (ZeRO-3) gathers them: bucketed = a few "
        "coalesced all-gathers per layer, prefetched behind compute (torch FSDP; DeepSpeed >= 0.6.0, PR #1453 "
        "all_gather_coalesced); per_parameter_sync = one all-gather and one reduce-scatter per parameter tensor "
        "over the whole group, after a device synchronize, none hidden (DeepSpeed 0.3.12-0.5.10 "
        "partition_parameters.py _allgather_param; cost/zero3_gather.py)",
    )

    @field_validator("p2p_overlap")
    @classmethod
    def _p2p_overlap_needs_a_schedule(cls, on: bool, info: ValidationInfo) -> bool:
        if on and not info.data.get("p2p_overlap_schedules"):
            raise ValueError("the engine overlaps pipeline sends under no schedule (its p2p_overlap_schedules)")
        return on

    def bucket_params(self, dp: int) -> float:
        return max(self.dp_bucket_params, self.dp_bucket_params_per_rank * dp)


class MoE(Frozen):
    """How the engine runs mixture-of-experts layers (from the engines' files: Megatron-Core's moe/, torchtitan's
    and DeepSpeed's MoE layers)."""

    dispatcher: Dispatcher = Field(
        "alltoall",
        description="token dispatch: alltoall (one copy per chosen expert, Megatron --moe-token-dispatcher-type "
        "alltoall, torchtitan), allgather (the ETP·EP group gathers every token), deepep (each token once per "
        "destination node, then NVLink forwarding: DeepEP, Megatron flex/deepep)",
    )
    grouped_gemm: bool = Field(
        True,
        description="the local experts run as one grouped GEMM (Megatron --moe-grouped-gemm, TE GroupedLinear; "
        "torchtitan grouped_mm); false: one GEMM per expert",
    )
    replicated_over_tp: bool = Field(
        False,
        description="the MoE block's input is gathered whole on every tp rank, its output reduce-scattered back, "
        "as a dense MLP's (torchtitan v0.2.2 llama4/deepseek_v3 parallelize.py apply_moe_ep_tp: "
        "PrepareModuleInputOutput to Replicate): with etp = tp each rank dispatches all of its tokens and gathers "
        "no rows over etp; with etp 1 the tp ranks split the tokens (ReordererSequenceParallel); false: Megatron's "
        "sequence-parallel dispatch of the rank's own tokens, rows gathered over etp",
    )
    deepep_without_etp: bool = Field(
        False,
        description="DeepEP runs only with ep > 1 and no expert tensor parallelism (torchtitan v0.2.2 "
        "deepseek_v3/llama4 parallelize.py raise otherwise); false: with any degrees",
    )
    grouped_gemm_archs: tuple[Architecture, ...] | None = Field(
        None,
        description="the GPU architectures the engine runs grouped GEMMs on, one GEMM per expert elsewhere "
        "(torchtitan's MoE args: has_cuda_capability(9, 0)); null: wherever grouped_gemm says",
    )
    ep_overlap: bool = Field(
        False,
        description="the dispatch/combine all-to-alls of one micro-batch run behind another micro-batch's layer "
        "compute (Megatron --overlap-moe-expert-parallel-comm: 1F1B all-to-all overlap, with pp = 1 or "
        "interleaved; combined_1f1b.py); false: exposed. The dualpipev schedule hides them whatever this says",
    )
    dispatch_dtype: DispatchDtype = Field(
        "bf16",
        description="the dtype tokens are dispatched in: bf16 (Megatron's alltoall and DeepEP paths, torchtitan) "
        "or fp8 (DeepEP's fp8 dispatch, DeepSeek-V3 §3.3.3); the combine and backward stay bf16",
    )
    imbalance: float = Field(
        1.0,
        ge=1,
        le=64,
        allow_inf_nan=False,
        description="tokens the busiest expert-parallel rank receives over the mean (no engine measures it; 1.0 is "
        "the balanced routing of Megatron's forced-balance benchmark mode)",
    )
    pad_to_capacity: bool = Field(
        False,
        description="with a capacity factor, every expert gets exactly its capacity (Megatron "
        "--moe-pad-expert-input-to-capacity): the work of the factor, whatever the routing",
    )
    quantized_recipes: tuple[str, ...] | None = Field(
        None,
        description="the low precisions whose converter reaches the routed experts' grouped GEMMs (torchtitan "
        "v0.2.2: MX's grouped_mm converter; float8's converts nn.Linear only); null: every one the engine runs",
    )
    comm_sms: int = Field(
        0,
        ge=0,
        le=1024,
        description="SMs the dispatch and combine kernels hold while they run beside another micro-batch's compute "
        "(DeepEP Buffer.num_sms, 20 by default; Megatron --moe-deepep-num-sms): compute runs on the others then "
        "(cost/moe.py comm_sm_slowdown_s); 0: not charged",
    )

    def grouped_on(self, architecture: str | None) -> bool:
        """Whether the experts run as one grouped GEMM on a GPU of this architecture."""
        return self.grouped_gemm and (self.grouped_gemm_archs is None or architecture in self.grouped_gemm_archs)
