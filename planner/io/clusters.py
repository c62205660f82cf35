"""Cluster descriptions (`--cluster NAME|FILE`): the shipped cluster_profiles/, user catalogs' cluster_profiles/,
or a YAML file; each one validated once (planner/cluster/fabric.py `Cluster`, misspelt keys refused) and put
around its GPU profile."""

from __future__ import annotations

import warnings
from pathlib import Path

from planner.cluster.fabric import Cluster, ClusterHardware, on_cluster
from planner.errors import PlannerError
from planner.hardware import HardwareProfile
from planner.io.catalog import catalog_path, catalog_root, load_hardware, load_yaml
from planner.io.readers import validated

CLUSTER_DIR = "cluster_profiles"


def list_clusters() -> list[str]:
    """The shipped cluster names."""
    return sorted(p.stem for p in (catalog_root() / CLUSTER_DIR).glob("*.yaml"))


def load_cluster(name_or_path: str | Path) -> Cluster:
    """A cluster by catalog name or alias (`dgx-superpod-h100`) or a cluster YAML file."""
    arg = str(name_or_path)
    if isinstance(name_or_path, Path) or "/" in arg or arg.endswith((".yaml", ".yml")):
        path, shipped = Path(arg), False
    else:
        found = catalog_path(CLUSTER_DIR, arg)
        if found is None:
            raise PlannerError(
                f'unknown cluster "{arg}"; known: {", ".join(list_clusters())} (or give a path to a cluster .yaml)'
            )
        path, shipped = found, found.parent.parent == catalog_root()
    if not path.is_file():
        kind = "not a regular file (a device, a pipe or a socket)" if path.exists() else "no such file"
        raise PlannerError(f"--cluster {arg!r}: {'is a folder, give a cluster .yaml' if path.is_dir() else kind}")
    return validated(Cluster, load_yaml(path, shipped=shipped), arg)


def cluster_hardware(cluster: str | Path | Cluster, hardware: str | HardwareProfile | None) -> ClusterHardware:
    """The GPU profile (the one given, else the cluster's own) placed on the cluster's tiers."""
    c = cluster if isinstance(cluster, Cluster) else load_cluster(cluster)
    label = c.name if isinstance(cluster, Cluster) else str(cluster)  # as the user named it, not the file's name
    own = _own_hardware(c, label)
    if hardware is None:
        hw = own
    else:
        hw = hardware if isinstance(hardware, HardwareProfile) else load_hardware(hardware)
        if hw.gpu.name != own.gpu.name:  # a capped or measured profile of the cluster's own GPU is no other GPU
            warnings.warn(
                f"cluster {c.name} is built of {own.gpu.name} ({c.hardware}); priced with {hw.name}'s "
                f"{hw.gpu.name} on its tiers, storage and failure rate",
                stacklevel=2,
            )
    return on_cluster(hw, c, label)


def _own_hardware(c: Cluster, label: str) -> HardwareProfile:
    """The GPU profile a cluster file names, a name it does not find said as the cluster file's (`label`)."""
    try:
        return load_hardware(c.hardware)
    except PlannerError as e:
        raise PlannerError(f"cluster {label}: hardware: {e}") from None
