"""Unit constants and human formatting. Everything inside planner is SI (bytes, seconds, FLOP/s)."""

from __future__ import annotations

import math
from typing import Any

KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
KiB = 1024
MiB = 1024**2
GiB = 1024**3
TFLOPS = 1e12  # FLOP/s


def fmt_bytes(num_bytes: float) -> str:
    """Binary units, as GPU memory is usually quoted (nvidia-smi, torch.cuda)."""
    value = float(num_bytes)
    for unit, scale in (("TiB", 1024**4), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {unit}"
    return f"{value:.0f} B"


YEAR_S = 365.25 * 86400


def fmt_seconds(seconds: float) -> str:
    if seconds >= YEAR_S:  # 135785393.6 d read as a number, not as 372 thousand years
        return f"{seconds / YEAR_S:,.1f} y"
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} d"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.1f} us"


def fmt_seconds_range(lo: float, hi: float) -> str:
    """A span of time in fmt_seconds' unit of its upper end: '178.2–227.1 d', '5.90–7.41 s'."""
    units = (("y", YEAR_S), ("d", 86400.0), ("h", 3600.0), ("s", 1.0))
    unit, scale = next(((u, s) for u, s in units if hi >= s), ("ms", 1e-3))
    decimals = 1 if scale >= 3600 else 2
    return f"{lo / scale:,.{decimals}f}–{hi / scale:,.{decimals}f} {unit}"


def fmt_duration(seconds: float) -> str:
    """A span a person plans around (a mean time between failures, a restart): minutes from a minute, then hours
    and days as fmt_seconds has them ('1391.89 s' read as a step time, not 23 minutes)."""
    return f"{seconds / 60:.1f} min" if 60 <= seconds < 3600 else fmt_seconds(seconds)


def fmt_steps(seconds: float, step_s: float) -> str:
    """A span of whole steps, as a job checkpoints: '12 steps (1.2 min)'."""
    n = max(1, round(seconds / step_s)) if step_s else 0
    return f"{n:,} step{'s' if n != 1 else ''} ({fmt_seconds(seconds)})" if n else fmt_seconds(seconds)


def fmt_count(n: float) -> str:
    """'4.19M', '15.00T'; from a thousand trillion on in powers of ten ('1.00e+18', not '1000000.00T')."""
    if abs(n) >= 1e15:
        return f"{n:.2e}"
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f}{unit}"
    return f"{n:.0f}"


def fmt_rate(n: float) -> str:
    """Three significant digits with a k/M/G suffix: 182,714 -> '183k', 1,234,567 -> '1.23M'."""
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            v = n / scale
            return f"{v:.3g}{unit}" if v < 100 else f"{v:.0f}{unit}"
    return f"{n:.3g}"


def fmt_range(lo: float, hi: float) -> str:
    """An interval with one k/M/G suffix, three significant digits on its upper end: '181–196k', '5.10–5.92k',
    '95.3–110'."""
    import math

    unit, scale = next(((u, s) for u, s in (("G", 1e9), ("M", 1e6), ("k", 1e3)) if abs(hi) >= s), ("", 1.0))
    top = abs(hi) / scale
    decimals = max(0, 2 - math.floor(math.log10(top))) if top > 0 else 0
    return f"{lo / scale:.{decimals}f}–{hi / scale:.{decimals}f}{unit}"


def fmt_bytes_range(lo: float, hi: float) -> str:
    """A memory interval in binary units of its upper end: '29.10–34.52 GiB'."""
    unit, scale = next(((u, s) for u, s in (("TiB", 1024**4), ("GiB", GiB), ("MiB", MiB)) if hi >= s), ("B", 1))
    return f"{lo / scale:.2f}–{hi / scale:.2f} {unit}"


def fmt_hours(hours: float) -> str:
    """GPU-hours as a person budgets them: whole hours from 10 on ('1,234'), two significant digits below ('0.11',
    where a whole number printed 0)."""
    if 0 < hours < 0.01:  # "4e-05" read as a number, not as a few seconds of a GPU
        return "< 0.01"
    return f"{hours:,.0f}" if hours >= 10 or hours == 0 else f"{hours:.2g}"


# Mappings keyed by a measured field's name that hold no size: validate's `error`, each field's error in percent
# (DESIGN.md, `planner validate --json`), whose `peak_memory_bytes` is -7.3, not -7 bytes.
NOT_SIZES = frozenset({"error"})


def whole_bytes(doc: Any, sizes: bool = False) -> Any:
    """A document with every `*_bytes` size in whole bytes, at any depth, a list of sizes too (DESIGN.md: sizes are
    bytes): profiles and figures keep floats (85e9, a fitted 1.6e9) that --json must not print as 85000000000.0.
    A NOT_SIZES mapping is left as it is."""
    if isinstance(doc, dict):
        return {
            k: v if k in NOT_SIZES else whole_bytes(v, isinstance(k, str) and k.endswith("_bytes"))
            for k, v in doc.items()
        }
    if isinstance(doc, list | tuple):
        return [whole_bytes(v, sizes) for v in doc]
    if sizes and isinstance(doc, float) and math.isfinite(doc):
        return round(doc)
    return doc
