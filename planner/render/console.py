"""The two consoles every command writes to, and the JSON writer: stdout carries the result (a table or a
JSON document, nothing else with --json), stderr carries errors, warnings and progress."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

# Piped output is not squeezed to 80 columns: tables stay readable in logs and READMEs.
out = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
err = Console(stderr=True, highlight=False)


def emit_json(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")


def warning_line(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """`warnings.showwarning` for the CLI: one yellow line on stderr, no source location."""
    err.print(f"[yellow]warning:[/] {message}")


def error_line(message: str) -> None:
    err.print(f"[red]error:[/] {message}", soft_wrap=True)
