"""The one exception type the library raises for bad input; only the CLI turns it into exit code 2."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


class PlannerError(Exception):
    """A user-facing error: the message names the offending values and what would be valid."""

    @property
    def messages(self) -> list[str]:
        """One error line per input refused: this one's."""
        return [str(self)]


class PlannerErrors(PlannerError):
    """Several inputs of one command refused together (the files of a list): one error line each."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__("; ".join(messages))
        self._messages = messages

    @property
    def messages(self) -> list[str]:
        return self._messages


def each_or_refused(items: Iterable[T], do: Callable[[T], R]) -> list[R]:
    """do(item) for every item, or the refusals of every item refused (PlannerErrors), not the first alone:
    a user fixing ten logs learns of all of them from one run."""
    done: list[R] = []
    refused: list[str] = []
    for item in items:
        try:
            done.append(do(item))
        except PlannerError as e:
            refused += e.messages
    if len(refused) > 1:
        raise PlannerErrors(refused)
    if refused:
        raise PlannerError(refused[0])
    return done


def did_you_mean(value: str, known: Iterable[str]) -> str:
    """' (did you mean "x"?)' for the known name `value` most likely misspells (one it starts, else the closest by
    difflib at 0.7), or '' where none is close."""
    names, low = list(known), value.lower()
    close = [k for k in names if k.lower().startswith(low)] or difflib.get_close_matches(low, names, n=1, cutoff=0.7)
    return f' (did you mean "{close[0]}"?)' if close else ""
