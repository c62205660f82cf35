"""The hardware profile a log's device line names: the catalog profile whose GPU has that name (what
torch.cuda.get_device_name returns, each profile's gpu.name) and, where the line states it, that memory; none where
no profile or several do (the log then names the device, and --hardware is asked for)."""

from __future__ import annotations

import re

from planner.errors import PlannerError
from planner.io.catalog import list_hardware, load_hardware
from planner.units import GiB

# "CUDA capacity: NVIDIA H200 with 139.83GiB memory": torchtitan's device memory monitor, device_module's
# get_device_name and total_memory in GiB (torchtitan/components/metrics.py build_device_memory_monitor @00fbaafa,
# "{device_type.upper()} capacity: ..."); before 2025 "GPU capacity: NVIDIA H100 (0) with 95.00GiB memory" (the
# device index in brackets, torchtitan/metrics.py).
DEVICE_LINE = re.compile(r"\b[A-Z]{3,4} capacity: (.+?)(?: \(\d+\))? with ([\d.]+) ?GiB memory")
# How far the memory a line states may differ from a profile's hbm_bytes and still be that GPU (a driver's or ECC's
# reservation moves total_memory by tenths of a percent; the next GPU size differs by 15% or more).
MEMORY_TOLERANCE = 0.01


def device_in(line: str) -> tuple[str, float] | None:
    """(device name, memory in GiB) of a device line, or None."""
    m = DEVICE_LINE.search(line)
    return (m[1].strip(), float(m[2])) if m else None


def _same_memory(hbm_bytes: float, gib: float) -> bool:
    return abs(gib * GiB / hbm_bytes - 1) <= MEMORY_TOLERANCE


def log_hardware(device: tuple[str, float] | None) -> tuple[str | None, str]:
    """(the catalog profile the log's device is, or None; the note saying which, or why --hardware is needed)."""
    if device is None:
        return None, "hardware: not in the log; give --hardware"
    name, gib = device
    profiles = [load_hardware(p) for p in list_hardware()]
    named = [p.name for p in profiles if p.gpu.name.lower() == name.lower()]
    same = [p.name for p in profiles if p.gpu.name.lower() == name.lower() and _same_memory(p.gpu.hbm_bytes, gib)]
    said = f"the log's device is {name} with {gib:.2f} GiB"
    if len(same) == 1:
        return same[0], (
            f"hardware: {same[0]}, the catalog profile of that GPU ({said}); its node and network are the profile's, "
            "which the log does not state: give --hardware for another"
        )
    if len(same) > 1:
        return None, f"hardware: {said}, the GPU of {', '.join(same)}: give --hardware"
    if named:
        return None, f"hardware: {said}, not the memory of {', '.join(named)}: give --hardware"
    sized = [p.name for p in profiles if _same_memory(p.gpu.hbm_bytes, gib)]
    hint = f" (the memory of {', '.join(sized)})" if sized else ""
    return None, f"hardware: {said}, no catalog profile's GPU by that name{hint}: give --hardware"


def given_against_log(device: tuple[str, float] | None, hardware: object) -> str | None:
    """Why --hardware cannot be the log's device, where it names a GPU other than the one the log names (a run
    measured on one GPU priced and fitted as another: calibrate moved an H100's factors onto the A100, audit); None
    where they agree, or where either is not known."""
    if device is None or not isinstance(hardware, str):
        return None
    try:
        given = load_hardware(hardware)
    except PlannerError:
        return None  # a name the caller refuses itself
    name, gib = device
    if given.gpu.name.lower() == name.lower() and _same_memory(given.gpu.hbm_bytes, gib):
        return None
    found, _ = log_hardware(device)
    instead = f"the profile of that GPU ({found})" if found else "the profile of that GPU"
    return (
        f"--hardware {hardware} is {given.gpu.name} with {given.gpu.hbm_bytes / GiB:.2f} GiB, not the log's device "
        f"({name} with {gib:.2f} GiB): give {instead}, or a profile of your own whose gpu.name and memory are the "
        "device's"
    )
