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

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from planner.engine.behaviour import Behaviour
from planner.engine.split import Split
from planner.engine.zero import ZERO_STATES, ZeroStage
from planner.errors import PlannerError
from planner.plan import RECOMPUTES, Plan, Recompute, Schedule
from planner.precision import RECIPE_NAMES, Architecture
from planner.specs import Frozen

# The per-run settings' vocabularies (Engine.configured; plan files' training:, runs files' software:, flags).
Optimizer = Literal["adamw", "adam", "sgd"]
GradDtype = Literal["param", "fp32"]
Attention = Literal["flash", "softmax"]
SelectivePolicy = Literal["op", "attention"]
# Megatron's --recompute-modules (transformer_config.py l.560-582): what recompute=selective re-runs.
RecomputeModule = Literal["core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts"]
MomentDtype = Literal["fp32", "bf16"]
# The memory and speed options of issue 20 item 5 an engine may offer (Rules.options; cost/recipe_options.py).
RecipeOption = Literal[
    "recompute_modules", "activation_offload", "optimizer_offload", "precision_aware_optimizer", "fp8_param_gather",
    "cuda_graphs",
]  # fmt: skip
RECOMPUTE_MODULES: tuple[RecomputeModule, ...] = get_args(RecomputeModule)
MOMENT_DTYPES: tuple[MomentDtype, ...] = get_args(MomentDtype)
RECIPE_OPTIONS: tuple[RecipeOption, ...] = get_args(RecipeOption)
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
    precision_recipes: dict[str, tuple[Architecture, ...]] = Field(
        default_factory=dict,
        description="the named precision recipes it runs (precision.py), each with the GPU architectures its "
        "quantization library accepts; a recipe absent here, or a GPU of another architecture, is refused",
    )
    options: tuple[RecipeOption, ...] = Field(
        (),
        description="the memory and speed options it offers (recompute modules, activation and optimizer offload, "
        "the precision-aware optimizer, fp8 parameter gather, CUDA graphs); the others are refused when set",
    )
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
        unknown = sorted(set(self.precision_recipes) - set(RECIPE_NAMES))
        if unknown:
            raise ValueError(f"precision_recipes: {unknown} are not recipes; known: {list(RECIPE_NAMES)}")
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
    quantized_activations: bool = Field(
        True,
        description="a named fp8/fp4 recipe saves each linear's quantized input for its backward (Transformer "
        "Engine); false: the 16-bit input is saved and cast again in backward (torchao Float8Linear)",
    )
    precision_aware_optimizer: bool = Field(
        False,
        description="Megatron's --use-precision-aware-optimizer (TE FusedAdam): the fp32 master kept as the "
        "16-bit remainder beside the bf16 weights (store_param_remainders), moments in optimizer_moment_dtype",
    )
    optimizer_moment_dtype: MomentDtype = Field(
        "fp32", description="dtype the Adam moments are stored in (--exp-avg-dtype/--exp-avg-sq-dtype)"
    )
    optimizer_offload: float = Field(
        0.0,
        ge=0,
        le=1,
        description="share of the optimizer state (fp32 master and moments) kept and updated on the CPU "
        "(--optimizer-cpu-offload --optimizer-offload-fraction)",
    )
    activation_offload: float = Field(
        0.0,
        ge=0,
        le=1,
        description="share of the saved activations moved to host memory in forward and back before backward "
        "(--fine-grained-activation-offloading --activation-offload-fraction)",
    )
    fp8_param_gather: bool = Field(
        False,
        description="weights kept quantized (no 16-bit copy) and all-gathered quantized (--fp8-param-gather, "
        "--fp4-param-gather)",
    )
    loss_fp32_copies: int = Field(
        2,
        ge=1,
        le=2,
        description="fp32 copies of the last stage's logits alive while the loss runs: 2 = an upcast and the "
        "softmax kept for backward (PyTorch cross_entropy on .float() logits; Korthikanti et al. 2022 §4.3); "
        "1 = the upcast exponentiated and normalised in place and kept as the softmax (Megatron's "
        "VocabParallelCrossEntropy, megatron/core/tensor_parallel/cross_entropy.py calculate_logits_max)",
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

    @field_validator("p2p_overlap")
    @classmethod
    def _p2p_overlap_needs_a_schedule(cls, on: bool, info: ValidationInfo) -> bool:
        if on and not info.data.get("p2p_overlap_schedules"):
            raise ValueError("the engine overlaps pipeline sends under no schedule (its p2p_overlap_schedules)")
        return on

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
    comm_sms: int = Field(
        0,
        ge=0,
        le=1024,
        description="SMs the dispatch and combine kernels hold while they run beside another micro-batch's compute "
        "(DeepEP Buffer.num_sms, 20 by default; Megatron --moe-deepep-num-sms): compute runs on the others then "
        "(cost/moe.py comm_sm_slowdown_s); 0: not charged",
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
    installable: bool = Field(
        True,
        description="a stack users can install and run; false for an in-house stack described from its reports "
        "(hai-llm), kept to check the cost model against them: named it is used, `--engine all` leaves it out",
    )
    variant_of: str | None = Field(
        None, description="a search variant of this engine (search --recipe-options): the profile it was made from"
    )
    variant_settings: dict[str, object] = Field(
        default_factory=dict,
        description="the per-run settings (SETTINGS) that make the variant, as a plan file keeps them",
    )

    def zero_stage(self, plan: Plan) -> ZeroStage:
        """How this engine runs the plan's ZeRO stage (the plan must pass the engine's rules)."""
        return self.rules.stages(plan.pp)[plan.zero]

    def factors(self, hardware: str, proxy: str | None = None) -> Fitted:
        """The fitted factors for a hardware profile, or for its calibration proxy (none fitted: neutral)."""
        return self.fitted.get(hardware) or (self.fitted.get(proxy) if proxy else None) or Fitted()

    def configured(self, **settings: object) -> Engine:
        """A copy with per-run choices overridden (None keeps the profile's default): SETTINGS' names, checked by
        the blocks' own validation (one PlannerError naming the setting and what is valid)."""
        unknown = sorted(set(settings) - set(SETTINGS))
        if unknown:
            raise PlannerError(f"unknown engine setting(s) {', '.join(unknown)}; valid: {', '.join(SETTINGS)}")
        blocks: dict[str, dict[str, object]] = {}
        for name, value in settings.items():
            if value is not None:
                block, field = SETTINGS[name]
                blocks.setdefault(block, {})[field] = _listed(value) if name == "recompute_modules" else value
        if not blocks:
            return self
        update: dict[str, object] = {}
        for block, values in blocks.items():
            current = getattr(self, block)
            try:
                update[block] = type(current).model_validate({**current.model_dump(), **values})
            except ValidationError as e:
                bad = "; ".join(
                    f"{'.'.join(map(str, err['loc']))}={err.get('input')!r}: {err['msg']}" for err in e.errors()
                )
                raise PlannerError(f"engine setting {bad}") from None
        return self.model_copy(update=update)


def _listed(value: object) -> object:
    """A comma list given as text (the command line, a YAML string) as a tuple; anything else as it is."""
    return tuple(v.strip() for v in value.split(",") if v.strip()) if isinstance(value, str) else value


# The per-run settings Engine.configured takes (plan files' training:, runs files' software:, the command line's
# engine settings), and the block and field each one sets.
SETTINGS: dict[str, tuple[str, str]] = {
    "attention": ("kernels", "attention"),
    "selective_recompute": ("kernels", "selective_recompute"),
    "compile": ("kernels", "compile"),
    "tp_overlap": ("comm", "tp_overlap"),
    "p2p_overlap": ("comm", "p2p_overlap"),
    "optimizer": ("memory", "optimizer"),
    "grad_dtype": ("memory", "grad_dtype"),
    "recompute_modules": ("kernels", "recompute_modules"),
    "cuda_graphs": ("kernels", "cuda_graphs"),
    "activation_offload": ("memory", "activation_offload"),
    "optimizer_offload": ("memory", "optimizer_offload"),
    "precision_aware_optimizer": ("memory", "precision_aware_optimizer"),
    "optimizer_moment_dtype": ("memory", "optimizer_moment_dtype"),
    "fp8_param_gather": ("memory", "fp8_param_gather"),
    "moe_dispatcher": ("moe", "dispatcher"),
    "ep_overlap": ("moe", "ep_overlap"),
    "moe_imbalance": ("moe", "imbalance"),
    "moe_dispatch_dtype": ("moe", "dispatch_dtype"),
}
