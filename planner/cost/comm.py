"""Collectives and link tiers: the alpha–beta time of one collective on the link tier its group uses.

time = calls·(base + steps·latency) + bytes_on_the_wire / (bandwidth · efficiency · ramp(message)) (Hockney
1994; Thakur, Rabenseifner & Gropp 2005 for the ring algorithms): a collective split into calls (buckets,
FSDP units) pays NCCL's fixed cost per call (tuning.cc base latency) and reaches only a share of the link's
large-message bandwidth, size / (size + half), the protocol ramp nccl-tests sweeps show.
Rank order is Megatron's: tp innermost (stride 1), then cp
(stride tp), then dp (stride tp·cp; ep carved out of dp·cp, stride tp), pp outermost (stride tp·cp·dp).
A group of n ranks with stride k lies inside one NVLink domain iff every such group of the job does (n·k
tiles the job's ranks a domain, cluster/domains.py: the node on HGX, up to the 72-GPU rack on NVL72); otherwise
it crosses domains and runs at min(intra, its NICs' share) bandwidth with the inter-node latency (DESIGN.md,
"Collectives"; `group_link`). Beyond the domain, the tier is the GPU profile's inter-node tier, or, on a
cluster (`--cluster`, planner/cluster/fabric.py), the slowest switch tier the group's n·stride consecutive ranks
cross: every collective of every dimension chooses its link here. What each parallel
dimension sends is traffic.py; what of it overlaps compute, schedule.py.

An all-reduce whose group crosses tiers is also priced hierarchically (`hierarchical_s`; all-gather and
reduce-scatter stay rings: HIERARCHICAL), and the faster of the two is charged, as NCCL runs the algorithm of least
predicted time (NVIDIA/nccl src/enqueue.cc, topoGetAlgoInfo: the argmin over ring, tree, NVLS, ... of tuning.cc's
alpha-beta times). Hierarchical all-reduce (Jia et al. 2018, arXiv:1807.11205 §3.3; NCCL's tree: an NVLink chain
inside the node, a tree between nodes): reduce-scatter inside each NVLink domain, then across each tier outward
among the ranks holding the same shard, then all-gather back. A rank holding 1/b of the buffer that reduces with the
w/b sub-groups under one unit of tier j sends (1/b − 1/w) of it across tier j at that tier's per-GPU share (its own
NIC: rail-aligned, the same local rank in every domain), in w/b − 1 steps of that tier's latency. The shares over
the tiers add up to the ring's (n − 1)/n, so the bytes are the ring's; what changes is that only the last share
crosses the outer, oversubscribed tiers.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.cluster.domains import domain_split, ranks_per_domain, straddles
from planner.cluster.fabric import NETWORK, NVLINK, cluster_of, network_tier, tier_name
from planner.cost.cache import spec_cache
from planner.hardware import HardwareProfile
from planner.plan import Plan


@dataclass(frozen=True)
class Level:
    """One tier of a hierarchical collective: each rank holds 1/`below` of the buffer when it reaches this tier,
    and reduces (or gathers) with the ranks of the `within`/`below` sub-groups under one unit of the tier."""

    below: int  # the group's ranks under one unit of the tier inside this one (1 for the NVLink domain)
    within: int  # the group's ranks under one unit of this tier
    bandwidth_bytes_per_s: float  # per GPU, achieved on large messages
    latency_s: float  # per step across this tier
    tier: str


@dataclass(frozen=True)
class Link:
    """What one group's collectives run on."""

    bandwidth_bytes_per_s: float  # achieved on large messages: link bandwidth × efficiency
    latency_s: float  # per ring step
    intra_node: bool
    base_s: float = 0.0  # fixed cost per collective call (efficiency.collective_base_s)
    half_bytes: float = 0.0  # message size reaching half the bandwidth (efficiency.half_bandwidth_bytes)
    tier: str = NVLINK  # the slowest tier the group crosses: nvlink, network (no cluster), or a cluster tier
    levels: tuple[Level, ...] = ()  # the tiers a group crossing the NVLink domain reduces over, innermost first

    def ramp(self, message_bytes: float) -> float:
        """The share of the large-message bandwidth a message of this size reaches."""
        h = self.half_bytes
        return 1.0 if h <= 0 else message_bytes / (message_bytes + h)


