"""The two consoles every command writes to, and the JSON writer: stdout carries the result (a table or a
JSON document, nothing else with --json), stderr carries errors, warnings and progress."""

from __future__ import annotations

import json
import math
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


class _Console:
    """A rich Console made on first use: commands that print JSON never import rich (about 20 ms a start)."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return getattr(self._console, name)


def escape(text: str) -> str:
    """rich markup escaped (rich.markup.escape), imported when text is rendered."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


# Piped output is not squeezed to 80 columns: tables stay readable in logs and READMEs.
out: Any = _Console(highlight=False, width=None if sys.stdout.isatty() else 120)
err: Any = _Console(stderr=True, highlight=False)


def finite_json(value: Any) -> Any:
    """The document with every non-finite float as null: strict JSON (no NaN, no Infinity), which every
    parser reads."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value


def emit_json(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(finite_json(doc), indent=2, allow_nan=False) + "\n")


def warning_line(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """`warnings.showwarning` for the CLI: one yellow line on stderr, no source location."""
    err.print(f"[yellow]warning:[/] {escape(str(message))}")


def error_line(message: str) -> None:
    """One line on stderr; the message is text, never markup (it may echo what the user typed)."""
    err.print(f"[red]error:[/] {escape(' '.join(message.splitlines()))}", soft_wrap=True)
