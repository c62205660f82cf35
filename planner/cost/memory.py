"""Per-GPU memory of one plan, per pipeline stage, as a breakdown.

weights + gradients + optimizer state (Rajbhandari et al. 2020, ZeRO, section 3 and Figure 1),
activations kept for backward (activations.py, after Korthikanti et al. 2022) times the micro-batches
in flight on each stage (Narayanan et al. 2021, section 2.2), the output logits on the last stage,
buffers (ZeRO-3 gathers, gradient buckets, fp8 weight copies, the backward working set) and reserved
memory (CUDA context, NCCL workspace, caching-allocator fragmentation) from the hardware profile.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from planner.cost.activations import activation_bytes_per_layer, layer_workspace_bytes, pp_boundary_bytes
from planner.cost.moe import routed_load
from planner.cost.moments import Moment, interleaved_moments
from planner.cost.params import RankParams, chunk_shares, padded_vocab, plan_params
from planner.cost.quantization import NO_RECIPE_MEMORY, RecipeMemory, recipe_memory, saved_input_bytes
from planner.cost.recipe_options import (
    Groups,
    gpu_optimizer_bytes,
    held_activations,
    offload_group_bytes,
    offload_modules,
    offloaded_bytes,
    original_inputs,
)
from planner.cost.stages import Mix, plan_layout, rank_mix, v_shape, warmup_chunks
from planner.cost.states import StateBytes, sharded_states, state_bytes_per_param
from planner.engine import Engine, ZeroStage
from planner.engine import Memory as EngineMemory
from planner.hardware import HardwareProfile, ReservedMemory
from planner.layers import LayerKind
from planner.plan import Plan
from planner.precision import TENSORWISE_FP8, activation_bytes
from planner.specs import ModelSpec

TERMS = ("weights", "gradients", "optimizer", "activations", "buffers", "reserved")
FP8_SCALING_BYTES_PER_TENSOR = 2 * 1024 * 4  # amax history (1024 fp32) for input and weight, per GEMM


@dataclass(frozen=True)
class MemoryBreakdown:
    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    buffers_bytes: float
    reserved_bytes: float

    @property
    def total_bytes(self) -> float:
        # Added left to right, as stage_total_bytes does (the search's screen must give the same float, bit
        # for bit, and sum() compensates its rounding from Python 3.12 on).
        return (
            self.weights_bytes
            + self.gradients_bytes
            + self.optimizer_bytes
            + self.activations_bytes
            + self.buffers_bytes
            + self.reserved_bytes
        )

    @property
    def model_state_bytes(self) -> float:
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes

    def as_dict(self) -> dict[str, float]:
        return {t: getattr(self, f"{t}_bytes") for t in TERMS}


@dataclass(frozen=True)
class StageMemory:
    stage: int
    layers: int
    first: bool
    last: bool
    in_flight_microbatches: float
    breakdown: MemoryBreakdown
    step_bytes: float = 0.0  # the optimizer step's transient, when it outweighs the activations (in buffers)
    gradients_alive: tuple[int, ...] | None = None  # the chunks whose unsharded gradients the peak holds; None: all

    @property
    def total_bytes(self) -> float:
        return self.breakdown.total_bytes


@dataclass(frozen=True)
class MemoryReport:
    stages: tuple[StageMemory, ...]
    capacity_bytes: float
    notes: tuple[str, ...] = field(default=())

    @property
    def peak(self) -> StageMemory:
        return max(self.stages, key=lambda s: s.total_bytes)

    @property
    def total_bytes(self) -> float:
        return self.peak.total_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes

    @property
    def headroom_bytes(self) -> float:
        return self.capacity_bytes - self.total_bytes


# ---- micro-batches in flight ------------------------------------------------------------------------
def in_flight_microbatches(plan: Plan, rank: int) -> float:
    """Micro-batches whose activations one pipeline rank holds at its peak, in units of the rank's
    whole layer set. GPipe holds all m; 1F1B holds min(p − rank, m); interleaved 1F1B holds
    (2(p − rank − 1) + (v − 1)N + 1) chunk passes of 1/v of the layers, N the micro-batches a virtual stage
    takes at a time (plan.microbatch_group: p where p divides m), which is p(1 + (p−1)/(pv)) on the first
    rank with N = p (Narayanan et al. 2021, section 2.2; Megatron's warm-up count)."""
    m, p, v = plan.num_microbatches, plan.pp, plan.vpp
    if p == 1:
        return 1.0
    if plan.schedule == "gpipe":
        return float(m)
    if plan.schedule == "dualpipev":
        # DualPipeV keeps PP + 1 chunk-micro-batches of activations per device where PP is its 2p chunks
        # (deepseek-ai/DualPipe README, schedule table): (2p + 1)/2 of the rank's two chunks, on every rank.
        return min(p + 0.5, float(m))
    if plan.schedule == "interleaved":
        return min(warmup_chunks(p, v, m, rank) + 1, m * v) / v
    return float(min(p - rank, m))


def rank_moments(plan: Plan, engine: Engine, rank: int) -> tuple[Moment, ...]:
    """The moments of the step that can hold the rank's peak: one, with the most micro-batches in flight and every
    state alive, unless the engine frees a stage's states after its own last backward
    (memory.pipeline_stage_reduce) on a rank with several interleaved chunks (cost.moments)."""
    if plan.schedule == "interleaved" and plan.pp > 1 and plan.vpp > 1 and engine.memory.pipeline_stage_reduce:
        return interleaved_moments(plan.pp, plan.vpp, plan.num_microbatches, rank)
    return (Moment(in_flight_microbatches(plan, rank)),)


# ---- the breakdown ------------------------------------------------------------------------------------
def state_buffer_bytes(
    plan: Plan, params: RankParams, per: StateBytes, stage: ZeroStage, engine_memory: EngineMemory
) -> float:
    """Buffers beside the model states that do not depend on the activations: the gathered layers of a
    ZeRO-3 stage or DDP buckets, plus fp8 weight copies and scaling state."""
    buffers = 0.0
    if stage.gathered_weights == "unit" and plan.dp * plan.cp > 1:
        # ZeRO-3/FSDP gathers the current unit and prefetches the next, and holds the unsharded
        # gradient of one unit before its reduce-scatter (Zhao et al. 2023, PyTorch FSDP, section 3).
        buffers += params.unit(engine_memory.fsdp_edge_groups) * (2 * per.compute + per.gradients)
    elif plan.dp * plan.cp > 1:
        buffers += stage.bucket_bytes  # the engine's gradient-reduction buffers (DDP, DeepSpeed's IPG bucket)
    if plan.precision == "fp8" and engine_memory.fp8_weight_cache:
        # FP8 copies of the local weights reused across micro-batches, plus per-GEMM scaling state
        # (Transformer Engine, `is_first_microbatch`; Micikevicius et al. 2022, FP8 Formats). torchao's
        # dynamic scaling casts each weight when its GEMM runs: transient, nothing cached.
        unit = params.unit(engine_memory.fsdp_edge_groups)
        fp8_weights = unit * 2 if stage.gathered_weights == "unit" else params.total
        buffers += fp8_weights + params.num_gemms * FP8_SCALING_BYTES_PER_TENSOR
    return buffers


def logits_bytes(model: ModelSpec, plan: Plan, engine: Engine) -> float:
    """Output logits on the last stage, one micro-batch, over the engine's padded vocabulary, at the loss: the
    logits in the activation dtype plus the engine's fp32 copies (`memory.loss_fp32_copies`): the upcast and the
    softmax kept for backward where the loss upcasts and then runs a softmax (Korthikanti 2022 section 4.3
    counts the fp32 one as 4·s·b·v/t), one where the upcast becomes the softmax in place (Megatron's
    VocabParallelCrossEntropy: `.float()`, then `sub_`, `exp(out=)`, `div_`, and that tensor saved). In fp32
    the upcast is the logits themselves: no 16-bit tensor beside them. A compiled loss keeps no fp32 copy. Where
    the vocabulary is split over tp > 1 ranks and the engine runs DTensor's loss_parallel, its backward holds
    `memory.loss_parallel_fp32_copies` fp32 copies at once instead, and no 16-bit logits."""
    tokens = plan.micro_batch * plan.seq_len / plan.cp
    a = activation_bytes(plan.precision)
    copies = 0 if engine.memory.compiled_loss else engine.memory.loss_fp32_copies  # compiled: none (execution.py)
    per_element = (a if a < 4 else 0) + 4 * copies
    split = engine.memory.loss_parallel_fp32_copies
    if plan.tp > 1 and split is not None and copies:
        per_element = 4 * split  # DTensor's loss_parallel backward, the 16-bit logits freed (execution.py)
    vocab = padded_vocab(model.vocab_size, plan.tp, engine.rules.vocab_padding)
    heads = 1 + model.mtp_layers  # each multi-token-prediction module computes its own logits and loss
    return tokens * vocab / plan.tp * per_element * heads


def layers_work_bytes(work_bytes: float, logits_bytes: float, *, loss_apart: bool) -> float:
    """What the layers' backward working set adds to the peak of a rank whose activations hold `logits_bytes` of
    loss. The loss runs, and frees its fp32 copies of the logits, before the last layer's backward starts, so on
    the stage that computes it the working set adds only what it exceeds the logits by. Measured on an H200 with
    torchtitan 0.2.2 (benchmarks/results/h200-2026-11-28-titan-pp): the 405B pipeline's last stages peak at the
    loss, and Llama 3 70B at FSDP 32 x TP 8 peaks there with its layers' backward 17.8 GiB lower. DualPipeV runs one
    micro-batch's loss beside another's backward chunk (loss_apart false: both count)."""
    return max(0.0, work_bytes - logits_bytes) if loss_apart else work_bytes


def loss_apart(plan: Plan) -> bool:
    """Whether the loss's logits and the layers' backward working set are alive at different moments."""
    return not v_shape(plan)


def rank_reserved(hw: HardwareProfile, engine: Engine) -> ReservedMemory:
    """The memory a rank holds beyond tensors: the profile's context and NCCL workspace, and the engine's measured
    allocator fragmentation (`memory.allocator_fraction`) where it states one, else the profile's assumed one."""
    fraction = engine.memory.allocator_fraction
    return hw.reserved if fraction is None else hw.reserved.model_copy(update={"allocator_fraction": fraction})


# (bytes a layer keeps per micro-batch, its backward working set, its offload groups' bytes in forward order)
Pieces = tuple[float, float, Groups]


def kind_pieces(model: ModelSpec, plan: Plan, engine: Engine, kind: LayerKind) -> Pieces:
    """(bytes one layer of this kind keeps per micro-batch, the working set of its backward, the bytes each of its
    eligible offload groups frees, in forward order: none without activation offload) on one rank
    (activations.py, recipe_options.offload_group_bytes)."""
    p, a, k = plan, activation_bytes(plan.precision), engine.kernels
    kw: dict[str, Any] = {"micro_batch": p.micro_batch, "seq_len": p.seq_len, "tp": p.tp, "sp": p.sp, "cp": p.cp}
    kw.update(
        recompute=p.recompute,
        act_bytes=a,
        kernels=k,
        kind=kind,
        etp=p.expert_tp,
        saved_quant=saved_input_bytes(p.precision, engine),
        col_in_bytes=1.0 if k.tp_fp8_inputs and p.precision in TENSORWISE_FP8 else 0.0,
        autocast=engine.zero_stage(p).autocast and a < 4,
        load=routed_load(model, engine, p.ep) if kind.ffn == "moe" else 1.0,  # the busiest rank's routed rows
    )
    moved = offload_modules(engine, p.recompute)
    kw["original"] = original_inputs(moved, p.precision) if kw["saved_quant"] else ()
    share = engine.memory.activation_offload

    def moved_by(modules: tuple[str, ...]) -> float:
        return activation_bytes_per_layer(model, **kw, offloaded=modules)

    groups = offload_group_bytes(moved_by, moved, share) if moved else ()
    return activation_bytes_per_layer(model, **kw), layer_workspace_bytes(model, **kw), groups


def mix_pieces(
    mix: Mix,
    pieces: dict[LayerKind, Pieces],
    *,
    chunk_sizes: tuple[int, ...] = (),
    share: float = 0.0,
    offloaded: Mix = (),
) -> tuple[float, float, float]:
    """A rank's (kept bytes of all its layers per micro-batch, the largest working set of its kinds, the kept bytes
    activation offload moves: at `share` over the rank's model chunks of `chunk_sizes` layers
    (recipe_options.offloaded_bytes), or all that the `offloaded` layers keep (layer-wise CPU offload:
    first_layers))."""
    keep, work = 0.0, 0.0
    for kind, n in mix:
        k, w, _g = pieces[kind]
        keep, work = keep + k * n, max(work, w)
    moved = offloaded_bytes(((pieces[kind][2], n) for kind, n in mix), chunk_sizes, share) if share else 0.0
    return keep, work, moved + sum(pieces[kind][0] * n for kind, n in offloaded)


def first_layers(model: ModelSpec, engine: Engine) -> Mix:
    """The kinds of the model's first memory.offload_layers layers, in model order (the layer-wise CPU offload runs
    with pp 1: the one rank holds them all), as (kind, how many)."""
    n = engine.memory.offload_layers
    return tuple(Counter(model.layer_kinds[:n]).items()) if n else ()


def activation_pieces(model: ModelSpec, plan: Plan, engine: Engine) -> dict[LayerKind, Pieces]:
    """Each layer kind's pieces (kind_pieces) for the plan's micro-batch shape and recompute level."""
    return {kind: kind_pieces(model, plan, engine, kind) for kind in model.kind_params}


class StateTerms(NamedTuple):
    """What a pipeline rank holds whatever its activations, and what its optimizer step adds once they are freed."""

    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    buffers_bytes: float  # beside the activations
    step_bytes: float = 0.0  # transient at the optimizer step (the fp32 gradient copies, ModelStates.step_upcast_bytes)
    gathered_bytes: float = 0.0  # of weights_bytes: the 16-bit copies gathered for the step (cost.moments)
    accumulated_bytes: float = 0.0  # of gradients_bytes: the unsharded ones accumulated over micro-batches

    def at(self, moment: Moment, shares: tuple[float, ...]) -> StateTerms:
        """The terms at `moment`, with only its chunks' gathered weights and accumulated gradients alive, each chunk
        its share of the rank's parameters (params.chunk_shares)."""
        return self.alive(alive_share(moment.weights, shares), alive_share(moment.grads, shares))

    def alive(self, weights_share: float, grads_share: float) -> StateTerms:
        """The terms with only these shares of the gathered weights and the accumulated gradients alive."""
        if weights_share == 1.0 and grads_share == 1.0:
            return self
        w, g, o, buffers, step, gathered, accumulated = self
        g_alive = g - accumulated * (1.0 - grads_share)
        return StateTerms(w - gathered * (1.0 - weights_share), g_alive, o, buffers, step, gathered, accumulated)


def alive_share(chunks: tuple[int, ...] | None, shares: tuple[float, ...]) -> float:
    """The share of a rank's parameters in `chunks` (None or all of them: exactly 1)."""
    return 1.0 if chunks is None or len(chunks) == len(shares) else sum(shares[c] for c in chunks)


def state_terms(
    plan: Plan,
    params: RankParams,
    per: StateBytes,
    stage: ZeroStage,
    engine_memory: EngineMemory,
    recipe: RecipeMemory = NO_RECIPE_MEMORY,
) -> StateTerms:
    """What a pipeline rank holds whatever its activations: weights (with 16-bit copies held through the
    step), gradients (with unsharded ones accumulated across micro-batches), optimizer state (cost.states; less
    the share offloaded to the CPU) and the state buffers, with a named precision recipe's weights and copies
    (cost.quantization.recipe_memory). Depends on the structure and the ZeRO stage `stage` (not on `plan.zero`: the
    search asks about every stage with one plan), not on recompute."""
    s = sharded_states(params, per, plan, stage)
    fsdp = "weights" in stage.shards and plan.dp * plan.cp > 1  # what a stage gathers and reduces itself (moments)
    return StateTerms(
        s.weights_bytes + s.gathered_weights_bytes + recipe.weights_bytes,
        s.gradients_bytes + s.accumulated_grads_bytes,
        gpu_optimizer_bytes(s.optimizer_bytes, engine_memory),
        state_buffer_bytes(plan, params, per, stage, engine_memory) + recipe.buffers_bytes,
        gpu_optimizer_bytes(s.step_upcast_bytes, engine_memory),
        s.gathered_weights_bytes if fsdp else 0.0,
        s.accumulated_grads_bytes if fsdp else 0.0,
    )


class PipelineBuffers(NamedTuple):
    """What torch.distributed.pipelining holds beside the layers' activations (memory.pipeline_recv_buffers):
    `extra`, the bytes the activation phase adds beyond them, and `step_shift`, what the optimizer step's phase
    holds beyond `extra` (the receive buffers of the micro-batches in flight, counted among the activations until
    then, less the kept outputs, freed by the backward)."""

    extra: float = 0.0
    step_shift: float = 0.0


NO_PIPELINE_BUFFERS = PipelineBuffers()


def pipeline_buffers(
    model: ModelSpec, plan: Plan, engine: Engine, *, chunks: int, first: bool, last: bool, in_flight: float
) -> PipelineBuffers:
    """The buffers a torch.distributed.pipelining rank holds for its `chunks` stages: an activation receive buffer
    per micro-batch for each stage but the first and a gradient receive buffer per micro-batch for each but the
    last, made at the first step and kept (torch 2.13 stage.py _setup_forward_recv_info, _setup_backward_recv_info;
    2.6 _prepare_forward_infra, _prepare_backward_infra), and, for each stage but the last, the output of each
    micro-batch in flight, kept for its backward (fwd_cache). The in-flight micro-batches' receive buffers are their
    first layers' inputs, counted among the activations; in flight is spread evenly over the chunks (on rank 0 of an
    interleaved plan its first chunk holds more, so the others' buffers are slightly undercounted)."""
    if plan.pp == 1 or not engine.memory.pipeline_recv_buffers:
        return NO_PIPELINE_BUFFERS
    m, held = plan.num_microbatches, min(in_flight, plan.num_microbatches)
    boundary = pp_boundary_bytes(
        model,
        plan.micro_batch,
        plan.seq_len,
        cp=plan.cp,
        tp=plan.tp,
        sp=plan.sp,
        act_bytes=activation_bytes(plan.precision),
    )
    receiving, sending = chunks - first, chunks - last
    persistent = boundary * (receiving + sending) * m
    inputs, outputs = boundary * receiving * held, boundary * sending * held
    return PipelineBuffers(persistent - inputs + outputs, inputs - outputs)


def stage_terms(
    state: StateTerms,
    reserved: ReservedMemory,
    *,
    in_flight: float,
    kept_bytes: float,
    workspace_bytes: float,
    logits: float,
    pipeline: PipelineBuffers = NO_PIPELINE_BUFFERS,
) -> MemoryBreakdown:
    """The six terms of one pipeline rank's memory: the one formula behind both
    memory_report and the search's memory screen. Activations: what the rank's layers keep per micro-batch
    (mix_pieces) times the micro-batches in flight, plus the logits on the last stage; buffers: the state
    buffers plus one layer's backward working set, and what the optimizer step's transient holds beyond the
    activations and working set it outlives (the peak is the larger of the two phases), plus the pipeline's
    receive buffers, which outlive both, and the outputs it keeps for the backward (pipeline_buffers); reserved:
    the profile's fixed context and communication workspace plus allocator fragmentation on everything else."""
    w, g, o, state_buffers, step, _gathered, _accumulated = state
    activations = kept_bytes * in_flight + logits
    step_beyond = max(0.0, step + pipeline.step_shift - (activations + workspace_bytes))
    buffers = workspace_bytes + state_buffers + step_beyond + pipeline.extra
    tensors = w + g + o + activations + buffers
    held = reserved.cuda_context_bytes + reserved.comm_workspace_bytes + reserved.allocator_fraction * tensors
    return MemoryBreakdown(w, g, o, activations, buffers, held)


def stage_total_bytes(
    state: StateTerms,
    reserved: ReservedMemory,
    in_flight: float,
    kept_bytes: float,
    workspace_bytes: float,
    logits: float,
    pipeline: PipelineBuffers = NO_PIPELINE_BUFFERS,
) -> float:
    """``stage_terms(...).total_bytes`` with the same additions in the same order (so the
    same float, bit for bit), without building the terms: the search screens tens of thousands of plans
    with it."""
    w, g, o, state_buffers, step, _gathered, _accumulated = state
    activations = kept_bytes * in_flight + logits
    step_beyond = max(0.0, step + pipeline.step_shift - (activations + workspace_bytes))
    buffers = workspace_bytes + state_buffers + step_beyond + pipeline.extra
    tensors = w + g + o + activations + buffers
    return tensors + (
        reserved.cuda_context_bytes + reserved.comm_workspace_bytes + reserved.allocator_fraction * tensors
    )


def _stage_memory(
    model: ModelSpec, hw: HardwareProfile, plan: Plan, engine: Engine, rank: int, pieces: dict[LayerKind, Pieces]
) -> StageMemory:
    layout = plan_layout(model, plan, engine)
    mix = rank_mix(model, layout, rank)
    sizes = layout.chunk_sizes(rank)
    keep, work, moved = mix_pieces(
        mix, pieces, chunk_sizes=sizes, share=engine.memory.activation_offload, offloaded=first_layers(model, engine)
    )
    params = plan_params(model, plan, engine, rank)
    layers = layout.num_rank_layers(rank)
    last = layout.holds_loss(rank)
    stage = engine.zero_stage(plan)
    per = state_bytes_per_param(plan.precision, engine, stage)
    recipe = recipe_memory(model, plan, engine, hw, stage, rank=rank, params=params)
    state = state_terms(plan, params, per, stage, engine.memory, recipe)
    logits = logits_bytes(model, plan, engine) if last else 0.0
    first = layout.holds_embedding(rank)
    vocab = padded_vocab(model.vocab_size, plan.tp, engine.rules.vocab_padding)
    shares = chunk_shares(model, layout, tp=plan.tp, ep=plan.ep, rank=rank, vocab=vocab, etp=plan.expert_tp)
    held_layers = sum(n for _k, n in mix)
    reserved, apart = rank_reserved(hw, engine), loss_apart(plan)
    best: tuple[MemoryBreakdown, Moment, float, StateTerms] | None = None
    for moment in rank_moments(plan, engine, rank):  # the largest total; the first of equals
        in_flight = moment.held
        kept, layers_work = held_activations(keep, work, moved, in_flight=in_flight, layers=held_layers, engine=engine)
        held_work = layers_work_bytes(layers_work, logits, loss_apart=apart)
        pipeline = pipeline_buffers(model, plan, engine, chunks=len(sizes), first=first, last=last, in_flight=in_flight)
        at = state.at(moment, shares)
        terms = stage_terms(
            at, reserved, in_flight=in_flight, kept_bytes=kept, workspace_bytes=held_work, logits=logits,
            pipeline=pipeline,
        )  # fmt: skip
        if best is None or terms.total_bytes > best[0].total_bytes:
            best = (terms, moment, held_work, at)
    assert best is not None
    terms, moment, work, at = best
    at_step = at.step_bytes if at.step_bytes > terms.activations_bytes + work else 0.0
    alive = moment.grads if at.accumulated_bytes else None
    return StageMemory(rank, layers, first, last, moment.held, terms, at_step, alive)


def memory_report(model: ModelSpec, hw: HardwareProfile, plan: Plan, engine: Engine) -> MemoryReport:
    """Memory per GPU for every pipeline stage of the plan, as the engine runs it (the plan is assumed to
    pass its checks and the engine's rules)."""
    pieces = activation_pieces(model, plan, engine)
    stages = tuple(_stage_memory(model, hw, plan, engine, r, pieces) for r in range(plan.pp))
    notes = []
    if plan.tp > model.kv_heads:
        notes.append(
            f"tp={plan.tp} > num_kv_heads={model.kv_heads}: each kv head is replicated on "
            f"{plan.tp // model.kv_heads} ranks"
        )
    report = MemoryReport(stages=stages, capacity_bytes=hw.gpu.hbm_bytes)
    alive = report.peak.gradients_alive
    if alive is not None and len(alive) < plan.vpp:
        notes.append(
            f"stage {report.peak.stage} peaks with the unsharded gradients of {len(alive)} of its {plan.vpp} chunks "
            "alive: torch's pipelining reduces each chunk's after its own last backward"
        )
    step = report.peak.step_bytes
    if step:
        notes.append(
            f"the peak is at the optimizer step: its fp32 copies of the 16-bit gradients "
            f"({step / 2**30:.2f} GiB, in buffers) outweigh the activations it follows"
        )
    return replace(report, notes=tuple(notes))
