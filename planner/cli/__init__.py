"""The command line: thin commands, one module per command group, one plan resolver (resolve.py).

The library raises PlannerError; `main` turns it (and click's usage errors) into one line on stderr and exit
code 2. Nothing here imports torch or scipy: `planner memory` must start fast.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import re
import sys
import warnings
from typing import Any, NoReturn

# The CLI uses no pydantic plugins; looking them up reads every installed package's entry points at start-up.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

import typer

from planner.errors import PlannerError
from planner.io.files import taken_back_on_failure
from planner.render.console import (
    StdoutClosed,
    drop_warnings,
    err,
    error_line,
    hold_warnings,
    release_warnings,
    warning_line,
)

try:  # typer >= 0.20 vendors click
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer depends on click
    from click import exceptions as click_exceptions  # type: ignore[no-redef]

# name -> (module, function) of each command, and (module, Typer) of each group: a command's module is
# imported only when that command runs (or for --help), so `planner memory` does not load the launcher.
COMMANDS = {
    "memory": ("planner.cli.sizing", "memory"),
    "estimate": ("planner.cli.sizing", "estimate"),
    "search": ("planner.cli.search", "search"),
    "scale": ("planner.cli.scale", "scale"),
    "launch": ("planner.cli.launch", "launch"),
    "validate": ("planner.cli.fit", "validate"),
    "calibrate": ("planner.cli.fit", "calibrate"),
    "ingest": ("planner.cli.ingest", "ingest"),
    "bench-hardware": ("planner.cli.bench", "bench_hardware"),
}
GROUPS = {
    "models": ("planner.cli.catalogs", "models_app"),
    "hardware": ("planner.cli.catalogs", "hardware_app"),
    "engines": ("planner.cli.catalogs", "engines_app"),
}


def _version(value: bool) -> None:
    if value:
        _say_version()
        raise typer.Exit()


def _say_version() -> None:
    from planner import __version__

    typer.echo(f"planner {__version__}")


def build_app(only: str | None = None) -> typer.Typer:
    """The Typer app with every command, or with `only` that one (the others are not imported)."""
    application = typer.Typer(
        add_completion=True,
        no_args_is_help=True,
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
        help="Plan, size, estimate and launch parallel LLM training.",
    )

    @application.callback()
    def _root(
        version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="print the version"),
    ) -> None:
        """Plan, size, estimate and launch parallel LLM training."""

    for name, (module, attr) in COMMANDS.items():
        if only in (None, name):
            application.command(name)(getattr(importlib.import_module(module), attr))
    for name, (module, attr) in GROUPS.items():
        if only in (None, name):
            application.add_typer(getattr(importlib.import_module(module), attr), name=name)
    return application


def __getattr__(name: str) -> Any:
    if name == "app":  # the full app, for tests and tools that import it
        return build_app()
    raise AttributeError(name)


def _command_of(argv: list[str]) -> str | None:
    """The command the arguments name, if it is one (else None: --help, --version, or a typo for click)."""
    first = next((a for a in argv if not a.startswith("-")), None)
    return first if first in COMMANDS or first in GROUPS else None


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; every user error is one line on stderr and exit code 2."""
    warnings.showwarning = warning_line
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--version"]:  # said before the app is built: building it imports every command (0.45 s)
        _say_version()
        return
    try:
        app = build_app(_command_of(args))
    except KeyboardInterrupt:  # Ctrl-C while the command's modules load
        _aborted()
    # What is imported lives as long as the command: out of the cyclic collector's generations, its full passes
    # do not walk every module and class again (about 15 ms of a search); thawed when the command returns,
    # unless a host program (a test, a notebook) froze objects before: those stay as the host left them.
    ours = gc.get_freeze_count() == 0
    if ours:
        gc.freeze()
    try:
        _run(app, args)
    finally:
        if ours:
            gc.unfreeze()


# The commands that only read and print (or write a file they close): they end without Python's teardown.
QUICK_EXIT = frozenset({"memory", "estimate", "search", "scale", "validate", "models", "hardware", "engines"})


