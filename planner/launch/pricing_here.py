"""Which hardware profile prices a run on this machine: the one its devices are (`default_hardware`), and whether a
profile named for the run prices this machine's kind of device at all (CPU processes or GPUs)."""

from __future__ import annotations

from planner.errors import PlannerError
from planner.hardware import HardwareProfile
from planner.launch.preflight import Environment, Preflight


def default_hardware(env: Environment) -> str:
    """The hardware profile that prices a run on this machine when --hardware is not given."""
    if env.device_type == "cpu":
        return "cpu"
    name = env.device_name.upper()
    for needle, profile in (
        ("H200", "h200"),
        ("H100", "h100-sxm"),
        ("H800", "h800"),
        ("B200", "b200"),
        ("MI300X", "mi300x"),
        ("V100", "v100-32gb"),
    ):
        if needle in name:
            return profile
    if "A100" in name:
        return "a100-80gb" if "80GB" in name.replace(" ", "") else "a100-40gb"
    raise PlannerError(
        f"no hardware profile matches this GPU ({env.device_name}); pass --hardware NAME|PATH "
        "(see `planner hardware`, or write one with `planner bench-hardware`)"
    )


def priced_here(env: Environment, hw: HardwareProfile) -> bool:
    """Whether `hw` prices what runs on this machine: CPU processes on a CPU profile, GPUs on a GPU's."""
    return (env.device_type == "cpu") == hw.runs_on_cpu


def _named(env: Environment) -> str:
    """This machine's catalog profile, or what to give where none matches its GPU (a check, not a refusal)."""
    try:
        return default_hardware(env)
    except PlannerError:
        return "NAME|PATH of this GPU's profile"


def hardware_check(pf: Preflight, env: Environment, hw: HardwareProfile) -> None:
    """The profile that prices the run is one of this machine's kind (forceable: a deliberate comparison)."""
    here = "CPU processes" if env.device_type == "cpu" else f"{env.device_name} GPUs"
    if priced_here(env, hw):
        pf.add("hardware", True, f"the {hw.name} profile prices this machine's {here}")
        return
    pf.add(
        "hardware", False, f"this machine runs {here}, which the {hw.name} profile does not price: its prediction "
        f"says nothing of this run; pass --hardware {_named(env)} (or a profile `planner bench-hardware` wrote "
        "here)", forceable=True,
    )  # fmt: skip
