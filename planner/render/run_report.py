"""`planner launch`: the dry-run report and the measured-against-predicted table."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from planner.launch.runner import DryRun


def render_dry_run(report: DryRun) -> str:
    lines = [
        "pre-flight:",
        *("  " + s for s in report.preflight.lines()),
        "mesh: " + " x ".join(f"{k}={v}" for k, v in report.mesh.items()),
        "command:",
        "  " + report.command,
        "ranks:",
        *("  " + r for r in report.ranks),
    ]
    return "\n".join(lines)


def print_comparison(rows: list[tuple[str, str, str, str]], profile_path: str) -> None:
    table = Table(title="measured vs predicted")
    for col in ("quantity", "measured", "predicted", "error"):
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    Console().print(table)
    typer.echo(f"profile: {profile_path}")
