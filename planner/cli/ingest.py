"""`planner ingest`: training logs in, runs-file entries out (a table, --json, or -o runs.yaml)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any, Optional

import typer

from planner.cli.callbacks import nonempty, nonempty_paths, written
from planner.cli.options import CatalogOpt, GpusOpt, JsonOpt
from planner.errors import PlannerError, each_or_refused
from planner.io.files import check_ours
from planner.io.logs import DEFAULT_WARMUP, ENGINES
from planner.render.console import emit_json, out

MAX_WARMUP = 1_000_000


def _hardware_name(arg: str) -> str:
    """The catalog name of --hardware (aliases resolved), or the path as given for a profile file."""
    from planner.io.catalog import load_hardware

    profile = load_hardware(arg)
    return arg if arg.endswith((".yaml", ".yml")) or "/" in arg else profile.name


LogsArg = Annotated[
    list[str],
    typer.Argument(
        callback=nonempty_paths,
        help="training log files (Megatron-LM/NeMo/Megatron-Bridge, Megatron-DeepSpeed, DeepSpeed, torchtitan, "
        "llm-foundry)",
    ),
]
LogEngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        help=f"auto | {' | '.join(ENGINES)} or a catalog alias of one, any case (default: detected from the text)",
    ),
]
RunsOutOpt = Annotated[
    Optional[str], typer.Option("-o", "--output", callback=written, help="write the runs file (YAML, .yaml) here")
]
LogModelOpt = Annotated[
    Optional[str],
    typer.Option("--model", "-m", callback=nonempty, help="the model when the log does not state its shape"),
]
LogHardwareOpt = Annotated[
    Optional[str],
    typer.Option(
        "--hardware", callback=nonempty, help="the GPU profile the run used (a log naming another GPU is refused)"
    ),
]
LogPlanOpt = Annotated[
    Optional[str],
    typer.Option(
        "--plan",
        callback=nonempty,
        help="the plan the run used (a `search --save` file or a YAML mapping of plan fields): what the log does "
        "not state, and the file's model, hardware and gpus where their options are not given",
    ),
]
WarmupOpt = Annotated[int, typer.Option("--warmup", min=0, max=MAX_WARMUP, help="first iterations left out as warm-up")]


@dataclass(frozen=True)
class LogGivens:
    """What the user gives for a log (ingest's and validate's --model, --hardware, --gpus, --plan): the options,
    or the plan file's where an option is not given, and the file's plan fields and engine settings."""

    model: str | None
    hardware: str | None
    gpus: int | None
    plan: dict[str, Any] | None
    software: dict[str, Any] | None


def log_engine(name: str) -> str:
    """--engine as a log family: auto, or an engine's catalog name or alias in any case (`nemo`, `MEGATRON` are
    megatron), resolved as every --engine is (io/catalog_roots.py lookup); one line naming the families otherwise."""
    from planner.io.catalog_roots import ENGINE_DIR, lookup

    if name.strip().lower() == "auto":
        return "auto"
    hit = lookup(ENGINE_DIR, name)
    family = hit.name.lower() if hit else name
    if family not in ENGINES:
        raise PlannerError(f"--engine {name!r} is not one of auto, {', '.join(ENGINES)} (or their aliases)")
    return family


def runs_output(path: str) -> str:
    """The -o path, if its suffix is one validate and calibrate read back as a runs file."""
    from planner.fit.inputs import is_runs_file  # as validate and calibrate tell a runs file

    if not is_runs_file(path):
        raise PlannerError(
            f"-o {path}: a runs file is YAML and must end in .yaml or .yml (validate and calibrate read a .json as "
            "a launch profile and other names as training logs); use --json for JSON"
        )
    return path


def log_givens(model: str | None, hardware: str | None, gpus: int | None, plan: str | None) -> LogGivens:
    from planner.fit.runs import SOFTWARE_KEYS
    from planner.io.planfile import checked_fields, read_plan_file

    if not plan:
        return LogGivens(model, hardware, gpus, None, None)
    saved = read_plan_file(plan)
    # the plan file's engine settings that a runs file's software block holds (the same names, fit/runs.py)
    settings = {k: v for k, v in saved.training.items() if k in SOFTWARE_KEYS}
    return LogGivens(
        model or saved.model, hardware or saved.hardware, gpus or saved.gpus, checked_fields(plan, saved.plan), settings
    )


def ingest(
    logs: LogsArg,
    engine: LogEngineOpt = "auto",
    as_json: JsonOpt = False,
    output: RunsOutOpt = None,
    model: LogModelOpt = None,
    hardware: LogHardwareOpt = None,
    gpus: GpusOpt = None,
    plan: LogPlanOpt = None,
    warmup: WarmupOpt = DEFAULT_WARMUP,
    catalog: CatalogOpt = None,
) -> None:
    """Read training logs into runs-file entries: the steady-state step time, tokens/s per GPU and peak memory,
    with the plan, model and precision the log states, and what had to be assumed."""
    from planner.io.catalog import load_model
    from planner.io.logs import ingested_runs, log_file_text, read_log, runs_yaml, unique_ids

    engine = log_engine(engine)
    if output:
        runs_output(output)
        check_ours(output, option="-o", what="runs file", ours=ingested_runs)
    given = log_givens(model, hardware, gpus, plan)
    spec = load_model(given.model) if given.model else None
    hw = _hardware_name(given.hardware) if given.hardware else None
    read = partial(
        read_log, engine=engine, warmup=warmup, model=spec, hardware=hw, gpus=given.gpus, given_plan=given.plan,
        given_software=given.software,
    )  # fmt: skip
    runs = unique_ids(each_or_refused(logs, lambda p: read(log_file_text(p), source=p)))
    from planner.fit.plausible import ingested_doubts

    for doubt in (d for r in runs for d in ingested_doubts(r)):  # written as read, and said
        warnings.warn(doubt, stacklevel=1)
    if output:
        from planner.io.files import write_text_atomic

        write_text_atomic(output, runs_yaml(runs), what="runs file")
    if as_json:
        from planner.render.ingested import ingest_json

        emit_json(ingest_json(runs))
    else:
        from planner.render.ingested import print_runs

        print_runs(out, runs, output)
