"""What an engine's memory holds: optimizer state, gradient dtype, offload, fp8 copies and the loss's fp32 logits
(the `memory:` block of engine_profiles/NAME.yaml, each field with the engine source it comes from)."""

from __future__ import annotations

from pydantic import Field

from planner.engine.settings import EdgeGroups, GradDtype, MomentDtype, OffloadModule, Optimizer
from planner.specs import MAX_LAYERS, Frozen, Int


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
        description="a separate fp32 copy of the weights in the optimizer; default: what the ZeRO stage keeps "
        "(ZeroStage.keeps_master: yes for 16-bit precisions, no for fp32, as PyTorch and Megatron; DeepSpeed's ZeRO "
        "optimizer one even in fp32)",
    )
    quantized_activations: bool = Field(
        True,
        description="a named fp8/fp4 recipe saves each linear's quantized input for its backward (Transformer "
        "Engine); false: the 16-bit input is saved and cast again in backward (torchao Float8Linear)",
    )
    precision_aware_optimizer: bool = Field(
        False,
        description="Megatron's --use-precision-aware-optimizer (TE FusedAdam): the fp32 master kept as the "
        "16-bit remainder beside the bf16 weights (store_param_remainders; Megatron-FSDP keeps fp32 main weights of "
        "its own: ZeroStage.param_remainders), moments in optimizer_moment_dtype",
    )
    optimizer_moment_dtype: MomentDtype = Field(
        "fp32", description="dtype the Adam moments are stored in (--exp-avg-dtype/--exp-avg-sq-dtype)"
    )
    optimizer_offload: float = Field(
        0.0, ge=0, le=1,
        description="share of the optimizer state (fp32 master and moments) kept and updated on the CPU "
        "(--optimizer-cpu-offload --optimizer-offload-fraction)",
    )  # fmt: skip
    activation_offload: float = Field(
        0.0, ge=0, le=1,
        description="share of the offload groups of offload_modules (the first in forward order) held in host memory "
        "(--fine-grained-activation-offloading --activation-offload-fraction)",
    )  # fmt: skip
    offload_layers: Int = Field(
        0, ge=0, le=MAX_LAYERS,
        description="the first N transformer layers whose saved activations are held in host memory, layer by "
        "layer (Megatron's --cpu-offloading-num-layers: Transformer Engine's CPU offload; pipeline 1, no recompute)",
    )  # fmt: skip
    offload_modules: tuple[OffloadModule, ...] | None = Field(
        None, min_length=1, description="whose saved tensors activation offload moves (--offload-modules); null: all"
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
    loss_parallel_fp32_copies: int | None = Field(
        None,
        ge=1,
        le=8,
        description="fp32 logit-sized tensors alive at once when the vocabulary is split over tp > 1 ranks and the "
        "loss runs under DTensor's loss_parallel, with the 16-bit logits already freed: its backward keeps the "
        "saved log-softmax, a zeros_like for the targets' -1, exp of the log-softmax and their sum, 4 "
        "(torch/distributed/tensor/parallel/loss.py _nll_loss_and_log_softmax_backward; torchtitan's train.py "
        "deletes pred before backward); null: the loss keeps loss_fp32_copies whatever tp is",
    )
    compiled_loss: bool = Field(
        False,
        description="the cross entropy runs under torch.compile, which fuses the fp32 upcast, log-softmax and "
        "gather into kernels that keep no fp32 copy of the logits (backward reads the 16-bit logits and one "
        "log-sum-exp per token): torchtitan's build_cross_entropy_loss compiles it with the model since "
        "bbb1b61 (2025-04-02, torchtitan/components/loss.py); before, train.py left it commented out",
    )
    loss_compiles_with_model: bool = Field(
        False,
        description="turning compile on compiles the loss too unless a run says otherwise: torchtitan's compile "
        "components default to model and loss (job_config.py Compile.components)",
    )
    allocator_fraction: float | None = Field(
        None,
        ge=0,
        lt=1,
        description="the caching allocator's reserve beyond the tensors, as a share of them, measured for this "
        "engine (torch.cuda.max_memory_reserved over max_memory_allocated, less one): its streams' pools and "
        "the fragmentation of its allocation pattern; null: the hardware profile's assumed allocator_fraction",
    )
    pipeline_recv_buffers: bool = Field(
        False,
        description="the pipeline schedule keeps a receive buffer per micro-batch for every stage but the first "
        "(the activations it receives) and a gradient receive buffer per micro-batch for every stage but the last, "
        "made at the first step and kept, and each in-flight micro-batch's output for its backward "
        "(torch.distributed.pipelining stage.py: 2.13 _setup_forward_recv_info, _setup_backward_recv_info; 2.6 "
        "_prepare_forward_infra, _prepare_backward_infra; fwd_cache): m boundary tensors each beyond the inputs of "
        "the micro-batches in flight (cost/memory.py pipeline_buffers). false: the engine receives into the in-flight "
        "micro-batches' tensors only and frees the outputs it sent (Megatron's p2p_communication and "
        "deallocate_output_tensor, DeepSpeed's num_pipe_buffers)",
    )
    pipeline_stage_reduce: bool = Field(
        False,
        description="the pipeline schedule reduces a stage's gradients and reshards its FSDP weights right after that "
        "stage's last backward of the step, so on a rank with several stages they are freed while its other stages "
        "still run (torch.distributed.pipelining: 2.6 stage.py backward_maybe_with_nosync on last_backward, 2.13 "
        "schedules.py _add_reduce_grad's REDUCE_GRAD; cost/moments.py). false: every stage's gradients are held to "
        "the end of the step (Megatron's grad buffers and finalize_model_grads)",
    )
    fsdp_edge_groups: EdgeGroups = Field(
        "root",
        description="where a stage that gathers one unit at a time (ZeRO-3, FSDP) keeps the embedding and the "
        "output layer: root = together in the model's root unit (torchtitan until 83e6941, 2025-07-28: "
        "fully_shard(model) held them); own = each in its own unit, gathered apart (torchtitan's apply_fsdp since "
        "83e6941: fully_shard(model.tok_embeddings), fully_shard([model.norm, model.output]))",
    )
