"""`planner validate` and `planner calibrate`: the cost model against measured runs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from planner.cli.callbacks import nonempty
from planner.cli.fit_options import (
    BehaviourOpt,
    EngineOutOpt,
    FitHardwareOpt,
    FitOutOpt,
    InputsArg,
    LogModelOpt,
    ParamsOpt,
    param_names,
)
from planner.cli.ingest import LogPlanOpt
from planner.cli.options import CatalogOpt, GpusOpt, JsonOpt
from planner.errors import PlannerError
from planner.render.console import emit_json, out

if TYPE_CHECKING:
    from planner.hardware import HardwareProfile
    from planner.specs import ModelSpec

LOG_ONLY = (
    "--model, --gpus and --plan fill what a training log leaves unstated (each run of a runs file states its own)"
)


def validate(
    runs: Annotated[
        str,
        typer.Argument(
            callback=nonempty,
            help="runs file (the calibration_runs.yaml schema) or a training log (as ingest reads it)",
        ),
    ],
    hardware: Annotated[
        Optional[str], typer.Option("--hardware", callback=nonempty, help="use this profile for every run")
    ] = None,
    engine: Annotated[
        Optional[str],
        typer.Option(
            "--engine", callback=nonempty, help="use this engine for every run (default: each run's software.engine)"
        ),
    ] = None,
    calibrated: Annotated[
        Optional[str],
        typer.Option(
            "--calibrated",
            callback=nonempty,
            help="a folder `planner calibrate -o DIR --engine-out DIR` wrote: each run also against its profiles",
        ),
    ] = None,
    model: LogModelOpt = None,
    gpus: GpusOpt = None,
    plan: LogPlanOpt = None,
    as_json: JsonOpt = False,
    catalog: CatalogOpt = None,
) -> None:
    """Predicted vs measured throughput and peak memory for a file of real runs, each run with its own engine
    (with --calibrated DIR: the shipped and the calibrated profiles side by side), or for a training log (with
    what it does not state from --model, --hardware, --gpus and --plan, as ingest takes them)."""
    from planner.cli.ingest import log_givens
    from planner.fit.inputs import states_its_plan
    from planner.fit.observations import runs_of
    from planner.fit.validate import calibrated_profiles, validate_runs
    from planner.io.catalog import load_engine, load_hardware, load_model
    from planner.render.accuracy import print_validation, validation_json

    if (gpus or plan or model) and states_its_plan(runs):
        raise PlannerError(f"{LOG_ONLY}; {runs} is a runs file")
    given = log_givens(model, hardware, gpus, plan)
    override = load_hardware(given.hardware) if given.hardware else None
    eng = load_engine(engine) if engine else None
    spec = load_model(given.model) if given.model else None
    options = {"gpus": given.gpus, "given_plan": given.plan, "given_software": given.software}
    raws = runs_of(Path(runs), override, spec, **options)
    result = validate_runs(raws, hardware=override, engine=eng)
    result.require_evaluated(runs)
    other = (
        validate_runs(raws, hardware=override, engine=eng, profiles=calibrated_profiles(calibrated))
        if calibrated
        else None
    )
    if as_json:
        emit_json(validation_json(result, other))
    else:
        print_validation(out, result, other, calibrated)


def calibrate(
    inputs: InputsArg,
    hardware: FitHardwareOpt = None,
    output: FitOutOpt = None,
    engine_out: EngineOutOpt = None,
    params: ParamsOpt = None,
    behaviour: BehaviourOpt = False,
    model: LogModelOpt = None,
    gpus: GpusOpt = None,
    plan: LogPlanOpt = None,
    as_json: JsonOpt = False,
    catalog: CatalogOpt = None,
) -> None:
    """Fit what the runs can identify (each engine's compute and per-step overhead on their GPUs; hardware
    parameters by name) and report every move, what stayed and why, and each run's error before and after.
    Training logs are read as ingest reads them, with what they do not state from --model, --hardware, --gpus
    and --plan."""
    from planner.cli.ingest import log_givens
    from planner.io.catalog import load_hardware, load_model
    from planner.io.files import make_dir

    names = param_names(params)
    if gpus or plan or model:
        _logs_only(inputs)
    one = hardware[0] if hardware and len(hardware) == 1 else None
    given = log_givens(model, one, gpus, plan)
    hardware = hardware or ([given.hardware] if given.hardware else None)
    profiles = [load_hardware(h) for h in hardware] if hardware else None
    spec = load_model(given.model) if given.model else None
    fill = {"gpus": given.gpus, "given_plan": given.plan, "given_software": given.software}
    created = bool(engine_out) and not Path(str(engine_out)).exists()
    _distinct(output, engine_out)
    _check_outputs(output, engine_out if behaviour else None)  # --behaviour writes every catalog engine
    if engine_out:  # checked before anything is written: a failure leaves no profile behind
        make_dir(engine_out, what="--engine-out folder")
    try:
        if behaviour:
            _calibrate_behaviour(
                inputs, profiles, spec, fill, output=output, names=names, engine_out=engine_out, as_json=as_json
            )
            return
        _calibrate_runs(
            inputs, profiles, spec, fill, hardware or [], names=names, output=output, engine_out=engine_out,
            as_json=as_json,
        )  # fmt: skip
    except PlannerError:
        if created and engine_out and not any(Path(engine_out).iterdir()):
            Path(engine_out).rmdir()  # nor the folder this command made for it
        raise


def _check_outputs(output: str | None, engine_out: str | None) -> None:
    """What -o FILE and --behaviour's --engine-out DIR would replace, checked before the fit (fit/write.py
    check_targets); a directory -o's files (by GPU) and a plain fit's engine files (those with runs) after it."""
    from planner.fit.write import check_targets, output_is_file
    from planner.io.catalog import list_engines

    if output and output_is_file(output):
        check_targets("-o", [Path(output)])
    if engine_out:
        check_targets("--engine-out", [Path(engine_out) / f"{e}.yaml" for e in list_engines()], engine=True)


def _distinct(output: str | None, engine_out: str | None) -> None:
    """-o FILE where --engine-out DIR writes an engine's profile: the hardware profile was replaced by the engine's,
    and the hint named the engine file as hardware (audit)."""
    from planner.fit.write import output_is_file
    from planner.io.catalog import list_engines

    if not (output and engine_out and output_is_file(output)):
        return
    o = Path(output)
    if o.resolve().parent == Path(engine_out).resolve() and o.stem in list_engines():
        raise PlannerError(
            f"-o {output}: --engine-out {engine_out} writes the {o.stem} engine profile there; give -o another name"
        )


def _logs_only(inputs: list[str]) -> None:
    """--model, --gpus and --plan fill what a training log leaves unstated; a runs file or launch profile states it."""
    from planner.fit.inputs import states_its_plan

    stated = [p for p in inputs if states_its_plan(p)]
    if stated:
        raise PlannerError(f"{LOG_ONLY}; {stated[0]} is a runs file")


def _calibrate_runs(
    inputs: list[str],
    profiles: list[HardwareProfile] | None,
    spec: ModelSpec | None,
    fill: dict[str, Any],
    args: list[str],
    *,
    names: tuple[str, ...] | None,
    output: str | None,
    engine_out: str | None,
    as_json: bool,
) -> None:
    from planner.fit.calibrate import calibrate_paths
    from planner.fit.left_out import gathered
    from planner.fit.write import check_targets, hardware_output, write_engine_outputs, write_hardware_profile
    from planner.io.catalog import hardware_source_text
    from planner.render.calibration import calibration_json, print_calibration
    from planner.render.progress import DelayedProgress

    _one_file_for_one_gpu(inputs, profiles, output)
    progress = DelayedProgress(enabled=sys.stderr.isatty(), description="fitting (model evaluations)")
    with gathered() as left_out:  # said once the progress bar is gone
        try:
            result = calibrate_paths(inputs, profiles, names=names, progress=progress, model=spec, given=fill)
        finally:
            progress.close()
    bases = list(result.bases.values())
    targets = hardware_output(output, bases) if output else {}
    check_targets("-o", list(targets.values()))
    if engine_out:  # the engines with runs in the fit: the files write_engine_outputs replaces
        check_targets("--engine-out", [Path(engine_out) / f"{e}.yaml" for e in result.engines], engine=True)
    sources = dict(zip((p.name for p in profiles or []), args))
    for h in bases:
        if h.name in targets:
            write_hardware_profile(result, h.name, hardware_source_text(sources.get(h.name, h.name)), targets[h.name])
    written = (
        write_engine_outputs(result, Path(engine_out), {h: p.stem for h, p in targets.items()}) if engine_out else []
    )
    outputs = {h: str(p) for h, p in targets.items()}
    if as_json:
        emit_json({**calibration_json(result, outputs, [str(p) for p in written]), "left_out": left_out})
    else:
        print_calibration(out, result, outputs, [str(p) for p in written])


def _one_file_for_one_gpu(inputs: list[str], profiles: list[HardwareProfile] | None, output: str | None) -> None:
    """-o FILE.yaml holds one fitted profile: refused before the fit where the runs files name several GPUs (the
    fit takes seconds; hardware_output would refuse it after)."""
    from planner.fit.inputs import is_runs_file
    from planner.fit.runs import runs_hardware
    from planner.fit.write import output_is_file

    if not output or not output_is_file(output) or profiles:
        return
    stated = [p for p in inputs if is_runs_file(p)]
    named = runs_hardware(stated) if stated else []
    if len(named) > 1:
        raise PlannerError(
            f"-o {output}: the runs name {len(named)} hardware profiles ({', '.join(named)}); give a directory, or "
            "--hardware to fit one"
        )


def _calibrate_behaviour(
    inputs: list[str],
    profiles: list[HardwareProfile] | None,
    spec: ModelSpec | None,
    fill: dict[str, Any],
    *,
    output: str | None,
    names: tuple[str, ...] | None,
    engine_out: str | None,
    as_json: bool,
) -> None:
    from planner.fit.left_out import gathered
    from planner.fit.observations import load_observations
    from planner.fit.pooled import calibrate_behaviour, write_engine_behaviours
    from planner.render.behaviour_fit import behaviour_json, print_behaviour

    if output or names:
        raise PlannerError(
            "--behaviour fits the engines' behaviour only (the GPUs' physics is never fitted to end-to-end runs): "
            "leave out -o and --params"
        )
    single = profiles[0] if profiles and len(profiles) == 1 else None
    with gathered() as left_out:
        obs = load_observations(inputs, single, model=spec, given=fill)
    if profiles:
        wanted = {p.name for p in profiles}
        obs = [o for o in obs if o.hardware.name in wanted]
    if len(obs) < 2:
        raise PlannerError(f"--behaviour needs runs to cross-validate (at least 2), got {len(obs)}")
    cal = calibrate_behaviour(obs)
    written = write_engine_behaviours(cal, Path(engine_out)) if engine_out else []
    if as_json:
        emit_json({**behaviour_json(cal, [str(p) for p in written]), "left_out": left_out})
    else:
        print_behaviour(out, cal, [str(p) for p in written])
