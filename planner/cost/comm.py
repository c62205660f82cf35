"""Collectives and link tiers: the alpha–beta time of one collective on the link tier its group uses.

time = calls·(base + steps·latency) + bytes_on_the_wire / (bandwidth · efficiency · ramp(message)) (Hockney
1994; Thakur, Rabenseifner & Gropp 2005 for the ring algorithms): a collective split into calls (buckets,
FSDP units) pays NCCL's fixed cost per call (tuning.cc base latency) and reaches only a share of the link's
large-message bandwidth, size / (size + half), the protocol ramp nccl-tests sweeps show.
Rank order is Megatron's: tp innermost (stride 1), then cp
(stride tp), then dp (stride tp·cp; ep carved out of dp·cp, stride tp), pp outermost (stride tp·cp·dp).
A group of n ranks with stride k lies inside one NVLink domain iff n·k ≤ nvlink_domain (the node on HGX,
the 72-GPU rack on NVL72); otherwise it crosses domains and runs at min(intra, its NICs' share) bandwidth with
the inter-node latency (DESIGN.md, "Collectives"; `group_link`). Beyond the domain, the tier is the GPU profile's
inter-node tier, or, on a cluster (`--cluster`, planner/cluster/fabric.py), the slowest switch tier the group's
n·stride consecutive ranks cross: every collective of every dimension chooses its link here. What each parallel
dimension sends is traffic.py; what of it overlaps compute, schedule.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.cluster.fabric import NVLINK, network_tier
from planner.hardware import HardwareProfile


@dataclass(frozen=True)
class Link:
    """What one group's collectives run on."""

    bandwidth_bytes_per_s: float  # achieved on large messages: link bandwidth × efficiency
    latency_s: float  # per ring step
    intra_node: bool
    base_s: float = 0.0  # fixed cost per collective call (efficiency.collective_base_s)
    half_bytes: float = 0.0  # message size reaching half the bandwidth (efficiency.half_bandwidth_bytes)
    tier: str = NVLINK  # the slowest tier the group crosses: nvlink, network (no cluster), or a cluster tier

    def ramp(self, message_bytes: float) -> float:
        """The share of the large-message bandwidth a message of this size reaches."""
        h = self.half_bytes
        return 1.0 if h <= 0 else message_bytes / (message_bytes + h)


def group_link(hw: HardwareProfile, *, n: int, stride: int) -> Link:
    """NVLink tier iff the n ranks, `stride` apart, fit in one NVLink domain (n·stride ≤ nvlink_domain).

    The domain, not the node, decides: on HGX / OAM boards both are the same 8 GPUs; on GB200 / GB300 NVL72,
    18 trays of 4 GPUs share one NVLink switch fabric, and NCCL joins the 72 as one node (the MNNVL clique
    takes the place of the host in its topology: NVIDIA/nccl src/graph/topo.cc, "MNNVL clique support";
    src/graph/tuning.cc, "treat as a single NVLink connected node"). So a TP or EP group of 16..72 ranks on
    NVL72 runs on NVLink; on an 8-GPU node it crosses the NICs.

    A group that crosses domains with k of its ranks in each (k = nvlink_domain / stride, at least 1) drives
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
    group spans n·stride consecutive ranks and stays inside the smallest tier that large; its ring (or NCCL's
    hierarchical tree) runs all its NVLink-domain-crossing steps at that tier's share and latency.
    """
    eff = hw.efficiency
    intra_bw = hw.intra_node.bandwidth_bytes_per_s * eff.intra_node
    base, half = eff.collective_base_s, eff.half_bandwidth_bytes
    if n * stride <= hw.nvlink_domain:
        return Link(intra_bw, hw.intra_node.latency_s, True, base, half)
    k = max(1, min(n, hw.nvlink_domain // stride))
    tier, net = network_tier(hw, span=n * stride)
    inter_bw = net.bandwidth_bytes_per_s * eff.inter_node
    return Link(min(intra_bw, k * inter_bw), net.latency_s, False, base, half, tier)


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


def collective_s(kind: str, nbytes: float, n: int, link: Link, *, chunk_bytes: float | None = None) -> float:
    """Alpha–beta time of a collective on a buffer of `nbytes` (full size, before sharding), issued as calls of
    `chunk_bytes` each (default: one call): every call pays the base and ring latency, and the bandwidth is
    the share its message size reaches."""
    if n <= 1 or nbytes <= 0:
        return 0.0
    steps, frac = ring_steps(kind, n)
    chunk = nbytes if not chunk_bytes or chunk_bytes >= nbytes else chunk_bytes
    calls = max(1.0, nbytes / chunk)
    return calls * (link.base_s + steps * link.latency_s) + frac * nbytes / (
        link.bandwidth_bytes_per_s * link.ramp(chunk)
    )
