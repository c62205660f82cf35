"""What each parallel dimension sends, and how long it spends on its link (before any overlap).

Per layer and micro-batch: tensor parallelism's all-reduces (or SP's reduce-scatter + all-gather pairs of
the same bytes), context parallelism's KV ring and expert parallelism's all-to-alls; per micro-batch and
stage: the pipeline's activation and gradient transfers; per step: data parallelism's gradient reduction
and weight all-gathers, as the engine's ZeRO stage runs them. Which of it hides behind compute is
schedule.py's question.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.cost.activations import pp_boundary_bytes
from planner.cost.comm import collective_s, group_link
from planner.cost.compute import ACT_BYTES
from planner.cost.moe import layer_ep_s
from planner.cost.params import expert_dp, plan_params
from planner.cost.recipe_options import moe_recomputed
from planner.cost.states import state_bytes_per_param
from planner.engine import Engine
from planner.hardware import HardwareProfile
from planner.layers import LayerKind
from planner.plan import Plan
from planner.specs import ModelSpec


@dataclass(frozen=True)
class LayerTraffic:
    """One layer, one micro-batch, one GPU: seconds on the wire (collective calls included, none hidden)."""

    tp_passes: int  # TP collectives: 2 forward + 2 backward (+ 2 recomputed forward)
    tp_one_s: float  # one of them
    cp_ring_s: float  # one pass of the KV ring (cp − 1 steps); backward sends twice as much
    cp_recompute: bool  # full recompute runs the forward ring again
    ep_s: float  # every expert all-to-all of the layer (MoE layers only)
    call_s: float  # host cost of one collective call (hardware collective_overhead_s + engine launch cost)
    cp_a2a_s: float = 0.0  # a Mamba-2 layer's context-parallel all-to-alls, forward and backward (none hidden)
    tp_calls_per_pass: int = 1  # an all-reduce is one call; SP's reduce-scatter + all-gather are two

    @property
    def tp_calls(self) -> int:
        """TP collective calls, each paying the host cost `call_s`."""
        return self.tp_passes * self.tp_calls_per_pass


def layer_traffic(
    model: ModelSpec,
    hw: HardwareProfile,
    plan: Plan,
    engine: Engine,
    *,
    moe: bool = False,
    kind: LayerKind | None = None,
) -> LayerTraffic:
    """TP: 2 all-reduces of b·s·h forward + 2 backward (Narayanan 2021 Sec. 3, Megatron's f/g operators),
    2 more when full recompute reruns the forward; with SP each becomes a reduce-scatter + all-gather of
    the same bytes (Korthikanti 2022 Sec. 4.2.2), so the time on the link is the same, but two calls pay the
    host cost of a call (efficiency.collective_overhead_s, engine collective_launch_s) where one did. CP: ring
    exchange of the local K and V block, cp − 1 steps forward, twice that backward (K, V and their gradients)
    (Liu et al. 2023, Ring Attention). EP: all-to-all of the routed tokens (t·h·top_k) before and after the
    experts, forward and backward (Lepikhin et al. 2020, GShard; Fedus et al. 2021). A hybrid layer (one block: a
    mixer or an FFN) has half the TP collectives; only attention mixers run the CP ring, only MoE FFNs the
    all-to-all."""
    if kind is None:
        kind = LayerKind("mla" if model.is_mla else "attention", "moe" if moe else "dense", "global")
    act_b = ACT_BYTES[plan.precision]
    tokens = plan.micro_batch * plan.seq_len / plan.cp
    full = plan.recompute == "full"
    # TP collectives per block (the mixer's, a dense FFN's): one forward, one backward, one more under full
    # recompute. A MoE FFN has none of its own where its dispatcher gathers over the expert tensor-parallel ranks
    # (moe.dispatch_s), which replaces the sequence-parallel all-gather / reduce-scatter of a dense FFN; where the
    # engine gathers the block's input whole on every tp rank (moe.replicated_over_tp), it has a dense FFN's.
    blocks = (kind.mixer != "none") + (kind.ffn == "dense" or (kind.ffn == "moe" and engine.moe.replicated_over_tp))
    n_pass = blocks * (2 + (1 if full else 0))
    tp_one = collective_s(
        "all_reduce", tokens * model.hidden_size * act_b, plan.tp, group_link(hw, n=plan.tp, stride=1, gpus=plan.gpus)
    )
    co = hw.efficiency.collective_overhead_s + engine.comm.collective_launch_s
    ring = _cp_ring_s(model, hw, plan, kind, tokens=tokens, act_b=act_b)
    cp_a2a = _mamba_cp_s(model, hw, plan, kind, tokens=tokens, act_b=act_b, full=full, co=co)
    ep = 0.0
    if kind.ffn == "moe" and model.moe is not None and plan.ep * plan.expert_tp > 1:
        # dispatch and combine, forward and backward, and the forward pair again under full recompute or when
        # selective recompute re-runs the `moe` module
        again = full or moe_recomputed(engine.kernels, plan.recompute)
        ep = layer_ep_s(model, hw, plan, engine, tokens=tokens, recomputed=again) + (4 + (2 if again else 0)) * co
    return LayerTraffic(n_pass, tp_one, ring, full, ep, co, cp_a2a, tp_calls_per_pass=2 if plan.sp else 1)


def _cp_ring_s(
    model: ModelSpec, hw: HardwareProfile, plan: Plan, kind: LayerKind, *, tokens: float, act_b: float
) -> float:
    """One attention layer's CP ring exchange: the local K and V block passed cp − 1 times (Liu et al. 2023)."""
    if plan.cp == 1 or not kind.has_attention:
        return 0.0
    kv_loc = max(model.kv_heads / plan.tp, 1.0) * model.head_size
    if kind.mixer == "mla" and model.attention is not None and model.attention.v_head_dim:
        kv_loc = model.num_attention_heads / plan.tp * (model.head_size + model.attention.v_head_dim) / 2
    block = tokens * 2 * kv_loc * act_b
    return (plan.cp - 1) * collective_s("p2p", block, 2, group_link(hw, n=plan.cp, stride=plan.tp, gpus=plan.gpus))


def _mamba_cp_s(
    model: ModelSpec, hw: HardwareProfile, plan: Plan, kind: LayerKind, *, tokens: float, act_b: float, full: bool,
    co: float,
) -> float:  # fmt: skip
    """Megatron's Mamba context parallelism (megatron/core/ssm/mamba_context_parallel.py): an all-to-all turns
    [s/cp, features] into [s, features/cp] before the conv1d and the scan, and one turns it back after; backward
    mirrors both (and full recompute reruns the forward pair)."""
    if plan.cp == 1 or kind.mixer != "mamba" or model.mamba is None:
        return 0.0
    m = model.mamba
    conv = (m.d_inner + 2 * m.num_groups * m.state_size + m.num_heads) / plan.tp
    link = group_link(hw, n=plan.cp, stride=plan.tp, gpus=plan.gpus)
    pair = sum(collective_s("all_to_all", tokens * w * act_b, plan.cp, link) for w in (conv, m.d_inner / plan.tp))
    return (2 + (1 if full else 0)) * pair + (4 + (2 if full else 0)) * co


def pp_microbatch_s(model: ModelSpec, hw: HardwareProfile, plan: Plan, engine: Engine) -> float:
    """Per micro-batch per stage: one activation send forward and one gradient send backward of
    b·s·h/cp (/tp with SP) bytes, × vpp chunk boundaries interleaved (Narayanan 2021 Sec. 2.2, 4.1)."""
    if plan.pp == 1:
        return 0.0
    nbytes = pp_boundary_bytes(
        model, plan.micro_batch, plan.seq_len, cp=plan.cp, tp=plan.tp, sp=plan.sp, act_bytes=ACT_BYTES[plan.precision]
    )
    link = group_link(hw, n=plan.pp, stride=plan.tp * plan.cp * plan.dp, gpus=plan.gpus)
    call = hw.efficiency.collective_overhead_s + engine.comm.collective_launch_s
    return 2 * plan.vpp * (collective_s("p2p", nbytes, 2, link) + call)


@dataclass(frozen=True)
class DpTraffic:
    """Data-parallel traffic of one pipeline rank: one gradient reduction and one weight all-gather of the
    rank's parameters, and the host cost of one call on each of its groups."""

    reduce_s: float
    gather_s: float
    call_s: float  # collective_overhead_s × the groups involved (dense, and expert when separate)
    reduce_bytes: float  # the gradient buffer one reduction covers (dense + expert, before the ring factor)
    gather_bytes: float  # the 16-bit weights one all-gather assembles


def dp_groups(plan: Plan) -> tuple[int, int]:
    """(dense, expert) gradient-reduction group sizes: dp·cp (torchtitan/Megatron reduce over both)
    and dp·cp/ep for the experts."""
    return plan.dp * plan.cp, expert_dp(plan)


def _dp_s(kind: str, dense_b: float, expert_b: float, hw: HardwareProfile, plan: Plan, chunk_b: float) -> float:
    n, ne = dp_groups(plan)
    return collective_s(
        kind, dense_b, n, group_link(hw, n=n, stride=plan.tp, gpus=plan.gpus), chunk_bytes=chunk_b
    ) + collective_s(
        kind, expert_b, ne, group_link(hw, n=ne, stride=plan.expert_tp * plan.ep, gpus=plan.gpus), chunk_bytes=chunk_b
    )


def dp_traffic(model: ModelSpec, hw: HardwareProfile, plan: Plan, engine: Engine, *, stage: int) -> DpTraffic:
    """The gradient reduction moves the rank's gradients in the engine's gradient dtype, with the ZeRO
    stage's collective (all-reduce, or reduce-scatter when the gradients or optimizer are sharded); the
    all-gather moves its 16-bit compute copy of the weights (Rajbhandari et al. 2020, Sec. 7)."""
    params = plan_params(model, plan, engine, stage)
    zero = engine.zero_stage(plan)
    per = state_bytes_per_param(plan.precision, engine, zero)
    per_unit = zero.weight_gather in ("microbatch", "microbatch_forward") or zero.gathered_weights == "unit"
    chunk = params.unit(engine.memory.fsdp_edge_groups) if per_unit else engine.comm.bucket_params(plan.dp * plan.cp)
    red = _dp_s(
        zero.grad_collective,
        params.dense * per.gradients,
        params.expert * per.gradients,
        hw,
        plan,
        chunk * per.gradients,
    )
    ag = _dp_s("all_gather", params.dense * per.gather, params.expert * per.gather, hw, plan, chunk * per.gather)
    n, ne = dp_groups(plan)
    call = hw.efficiency.collective_overhead_s + engine.comm.collective_launch_s
    co = call * ((n > 1) + (ne > 1 and params.expert > 0))
    return DpTraffic(red, ag, co, params.total * per.gradients, params.total * per.gather)
