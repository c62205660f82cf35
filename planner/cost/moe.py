"""Mixture-of-experts layers as the engines run them: how many tokens the busiest expert-parallel rank's experts
process, and what dispatching them and combining the results costs on the links the expert-parallel group
crosses (from Megatron-Core's moe/token_dispatcher.py, parallel_state.py and DeepEP).

Rank order of the expert grid (Megatron parallel_state.py, order tp-cp-ep-dp-pp): etp innermost, then ep, so an
expert-parallel group is ep ranks etp apart, and the token-dispatch group ep·etp contiguous ranks.
"""

from __future__ import annotations

import math

from planner.cluster.domains import domain_split
from planner.cluster.fabric import network_tier
from planner.cost.comm import collective_s, group_link
from planner.cost.kernels import ACT_BYTES
from planner.engine import Engine
from planner.hardware import Efficiency, HardwareProfile
from planner.plan import Plan
from planner.specs import ModelSpec


def routed_load(model: ModelSpec, engine: Engine, ep: int) -> float:
    """Rows the busiest of `ep` expert-parallel ranks' experts process, over the balanced mean: the routing
    imbalance (engine.moe.imbalance), capped by the capacity factor when tokens beyond it are dropped, and exactly
    the factor when every expert is padded to its capacity (Megatron moe_utils.py: C = ceil(T·k/E · CF) per source
    rank; --moe-pad-expert-input-to-capacity). Never more than one rank can receive: a token's top-k picks k
    distinct experts (torch.topk over the router's scores: Megatron moe_utils.py l.766 @d98e8a64;
    Shazeer et al. 2017), at most ceil(E/ep) of them on one rank, so the busiest gets at most T·min(k, ceil(E/ep)) of
    the T·k/ep mean: ep·min(k, ceil(E/ep))/k (1 at ep 1, where every expert is on the one rank)."""
    m, e = model.moe, engine.moe
    if m is None:
        return 1.0
    most = ep * min(m.top_k, math.ceil(m.num_experts / ep)) / m.top_k
    cf = m.capacity_factor
    if cf is None:
        return min(e.imbalance, most)
    return cf if e.pad_to_capacity else min(e.imbalance, cf, most)


def all_to_all_s(hw: HardwareProfile, *, nbytes: float, n: int, stride: int, gpus: int | None = None) -> float:
    """A flat all-to-all (NCCL send/recv to every peer) of `nbytes` per rank over n ranks: the (n − 1)/n it
    sends, split between the peers in its NVLink domain (NVLink) and the others (its own NIC: one NIC per GPU on
    HGX and NVL72 systems, so the per-GPU inter-node share, not the node's); both run at once, the slower sets
    the time (Hockney's alpha-beta per link); the slowest rank is one of a group's fewest in one domain
    (cluster/domains.py). Within one domain this is the collective's ring model."""
    if n <= 1 or nbytes <= 0:
        return 0.0
    r = domain_split(hw, n=n, stride=stride, gpus=gpus)[0]
    if r == n:
        return collective_s("all_to_all", nbytes, n, group_link(hw, n=n, stride=stride, gpus=gpus))
    eff = hw.efficiency
    net = network_tier(hw, span=n * stride, gpus=gpus)[1]  # the NIC, or the slowest cluster tier the group crosses
    intra_bw = hw.intra_node.bandwidth_bytes_per_s * eff.intra_node
    inter_bw = net.bandwidth_bytes_per_s * eff.inter_node
    ramp = eff.bandwidth_fraction(nbytes)
    local = nbytes * (r - 1) / n / (intra_bw * ramp)
    remote = nbytes * (n - r) / n / (inter_bw * ramp)
    return eff.collective_base_s + (n - 1) * net.latency_s + max(local, remote)


def _wire_s(nbytes: float, bandwidth_bytes_per_s: float, eff: Efficiency) -> float:
    """Seconds `nbytes` take on a link at the share of its bandwidth their size reaches (none: no time)."""
    return 0.0 if nbytes <= 0 else nbytes / (bandwidth_bytes_per_s * eff.bandwidth_fraction(nbytes))


def deepep_s(
    hw: HardwareProfile, *, token_bytes: float, top_k: int, n: int, stride: int, group_limit: int | None = None,
    groups: int | None = None, gpus: int | None = None,
) -> float:  # fmt: skip
    """DeepEP's hierarchical dispatch (deepseek-ai/DeepEP, normal kernels; DeepSeek-V3 report §3.2.2): each token
    goes once to every remote NVLink domain holding one of its experts, over the GPU's NIC, then NVLink forwards
    it to the experts' GPUs there. With k experts spread evenly over G domains, a token reaches
    (G − 1)·(1 − (1 − 1/G)^k) remote domains on average, and with node-limited routing (experts of at most M of
    the model's `groups` groups) at most M·d·(G − 1)/G, a group spanning d = max(1, n / groups / r) domains of r
    ranks (one group a domain as DeepSeek-V3 ran it, ep 64 of 8 groups on 8-GPU nodes; at ep 256 each of 8 groups
    spans 4 nodes, which the cap of one domain a group undercounted: audit). `token_bytes`: one token's hidden state,
    summed over the rank's tokens."""
    if n <= 1 or token_bytes <= 0:
        return 0.0
    r, domains = domain_split(hw, n=n, stride=stride, gpus=gpus)  # a straddler touches 2 domains, not ceil(n / r)
    if r == n:
        return all_to_all_s(hw, nbytes=token_bytes * top_k, n=n, stride=stride, gpus=gpus)
    remote_domains = (domains - 1) * (1 - (1 - 1 / domains) ** top_k)
    if group_limit is not None:
        spans = max(1.0, n / groups / r) if groups else 1.0  # None: a group a domain
        remote_domains = min(remote_domains, group_limit * spans * (domains - 1) / domains)
    eff = hw.efficiency
    inter = token_bytes * remote_domains
    intra = token_bytes * top_k * (r - 1) / r
    net = network_tier(hw, span=n * stride, gpus=gpus)[1]  # the NIC, or the slowest cluster tier the group crosses
    inter_s = _wire_s(inter, net.bandwidth_bytes_per_s * eff.inter_node, eff)
    intra_s = _wire_s(intra, hw.intra_node.bandwidth_bytes_per_s * eff.intra_node, eff)  # 0 with one rank a domain
    return eff.collective_base_s + (domains - 1) * net.latency_s + max(inter_s, intra_s)


