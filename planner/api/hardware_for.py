"""The hardware a command prices on: the catalog profile (or a file) it names, the cluster a saved plan was searched
on, and a board power cap (--power-limit)."""

from __future__ import annotations

import warnings

from planner.hardware import HardwareProfile
from planner.io.catalog import DEFAULT_HARDWARE, load_hardware
from planner.io.planfile import PlanFile


def hardware_for(
    hardware: str | HardwareProfile | None, doc: PlanFile | None, power_limit_w: float | None
) -> HardwareProfile:
    """--hardware (a name, a path or a profile), else the plan file's, else the default; on the plan file's cluster
    where the command line names neither a cluster nor another GPU; under `power_limit_w` where given."""
    given = hardware or (doc.hardware if doc else None) or DEFAULT_HARDWARE
    hw = given if isinstance(given, HardwareProfile) else load_hardware(given)
    hw = _on_saved_cluster(hw, doc, hardware)
    return hw if power_limit_w is None else capped(hw, power_limit_w)


def power_capped(hardware: str | HardwareProfile | None, watts: float | None) -> str | HardwareProfile | None:
    """The hardware (the default where none is given) under a board power cap of `watts`
    (HardwareProfile.with_power_limit); None: as given. A cap at the profile's own limit changes nothing, and says
    so; one above it is refused."""
    if watts is None:
        return hardware
    hw = hardware if isinstance(hardware, HardwareProfile) else load_hardware(hardware or DEFAULT_HARDWARE)
    return capped(hw, watts)


def capped(hw: HardwareProfile, watts: float) -> HardwareProfile:
    """power_capped for a loaded profile."""
    out = hw.with_power_limit(watts)
    if out is hw:
        warnings.warn(
            f"--power-limit {watts:g} W is {hw.name}'s own limit: it changes nothing",
            stacklevel=2,
        )
    return out


def _on_saved_cluster(hw: HardwareProfile, doc: PlanFile | None, hardware: object) -> HardwareProfile:
    """The plan file's GPU on the cluster it was priced on (search --cluster --save), where the command line gives
    neither a cluster (its hardware is then placed already) nor another GPU."""
    from planner.cluster import cluster_of

    if doc is None or doc.cluster is None or cluster_of(hw) is not None:
        return hw
    if hardware is not None and not (isinstance(hardware, str) and hardware == doc.hardware):
        return hw
    from planner.io.clusters import cluster_hardware

    return cluster_hardware(doc.cluster, hw)
