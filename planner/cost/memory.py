"""Per-GPU memory of one plan, per pipeline stage, as a breakdown.

weights + gradients + optimizer state (Rajbhandari et al. 2020, ZeRO, section 3 and Figure 1),
activations kept for backward (activations.py, after Korthikanti et al. 2022) times the micro-batches
in flight on each stage (Narayanan et al. 2021, section 2.2), the output logits on the last stage,
buffers (ZeRO-3 gathers, gradient buckets, fp8 weight copies, the backward working set) and reserved
memory (CUDA context, NCCL workspace, caching-allocator fragmentation) from the hardware profile.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from planner.cost.activations import activation_bytes_per_layer, layer_workspace_bytes
from planner.plan import Plan, stage_layers
from planner.specs import HardwareProfile, ModelSpec, Training

TERMS = ("weights", "gradients", "optimizer", "activations", "buffers", "reserved")
DDP_BUCKET_BYTES = 25e6  # torch DDP bucket_cap_mb default; Megatron's grad buffer is counted in gradients
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
        return sum(self.as_dict().values())

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


# ---- bytes per parameter ---------------------------------------------------------------------------
@dataclass(frozen=True)
class StateBytes:
    """Bytes per parameter of each model state before sharding."""

    weights: float
    gradients: float
    optimizer: float


def state_bytes_per_param(precision: str, training: Training) -> StateBytes:
    """Mixed-precision Adam: 2 (16-bit weights) + 2 (16-bit grads) + 12 (fp32 master, m, v) = 16
    bytes per parameter (ZeRO, section 3.1); Megatron accumulates grads in fp32 (+2). Pure fp32 Adam
    needs no master copy: 4 + 4 + 8, unless the optimizer keeps one anyway (DeepSpeed's ZeRO optimizer
    does: 4 + 4 + 12). SGD with momentum keeps one moment instead of two."""
    moments = 1 if training.optimizer == "sgd" else 2
    wide = precision == "fp32"
    master = (not wide) if training.master_copy is None else training.master_copy
    weights = 4 if wide else 2  # fp8 recipes keep 16-bit weights (Transformer Engine, torchao)
    grads = 4 if (wide or training.grad_dtype == "fp32") else 2
    return StateBytes(weights, grads, 4 * (moments + (1 if master else 0)))


# ---- parameters per rank ---------------------------------------------------------------------------
@dataclass(frozen=True)
class RankParams:
    """Parameters one rank holds, split by how ZeRO shards them."""

    dense: float  # sharded over the dp·cp group
    expert: float  # sharded over the expert-data-parallel group dp·cp/ep
    largest_unit: float  # largest FSDP unit (a layer, or the embedding/output block), per rank
    num_gemms: int

    @property
    def total(self) -> float:
        return self.dense + self.expert


def _attention_params_per_rank(model: ModelSpec, tp: int) -> float:
    """Megatron splits Q and the output projection by heads; K and V heads are split too, or
    replicated when tp exceeds num_kv_heads (each rank keeps one kv head)."""
    h, hd = model.hidden_size, model.head_size
    q = model.num_attention_heads * hd
    kv_per_rank = max(model.kv_heads / tp, 1) * hd
    weights = h * q / tp + 2 * h * kv_per_rank + q * h / tp
    bias = (q / tp + 2 * kv_per_rank + h) if model.has_bias else 0
    return weights + bias


def _layer_params_per_rank(model: ModelSpec, layer: int, tp: int, ep: int) -> tuple[float, float]:
    """(dense, expert) parameters of one layer on one rank. Norms are replicated across tp."""
    dense = _attention_params_per_rank(model, tp) + 2 * model.norm_params
    if model.is_moe_layer(layer):
        m = model.moe
        assert m is not None
        dense += model.hidden_size * m.num_experts  # router, replicated
        dense += m.num_shared_experts * model.expert_params / tp
        expert = (m.num_experts / ep) * model.expert_params / tp
        return dense, expert
    return dense + model.mlp_params(model.ffn_hidden_size) / tp, 0.0


@lru_cache(maxsize=4096)
def rank_params(model: ModelSpec, *, tp: int, pp: int, vpp: int, ep: int, rank: int) -> RankParams:
    """Parameters held by pipeline rank `rank` (chunks rank, rank + pp, ... of pp·vpp chunks)."""
    chunks = stage_layers(model.num_layers, pp, vpp)
    sizes = [chunks[c % pp][c // pp] for c in range(pp * vpp)]
    starts = [sum(sizes[:c]) for c in range(pp * vpp)]
    dense = expert = largest = 0.0
    gemms = 0
    for k in range(vpp):
        c = rank + k * pp
        for layer in range(starts[c], starts[c] + sizes[c]):
            d, e = _layer_params_per_rank(model, layer, tp, ep)
            dense, expert, largest = dense + d, expert + e, max(largest, d + e)
            gemms += 4 + model.mlp_matrices
    h, v = model.hidden_size, model.vocab_size
    first, last = rank == 0, rank == (pp * vpp - 1) % pp
    edge = 0.0
    if first:
        edge += v * h / tp + (model.max_seq_len * h if model.position_embedding == "learned" else 0)
    if last:
        # The output projection is vocab-parallel; a tied one is a second copy when pp > 1 (Megatron).
        if not model.tied_embeddings or pp > 1:
            edge += v * h / tp
        edge += model.norm_params
        gemms += 1
    dense += edge
    return RankParams(dense=dense, expert=expert, largest_unit=max(largest, edge), num_gemms=gemms)


# ---- micro-batches in flight ------------------------------------------------------------------------
def in_flight_microbatches(plan: Plan, rank: int) -> float:
    """Micro-batches whose activations one pipeline rank holds at its peak, in units of the rank's
    whole layer set. GPipe holds all m; 1F1B holds min(p − rank, m); interleaved 1F1B holds
    (2(p − rank − 1) + (v − 1)p + 1) chunk passes of 1/v of the layers, which is p(1 + (p−1)/(pv)) on
    the first rank (Narayanan et al. 2021, section 2.2; Megatron's warm-up count)."""
    m, p, v = plan.num_microbatches, plan.pp, plan.vpp
    if p == 1:
        return 1.0
    if plan.schedule == "gpipe":
        return float(m)
    if plan.schedule == "interleaved":
        chunk_passes = 2 * (p - rank - 1) + (v - 1) * p + 1
        return min(chunk_passes, m * v) / v
    return float(min(p - rank, m))


# ---- the breakdown ------------------------------------------------------------------------------------
def buffer_bytes(plan: Plan, params: RankParams, per: StateBytes, *, workspace_bytes: float) -> float:
    """Buffers beside the model states: the backward working set, plus ZeRO-3 gathers or DDP buckets,
    plus fp8 weight copies and scaling state."""
    buffers = workspace_bytes
    if plan.zero == 3 and plan.dp * plan.cp > 1:
        # FSDP/ZeRO-3 gathers the current unit and prefetches the next, and holds the unsharded
        # gradient of one unit before its reduce-scatter (Zhao et al. 2023, PyTorch FSDP, section 3).
        buffers += params.largest_unit * (2 * per.weights + per.gradients)
    elif plan.dp > 1:
        buffers += 2 * DDP_BUCKET_BYTES
    if plan.precision == "fp8":
        # FP8 copies of the local weights reused across micro-batches, plus per-GEMM scaling state
        # (Transformer Engine, `is_first_microbatch`; Micikevicius et al. 2022, FP8 Formats).
        fp8_weights = params.largest_unit * 2 if plan.zero == 3 else params.total
        buffers += fp8_weights + params.num_gemms * FP8_SCALING_BYTES_PER_TENSOR
    return buffers


def act_bytes(precision: str) -> int:
    """Activations are kept in the compute dtype; fp8 recipes keep bf16 activations (TE, torchao)."""
    return 4 if precision == "fp32" else 2


def logits_bytes(model: ModelSpec, plan: Plan) -> float:
    """Output logits on the last stage, one micro-batch: the logits in the activation dtype plus two
    fp32 copies alive during the loss (the upcast and the softmax kept for backward; Korthikanti 2022
    section 4.3 counts the fp32 one as 4·s·b·v/t)."""
    tokens = plan.micro_batch * plan.seq_len / plan.cp
    per_element = act_bytes(plan.precision) + 8
    return tokens * model.vocab_size / plan.tp * per_element


def _stage_memory(
    model: ModelSpec, hw: HardwareProfile, plan: Plan, training: Training, rank: int
) -> StageMemory:
    p = plan
    params = rank_params(model, tp=p.tp, pp=p.pp, vpp=p.vpp, ep=p.ep, rank=rank)
    per = state_bytes_per_param(p.precision, training)
    shard = p.dp * p.cp  # ZeRO shards over every data-parallel rank, cp included (torchtitan, Megatron)
    expert_shard = max(shard // p.ep, 1)

    def sharded(bytes_per_param: float, stage_min: int) -> float:
        if p.zero < stage_min:
            return params.total * bytes_per_param
        return bytes_per_param * (params.dense / shard + params.expert / expert_shard)

    weights = sharded(per.weights, 3)
    gradients = sharded(per.gradients, 2)
    optimizer = sharded(per.optimizer, 1)

    layers = sum(stage_layers(model.num_layers, p.pp, p.vpp)[rank])
    first, last = rank == 0, rank == (p.pp * p.vpp - 1) % p.pp
    a = act_bytes(p.precision)
    kwargs = dict(micro_batch=p.micro_batch, seq_len=p.seq_len, tp=p.tp, sp=p.sp, cp=p.cp,
                  recompute=p.recompute, act_bytes=a, training=training)
    moe_share = model.num_moe_layers / model.num_layers
    per_layer = activation_bytes_per_layer(model, **kwargs)
    if moe_share:
        per_layer = (1 - moe_share) * per_layer + moe_share * activation_bytes_per_layer(
            model, moe_layer=True, **kwargs)
    in_flight = in_flight_microbatches(p, rank)
    activations = per_layer * layers * in_flight
    if last:
        activations += logits_bytes(model, p)

    workspace = layer_workspace_bytes(model, moe_layer=moe_share > 0, **kwargs)
    buffers = buffer_bytes(p, params, per, workspace_bytes=workspace)

    tensors = weights + gradients + optimizer + activations + buffers
    r = hw.reserved
    reserved = r.cuda_context_bytes + r.comm_workspace_bytes + r.allocator_fraction * tensors
    breakdown = MemoryBreakdown(weights, gradients, optimizer, activations, buffers, reserved)
    return StageMemory(rank, layers, first, last, in_flight, breakdown)


def memory_report(
    model: ModelSpec, hw: HardwareProfile, plan: Plan, training: Training = Training()
) -> MemoryReport:
    """Memory per GPU for every pipeline stage of the plan (the plan is assumed to pass its checks)."""
    stages = tuple(_stage_memory(model, hw, plan, training, r) for r in range(plan.pp))
    notes = []
    if plan.tp > model.kv_heads:
        notes.append(f"tp={plan.tp} > num_kv_heads={model.kv_heads}: each kv head is replicated on "
                     f"{plan.tp // model.kv_heads} ranks")
    return MemoryReport(stages=stages, capacity_bytes=hw.gpu.hbm_bytes, notes=tuple(notes))


def model_state_bytes(
    *, params: float, dp: int, zero: int, precision: str = "bf16", training: Training = Training()
) -> MemoryBreakdown:
    """Model states of `params` parameters on one of `dp` data-parallel ranks (ZeRO, Figure 1)."""
    per = state_bytes_per_param(precision, training)
    w = per.weights * params / (dp if zero >= 3 else 1)
    g = per.gradients * params / (dp if zero >= 2 else 1)
    o = per.optimizer * params / (dp if zero >= 1 else 1)
    return MemoryBreakdown(w, g, o, 0.0, 0.0, 0.0)