def dispatch_s(
    model: ModelSpec,
    hw: HardwareProfile,
    plan: Plan,
    engine: Engine,
    *,
    tokens: float,
    bytes_per_value: float | None = None,
) -> float:
    """One dispatch (or one combine, the same volume back) of one MoE layer for one micro-batch on one GPU, its
    values `bytes_per_value` wide (default the activations').

    The rank routes its T tokens (tokens/tp with sequence parallelism): alltoall sends T·k·load rows of h
    activations to the ep ranks (Megatron alltoall dispatcher, torchtitan), then gathers them over the etp ranks
    (and reduce-scatters before the combine); allgather gathers every token over the ep·etp group; deepep sends
    each token once per remote domain (deepep_s)."""
    m = model.moe
    if m is None or plan.ep * plan.expert_tp <= 1:
        return 0.0
    etp, h = plan.expert_tp, model.hidden_size
    act_b = ACT_BYTES[plan.precision] if bytes_per_value is None else bytes_per_value
    whole = engine.moe.replicated_over_tp  # every tp rank holds the block's input (torchtitan)
    t = tokens / (plan.tp if (etp == 1 if whole else plan.sp) else 1)
    load = routed_load(model, engine, plan.ep)
    kind = engine.moe.dispatcher
    if kind == "allgather":
        n = plan.ep * etp
        return collective_s("all_gather", t * n * h * act_b, n, group_link(hw, n=n, stride=1, gpus=plan.gpus))
    if kind == "deepep":
        limit = m.group_top_k if m.routing_groups else None
        a2a = deepep_s(
            hw, token_bytes=t * load * h * act_b, top_k=m.top_k, n=plan.ep, stride=etp, group_limit=limit,
            groups=m.routing_groups, gpus=plan.gpus,
        )  # fmt: skip
    else:
        a2a = all_to_all_s(hw, nbytes=t * m.top_k * load * h * act_b, n=plan.ep, stride=etp, gpus=plan.gpus)
    if etp > 1 and not whole:  # the received rows gathered over the expert tensor-parallel ranks
        rows = t * m.top_k * load * h * act_b
        a2a += collective_s("all_gather", rows * etp, etp, group_link(hw, n=etp, stride=1, gpus=plan.gpus))
    return a2a


# fp8 dispatch: one byte per value plus one fp32 scale per 128 values (DeepSeek-V3 §3.3.3: 1x128 tiles)
FP8_DISPATCH_BYTES = 1.0 + 4.0 / 128


def layer_ep_s(
    model: ModelSpec, hw: HardwareProfile, plan: Plan, engine: Engine, *, tokens: float, recomputed: bool
) -> float:
    """A MoE layer's dispatch and combine, forward and backward (and the forward pair again when `recomputed`:
    full recompute, or Megatron's `moe` recompute module), for one micro-batch on one GPU: the forward dispatch in
    the engine's dispatch dtype, the rest in the activations' (DeepSeek-V3 §3.3.3 combines in bf16)."""
    if model.moe is None or plan.ep * plan.expert_tp <= 1:
        return 0.0
    one = dispatch_s(model, hw, plan, engine, tokens=tokens)
    first = one
    if engine.moe.dispatch_dtype == "fp8":
        first = dispatch_s(model, hw, plan, engine, tokens=tokens, bytes_per_value=FP8_DISPATCH_BYTES)
    passes = 3 + (2 if recomputed else 0)  # combine fwd, dispatch and combine bwd (+ the forward pair)
    return first + passes * one


def comm_sm_slowdown_s(hw: HardwareProfile, engine: Engine, *, comm_s: float, compute_s: float) -> float:
    """What the dispatch/combine kernels cost the compute they overlap: DeepEP's normal kernels hold s of the GPU's
    S SMs while they run (deep_ep/buffer.py `Buffer.num_sms = 20`; DeepSeek-V3 §3.2.2 and §3.5.1: "we allocate 20
    out of the 132 SMs available in the H800 GPU for this purpose, which will limit the computational
    throughput"), and compute beside them runs on the other S − s. Compute of `compute_s` at the full rate
    overlapping communication of `comm_s`: within the window it runs at (S − s)/S, so it takes
    compute_s + comm_s·s/S, or compute_s·S/(S − s) when the window covers all of it — the lesser of the two
    extras. GEMMs and attention scale with the SMs; the memory-bound share is charged alike (an upper bound for it).
    Nothing when the engine holds no SMs for them or the GPU's SM count is unknown."""
    s, sms = engine.moe.comm_sms, hw.gpu.sm_count
    if s <= 0 or sms is None or comm_s <= 0 or compute_s <= 0:
        return 0.0
    s = min(s, sms - 1)
    return min(comm_s * s / sms, compute_s * s / (sms - s))
