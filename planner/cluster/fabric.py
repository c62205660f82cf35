"""The network beyond the NVLink domain: a cluster's switch tiers (cluster_profiles/NAME.yaml), and which tier a
group of ranks crosses.

A GPU profile (hardware_profiles/) knows the GPU, its node and its NVLink domain, and one inter-node tier: the
GPU's NIC. A cluster adds what lies beyond: the leaf (rail) switches, the spine, the core that joins pods, each
with the bandwidth one GPU gets through it when every GPU sends at once (the NIC's share divided by the tier's
oversubscription) and the latency of one ring step across it. Tiers nest: tier i joins `gpus` consecutive
ranks, a whole number of tier i − 1's.

Which tier a group uses follows from the rank order (Megatron's parallel_state.py, tp innermost): a group of n
ranks `stride` apart spans n·stride consecutive ranks, so it stays inside the smallest tier at least that
large: the slowest it crosses (`network_tier`, `tier_name`). cost/comm.py `group_link` (the one place that chooses
a link) charges a ring every step at that tier's share, and weighs it against the hierarchical collective over each
tier in turn (`hierarchy`), where only the bytes that cross a tier pay its share: an oversubscribed spine slows
the part of a reduction that crosses the spine, not the part that stays under a leaf. The MoE all-to-alls
(cost/moe.py) send a share of every rank's bytes across the slowest tier, which the share describes. Where the tiers
are not oversubscribed (the DGX SuperPODs) only the latency changes.
"""

from __future__ import annotations

import warnings
from typing import Any

from pydantic import Field, model_validator

from planner.cluster.domains import domain_split, span_gpus
from planner.errors import PlannerError
from planner.hardware import HardwareProfile, LinkTier
from planner.specs import Frozen

NVLINK = "nvlink"  # the name of the tier inside one NVLink domain
NETWORK = "network"  # the GPU profile's inter-node tier, when no cluster is given


class Tier(Frozen):
    """One switch tier beyond the NVLink domain, seen from one GPU."""

    name: str = Field(min_length=1, description="leaf, rail, spine, core, pod, ...")
    gpus: int = Field(gt=0, description="GPUs this tier joins: consecutive ranks reach each other through it")
    bandwidth_bytes_per_s: float = Field(
        gt=0,
        allow_inf_nan=False,
        description="per-GPU unidirectional bandwidth through this tier when every GPU sends at once: the NIC's "
        "rate divided by the tier's oversubscription",
    )
    latency_s: float = Field(ge=0, allow_inf_nan=False, description="one ring step across this tier")
    source: str = Field(min_length=1, description="where the numbers come from")


# R, seconds: what one failure costs a synchronous job besides the lost work. Meta's FT-HSDP (arXiv 2602.00277,
# abstract) measures failure recovery stalling a job at O(100K) GPUs for 10 minutes (3 with its fault-tolerant
# HSDP), and with it an effective training time of 44%.
RESTART_S = 600.0
RESTART_S_RANGE = (0.0, 86400.0)  # none to a day (a job waiting for a replacement node overnight)
# Failures and storage: finite, and within what a run can be (an MTBF of a million years). The lower bounds are
# physical: no GPU or node fails every hour on average (published per-GPU MTBFs are tens of thousands of hours), and no
# checkpoint store writes below 1 MB/s (a single spinning disk writes 100 MB/s). A cluster file keeps to them as the
# options do (a file's 0.5 h MTBF had been blamed on --mtbf-hours, which the user never gave: audit).
MTBF_HOURS_RANGE = (1.0, 1e10)
CHECKPOINT_BYTES_PER_S_RANGE = (1e6, 1e15)


class Failures(Frozen):
    """How often a GPU of this cluster interrupts a synchronous job, with the measurement it comes from, and what
    each interruption costs its jobs besides the lost work where the file says (else RESTART_S)."""

    gpu_mtbf_hours: float = Field(
        ge=MTBF_HOURS_RANGE[0], le=MTBF_HOURS_RANGE[1], allow_inf_nan=False,
        description="mean GPU-hours between interruptions",
    )  # fmt: skip
    source: str = Field(min_length=1)
    restart_minutes: float | None = Field(
        None,
        ge=RESTART_S_RANGE[0] / 60,
        le=RESTART_S_RANGE[1] / 60,
        allow_inf_nan=False,
        description="wall time one failure costs this cluster's jobs besides the lost work (detection, a spare node, "
        "restart, communicator init, reading the checkpoint); default: cost/timing.py's RESTART_S",
    )


class Cluster(Frozen):
    """cluster_profiles/NAME.yaml: the tiers beyond the NVLink domain, innermost first."""

    name: str
    description: str = ""
    hardware: str = Field(description="the GPU profile of its nodes (hardware_profiles/NAME)")
    tiers: tuple[Tier, ...] = Field(min_length=1)
    failures: Failures | None = None
    checkpoint_write_bytes_per_s: float | None = Field(
        None,
        ge=CHECKPOINT_BYTES_PER_S_RANGE[0],
        le=CHECKPOINT_BYTES_PER_S_RANGE[1],
        allow_inf_nan=False,
        description="sustained write bandwidth of the cluster's checkpoint storage, all of it; a job never writes "
        "faster than this (nor than the GPU profile's per-node share times its nodes)",
    )
    aliases: tuple[str, ...] = ()

    @property
    def gpus(self) -> int:
        """The largest job the fabric holds: its outermost tier."""
        return self.tiers[-1].gpus

    @model_validator(mode="after")
    def _check(self) -> Cluster:
        for inner, outer in zip(self.tiers, self.tiers[1:], strict=False):
            if outer.gpus <= inner.gpus or outer.gpus % inner.gpus:
                raise ValueError(
                    f"tier {outer.name!r} joins {outer.gpus} GPUs: it must be a multiple of tier {inner.name!r}'s "
                    f"{inner.gpus} (tiers nest, innermost first)"
                )
            if outer.bandwidth_bytes_per_s > inner.bandwidth_bytes_per_s:
                raise ValueError(
                    f"tier {outer.name!r} gives {outer.bandwidth_bytes_per_s:g} B/s per GPU, more than tier "
                    f"{inner.name!r} inside it ({inner.bandwidth_bytes_per_s:g}); traffic to it crosses both"
                )
            if outer.latency_s < inner.latency_s:
                raise ValueError(
                    f"tier {outer.name!r} latency {outer.latency_s:g} s is below tier {inner.name!r}'s "
                    f"{inner.latency_s:g} s; crossing it passes through the inner tier's switches too"
                )
        return self


