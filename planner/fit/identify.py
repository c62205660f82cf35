"""Which parameters the given runs can identify (issue 22 item 2): calibrate moves only those, and says why the
others stay.

The sensitivity of every run's log step time to each parameter (a column of the Jacobian, per one prior width of
the parameter) decides. In priority order (a group's compute scale, then its per-step overhead, then hardware
parameters in the order asked), a parameter is chosen when some run is sensitive to it (MIN_SENSITIVITY), when
its column is not (nearly) a combination of those already chosen (MIN_INDEPENDENCE: the runs would move them
together), and while fewer parameters are chosen than there are runs (one run can move one scale).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_SENSITIVITY = 0.005  # the largest change of a run's log step time per prior width of the parameter
MIN_INDEPENDENCE = 0.2  # the share of a column left after projecting out the chosen ones (the sine of the angle)
PRIORITY = {"c": 0, "o": 1, "hw": 2}


@dataclass(frozen=True)
class Choice:
    chosen: tuple[int, ...]  # slot indices to fit
    reasons: dict[int, str]  # slot index -> why it stays


def choose(jac: np.ndarray, slots: list[tuple[str, ...]], labels: list[str], runs: int) -> Choice:
    """The identifiable slots of `jac` (runs x slots, d log step / d parameter x prior width)."""
    order = sorted(range(len(slots)), key=lambda i: (PRIORITY[slots[i][0]], i))
    chosen: list[int] = []
    reasons: dict[int, str] = {}
    for i in order:
        col = jac[:, i]
        if float(np.max(np.abs(col), initial=0.0)) < MIN_SENSITIVITY:
            reasons[i] = "no run is sensitive to it"
            continue
        if len(chosen) >= runs:
            reasons[i] = (
                f"{runs} run{'s' if runs != 1 else ''} can move at most {runs} parameter{'s' if runs != 1 else ''}"
            )
            continue
        left, partner = _independent_share(jac[:, chosen], col)
        if left < MIN_INDEPENDENCE:
            reasons[i] = f"these runs move it together with {labels[chosen[partner]]}"
            continue
        chosen.append(i)
    return Choice(tuple(sorted(chosen)), reasons)


def _independent_share(basis: np.ndarray, col: np.ndarray) -> tuple[float, int]:
    """The share of `col` outside the span of `basis`'s columns, and the column it is most aligned with."""
    norm = float(np.linalg.norm(col))
    if basis.shape[1] == 0:
        return 1.0, -1
    coef, *_ = np.linalg.lstsq(basis, col, rcond=None)
    left = float(np.linalg.norm(col - basis @ coef)) / norm
    align = np.abs(basis.T @ col) / (np.linalg.norm(basis, axis=0) * norm + 1e-300)
    return left, int(np.argmax(align))
