"""Communication time of a training step: alpha–beta collectives on the link tier each group uses.

time = steps·latency + bytes_on_the_wire / (bandwidth · efficiency) (Hockney 1994; Thakur, Rabenseifner
& Gropp 2005 for the ring algorithms). Rank order is Megatron's: tp innermost (stride 1), then cp
(stride tp), then dp (stride tp·cp; ep carved out of dp·cp, stride tp), pp outermost (stride tp·cp·dp).
A group of n ranks with stride k lies inside one node iff n·k ≤ gpus_per_node; otherwise it crosses
nodes and runs at min(intra, inter per-GPU share) bandwidth with the inter-node latency (DESIGN.md,
"Collectives"). Overlap follows DESIGN.md "Overlap": DP reduction hides behind the backward except the
last bucket, ZeRO-3 prefetch hides the weight all-gather behind compute, TP is exposed unless
training.tp_overlap, PP and EP are exposed.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.cost.compute import ACT_BYTES, LayerTime, StageCompute, layer_time, stage_compute, stage_shapes
from planner.cost.params import rank_params
from planner.cost.stages import layer_layout
from planner.cost.states import state_bytes_per_param
from planner.plan import Plan
from planner.specs import HardwareProfile, ModelSpec, Training

DIMS = ("tp", "cp", "ep", "pp", "dp")


@dataclass(frozen=True)
class Link:
    """What one group's collectives run on."""

    bandwidth_bytes_per_s: float  # achieved: link bandwidth × efficiency
    latency_s: float
    intra_node: bool