@spec_cache()
def group_link(hw: HardwareProfile, *, n: int, stride: int, gpus: int | None = None) -> Link:
    """NVLink tier iff every group of n ranks `stride` apart of a job of `gpus` GPUs fits in one NVLink domain.

    The domain, not the node, decides: on HGX / OAM boards both are the same 8 GPUs; on GB200 / GB300 NVL72,
    18 trays of 4 GPUs share one NVLink switch fabric, and NCCL joins the 72 as one node (the MNNVL clique
    takes the place of the host in its topology: NVIDIA/nccl src/graph/topo.cc, "MNNVL clique support";
    src/graph/tuning.cc, "treat as a single NVLink connected node"). So a TP or EP group of 16..72 ranks on
    NVL72 can run on NVLink; on an 8-GPU node it crosses the NICs. Whether every group of a dimension lies in
    one domain, and how few of a straddling group's ranks share one, is cluster/domains.py's (`domain_split`):
    ep 64 with 72 ranks a rack puts 8 of one group in rack 0 and 56 in rack 1, and those 8 drive its NICs.

    A group that crosses domains with k of its ranks in each (k: its fewest in one domain, `domain_split`) drives
    k NICs at once: NCCL runs one ring per channel, each leaving the domain through its own NIC, so the ring's
    bandwidth is min(intra, k × the per-GPU inter-node share) (NCCL's bus bandwidth on multi-node DGX systems
    is NICs-per-node × NIC bandwidth; nccl-tests PERFORMANCE.md). The inter-node tier is each GPU's share of
    its tray's NICs (one NIC per GPU on DGX / HGX and on the NVL72 compute trays), so k ranks of a domain
    reach k shares whichever trays they sit on: the node of the old rule becomes the domain. Measured: GB200
    partitions of 4 and 8 GPUs joined over InfiniBand reach 196.7 and 393.7 GB/s ring all-reduce bus
    bandwidth, 4 and 8 × 49 GB/s (NVIDIA/nccl#1801, 400 Gb/s NICs).
    The other stride − 1 groups in the domain use its other NICs, so nothing is counted twice. k = 1 (a dp
    group over tp = 8 on HGX) gives the plain per-GPU share.

    On a cluster the per-GPU share is that of the slowest switch tier the group crosses (`network_tier`): the
    group spans n·stride consecutive ranks and stays inside the smallest tier that large; its ring runs all its
    NVLink-domain-crossing steps at that tier's share and latency. `levels` (`hierarchy`) are the tiers one by
    one, for the hierarchical algorithm collective_s weighs against the ring.
    """
    eff = hw.efficiency
    intra_bw = hw.intra_node.bandwidth_bytes_per_s * eff.intra_node
    base, half = eff.collective_base_s, eff.half_bandwidth_bytes
    k = domain_split(hw, n=n, stride=stride, gpus=gpus)[0]  # the fewest ranks of a group in one domain
    if k == n:
        return Link(intra_bw, hw.intra_node.latency_s, True, base, half)
    tier, net = network_tier(hw, span=n * stride, gpus=gpus)
    inter_bw = net.bandwidth_bytes_per_s * eff.inter_node
    crossed = straddles(hw, n=n, stride=stride, gpus=gpus)  # two domains: the ring alone
    levels = () if crossed else hierarchy(hw, n=n, stride=stride, in_domain=k, gpus=gpus)
    return Link(min(intra_bw, k * inter_bw), net.latency_s, False, base, half, tier, levels)


