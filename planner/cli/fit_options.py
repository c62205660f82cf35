"""The options of `planner calibrate` (and `validate`'s runs argument), and --params read as names."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from planner.cli.callbacks import nonempty, nonempty_paths, written
from planner.errors import PlannerError


def param_names(params: str | None) -> tuple[str, ...] | None:
    """--params as names (None: the default set); an empty name between commas is an error, not "every"."""
    if params is None:
        return None
    names = tuple(p.strip() for p in params.split(","))
    if not all(names):
        from planner.fit.priors import ENGINE_PARAMS, HARDWARE_BOUNDS

        valid = ", ".join([*HARDWARE_BOUNDS, *ENGINE_PARAMS])
        raise PlannerError(f"--params {params!r} has an empty name; give a comma list of names of: {valid}")
    return names


InputsArg = Annotated[
    list[str],
    typer.Argument(
        callback=nonempty_paths, help="runs files (.yaml), launch profiles (.json) and training logs, alike"
    ),
]
FitHardwareOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--hardware",
        help="fit only the runs of this profile (catalog name or YAML; repeat for several); also the GPU of "
        "a log or launch profile that does not name one; a log naming another GPU is refused (default: the "
        "profiles the runs name)",
    ),
]
FitOutOpt = Annotated[
    Optional[str],
    typer.Option(
        "-o",
        "--output",
        callback=written,
        help="write the hardware profile(s) here (.yaml, or a directory for several)",
    ),
]
EngineOutOpt = Annotated[
    Optional[str],
    typer.Option(
        "--engine-out",
        callback=written,
        help="write the engine profiles with their fitted factors into this directory",
    ),
]
ParamsOpt = Annotated[
    Optional[str],
    typer.Option(
        "--params",
        help="comma list to fit (default: compute,overhead_s of each engine and GPU of the runs; hardware "
        "parameters such as matmul_scale only by name)",
    ),
]
BehaviourOpt = Annotated[
    bool,
    typer.Option(
        "--behaviour",
        help="fit every engine's behaviour across all GPUs of the runs (partial pooling) and cross-validate "
        "it, as the shipped engine profiles are made; writes them with --engine-out",
    ),
]
LogModelOpt = Annotated[
    Optional[str], typer.Option("--model", "-m", callback=nonempty, help="the model of a log that does not say")
]
