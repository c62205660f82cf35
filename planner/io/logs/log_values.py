"""The values a log prints, read as numbers: a number field (refused naming the field and the line when it prints no
finite number), a date-time (seconds since the epoch), and which of a peak reserved and a peak allocated is the
peak."""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone

from planner.errors import PlannerError
from planner.io.logs.log_text import Memory

# "2025-06-16 22:30:50,322" (Python logging, DeepSpeed, torchtitan, Megatron's "[2024-03-30 20:02:40]"), and
# "20251202 06:56:28" (AMD Primus's loguru format "{time:YYYYMMDD HH:mm:ss}", primus/core/utils/logger.py
# @077c0ff0): the date's dashes both there or both absent.
TIMESTAMP = re.compile(r"(?<!\d)(\d{4})(-?)(\d{2})\2(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:[,.](\d{1,6}))?")


def number(text: str, *, field: str | None = None, line: int | None = None) -> float:
    """A printed number with thousands separators ("6,123", "8_000") as a float; anything else where a number was
    printed ("n/a", "nan", "13100.0/13240.9") is refused naming it, and the field and line it is in where given,
    not read as one or left to raise."""
    try:
        value = float(text.replace(",", "").replace("_", ""))
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        where = ", ".join(w for w in (f"line {line}" if line else "", f"{field!r}" if field else "") if w)
        raise PlannerError(
            f"{where + ': ' if where else ''}the log prints {text.strip()!r} where a finite number belongs"
        )
    return value


def timestamp_s(line: str) -> float | None:
    """The first date-time in the line ("2025-06-16 22:30:50,322", "20251202 06:56:28"), as seconds since the epoch
    (UTC assumed); None where there is none, or its fields name no time (second 64: a hand-edited line), which
    stopped ingest with a traceback."""
    m = TIMESTAMP.search(line)
    if not m:
        return None
    y, mo, d, h, mi, s = (int(g) for g in (m[1], m[3], m[4], m[5], m[6], m[7]))
    frac = float("0." + m[8]) if m[8] else 0.0
    try:
        return datetime(y, mo, d, h, mi, s, tzinfo=timezone.utc).timestamp() + frac
    except ValueError:
        return None


def peak_memory(
    reserved_bytes: float | None, allocated_bytes: float | None, rank: int | None, after: int | None = None
) -> Memory | None:
    """A log's peak: the peak reserved where it prints one (what the allocator held, as nvidia-smi sees the
    process), with the peak allocated beside it; else the peak allocated; None where it prints neither."""
    if reserved_bytes is not None:
        return Memory(reserved_bytes, "max_reserved", rank, allocated_bytes=allocated_bytes, after_iterations=after)
    if allocated_bytes is not None:
        return Memory(allocated_bytes, "max_allocated", rank, after_iterations=after)
    return None