def hierarchy(
    hw: HardwareProfile, *, n: int, stride: int, in_domain: int | None = None, gpus: int | None = None
) -> tuple[Level, ...]:
    """The tiers a group of n ranks `stride` apart crosses, innermost first, with the group's ranks under one
    unit of each (rank order: a unit of g consecutive ranks holds g // stride of them, at least 1): the NVLink
    domain, then the GPU profile's inter-node tier (no cluster) or each cluster tier up to the one that holds all
    n·stride ranks. Tiers that join no more of the group than the one inside them are left out. `in_domain`: the
    group's fewest ranks in one domain, where the job's layout leaves fewer than domain // stride; a cluster tier
    holds the job's ranks in its domains (cluster/domains.py `ranks_per_domain` each, for a job of `gpus`)."""
    eff = hw.efficiency
    intra = hw.intra_node
    tiers = [(NVLINK, hw.nvlink_domain, intra.bandwidth_bytes_per_s * eff.intra_node, intra.latency_s)]
    cluster = cluster_of(hw)
    if cluster is None:
        net = hw.inter_node
        tiers.append((NETWORK, n * stride, net.bandwidth_bytes_per_s * eff.inter_node, net.latency_s))
    else:
        per = ranks_per_domain(hw, gpus)  # of the job's ranks in each domain a tier holds
        ranks = [t.gpus // hw.nvlink_domain * per for t in cluster.tiers]
        tiers += [
            (t.name, r, t.bandwidth_bytes_per_s * eff.inter_node, t.latency_s)
            for t, r in zip(cluster.tiers, ranks, strict=True)
        ]
    levels: list[Level] = []
    below = 1
    for name, tier_ranks, bandwidth, latency in tiers:
        within = min(n, max(1, tier_ranks // stride), *((in_domain,) if name == NVLINK and in_domain else ()))
        if within > below:
            levels.append(Level(below, within, bandwidth, latency, name))
            below = within
        if below >= n:
            break
    return tuple(levels)


def plan_groups(plan: Plan) -> dict[str, tuple[int, int]]:
    """(ranks, stride) of each parallel group as traffic.py and moe.py price them: tp innermost; cp over tp; ep
    over etp (the expert grid); dp the gradient reduction over dp·cp ranks, stride tp; pp outermost."""
    return {
        "tp": (plan.tp, 1),
        "cp": (plan.cp, plan.tp),
        "ep": (plan.ep, plan.expert_tp),
        "dp": (plan.dp * plan.cp, plan.tp),
        "pp": (plan.pp, plan.tp * plan.cp * plan.dp),
    }


def group_tiers(hw: HardwareProfile, plan: Plan) -> dict[str, str | None]:
    """The slowest tier each parallel group crosses: `nvlink` inside one NVLink domain, `network` (the GPU
    profile's inter-node tier, no cluster) or the cluster tier's name beyond it; None for a group of one rank."""
    groups = plan_groups(plan).items()
    return {dim: tier_name(hw, n=n, stride=s, gpus=plan.gpus) if n > 1 else None for dim, (n, s) in groups}


def ring_steps(kind: str, n: int) -> tuple[float, float]:
    """(latency steps, fraction of the buffer each GPU sends) for a ring over n ranks (Thakur et al. 2005)."""
    if kind == "all_reduce":
        return 2 * (n - 1), 2 * (n - 1) / n
    if kind in ("reduce_scatter", "all_gather", "all_to_all"):
        return n - 1, (n - 1) / n
    if kind == "p2p":
        return 1, 1.0
    raise ValueError(f"unknown collective {kind!r}; use all_reduce, reduce_scatter, all_gather, all_to_all, p2p")


def collective_bytes(kind: str, nbytes: float, n: int) -> float:
    """Bytes each GPU sends: all-reduce 2(n−1)/n·B, reduce-scatter / all-gather / all-to-all (n−1)/n·B."""
    return 0.0 if n <= 1 else ring_steps(kind, n)[1] * nbytes


# What NCCL runs hierarchically across tiers: all-reduce, by its tree algorithm (an NVLink chain inside the node, a
# double binary tree between nodes) when that is predicted faster than the ring. All-gather and reduce-scatter run
# only as rings across nodes (NCCL's algorithm table in src/enqueue.cc offers them Ring, and CollNet/NVLS only on
# switch-reduction hardware; PAT, from 2.23, only at one GPU per node), and p2p and all-to-all are not collectives
# the tiers decompose.
HIERARCHICAL = ("all_reduce",)
# The profiles' half_bandwidth_bytes come from all-reduce sweeps on 8 GPUs (nccl-tests, torch all_reduce_bench),
# keyed by the buffer: a ring step there moves a buffer's 1/8, so a point-to-point send of X bytes sits where an
# all-reduce of 8X does (Hockney: the all-reduce's half point is n·alpha·B, one send's alpha·B). Measured sends
# ramp sooner still: nccl-tests sendrecv_perf over 400 Gb/s CX-7 reaches half its peak near 1 MiB, 82% at 4 MiB
# (an estimate kept conservative: 2.5 MB here).
RAMP_RING_RANKS = 8


def collective_s(kind: str, nbytes: float, n: int, link: Link, *, chunk_bytes: float | None = None) -> float:
    """Alpha–beta time of a collective on a buffer of `nbytes` (full size, before sharding), issued as calls of
    `chunk_bytes` each (default: one call): every call pays the base and ring latency, and the bandwidth is
    the share its message size reaches. An all-reduce over a group that crosses the NVLink domain costs the
    lesser of the ring and the hierarchical algorithm (`hierarchical_s`, HIERARCHICAL)."""
    if n <= 1 or nbytes <= 0:
        return 0.0
    steps, frac = ring_steps(kind, n)
    chunk = nbytes if not chunk_bytes or chunk_bytes >= nbytes else chunk_bytes
    calls = max(1.0, nbytes / chunk)
    message = chunk * RAMP_RING_RANKS if kind == "p2p" else chunk  # what the profile's ramp is keyed by
    ring = calls * (link.base_s + steps * link.latency_s) + frac * nbytes / (
        link.bandwidth_bytes_per_s * link.ramp(message)
    )
    if kind not in HIERARCHICAL or not link.levels or link.levels[-1].within != n:
        return ring
    return min(ring, hierarchical_s(kind, nbytes, link, chunk_bytes=chunk))


def hierarchical_s(kind: str, nbytes: float, link: Link, *, chunk_bytes: float) -> float:
    """The hierarchical collective over `link.levels`: per tier, (1/below − 1/within) of the buffer at that
    tier's per-GPU bandwidth and within/below − 1 steps of its latency, summed over the tiers (the phases run
    one after another); an all-reduce is a reduce-scatter and an all-gather, twice each. Calls and the
    bandwidth ramp as for the ring."""
    passes = 2 if kind == "all_reduce" else 1
    calls = max(1.0, nbytes / chunk_bytes)
    steps_s = sum((lv.within / lv.below - 1) * lv.latency_s for lv in link.levels)
    wire_s = sum((1 / lv.below - 1 / lv.within) * nbytes / lv.bandwidth_bytes_per_s for lv in link.levels)
    return calls * (link.base_s + passes * steps_s) + passes * wire_s / link.ramp(chunk_bytes)
