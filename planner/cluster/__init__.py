"""Clusters: the switch tiers beyond a GPU's NVLink domain (fabric.py), what a job of many GPUs should be told
(advice lives in explore/advice.py, the scaling curve in api/scaling.py)."""

from planner.cluster.fabric import (
    NETWORK,
    NVLINK,
    Cluster,
    ClusterHardware,
    Failures,
    Tier,
    check_fits,
    cluster_of,
    network_tier,
    on_cluster,
    tier_name,
)

__all__ = [
    "NETWORK",
    "NVLINK",
    "Cluster",
    "ClusterHardware",
    "Failures",
    "Tier",
    "check_fits",
    "cluster_of",
    "network_tier",
    "on_cluster",
    "tier_name",
]
