"""Memoising pure cost functions of frozen specs (search evaluates the same shapes thousands of times)."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from pydantic import BaseModel

F = TypeVar("F", bound=Callable[..., Any])
_PLAIN = (int, float, str, bool)  # keyed by value without asking whether they are specs


def spec_cache(maxsize: int = 65536) -> Callable[[F], F]:
    """Memoise a pure function of frozen specs by the specs' identity (hashing a pydantic model on
    every call costs more than the function). The cache holds a reference to each spec it keys, so
    an id cannot be reused while its entry lives; the cache is cleared when it reaches maxsize."""

    def deco(fn: F) -> F:
        cache: dict[tuple, tuple[tuple, Any]] = {}

        @wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            key = (*[a if type(a) in _PLAIN or not isinstance(a, BaseModel) else id(a) for a in args], *kwargs.items())
            hit = cache.get(key)
            if hit is not None:
                return hit[1]
            if len(cache) >= maxsize:
                cache.clear()
            value = fn(*args, **kwargs)
            cache[key] = (args, value)  # keep the specs alive: their ids stay unique
            return value

        wrapper.cache_clear = cache.clear  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return deco
