"""The typer callbacks every command's options share: a finite number in a range, a name or path that says
something, and shell completion of catalog names."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import typer

from planner.io.files import names_folder


def finite(low: float, high: float, *, open_low: bool = False) -> Callable[[float | None], float | None]:
    """A typer callback: the value is a finite number in [low, high] ((low, high] with open_low). click's
    FloatRange lets nan through and accepts inf as the top of an open range."""

    def check(value: float | None) -> float | None:
        if value is None:
            return None
        below = value <= low if open_low else value < low
        if not math.isfinite(value) or below or value > high:
            side = "(" if open_low else "["
            what = "is not a finite number in" if not math.isfinite(value) else "is out of"
            raise typer.BadParameter(f"{value!r} {what} {side}{low:g}, {high:g}]")
        return value

    return check


def nonempty(value: str | None) -> str | None:
    """A typer callback for names and paths: given, it must say something."""
    if value is not None and not value.strip():
        raise typer.BadParameter(f"{value!r} is empty; give a name or a path")
    return value


STDOUT_REFUSED = "'-' is not taken for standard output here; give a file or folder name"


def written(value: str | None) -> str | None:
    """`nonempty` for an option that names what a command writes: '-' (a folder or file named '-' was written) is
    refused, since no such option writes to standard output."""
    if value is not None and value.strip() == "-":
        raise typer.BadParameter(STDOUT_REFUSED)
    return nonempty(value)


def nonempty_paths(values: list[str] | None) -> list[str] | None:
    """`nonempty` for a list of files (calibrate's inputs, ingest's logs): each must say something."""
    for value in values or []:
        nonempty(value)
    return values


def nonempty_as(expected: str) -> Callable[[str | None], str | None]:
    """`nonempty` for an option that takes no name or path: an empty one says what it takes."""

    def check(value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise typer.BadParameter(f"is empty; give {expected}")
        return value

    return check


def nonempty_path(value: str | Path) -> Path:
    """A typer parser for path options: an empty one is refused (a Path of '' is '.', the folder it ran in)."""
    if not str(value).strip():
        raise typer.BadParameter("is empty; give a path")
    if str(value).strip() == "-":  # every path option names something written or read as a folder
        raise typer.BadParameter(STDOUT_REFUSED)
    return Path(value)


def file_path(value: str | Path) -> Path:
    """`nonempty_path` for an option that names a file: a name that can only be a folder's ('dir/', '.', '..') is
    refused here, before the trailing '/' that says so is lost to Path."""
    path = nonempty_path(value)
    if names_folder(value):
        raise typer.BadParameter(f"{str(value)!r} names a folder; give a file name")
    return path


def words(values: Sequence[str]) -> Callable[[str], list[str]]:
    """Shell completion of a vocabulary (`--precision fp8-<TAB>`, `--schedule`, `--recompute`, `--emit`): the values
    that start with what was typed (a comma list completes its last item)."""

    def complete(incomplete: str) -> list[str]:
        head, _, last = incomplete.rpartition(",")
        prefix = f"{head}," if head else ""
        return [prefix + v for v in values if v.lower().startswith(last.lower())]

    return complete


def catalog_names(kind: str) -> Callable[[str], list[str]]:
    """Shell completion of a catalog name (`planner search --model lla<TAB>`): the entries of `kind` (models,
    hardware, engines) that start with what was typed, from the catalogs' file names (nothing is parsed)."""

    def complete(incomplete: str) -> list[str]:
        from planner.io import catalog

        listed = {"models": catalog.list_models, "hardware": catalog.list_hardware, "engines": catalog.list_engines}
        return [n for n in listed[kind]() if n.lower().startswith(incomplete.lower())]

    return complete