def entry() -> None:
    """The `planner` program (the console script and `python -m planner`): `main`, and then, for a command that
    only reads and prints, the end of the process without Python's teardown, which would free every cached shape,
    plan and model one by one (about 80 ms of a 0.8 s search) for memory the OS takes back at once. Output is
    flushed first and the exit code kept; a command that starts processes or writes as it goes (launch, calibrate,
    ingest, bench-hardware) ends the usual way, as does `main` called from Python."""
    if _command_of(sys.argv[1:]) not in QUICK_EXIT:
        main()
        return
    try:
        main()
        code = 0
    except SystemExit as e:
        if not isinstance(e.code, int | None):  # a message to print: Python's own exit does that
            raise
        code = e.code or 0
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BrokenPipeError, ValueError):  # the reader has gone (as main: exit quietly)
            stream.flush()
    os._exit(code)


def _aborted() -> NoReturn:
    err.print("aborted")
    sys.exit(130)


def _run(app: typer.Typer, args: list[str]) -> None:
    """The command, its warnings said when it ends (render/console.py hold_warnings) unless it is refused: then
    its one error line is all it says."""
    hold_warnings()
    try:
        with taken_back_on_failure():  # a command that fails leaves none of the files it wrote
            _command(app, args)
    except SystemExit as e:
        if e.code == 2:
            drop_warnings()
        raise
    finally:
        release_warnings()


def _command(app: typer.Typer, args: list[str]) -> None:
    try:
        rc = app(args=args, standalone_mode=False)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except (StdoutClosed, BrokenPipeError):  # the reader stopped reading (`planner search ... | head -1`)
        _stdout_closed()
    except PlannerError as e:
        _refused(*e.messages)
    except OSError as e:  # a path the OS refuses (a name too long, a symlink loop, no permission): input
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        _refused(f"{where}{e.strerror or e}")
    except RecursionError:
        _refused("an input file is nested too deeply to read")
    except click_exceptions.NoArgsIsHelpError as e:
        err.print(e.format_message(), markup=False)
        sys.exit(2)
    except click_exceptions.UsageError as e:
        where = f" ({e.ctx.command_path})" if e.ctx else ""
        _refused(f"{_usage_message(e.format_message(), args)}{where}")
    except (typer.Abort, KeyboardInterrupt):
        _aborted()
    except typer.Exit as e:
        sys.exit(e.exit_code)


def _usage_message(message: str, args: list[str]) -> str:
    """Click's message, except that extra arguments that are all blank (`planner memory -m tiny ''`), which it
    shows as "()", are quoted."""
    extra = "Got unexpected extra argument(s) ("
    blanks = [a for a in args if not a.strip()]
    if message.startswith(extra) and not message[len(extra) : -1].strip() and blanks:
        return f"got unexpected blank argument(s) {', '.join(map(repr, blanks))}: remove them"
    bad = re.match(r"Invalid value for '(--[\w-]+)': ", message)
    given = _given(args, bad.group(1)) if bad else None
    return message if given is None or repr(given) in message else f"{message} (got {given!r})"


def _given(args: list[str], option: str) -> str | None:
    """The value the command line gave `option` (its last: click keeps the last), for a message that names only
    the bound it broke ("Input should be greater than or equal to 1")."""
    found = None
    for i, a in enumerate(args):
        if a == option and i + 1 < len(args):
            found = args[i + 1]
        elif a.startswith(option + "="):
            found = a[len(option) + 1 :]
    return found


def _refused(*messages: str) -> NoReturn:
    """Exit 2 with the one error line of each refused input (`_run` drops the warnings the refused input raised)."""
    for message in messages:
        error_line(message)
    sys.exit(2)


def _stdout_closed() -> NoReturn:
    """Exit 0 when stdout's reader has gone; stdout now points at /dev/null, so Python's flush at exit has
    nothing to complain about ("Exception ignored ... BrokenPipeError"; the recipe of the signal module's docs,
    "Note on SIGPIPE")."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(0)
