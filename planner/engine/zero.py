"""ZeRO stages as an engine realises them: which states a stage shards, and how the engine runs it
(the states each stage shards: Rajbhandari et al. 2020, Figure 1)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from planner.specs import Frozen, Precision

State = Literal["optimizer", "gradients", "weights"]
Dimension = Literal["tp", "cp", "pp", "vpp", "ep"]
ZERO_STATES: dict[int, tuple[State, ...]] = {  # what ZeRO stage k shards (Rajbhandari et al. 2020, Figure 1)
    0: (),
    1: ("optimizer",),
    2: ("optimizer", "gradients"),
    3: ("optimizer", "gradients", "weights"),
}


class ZeroStage(Frozen):
    """How an engine realises one ZeRO stage: what it shards, holds, reduces and gathers, and when."""

    mechanism: str = Field(description="what the engine calls it (e.g. 'DDP', 'distributed optimizer')")
    shards: tuple[State, ...] = Field(description="model states divided over the dp·cp group")
    fp32_params: bool = Field(
        False,
        description="the parameters are stored in fp32 and are the master copy (FSDP2 mixed precision, "
        "DDP under autocast): no separate master in the optimizer, and 16-bit weights exist "
        "only as gathered or cast copies (see gathered_weights)",
    )
    autocast: bool = Field(
        False,
        description="the stage computes under torch.autocast from fp32 weights (PyTorch DDP; FSDP2 casts the "
        "parameters itself): the residual stream stays fp32, so norms keep fp32 inputs, and each linear keeps its "
        "own 16-bit cast of its input (separate Q, K and V projections: three copies of the norm output)",
    )
    gathered_weights: Literal["none", "unit", "all"] = Field(
        "none",
        description="unsharded 16-bit weights alive at the peak besides the states: none, one unit "
        "being gathered plus the prefetched next one, or every layer of the rank",
    )
    grad_reduce: Literal["step", "microbatch"] = Field(
        "step",
        description="gradients reduced once per optimizer step (accumulated locally over the "
        "micro-batches) or after every micro-batch's backward",
    )
    grad_collective: Literal["all_reduce", "reduce_scatter"] = Field(
        "all_reduce", description="the collective that reduces gradients over the dp·cp group"
    )
    accumulate_unsharded: bool = Field(
        False,
        description="gradients accumulate unsharded (full size, in the gradient dtype) across the "
        "micro-batches of a step before one reduce-scatter (FSDP with gradient sync off)",
    )
    weight_gather: Literal["none", "step", "microbatch_forward", "microbatch"] = Field(
        "none",
        description="all-gather of the 16-bit weights: never (replicated), once per step (after the "
        "optimizer, or kept across micro-batches), in every micro-batch's forward, or in "
        "every micro-batch's forward and again in its backward",
    )
    bucket_bytes: float = Field(
        0.0,
        ge=0,
        allow_inf_nan=False,
        description="gradient-reduction buffers beside the states (DeepSpeed's "
        "IPG buckets, DDP's buckets); 0 when buckets are views",
    )
    excludes: tuple[Dimension, ...] = Field(
        (), description="parallel dimensions the mechanism cannot combine with when dp·cp > 1"
    )
    excludes_always: bool = Field(
        False,
        description="the exclusion holds at any data-parallel size (a configuration check, like DeepSpeed's "
        "AutoTP with ZeRO-3), not only when the mechanism actually shards over dp·cp > 1",
    )
    grad_overlap: bool | None = Field(
        None,
        description="whether this stage overlaps its gradient reduction with the backward (default: the "
        "engine's comm.grad_overlap; DeepSpeed overlaps only in ZeRO-3)",
    )
    untied_embeddings: bool = Field(
        False, description="the mechanism needs an output layer not tied to the embedding (Megatron with torch FSDP2)"
    )
    excludes_precisions: tuple[Precision, ...] = Field(
        (),
        description="precisions the mechanism does not run, at any data-parallel size (Megatron's torch FSDP2: fp16)",
    )
    grad_dtype: Literal["fp32", "param"] | None = Field(
        None,
        description="the gradients' dtype under this stage, over the engine's memory.grad_dtype (DeepSpeed's "
        "BF16_Optimizer accumulates into an fp32 buffer whatever the ZeRO optimizer would; Megatron's torch FSDP2 "
        "reduces the bf16 module's own gradients, not its fp32 main grads); null: the engine's",
    )
    master_copy: bool | None = Field(
        None,
        description="this stage's optimizer keeps a separate fp32 master copy whatever the precision (DeepSpeed's ZeRO "
        "optimizer clones an fp32 partition also of an fp32 model: stage_1_and_2.py single_partition_of_fp32_groups, "
        "stage3.py fp32_partitioned_groups_flat); null: by precision (16-bit: yes, fp32: no); the engine's "
        "memory.master_copy, where set, decides over both",
    )
    keeps_16bit_grads: bool = Field(
        False,
        description="the model's 16-bit .grad tensors stay alive, full size, beside the gradient buffer (DeepSpeed's "
        "BF16_Optimizer without bfloat16_immediate_grad_update, its default: backward clears them only before the "
        "next micro-batch's backward, bf16_optimizer.py backward / update_hp_grads(clear_lp_grads=False))",
    )
    bf16: ZeroStage | None = Field(
        None,
        description="how the engine runs this stage when the plan trains in bf16, where that differs: DeepSpeed "
        "without ZeRO picks its BF16_Optimizer (engine.py _do_optimizer_sanity_check, v0.16.4), which partitions "
        "the fp32 master and moments over the data-parallel group (bf16_optimizer.py _setup_for_real_optimizer)",
    )

    distributed_optimizer: bool = Field(
        False,
        description="the stage runs on Megatron's distributed optimizer, which its precision-aware optimizer needs "
        "(megatron/core/optimizer/__init__.py l.1057-1060 @d98e8a64): --use-distributed-optimizer, and Megatron-FSDP "
        "v1, which turns it on (arguments.py l.1124-1135)",
    )
    param_remainders: bool = Field(
        True,
        description="with the precision-aware optimizer in bf16, the fp32 master is kept as 16-bit remainders beside "
        "the bf16 weights (distrib_optimizer.py store_param_remainders); false where the stage keeps fp32 main "
        "weights of its own (Megatron-FSDP: 'Megatron-FSDP will manage optimizer weights and gradients', "
        "distrib_optimizer.py l.704-706 @d98e8a64, in --megatron-fsdp-main-params-dtype fp32)",
    )
    with_ep: ZeroStage | None = Field(
        None,
        description="how the engine runs this stage when the plan has ep > 1, where that differs: Megatron-LM runs "
        "ZeRO-3 as torch FSDP2, which asserts ep == 1 (arguments.py l.1031-1049 @d98e8a64), and with experts as "
        "Megatron-FSDP (--use-megatron-fsdp), which shards the experts over their own data-parallel mesh; also "
        "how it runs a dense plan whose run asks for it (comm.megatron_fsdp)",
    )

    def keeps_master(self, precision: str) -> bool:
        """Whether its optimizer keeps a separate fp32 master where the engine's memory.master_copy is null: as
        `master_copy` says, else for every precision but fp32 (PyTorch, Megatron)."""
        return precision != "fp32" if self.master_copy is None else self.master_copy

    def running(self, precision: str, *, ep: int, megatron_fsdp: bool) -> ZeroStage:
        """The stage as the engine runs it at this precision and expert-parallel degree (`with_ep` where it is set
        and ep > 1 or the run asks for it, comm.megatron_fsdp; then `bf16` where the plan trains in bf16 and it is
        set)."""
        way = self.with_ep if (ep > 1 or megatron_fsdp) and self.with_ep is not None else self
        return way.bf16 if precision == "bf16" and way.bf16 is not None else way

    def variants(self) -> tuple[ZeroStage, ...]:
        """This stage and every variant it runs as (expert-parallel, bf16)."""
        return (self, *(v for way in (self.with_ep, self.bf16) if way for v in way.variants()))

    @model_validator(mode="after")
    def _check(self) -> ZeroStage:
        if self.accumulate_unsharded and self.grad_reduce != "step":
            raise ValueError("accumulate_unsharded needs grad_reduce: step (it is what no-sync accumulation does)")
        return self


def check_stage_tables(*tables: dict[int, ZeroStage]) -> None:
    """Each table's stages are 0-3 and shard at least what the stage's name says (ZERO_STATES), in every
    variant; a ValueError names the first that does not."""
    for table in tables:
        bad = [z for z in table if z not in ZERO_STATES]
        if bad:
            raise ValueError(f"zero stages must be 0-3, got {bad}")
        for z, impl in table.items():
            for way in impl.variants():
                if not set(ZERO_STATES[z]) <= set(way.shards):
                    raise ValueError(f"zero {z} shards at least {list(ZERO_STATES[z])}, not {list(way.shards)}")
