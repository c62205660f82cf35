"""Runs a fit leaves out (a step time that averages warm-up, a run the engine's rules refuse, ...): each said as a
warning when it is left out, and, for `calibrate --json`, gathered with the file, the run and why, so that a script
reading the document knows which runs the fit did not see (a review found them on stderr only)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager


class LeftOutOfFit(UserWarning):
    """One run a fit leaves out: the warning's text, and its parts."""

    def __init__(self, source: str, run_id: str, why: str) -> None:
        super().__init__(f"{source}: run {run_id!r} is left out of the fit: {why}")
        self.source, self.run_id, self.why = source, run_id, why


@contextmanager
def gathered() -> Iterator[list[dict[str, str]]]:
    """The runs left out inside the block, as {source, id, why}; every warning is still said as it would be."""
    left: list[dict[str, str]] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.filterwarnings("always", category=LeftOutOfFit)  # gathered whatever -W says of showing them
        yield left
    for w in caught:  # a refused command says its error line alone (render/console.py drop_warnings): not reached
        if isinstance(w.message, LeftOutOfFit):
            left.append({"source": w.message.source, "id": w.message.run_id, "why": w.message.why})
        warnings.warn(w.message, stacklevel=2)  # said again under the filters as they are (-W ignore: not said)
