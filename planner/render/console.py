"""The two consoles every command writes to, and the JSON writer: stdout carries the result (a table or a
JSON document, nothing else with --json), stderr carries errors, warnings and progress."""

from __future__ import annotations

import json
import os
import re
import sys
from typing import TYPE_CHECKING, Any

from planner.io.files import finite_json
from planner.units import whole_bytes

if TYPE_CHECKING:
    from rich.console import Console


UNLIMITED_COLUMNS = 10_000
PIPED_COLUMNS = 100  # the width of piped output when COLUMNS does not say (every table fits it)


def piped_width(environ: Any = os.environ) -> int:
    """The width of piped output: COLUMNS when it is a positive number, else PIPED_COLUMNS (a terminal's own
    width is rich's to find, COLUMNS first)."""
    columns = str(environ.get("COLUMNS", "")).strip()
    return int(columns) if columns.isdigit() and int(columns) > 0 else PIPED_COLUMNS


class StdoutClosed(Exception):
    """stdout's reader has gone (`planner search ... | head -1`). Not an OSError: click would turn that into exit 1;
    the CLI ends quietly with exit 0 instead."""


class _Console:
    """A rich Console made on first use: commands that print JSON never import rich (about 20 ms a start)."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rich(), name)

    def _rich(self) -> Console:
        if self._console is None:
            from rich.console import Console

            class PipeConsole(Console):
                def on_broken_pipe(self) -> None:
                    """A reader that stops reading (`| head`) is no error: raise it for the CLI to end quietly with
                    exit 0 (rich's own handler exits 1)."""
                    self.quiet = True
                    raise StdoutClosed

            self._console = PipeConsole(**self._options)
        return self._console


def rich_console(console: Any) -> Console:
    """The rich Console behind one of the consoles here (made now if it was not), or the Console given."""
    return console._rich() if isinstance(console, _Console) else console


def natural_width(console: Any, renderable: Any) -> int:
    """The columns `renderable` takes when nothing limits it (a table with no cell wrapped or cut)."""
    c = rich_console(console)
    return int(c.measure(renderable, options=c.options.update_width(UNLIMITED_COLUMNS)).maximum)


def print_unlimited(console: Any, renderable: Any) -> None:
    """Print at the renderable's natural width when it is wider than the console (`--wide`): lines run past the
    terminal's edge rather than cells being cut."""
    c = rich_console(console)
    _print_at_least(c, renderable, natural_width(c, renderable))


def print_fitted(console: Any, renderable: Any) -> None:
    """Print at the console's width, the cells that may wrap wrapped; where even the cells that may not (numbers)
    need more, at the width they need: lines run past the terminal's edge rather than a number being cut."""
    c = rich_console(console)
    _print_at_least(
        c, renderable, int(c.measure(renderable, options=c.options.update_width(UNLIMITED_COLUMNS)).minimum)
    )


def _print_at_least(c: Any, renderable: Any, width: int) -> None:
    """Print at the console's width, or at `width` where that is wider; the console's setting restored after."""
    saved = c._width  # rich's own setting: None means "the terminal's width"
    c.width = max(c.width, width)
    try:
        c.print(renderable, crop=False)
    finally:
        c._width = saved


def print_hanging(console: Any, lead: str, markup: str) -> None:
    """`lead` then `markup` wrapped to the console's width, each further line indented as far as `lead` (the
    search's `  count  reason  (e.g. example)` lines: a long example wraps under its reason)."""
    from rich.text import Text

    c = rich_console(console)
    body = Text.from_markup(markup, emoji=False)
    for i, line in enumerate(body.wrap(c, max(20, c.width - len(lead)))):
        line.rstrip()
        c.print(Text(lead if i == 0 else " " * len(lead)) + line, soft_wrap=True)


def wrap_words(text: str, width: int | None, *, indent: str = "", breaks: str = " ") -> str:
    """`text` indented, in lines of at most `width` characters (indent included) broken after any of `breaks` (the
    hyphens and underscores of a run id); a piece longer than a line stays whole. `width` None: one line."""
    pieces = re.findall(f"[^{re.escape(breaks)}]*[{re.escape(breaks)}]|[^{re.escape(breaks)}]+$", text) or [text]
    lines = [indent]
    for piece in pieces:
        if width is not None and len(lines[-1]) > len(indent) and len(lines[-1]) + len(piece.rstrip()) > width:
            lines[-1] = lines[-1].rstrip()
            lines.append(indent + "  ")
        lines[-1] += piece
    return "\n".join(lines)


def escape(text: str) -> str:
    """rich markup escaped (rich.markup.escape), imported when text is rendered."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


# No emoji codes: a model, run or file name with ":name:" in it prints as written (and rich's emoji table, about
# 3 ms to import, is never loaded).
out: Any = _Console(highlight=False, emoji=False, width=None if sys.stdout.isatty() else piped_width())
err: Any = _Console(stderr=True, highlight=False, emoji=False)


def emit_json(doc: dict[str, Any]) -> None:
    """Every --json document, its sizes in whole bytes (units.whole_bytes: DESIGN.md, sizes are bytes)."""
    try:
        sys.stdout.write(json.dumps(finite_json(whole_bytes(doc)), indent=2, allow_nan=False) + "\n")
    except BrokenPipeError:
        raise StdoutClosed from None


# Warnings a command raised, said when it ends well (or before a long run starts): a command refused with exit 2
# says its one error line, not also the warnings its refused input raised on the way. Held by one process only
# (forked search workers print theirs: their list would die with them).
_held: list[str] | None = None
_holder_pid = 0


def warning_line(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """`warnings.showwarning` for the CLI: one yellow line on stderr, no source location (held while held)."""
    text = f"[yellow]warning:[/] {escape(str(message))}"
    if _held is not None and os.getpid() == _holder_pid:
        _held.append(text)
        return
    err.print(text)


def hold_warnings() -> None:
    global _held, _holder_pid
    _held, _holder_pid = [], os.getpid()


def release_warnings() -> None:
    """Say the held warnings, and say the next ones as they come."""
    global _held
    held, _held = _held or [], None
    for text in held:
        err.print(text)


def drop_warnings() -> None:
    """The command was refused: its error line is all it says."""
    global _held
    _held = None


def error_line(message: str) -> None:
    """One line on stderr; the message is text, never markup (it may echo what the user typed)."""
    err.print(f"[red]error:[/] {escape(' '.join(message.splitlines()))}", soft_wrap=True)
