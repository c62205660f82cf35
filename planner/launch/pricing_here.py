"""Which hardware profile prices a run on this machine: the one its devices are (`default_hardware`), whether a
profile named for the run prices this machine's kind of device at all (CPU processes or GPUs), and which one a
launch takes from --hardware, the plan file and this machine (`priced_on`)."""

from __future__ import annotations

from planner.errors import PlannerError
from planner.hardware import HardwareProfile
from planner.io.catalog import DEFAULT_HARDWARE, load_hardware
from planner.io.planfile import PlanFile
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


def priced_on(
    hardware: str | None, saved: PlanFile | None, env: Environment | None, *, rehearse_: bool
) -> tuple[str, list[str]]:
    """The hardware profile that prices the run, with a note where the plan file's is not this machine's kind. A run
    here (env: this machine) is priced on this machine's profile unless --hardware or the plan file names one; a
    rehearsal always is (and run by the worker's engine, not the file's); a plan file's GPU profile does not price
    CPU processes (nor a CPU profile GPUs): that run is priced on this machine's profile, and the note says so."""
    if hardware:
        return hardware, []
    planned = saved.hardware if saved and not rehearse_ else None
    if planned is None:  # this machine's profile: named from its devices only when needed (an unknown GPU is refused)
        return (default_hardware(env) if env is not None else DEFAULT_HARDWARE), []
    if env is not None and not priced_here(env, load_hardware(planned)):
        here, kind = default_hardware(env), "CPU processes" if env.device_type == "cpu" else "GPUs"
        return here, [f"this machine runs {kind}: priced on {here}, its profile, not the plan file's {planned}"]
    return planned, []