class ClusterHardware(HardwareProfile):
    """A GPU profile placed in a cluster: the same GPU, node and NVLink domain, with the cluster's tiers beyond
    it (made by `on_cluster`; a hardware profile file never holds a cluster)."""

    cluster: Cluster

    @property
    def domains_held(self) -> int | None:
        return self.cluster.gpus // self.nvlink_domain


def on_cluster(hw: HardwareProfile, cluster: Cluster, label: str | None = None) -> ClusterHardware:
    """The profile with the cluster's tiers; each tier must hold whole NVLink domains."""
    domain = hw.nvlink_domain
    inner = cluster.tiers[0]
    if inner.gpus <= domain or any(t.gpus % domain for t in cluster.tiers):
        raise PlannerError(
            f"cluster {cluster.name}: its tiers ({', '.join(f'{t.name} {t.gpus}' for t in cluster.tiers)} GPUs) "
            f"must be multiples of {hw.name}'s NVLink domain of {domain} GPUs, the first larger than it"
        )
    data: dict[str, Any] = {k: getattr(hw, k) for k in type(hw).model_fields if k != "cluster"}
    return ClusterHardware(**data, cluster=_within_nics(cluster, hw, label or cluster.name))


def _within_nics(cluster: Cluster, hw: HardwareProfile, label: str) -> Cluster:
    """The tiers at no more per GPU than the GPU's own NICs carry (the profile's inter-node tier): every byte that
    leaves the NVLink domain goes through them, so a faster tier (a 500 GB/s leaf on 50 GB/s NICs) is priced at
    the NICs' rate, and said."""
    nic = hw.inter_node.bandwidth_bytes_per_s
    over = [t for t in cluster.tiers if t.bandwidth_bytes_per_s > nic]
    if not over:
        return cluster
    said = ", ".join(f"tier {t.name!r} gives {t.bandwidth_bytes_per_s / 1e9:g} GB/s" for t in over)
    warnings.warn(
        f"cluster {label}: {said} per GPU, more than {hw.name}'s NICs carry ({nic / 1e9:g} GB/s per GPU, "
        f"its inter_node); priced at {nic / 1e9:g} GB/s (faster NICs: --hardware a profile that states them)",
        stacklevel=3,
    )
    capped = tuple(
        t.model_copy(update={"bandwidth_bytes_per_s": min(t.bandwidth_bytes_per_s, nic)}) for t in cluster.tiers
    )
    return cluster.model_copy(update={"tiers": capped})


def cluster_of(hw: HardwareProfile) -> Cluster | None:
    return hw.cluster if isinstance(hw, ClusterHardware) else None


def network_tier(hw: HardwareProfile, *, span: int, gpus: int | None = None) -> tuple[str, LinkTier]:
    """(name, per-GPU bandwidth and latency) of the tier that joins `span` consecutive ranks of a job of `gpus`
    GPUs beyond one NVLink domain: the GPU profile's inter-node tier without a cluster, else the smallest cluster
    tier that holds the domains they fill (cluster/domains.py `span_gpus`: 64 ranks a rack fill a leaf of 8
    NVL72 racks with 512). A span beyond the whole cluster is refused (the job does not fit on it)."""
    cluster = cluster_of(hw)
    if cluster is None:
        return NETWORK, hw.inter_node
    held = span_gpus(hw, span, gpus)
    for t in cluster.tiers:
        if held <= t.gpus:
            return t.name, LinkTier(bandwidth_bytes_per_s=t.bandwidth_bytes_per_s, latency_s=t.latency_s)
    raise PlannerError(f"{span} GPUs do not fit on cluster {cluster.name} ({cluster.gpus} GPUs); use at most that")


def tier_name(hw: HardwareProfile, *, n: int, stride: int, gpus: int | None = None) -> str:
    """The name of the slowest tier a group of n ranks `stride` apart crosses (`nvlink` when every such group of
    a job of `gpus` GPUs lies inside one domain: cluster/domains.py)."""
    if n <= 1 or domain_split(hw, n=n, stride=stride, gpus=gpus)[0] == n:
        return NVLINK
    return network_tier(hw, span=n * stride, gpus=gpus)[0]


def cluster_size(hw: HardwareProfile) -> int | None:
    """The GPUs of the cluster `hw` is placed on (None: no cluster): a `--gpus LO..HI` range stops there."""
    cluster = cluster_of(hw)
    return cluster.gpus if cluster is not None else None


def check_fits(hw: HardwareProfile, gpus: int) -> None:
    """A job larger than the cluster is refused with the cluster's size."""
    cluster = cluster_of(hw)
    if cluster is not None and gpus > cluster.gpus:
        raise PlannerError(f"--gpus {gpus} is more than cluster {cluster.name} holds ({cluster.gpus} GPUs)")
