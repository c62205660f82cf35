"""`--explain FIELD=VALUE`: why were plans with tp=16 (or zero=3, ...) rejected, or why did they lose?"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from planner.errors import PlannerError
from planner.explore.results import Ranked, SearchResult
from planner.plan import Plan


def parse_explain(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise PlannerError(f"--explain {text!r}: expected FIELD=VALUE, e.g. tp=16 or zero=3")
    k, v = (s.strip() for s in text.split("=", 1))
    k = k.replace("-", "_")
    if k not in Plan.model_fields:
        raise PlannerError(f"--explain {text!r}: unknown field {k!r}; valid: {', '.join(Plan.model_fields)}")
    val: Any = v
    if v.lower() in ("true", "false"):
        val = v.lower() == "true"
    elif v.isdigit():
        val = int(v)
    try:  # the value must be one a plan can have: validated as that field, and compared as it reads (sp=no: False)
        return k, getattr(Plan.model_validate({k: val}), k)
    except ValidationError as e:
        raise PlannerError(f"--explain {text!r}: {v!r} is not a {k} value ({e.errors()[0]['msg']})") from None


@dataclass(frozen=True)
class Explanation:
    """Why plans with field == value lost, from a search pinned to that value (the same options otherwise): its
    rejections by reason (with an example detail each) and its best valid plan against the winner; how many of
    the ranked plans have it; and why the search did not try it, where it did not."""

    rejected: int
    by_reason: Counter
    examples: dict[str, str]
    in_top: int
    outside: str | None = None  # why no candidate had it (outside the search space), and the fix
    valid: int = 0
    best: Ranked | None = None  # the pinned search's best plan
    winner_tokens_per_s: float | None = None
    pinned_error: str | None = None  # the pinned search's refusal (no degrees make up the count, ...)

    @property
    def best_share(self) -> float | None:
        """The best such plan's tokens/s over the winner's (above 1: the search's space left out a faster plan)."""
        if self.best is None or not self.winner_tokens_per_s:
            return None
        return self.best.time.tokens_per_s / self.winner_tokens_per_s

    def as_json(self, field_name: str, value: Any) -> dict[str, Any]:
        best = self.best
        return {
            "field": field_name,
            "value": value,
            "rejected": self.rejected,
            "valid": self.valid,
            "by_reason": dict(self.by_reason.most_common()),
            "examples": self.examples,
            "in_top": self.in_top,
            "best": None
            if best is None
            else {
                "plan": best.plan.document(best.estimate.engine.name),
                "engine": best.estimate.engine.name,
                "tokens_per_s": best.time.tokens_per_s,
            },
            "best_vs_winner": self.best_share,
            "outside_search_space": self.outside,
            "pinned_refused": self.pinned_error,
        }


def explain(
    result: SearchResult, field_name: str, value: Any, pinned: SearchResult | None, pinned_error: str | None = None
) -> Explanation:
    """`pinned`: the same search with field == value fixed (cli/search.py _explained), None where it was refused
    (`pinned_error` says why)."""
    in_top = sum(1 for r in result.top if getattr(r.plan, field_name) == value)
    runs = pinned is not None and pinned.valid > 0
    outside = None if result.considered(field_name, value) else _outside(result, field_name, value, runs=runs)
    winner = result.best.time.tokens_per_s if result.best is not None else None
    if pinned is None:
        return Explanation(0, Counter(), {}, in_top, outside, winner_tokens_per_s=winner, pinned_error=pinned_error)
    return Explanation(
        sum(pinned.rejected.values()), Counter(pinned.rejected),
        {k: v for k, v in pinned.examples.items() if pinned.rejected.get(k)}, in_top, outside,  # of the counted
        pinned.valid, pinned.best, winner,
    )  # fmt: skip


def _outside(result: SearchResult, field_name: str, value: Any, *, runs: bool) -> str:
    """Why no candidate had field == value, and what would give one: a degree that does not divide the GPUs cannot
    make them up at all; otherwise the option that widens the space, where the pinned search found a valid plan
    with it (`runs`): an option whose every plan is then refused is no fix (review: --schedule dualpipev)."""
    gpus = result.space.gpus
    if field_name in ("dp", "tp", "pp", "cp", "ep") and isinstance(value, int) and gpus % value:
        return (
            f"{field_name}={value} cannot make up {gpus} GPUs: the parallel degrees multiply to the GPU count "
            f"(give a {field_name} that divides {gpus}, or a GPU count that {value} divides)"
        )
    flag = f"--{'no-' if value is False else ''}{field_name.replace('_', '-')}"  # a switch: --sp / --no-sp
    limit = f", or raise --max-{field_name}" if field_name in ("tp", "pp", "cp", "ep", "vpp") else ""
    listed = ", or add it to the comma list" if field_name in ("zero", "recompute", "precision", "schedule") else ""
    given = flag if isinstance(value, bool) else f"{flag} {value}"
    if not runs:
        return f"it is outside the search space, and {given} would not help: no plan with it is valid here"
    return f"it is outside the search space (fix it with {given}{listed}{limit})"
