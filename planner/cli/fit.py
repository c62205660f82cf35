"""`planner validate` and `planner calibrate`: the cost model against measured runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from planner.cli.options import JsonOpt
from planner.errors import PlannerError
from planner.render.console import emit_json, out


def validate(
    runs: Annotated[str, typer.Argument(help="runs file (the calibration_runs.yaml schema)")],
    hardware: Annotated[Optional[str], typer.Option("--hardware", help="use this profile for every run")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Predicted vs measured throughput and peak memory for a file of real runs."""
    from planner.fit.validate import load_runs, validate_runs
    from planner.io.catalog import load_hardware
    from planner.render.fit import print_validation, validation_json

    override = load_hardware(hardware) if hardware else None
    result = validate_runs(load_runs(runs), hardware=override)
    if as_json:
        emit_json(validation_json(result))
    else:
        print_validation(out, result)


def calibrate(
    inputs: Annotated[list[str], typer.Argument(help="launch profile .json files and/or runs .yaml files")],
    hardware: Annotated[str, typer.Option("--hardware", help="the profile to fit (catalog name or YAML)")] = "h100-sxm",
    output: Annotated[str, typer.Option("-o", "--output", help="write the calibrated profile here (.yaml)")] = "",
    params: Annotated[Optional[str], typer.Option("--params", help="comma list of parameters to fit")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Fit a hardware profile's efficiency parameters to measured runs and write a new profile."""
    from planner.fit.calibrate import PARAMS, fit, load_observations, write_profile
    from planner.io.catalog import catalog_root, load_hardware
    from planner.render.fit import calibration_json, print_calibration

    if not output:
        raise PlannerError("give -o NEW.yaml: the calibrated profile is written there")
    base = load_hardware(hardware)
    names = tuple(p.strip() for p in params.split(",")) if params else tuple(PARAMS)
    result = fit(load_observations(inputs, base), base, names=names)
    source = Path(hardware) if Path(hardware).is_file() else catalog_root() / "hardware_profiles" / f"{base.name}.yaml"
    write_profile(result, source.read_text() if source.is_file() else None, output)
    if as_json:
        emit_json(calibration_json(result, output))
    else:
        print_calibration(out, result, output)
