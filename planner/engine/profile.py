"""The Engine: what one training stack does with a plan, loaded from engine_profiles/NAME.yaml.

A plan is run by a training stack (Megatron-LM, torchtitan, DeepSpeed, llm-foundry, or this project's own
launch worker), and the stack decides which combinations run at all (rules), what memory holds (ZeRO stages
as the stack realises them, gradient dtype, vocabulary padding), which collectives run when and what
overlaps (comm), and which kernels compute the layer (kernels). An engine profile is data, like a hardware
profile: every field is commented in the YAML with the engine source file it comes from. The cost model and
the launch worker both read it, so they cannot disagree.

Per-run choices a runs file's `software` block or the command line can change (attention kernel, TP
overlap, torch.compile, optimizer, selective-recompute policy) are fields too; ``Engine.configured`` returns
a copy with them overridden. ``fitted`` holds what `planner calibrate` fitted for this engine on each
hardware profile, with its provenance and the residual spread behind the error bars.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field, model_validator

from planner.engine.behaviour import Behaviour
from planner.engine.split import Split
from planner.engine.zero import ZERO_STATES, ZeroStage
from planner.plan import RECOMPUTES, Plan, Recompute, Schedule
from planner.specs import Frozen

# The per-run settings' vocabularies (Engine.configured; plan files' training:, runs files' software:, flags).
Optimizer = Literal["adamw", "adam", "sgd"]
GradDtype = Literal["param", "fp32"]
Attention = Literal["flash", "softmax"]
SelectivePolicy = Literal["op", "attention"]
OPTIMIZERS: tuple[Optimizer, ...] = get_args(Optimizer)
GRAD_DTYPES: tuple[GradDtype, ...] = get_args(GradDtype)
ATTENTIONS: tuple[Attention, ...] = get_args(Attention)
SELECTIVE_POLICIES: tuple[SelectivePolicy, ...] = get_args(SelectivePolicy)
Dispatcher = Literal["alltoall", "allgather", "deepep"]
DispatchDtype = Literal["bf16", "fp8"]
DISPATCHERS: tuple[Dispatcher, ...] = get_args(Dispatcher)
DISPATCH_DTYPES: tuple[DispatchDtype, ...] = get_args(DispatchDtype)


class Rules(Frozen):
    """What runs: combinations outside these are rejected with the engine's rule as the reason."""

    zero: dict[int, ZeroStage] = Field(description="the ZeRO stages the engine runs without pipeline parallelism")
    zero_pp: dict[int, ZeroStage] | None = Field(
        None,
        description="the ZeRO stages it runs with pp > 1, and how (default: the same as zero); a stage "
        "absent here does not run with pipeline parallelism",
    )
    schedules: tuple[Schedule, ...] = ("gpipe", "1f1b", "interleaved")
    interleaved_microbatches: Literal["multiple_of_pp", "torch_looped"] = Field(
        "multiple_of_pp",
        description="multiple_of_pp: m ≥ pp and m % pp == 0 (Megatron); torch_looped: "
        "m % max(1, m // pp) == 0 (torch.distributed.pipelining)",
    )
    tensor_parallel: bool = True
    sequence_parallel: Literal["optional", "required", "never"] = Field(
        "optional",
        description="Megatron-style sequence parallelism with tp > 1: optional, always on "
        "(torchtitan), or not available",
    )
    pipeline_parallel: bool = True
    context_parallel: bool = True
    seq_len_divisor: Literal["none", "2cp", "2tpcp"] = Field(
        "none",
        description="seq_len must divide by 2·cp when cp > 1 (Megatron), by 2·tp·cp always (torchtitan), or nothing",
    )
    expert_parallel: bool = True
    expert_tensor_parallel: Literal["any", "tp_or_1", "tp"] = Field(
        "tp",
        description="the expert tensor-parallel degrees it runs: any divisor that folds (Megatron-Core, "
        "--expert-tensor-parallel-size), tp or 1 (torchtitan v0.2 expert_tensor_parallel_degree), or tp only",
    )
    moe_tp_needs_sp: bool = Field(
        False, description="ep > 1 with tp > 1 needs sequence parallelism (Megatron's moe_layer.py raises without)"
    )
    fp8: bool = True
    recompute: tuple[Recompute, ...] = RECOMPUTES
    vocab_padding: int = Field(
        0,
        ge=0,
        description="the vocabulary is padded to a multiple of this x tp (Megatron's "
        "--make-vocab-size-divisible-by, default 128); 0 = not padded",
    )
    vocab_divisible_by_tp: bool = Field(
        False, description="the vocabulary must divide by tp (no padding of the embedding)"
    )
    kv_head_replication: bool = Field(
        True,
        description="tp may exceed num_kv_heads, each kv head replicated on tp / kv ranks (Megatron); "
        "false: tp must divide num_kv_heads",
    )
    pipeline_split: Split = Field(
        "even",
        description="how layers split over (virtual) stages: even (the first and last chunk get fewer "
        "when they do not divide), megatron (even, or --decoder-first/last-pipeline-num-"
        "layers, or the embedding and loss counted as layers), torchtitan (the embedding "
        "and the output each count as one layer)",
    )

    @model_validator(mode="after")
    def _check(self) -> Rules:
        for table in (self.zero, self.zero_pp or {}):
            bad = [z for z in table if z not in ZERO_STATES]
            if bad:
                raise ValueError(f"zero stages must be 0-3, got {bad}")
            for z, impl in table.items():
                if not set(ZERO_STATES[z]) <= set(impl.shards):
                    raise ValueError(f"zero {z} shards at least {list(ZERO_STATES[z])}, not {list(impl.shards)}")
        return self

    def stages(self, pp: int) -> dict[int, ZeroStage]:
        """The ZeRO stages runnable at this pipeline degree, and how."""
        return self.zero if pp == 1 or self.zero_pp is None else self.zero_pp


