"""The cluster options, declared once: `--cluster NAME|FILE` (the switch tiers beyond the NVLink domain) and
`--allow-cross-node-tp`, shared by `search`, `estimate` and `scale` (cli/options.py `with_options`)."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from planner.cli.options import Opt, nonempty

ClusterOpt = Annotated[
    Optional[str],
    typer.Option(
        "--cluster",
        callback=nonempty,
        help="cluster_profiles/ name or cluster YAML: the leaf, spine and core tiers beyond the NVLink domain, "
        "each with its per-GPU bandwidth (e.g. dgx-superpod-h100, gb200-nvl72-superpod, rail-fat-tree-2to1); "
        "sets --hardware to the cluster's GPU unless given",
    ),
]
AllowCrossTpOpt = Annotated[
    bool,
    typer.Option(
        "--allow-cross-node-tp",
        help="let tensor parallelism leave the NVLink domain (engines keep it inside; costed on the slower tier)",
    ),
]
CLUSTER_FILE = (Opt("cluster", ClusterOpt),)
CLUSTER = (*CLUSTER_FILE, Opt("allow_cross_node_tp", AllowCrossTpOpt, False))


def hardware_on_cluster(opts: dict[str, Any]) -> Any:
    """The --hardware value a command passes on: with --cluster, the GPU profile placed on the cluster's tiers;
    without, --hardware as given (a name, a path or None)."""
    if not opts.get("cluster"):
        return opts.get("hardware")
    from planner.io.clusters import cluster_hardware

    return cluster_hardware(opts["cluster"], opts.get("hardware"))
