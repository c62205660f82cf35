"""The command line: thin commands, one module per command group, one plan resolver (resolve.py).

The library raises PlannerError; `main` turns it (and click's usage errors) into one line on stderr and exit
code 2. Nothing here imports torch or scipy: `planner memory` must start fast.
"""

from __future__ import annotations

import sys
import warnings

import typer

from planner.cli import bench, catalogs, fit, launch, plan, search
from planner.errors import PlannerError
from planner.render.console import err, error_line, warning_line

try:  # typer >= 0.20 vendors click
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer depends on click
    from click import exceptions as click_exceptions  # type: ignore[no-redef]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="Plan, size, estimate and launch parallel LLM training.",
)
app.command("memory")(plan.memory)
app.command("estimate")(plan.estimate)
app.command("validate")(fit.validate)
app.command("calibrate")(fit.calibrate)
app.command("launch")(launch.launch)
app.command("search")(search.search)
app.command("bench-hardware")(bench.bench_hardware)
app.add_typer(catalogs.models_app, name="models")
app.add_typer(catalogs.hardware_app, name="hardware")
app.add_typer(catalogs.engines_app, name="engines")


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; every user error is one line on stderr and exit code 2."""
    warnings.showwarning = warning_line
    try:
        app(args=argv, standalone_mode=False)
    except PlannerError as e:
        error_line(str(e))
        sys.exit(2)
    except click_exceptions.NoArgsIsHelpError as e:
        err.print(e.format_message(), markup=False)
        sys.exit(2)
    except click_exceptions.UsageError as e:
        where = f" ({e.ctx.command_path})" if e.ctx else ""
        error_line(f"{e.format_message()}{where}")
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        err.print("aborted")
        sys.exit(130)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except BrokenPipeError:
        sys.exit(0)
