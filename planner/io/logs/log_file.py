"""A training log file's text: what ingest, validate and calibrate read, refused one way by all three (calibrate
and validate had called a binary file "not a training log planner can read" where ingest said "not a text file")."""

from __future__ import annotations

from planner.errors import PlannerError
from planner.io.files import read_text, require_file


def log_file_text(path: str) -> str:
    """The log's text (a stray byte of another encoding read as U+FFFD: io/files.read_text lenient); PlannerError
    for a missing file, a folder, bytes that are not text, or nothing in it."""
    require_file(path, "a training log")
    text = read_text(path, lenient=True)
    if "\x00" in text:
        raise PlannerError(f"{path}: not a text file (it contains NUL bytes); give a training log")
    if not text.strip():
        raise PlannerError(f"{path}: is empty; give a training log")
    return text
