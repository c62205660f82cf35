"""planner: parallelism planning, memory and step-time estimation, and launch for LLM training.

The Python API (planner.api) is importable from here: ``from planner import search, estimate, memory,
load_model, load_hardware, Plan``. It is loaded on first use, so `planner memory` starts fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["Plan", "estimate", "load_engine", "load_hardware", "load_model", "memory", "scale", "search"]

if TYPE_CHECKING:
    from planner.api import Plan, estimate, load_engine, load_hardware, load_model, memory, search
    from planner.api.scaling import scale


def __getattr__(name: str) -> Any:
    if name in __all__:
        from planner import api

        return getattr(api, name)
    raise AttributeError(f"module 'planner' has no attribute {name!r}")