def group_link(hw: HardwareProfile, *, n: int, stride: int) -> Link:
    """Intra-node tier iff the n ranks, `stride` apart, fit in one node (n·stride ≤ gpus_per_node).

    A group that crosses nodes with k of its ranks on each node (k = gpus_per_node / stride, at least 1)
    drives k NICs at once: NCCL runs one ring per channel, each leaving the node through its own NIC,
    so the ring's bandwidth is min(intra, k × the per-GPU inter-node share) (NCCL's bus bandwidth on
    multi-node DGX systems is NICs-per-node × NIC bandwidth; nccl-tests PERFORMANCE.md). The other
    stride − 1 groups on that node use the node's other NICs, so nothing is counted twice. k = 1 (a dp
    group over tp = 8) gives the plain per-GPU share.
    """
    eff = hw.efficiency
    intra_bw = hw.intra_node.bandwidth_bytes_per_s * eff.intra_node
    if n * stride <= hw.gpus_per_node:
        return Link(intra_bw, hw.intra_node.latency_s, True)
    k = max(1, min(n, hw.gpus_per_node // stride))
    inter_bw = hw.inter_node.bandwidth_bytes_per_s * eff.inter_node
    return Link(min(intra_bw, k * inter_bw), hw.inter_node.latency_s, False)


# (latency steps, fraction of the buffer each GPU sends) for a ring over n ranks (Thakur et al. 2005).
def _ring(kind: str, n: int) -> tuple[float, float]:
    if kind == "all_reduce":
        return 2 * (n - 1), 2 * (n - 1) / n
    if kind in ("reduce_scatter", "all_gather", "all_to_all"):
        return n - 1, (n - 1) / n
    if kind == "p2p":
        return 1, 1.0
    raise ValueError(f"unknown collective {kind!r}; use all_reduce, reduce_scatter, all_gather, all_to_all, p2p")


def collective_bytes(kind: str, nbytes: float, n: int) -> float:
    """Bytes each GPU sends: all-reduce 2(n−1)/n·B, reduce-scatter / all-gather / all-to-all (n−1)/n·B."""
    return 0.0 if n <= 1 else _ring(kind, n)[1] * nbytes


def collective_s(kind: str, nbytes: float, n: int, link: Link) -> float:
    """Alpha–beta time of one collective on a buffer of `nbytes` (full size, before sharding)."""
    if n <= 1 or nbytes <= 0:
        return 0.0
    steps, frac = _ring(kind, n)
    return steps * link.latency_s + frac * nbytes / link.bandwidth_bytes_per_s


# ---- per layer, per micro-batch ----------------------------------------------------------------------
@dataclass(frozen=True)
class LayerComm:
    """One layer, one micro-batch, one GPU: total and exposed seconds per dimension."""

    tp_s: float
    tp_exposed_s: float
    cp_s: float
    cp_exposed_s: float
    ep_s: float  # MoE layers only
    ep_exposed_s: float

    @property
    def total(self) -> float:
        return self.tp_s + self.cp_s + self.ep_s


def layer_comm(model: ModelSpec, hw: HardwareProfile, plan: Plan, training: Training, *,
               moe: bool, layer: LayerTime) -> LayerComm:
    """TP, CP and EP communication of one layer for one micro-batch.

    TP: 2 all-reduces of b·s·h forward + 2 backward (Narayanan 2021 Sec. 3, Megatron's f/g operators),
    2 more when full recompute reruns the forward; with SP each becomes a reduce-scatter + all-gather of
    the same bytes (Korthikanti 2022 Sec. 4.2.2), so the time is the same. CP: ring exchange of the local
    K and V block, cp − 1 steps forward, twice that backward (K, V and their gradients), hidden behind
    the attention core (Liu et al. 2023, Ring Attention); expose only the excess. EP: all-to-all of the
    routed tokens (t·h·top_k) before and after the experts, forward and backward (Lepikhin et al. 2020,
    GShard; Fedus et al. 2021).
    """
    act_b = ACT_BYTES[plan.precision]
    tokens = plan.micro_batch * plan.seq_len / plan.cp
    full = plan.recompute == "full"
    n_pass = 4 + (2 if full else 0)
    tp = n_pass * collective_s("all_reduce", tokens * model.hidden_size * act_b, plan.tp,
                               group_link(hw, n=plan.tp, stride=1))
    if training.tp_overlap:  # overlapped with the GEMMs (Wang et al. 2022; torchtitan async TP)
        tp_exp = max(0.0, tp - layer.gemm_forward_s - layer.gemm_backward_s)
    else:
        tp_exp = tp
    co = hw.efficiency.collective_overhead_s  # host cost per call, always exposed (0 on GPUs)
    if plan.tp > 1 and co:
        tp, tp_exp = tp + n_pass * co, tp_exp + n_pass * co
    cp = cp_exp = 0.0
    if plan.cp > 1:
        kv_loc = max(model.kv_heads / plan.tp, 1.0) * model.head_size
        block = tokens * 2 * kv_loc * act_b
        one = (plan.cp - 1) * collective_s("p2p", block, 2, group_link(hw, n=plan.cp, stride=plan.tp))
        fwd_c, bwd_c = one, 2 * one
        cp = fwd_c + bwd_c + (one if full else 0.0)
        cp_exp = (max(0.0, fwd_c - layer.attention_core_forward_s)
                  + max(0.0, bwd_c - layer.attention_core_backward_s)
                  + (max(0.0, one - layer.attention_core_forward_s) if full else 0.0))
        if co:
            calls = (plan.cp - 1) * (3 + (1 if full else 0))
            cp, cp_exp = cp + calls * co, cp_exp + calls * co
    ep = 0.0
    if moe and model.moe is not None and plan.ep > 1:
        a2a = tokens * model.hidden_size * model.moe.top_k * act_b / (plan.tp if plan.sp else 1)
        ep = n_pass * (collective_s("all_to_all", a2a, plan.ep, group_link(hw, n=plan.ep, stride=plan.tp)) + co)
    return LayerComm(tp, tp_exp, cp, cp_exp, ep, ep)


def pp_microbatch_s(model: ModelSpec, hw: HardwareProfile, plan: Plan) -> float:
    """Per micro-batch per stage: one activation send forward and one gradient send backward of
    b·s·h/cp (/tp with SP) bytes, × vpp chunk boundaries interleaved (Narayanan 2021 Sec. 2.2, 4.1)."""
    if plan.pp == 1:
        return 0.0
    nbytes = (plan.micro_batch * plan.seq_len / plan.cp * model.hidden_size * ACT_BYTES[plan.precision]
              / (plan.tp if plan.sp else 1))
    link = group_link(hw, n=plan.pp, stride=plan.tp * plan.cp * plan.dp)
    return 2 * plan.vpp * (collective_s("p2p", nbytes, 2, link) + hw.efficiency.collective_overhead_s)


# ---- data parallel ---------------------------------------------------------------------------------
def dp_groups(plan: Plan) -> tuple[int, int]:
    """(dense, expert) gradient-reduction group sizes: dp·cp (torchtitan/Megatron reduce over both)
    and dp·cp/ep for the experts."""
    return plan.dp * plan.cp, plan.dp * plan.cp // plan.ep


def _dp_s(kind: str, dense_b: float, expert_b: float, hw: HardwareProfile, plan: Plan) -> float:
    n, ne = dp_groups(plan)
    return (collective_s(kind, dense_b, n, group_link(hw, n=n, stride=plan.tp))
            + collective_s(kind, expert_b, ne, group_link(hw, n=ne, stride=plan.tp * plan.ep)))


def dp_comm(model: ModelSpec, hw: HardwareProfile, plan: Plan, training: Training, *, stage: int,
            compute: StageCompute) -> tuple[float, float]:
    """(total, exposed) seconds of DP/ZeRO communication per step for pipeline rank `stage`.

    ZeRO 0: all-reduce of the gradients; ZeRO 1/2: reduce-scatter of gradients + all-gather of the
    updated weights after the step; ZeRO 3: all-gather of the weights in forward and again in backward,
    plus the gradient reduce-scatter, every micro-batch (Rajbhandari et al. 2020, Sec. 7; FSDP, Zhao et
    al. 2023). Gradient reduction overlaps the last micro-batch's backward except the last bucket (one
    layer's share); ZeRO-3 prefetch hides each all-gather behind the previous layer (expose the excess
    plus the first layer's); the ZeRO-1/2 weight all-gather is exposed (DESIGN.md, "Overlap").
    """
    if plan.dp * plan.cp == 1:
        return 0.0, 0.0
    params = rank_params(model, layer_layout(model.num_layers, plan.pp, plan.vpp), tp=plan.tp, ep=plan.ep,
                         rank=stage)
    dense, expert = params.dense, params.expert
    per = state_bytes_per_param(plan.precision, training)
    p_b, g_b = per.weights, per.gradients
    layers = max(1, compute.num_dense_layers + compute.num_moe_layers)
    bwd = compute.backward_s + compute.recompute_s
    reduce_kind = "all_reduce" if plan.zero == 0 else "reduce_scatter"
    red = _dp_s(reduce_kind, dense * g_b, expert * g_b, hw, plan)
    # Host cost per collective call (efficiency.collective_overhead_s, 0 on GPUs), exposed: one gradient
    # bucket per group (+ the weight all-gather with ZeRO 1/2); ZeRO-3 gathers and reduces every FSDP unit
    # (each layer and the root) every micro-batch: 3 calls per unit.
    n, ne = dp_groups(plan)
    co = hw.efficiency.collective_overhead_s * ((n > 1) + (ne > 1 and expert > 0))
    if plan.zero < 3:
        gather = _dp_s("all_gather", dense * p_b, expert * p_b, hw, plan) if plan.zero else 0.0
        calls = co * (2 if plan.zero else 1)
        exposed = max(0.0, red - bwd) + red / layers + gather + calls
        return red + gather + calls, exposed
    m = plan.num_microbatches
    ag = _dp_s("all_gather", dense * p_b, expert * p_b, hw, plan)
    fwd_exp = max(0.0, ag - compute.forward_s) + ag / layers
    bwd_exp = max(0.0, ag + red - bwd) + red / layers
    calls = co * 3 * (layers + 1)
    return m * (2 * ag + red + calls), m * (fwd_exp + bwd_exp + calls)


# ---- the step ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CommBreakdown:
    """Communication of one step on one GPU of the bottleneck pipeline rank, seconds."""

    stage: int
    tp_s: float
    cp_s: float
    ep_s: float
    pp_s: float
    dp_s: float
    tp_exposed_s: float
    cp_exposed_s: float
    ep_exposed_s: float
    pp_exposed_s: float
    dp_exposed_s: float

    @property
    def total_by_dim(self) -> dict[str, float]:
        return {d: getattr(self, f"{d}_s") for d in DIMS}

    @property
    def exposed_by_dim(self) -> dict[str, float]:
        return {d: getattr(self, f"{d}_exposed_s") for d in DIMS}

    @property
    def total(self) -> float:
        return sum(self.total_by_dim.values())

    @property
    def exposed(self) -> float:
        return sum(self.exposed_by_dim.values())

    @property
    def pipelined_exposed_s(self) -> float:
        """Exposed TP + CP + EP + PP of the step: paid inside the micro-batch slots, so the bubble
        stretches with it (DP is paid once, outside the pipeline)."""
        return self.tp_exposed_s + self.cp_exposed_s + self.ep_exposed_s + self.pp_exposed_s


def stage_comm(model: ModelSpec, hw: HardwareProfile, plan: Plan, training: Training, *, stage: int,
               compute: StageCompute | None = None) -> CommBreakdown:
    """Per-step communication of pipeline rank `stage` (TP/CP/EP/PP per micro-batch × micro-batches)."""
    compute = compute or stage_compute(model, hw, plan, training, stage)
    m = plan.num_microbatches
    nd, nm = compute.num_dense_layers, compute.num_moe_layers
    dl = layer_comm(model, hw, plan, training, moe=False, layer=layer_time(model, hw, plan, training, moe=False))
    ml = (layer_comm(model, hw, plan, training, moe=True, layer=layer_time(model, hw, plan, training, moe=True))
          if nm else dl)
    pp = pp_microbatch_s(model, hw, plan)
    dp, dp_exp = dp_comm(model, hw, plan, training, stage=stage, compute=compute)
    return CommBreakdown(
        stage=stage,
        tp_s=m * (nd * dl.tp_s + nm * ml.tp_s),
        cp_s=m * (nd * dl.cp_s + nm * ml.cp_s),
        ep_s=m * nm * ml.ep_s,
        pp_s=m * pp,
        dp_s=dp,
        tp_exposed_s=m * (nd * dl.tp_exposed_s + nm * ml.tp_exposed_s),
        cp_exposed_s=m * (nd * dl.cp_exposed_s + nm * ml.cp_exposed_s),
        ep_exposed_s=m * nm * ml.ep_exposed_s,
        pp_exposed_s=m * pp,
        dp_exposed_s=dp_exp,
    )


def bottleneck_stage(model: ModelSpec, hw: HardwareProfile, plan: Plan,
                     training: Training) -> tuple[int, StageCompute, CommBreakdown]:
    """The pipeline rank with the longest micro-batch slot (compute + exposed per-micro-batch comm)."""
    best = None
    seen: dict[tuple[int, int, bool, bool], int] = {}
    for r, shape in enumerate(stage_shapes(model, plan.pp, plan.vpp)):
        if shape in seen:
            continue
        seen[shape] = r
        c = stage_compute(model, hw, plan, training, r)
        k = stage_comm(model, hw, plan, training, stage=r, compute=c)
        slot = c.total + k.pipelined_exposed_s / plan.num_microbatches
        if best is None or slot > best[0]:
            best = (slot, r, c, k)
    assert best is not None
    return best[1], best[2], best[3]


def comm_times(model: ModelSpec, hw: HardwareProfile, plan: Plan, training: Training) -> CommBreakdown:
    """Per-step communication, total and exposed per dimension, of the bottleneck pipeline rank."""
    return bottleneck_stage(model, hw, plan, training)[2]