class Memory(Frozen):
    fp8_weight_cache: bool = Field(
        True,
        description="fp8 recipes keep an fp8 copy of every local weight across the micro-batches of a step "
        "(Transformer Engine's is_first_microbatch); false: each GEMM casts its weight when it "
        "runs (torchao Float8Linear dynamic scaling)",
    )
    optimizer: Optimizer = Field(
        "adamw", description="adam(w): fp32 master + m + v = 12 B/param; sgd with momentum: master + m = 8"
    )
    grad_dtype: GradDtype = Field(
        "param",
        description="dtype gradients are accumulated and reduced in: 'param' = the weights' dtype, "
        "'fp32' = Megatron's fp32 main grads, FSDP's fp32 reduce dtype. NeMo's performance recipes run "
        "Megatron with 'param' (grad_sync_dtype: bf16 in NeMo-Framework-Launcher "
        "conf/training/gpt3/*_performance.yaml; grad_reduce_in_fp32 off in NeMo 2 scripts/performance)",
    )
    master_copy: bool | None = Field(
        None,
        description="a separate fp32 copy of the weights in the optimizer; default: yes for 16-bit "
        "precisions, no for fp32 (PyTorch, Megatron). DeepSpeed's ZeRO optimizer keeps one "
        "even in fp32",
    )


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
        "Apex); eager: PyTorch ops, whose RMSNorm computes in fp32 over several passes and "
        "keeps an fp32 copy, whose SwiGLU keeps the SiLU output, whose rotary runs in fp32",
    )
    compile: bool = Field(False, description="torch.compile: eager elementwise ops fused into a few kernels")
    dropout: bool = Field(False, description="dropout masks kept for backward (GPT-2/3 era recipes)")
    selective_recompute: SelectivePolicy = Field(
        "op",
        description="what recompute=selective recomputes: 'attention' = only the attention core "
        "(Korthikanti et al. 2022, Megatron's core_attn); 'op' = per-op checkpointing that "
        "keeps the attention output and every other matmul output (torchtitan)",
    )

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

    def bucket_params(self, dp: int) -> float:
        return max(self.dp_bucket_params, self.dp_bucket_params_per_rank * dp)


