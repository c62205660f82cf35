"""`planner validate` and `planner calibrate`: the cost model against measured runs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from planner.cli.options import JsonOpt, nonempty
from planner.errors import PlannerError
from planner.render.console import emit_json, out


def validate(
    runs: Annotated[str, typer.Argument(help="runs file (the calibration_runs.yaml schema)")],
    hardware: Annotated[
        Optional[str], typer.Option("--hardware", callback=nonempty, help="use this profile for every run")
    ] = None,
    engine: Annotated[
        Optional[str],
        typer.Option(
            "--engine", callback=nonempty, help="use this engine for every run (default: each run's software.engine)"
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Predicted vs measured throughput and peak memory for a file of real runs, each run with its own engine."""
    from planner.fit.runs import load_runs
    from planner.fit.validate import validate_runs
    from planner.io.catalog import load_engine, load_hardware
    from planner.render.accuracy import print_validation, validation_json

    override = load_hardware(hardware) if hardware else None
    eng = load_engine(engine) if engine else None
    result = validate_runs(load_runs(runs), hardware=override, engine=eng)
    if as_json:
        emit_json(validation_json(result))
    else:
        print_validation(out, result)


InputsArg = Annotated[list[str], typer.Argument(help="launch profile .json files and/or runs .yaml files")]
FitHardwareOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--hardware",
        help="a profile to fit (catalog name or YAML; repeat for several; default: every "
        "catalog profile the runs files name)",
    ),
]
FitOutOpt = Annotated[
    str, typer.Option("-o", "--output", help="the calibrated profile (.yaml), or a directory for several")
]
EngineOutOpt = Annotated[
    Optional[str],
    typer.Option("--engine-out", help="write the engine profiles with their fitted factors into this directory"),
]
ParamsOpt = Annotated[
    Optional[str],
    typer.Option(
        "--params",
        help="comma list of parameters to fit (default: compute, overhead_s and every bounded hardware parameter)",
    ),
]


def calibrate(
    inputs: InputsArg,
    hardware: FitHardwareOpt = None,
    output: FitOutOpt = "",
    engine_out: EngineOutOpt = None,
    params: ParamsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Fit hardware profiles (within their physical bounds) and per-engine factors to measured runs."""
    from planner.fit.calibrate import calibrate_paths
    from planner.fit.runs import runs_hardware
    from planner.fit.write import hardware_output, write_engine_outputs, write_hardware_profile
    from planner.io.catalog import hardware_source_text, load_hardware
    from planner.io.files import make_dir
    from planner.render.accuracy import calibration_json, print_calibration
    from planner.render.progress import DelayedProgress

    if not output:
        raise PlannerError(
            "give -o NEW.yaml (or a directory for several --hardware): the calibrated profile goes there"
        )
    names = tuple(p.strip() for p in params.split(",") if p.strip()) if params else None
    args = hardware or runs_hardware(inputs)
    profiles = [load_hardware(h) for h in args]
    targets = hardware_output(output, profiles)
    if engine_out:  # checked before anything is written: a failure leaves no profile behind
        make_dir(engine_out, what="--engine-out folder")
    progress = DelayedProgress(enabled=sys.stderr.isatty(), description="fitting (model evaluations)")
    try:
        result = calibrate_paths(inputs, profiles, names=names, progress=progress)
    finally:
        progress.close()
    for arg, h in zip(args, profiles):
        write_hardware_profile(result, h.name, hardware_source_text(arg), targets[h.name])
    written = (
        write_engine_outputs(result, Path(engine_out), {h: p.stem for h, p in targets.items()}) if engine_out else []
    )
    if as_json:
        emit_json(calibration_json(result, {h: str(p) for h, p in targets.items()}, [str(p) for p in written]))
    else:
        print_calibration(out, result, {h: str(p) for h, p in targets.items()}, [str(p) for p in written])
