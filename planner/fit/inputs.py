"""How validate and calibrate tell their inputs apart by name, in any case (what `ingest -o` writes must read back):
a runs file is YAML, a launch profile JSON (validate reads a .json as runs); anything else is a training log."""

from __future__ import annotations

from pathlib import Path

RUNS_SUFFIXES = (".yaml", ".yml")


def is_runs_file(path: str | Path) -> bool:
    return Path(path).suffix.lower() in RUNS_SUFFIXES


def is_launch_profile(path: str | Path) -> bool:
    return Path(path).suffix.lower() == ".json"


def states_its_plan(path: str | Path) -> bool:
    """A runs file or a launch profile, not a training log: what --gpus and --plan cannot fill."""
    return is_runs_file(path) or is_launch_profile(path)
