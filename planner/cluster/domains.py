"""How a parallel group's ranks fall into NVLink domains, as the engines lay the ranks out.

Megatron's rank order (parallel_state.py, tp innermost) gives a group of n ranks `stride` apart the ranks
s, s + stride, ..., s + (n − 1)·stride, the groups of one dimension filling consecutive blocks of n·stride ranks
(`stride` interleaved groups a block). A domain holds `domain` consecutive ranks (8 on HGX boards, 72 on a
GB200 / GB300 NVL72 rack). A block that does not divide the domain straddles two of them for some groups: tp 16
or ep 64 on NVL72 puts ranks 64..79 or 64..127 across racks 0 and 1, where 8 ranks drive the group's traffic out
of rack 0 through their 8 NICs. The slowest group sets the step, so a group is on NVLink only when every group
of its dimension is inside one domain, and a group across domains is priced by its fewest ranks in any one
domain (the NICs its traffic leaves that domain through) and the most domains any group touches.

A job fills each domain it uses alike (`job_domain`): Slurm's topology/block plugin places a job's nodes in
segments of one size within each NVLink block (CoreWeave SUNK docs, "Topology/Block Scheduling in Slurm": blocks,
segments), so a 2,048-GPU job on NVL72 racks runs 64 ranks in each of 32 racks and a 2,304-GPU job all 72. On a
cluster the job spreads over no more domains than the cluster holds: 61,440 GPUs on the 864 racks of the GB200
SuperPOD cannot run 64 a rack (960 racks) and pack all 72. Beyond one domain, `span_gpus` turns a span of the job's
ranks into the cluster GPUs its domains take, which is what a cluster's switch tiers count.
"""

from __future__ import annotations

import math
from functools import lru_cache

from planner.hardware import HardwareProfile


@lru_cache(maxsize=4096)
def group_domains(domain: int, n: int, stride: int) -> tuple[int, int]:
    """(fewest ranks of one group in one domain, most domains one group touches), over every group of n ranks
    `stride` apart; (n, 1) when every group lies inside one domain."""
    if n <= 1:
        return n, 1
    if stride >= domain:  # every rank of a group in a domain of its own
        return 1, n
    block = n * stride
    starts = {(b * block + o) % domain for b in range(domain // math.gcd(block, domain)) for o in range(stride)}
    parts = [_parts(start, domain, n, stride) for start in starts]
    return min(p for p, _ in parts), max(t for _, t in parts)


def _parts(start: int, domain: int, n: int, stride: int) -> tuple[int, int]:
    """(fewest ranks in one domain, domains touched) of the group whose first rank sits `start` ranks into its
    domain: the first domain's share, the last's, and the full domains between them (D // stride or one more)."""
    first = min(n, -(-(domain - start) // stride))
    if first == n:
        return n, 1
    last_domain = (start + (n - 1) * stride) // domain
    last = n - -(-(last_domain * domain - start) // stride)
    middle = domain // stride if last_domain >= 2 else n
    return min(first, last, middle), last_domain + 1


@lru_cache(maxsize=4096)
def job_domain(domain: int, node: int, gpus: int | None, domains: int | None = None) -> int:
    """Ranks of a job of `gpus` GPUs in each NVLink domain of `domain` GPUs it uses: all of them when they fit in
    one; else the most whole nodes of `node` GPUs a domain holds that divide the job alike in at most `domains`
    domains (None: no limit); the whole domain when the job fills whole domains, when no share divides it, or
    when the job's size is not known."""
    if gpus is not None and gpus <= domain:
        return gpus
    if gpus is None or gpus % domain == 0:
        return domain
    alike = (d for d in range(node, domain + 1, node) if gpus % d == 0 and (domains is None or gpus // d <= domains))
    return max(alike, default=domain)


def ranks_per_domain(hw: HardwareProfile, gpus: int | None) -> int:
    """`job_domain` for a job of `gpus` GPUs on `hw`, within the domains of the cluster it is placed on."""
    return job_domain(hw.nvlink_domain, hw.gpus_per_node, gpus, hw.domains_held)


def span_gpus(hw: HardwareProfile, span: int, gpus: int | None) -> int:
    """The cluster GPUs that `span` consecutive ranks of the job take: the span itself within one domain, else
    the whole domains its ranks fill (`ranks_per_domain` of them each)."""
    per = ranks_per_domain(hw, gpus)
    return span if span <= per else -(-span // per) * hw.nvlink_domain


def domain_split(hw: HardwareProfile, *, n: int, stride: int, gpus: int | None = None) -> tuple[int, int]:
    """`group_domains` for a job of `gpus` GPUs on `hw` (None: ranks packed whole domains at a time)."""
    return group_domains(ranks_per_domain(hw, gpus), n, stride)


def straddles(hw: HardwareProfile, *, n: int, stride: int, gpus: int | None = None) -> bool:
    """Some groups cross two domains though one group's ranks would fit in one (tp 16 or ep 64 with 72 ranks a
    rack): priced by their fewest ranks in a domain, on the ring alone, and said so."""
    per = ranks_per_domain(hw, gpus)
    return n * stride <= per and domain_split(hw, n=n, stride=stride, gpus=gpus)[0] < n