class MoE(Frozen):
    """How the engine runs mixture-of-experts layers (/work/notes/engine_research.md §2, with the engines' files)."""

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


class Fitted(Frozen):
    """What `planner calibrate` fitted for this engine on one hardware profile, and how well it holds: the
    engine's pooled behaviour (`behaviour`) with this GPU's own deviation, shrunk toward none. A GPU without an
    entry (or its calibration proxy's) runs the pooled behaviour."""

    compute: float = Field(
        1.0,
        gt=0,
        allow_inf_nan=False,
        description="multiplies compute time on this GPU (replaces behaviour.compute): what the stack's "
        "kernels lose or gain beyond the hardware's measured curves",
    )
    overhead_s: float = Field(
        0.0,
        ge=0,
        allow_inf_nan=False,
        description="fixed time per step on this GPU, on top of the behaviour's host times (data loading, "
        "logging, host synchronisation)",
    )
    tokens_per_s_rel: float | None = Field(
        None, ge=0, allow_inf_nan=False, description="error-bar half-width of predicted throughput"
    )
    peak_memory_rel: float | None = Field(
        None, ge=0, allow_inf_nan=False, description="error-bar half-width of predicted peak memory"
    )
    runs: int = Field(0, ge=0, description="runs the factors were fitted to")
    source: str = Field("", description="what they were fitted to, and when")


class Engine(Frozen):
    """engine_profiles/NAME.yaml: what one training stack does with a plan."""

    name: str
    description: str = ""
    source: str = Field("", description="the engine version and files this profile was read from")
    rules: Rules
    memory: Memory = Memory()
    kernels: Kernels = Kernels()
    comm: Comm = Comm()
    moe: MoE = MoE()
    fitted: dict[str, Fitted] = Field(default_factory=dict, description="by hardware profile name")
    behaviour: Behaviour | None = Field(None, description="what it does on any GPU (engine/behaviour.py)")
    aliases: tuple[str, ...] = Field((), description="other names the catalog finds this entry by (case-insensitive)")

    def zero_stage(self, plan: Plan) -> ZeroStage:
        """How this engine runs the plan's ZeRO stage (the plan must pass the engine's rules)."""
        return self.rules.stages(plan.pp)[plan.zero]

    def factors(self, hardware: str, proxy: str | None = None) -> Fitted:
        """The fitted factors for a hardware profile, or for its calibration proxy (none fitted: neutral)."""
        return self.fitted.get(hardware) or (self.fitted.get(proxy) if proxy else None) or Fitted()

    def configured(
        self,
        *,
        attention: str | None = None,
        tp_overlap: bool | None = None,
        compile: bool | None = None,
        optimizer: str | None = None,
        selective_recompute: str | None = None,
        grad_dtype: str | None = None,
        moe_dispatcher: str | None = None,
        ep_overlap: bool | None = None,
        moe_imbalance: float | None = None,
        moe_dispatch_dtype: str | None = None,
    ) -> Engine:
        """A copy with per-run choices overridden (None keeps the profile's default)."""
        kernels = {
            k: v
            for k, v in (("attention", attention), ("selective_recompute", selective_recompute), ("compile", compile))
            if v is not None
        }
        update: dict[str, object] = {}
        if kernels:
            update["kernels"] = self.kernels.model_copy(update=kernels)
        if tp_overlap is not None:
            update["comm"] = self.comm.model_copy(update={"tp_overlap": tp_overlap})
        memory = {k: v for k, v in (("optimizer", optimizer), ("grad_dtype", grad_dtype)) if v is not None}
        if memory:
            update["memory"] = self.memory.model_copy(update=memory)
        moe = {
            k: v
            for k, v in (
                ("dispatcher", moe_dispatcher),
                ("ep_overlap", ep_overlap),
                ("imbalance", moe_imbalance),
                ("dispatch_dtype", moe_dispatch_dtype),
            )
            if v is not None
        }
        if moe:
            update["moe"] = MoE.model_validate({**self.moe.model_dump(), **moe})  # validated: the imbalance's range
        return self.model_copy(update=update) if update else self
