"""The options of planning at cluster scale, declared once: `--cluster NAME|FILE` (the switch tiers beyond the NVLink
domain), `--allow-cross-node-tp`, and the GPU-count range, `--global-batch auto` and advice of `search` (shared
through cli/options.py `with_options`)."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from planner.cli.callbacks import nonempty, nonempty_as
from planner.cli.options import Opt
from planner.specs import MAX_TOKENS_PER_STEP

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


def run_options(opts: dict[str, Any]) -> dict[str, Any]:
    """estimate's run options (tokens, failures, checkpoint bandwidth, restart) as given: on a cluster, api
    run_estimate fills in what its file states."""
    return {k: opts[k] for k in ("tokens", "mtbf_hours", "mtbf_per", "checkpoint_bandwidth", "restart_minutes")}


GpusRangeOpt = Annotated[
    Optional[str],
    typer.Option(
        "--gpus",
        callback=nonempty_as("a GPU count or a range LO..HI"),
        help="GPUs in all, or a range LO..HI (e.g. 1024..131072: LO, HI and the powers of two of whole nodes "
        "between, whole NVL72 racks doubled on NVL72; the search takes the most GPUs whose best plan keeps >= 90% of "
        "the best tokens/s per GPU)",
    ),
]
GlobalBatchAutoOpt = Annotated[
    Optional[str],
    typer.Option(
        "--global-batch",
        callback=nonempty_as("a number of sequences or auto"),
        help="sequences per step, or auto: the smallest doubling of the default batch (within --max-tokens-per-step) "
        "whose best plan keeps >= 90% of the best tokens/s per GPU",
    ),
]
MaxTokensOpt = Annotated[
    Optional[int],
    typer.Option(
        "--max-tokens-per-step",
        min=1,
        max=MAX_TOKENS_PER_STEP,
        help="the largest global batch advice and --global-batch auto consider, in tokens (default 16,777,216: "
        "Llama 3 405B's final batch)",
    ),
]
NoAdviceOpt = Annotated[
    bool, typer.Option("--no-advice", help="no advice on GPU count and batch (it runs a few more searches)")
]
ADVICE = (Opt("max_tokens_per_step", MaxTokensOpt), Opt("no_advice", NoAdviceOpt, False))
