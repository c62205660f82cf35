"""`--explain FIELD=VALUE`: why were plans with tp=16 (or zero=3, ...) rejected, or why did they lose?"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from planner.errors import PlannerError
from planner.explore.results import SearchResult
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
    try:  # the value must be one a plan can have: validate it as that field
        Plan.model_validate({k: val})
    except ValidationError as e:
        raise PlannerError(f"--explain {text!r}: {v!r} is not a {k} value ({e.errors()[0]['msg']})") from None
    return k, val


@dataclass(frozen=True)
class Explanation:
    """Why plans with field == value lost: the rejected ones by reason (with an example detail each), and how
    many of the ranked plans have it."""

    rejected: int
    by_reason: Counter
    examples: dict[str, str]
    in_top: int
    outside: str | None = None  # why no candidate had it (outside the search space), and the fix

    def as_json(self, field_name: str, value: Any) -> dict[str, Any]:
        return {
            "field": field_name,
            "value": value,
            "rejected": self.rejected,
            "by_reason": dict(self.by_reason.most_common()),
            "examples": self.examples,
            "in_top": self.in_top,
            "outside_search_space": self.outside,
        }


def explain(result: SearchResult, field_name: str, value: Any) -> Explanation:
    """Needs a search run with keep_rejections=True."""
    counts: Counter = Counter()
    details: dict[str, str] = {}
    for r in result.rejections:
        if getattr(r.plan, field_name) == value:
            counts[r.reason] += r.plans
            details.setdefault(r.reason, r.detail)
    in_top = sum(1 for r in result.top if getattr(r.plan, field_name) == value)
    total = sum(counts.values())
    outside = None if total or in_top or result.considered(field_name, value) else _outside(result, field_name, value)
    return Explanation(total, counts, details, in_top, outside)


def _outside(result: SearchResult, field_name: str, value: Any) -> str:
    """Why no candidate had field == value, and what would give one: a degree that does not divide the GPUs cannot
    make them up at all; otherwise the option that widens the space."""
    gpus = result.space.gpus
    if field_name in ("dp", "tp", "pp", "cp", "ep") and isinstance(value, int) and gpus % value:
        return (
            f"{field_name}={value} cannot make up {gpus} GPUs: the parallel degrees multiply to the GPU count "
            f"(give a {field_name} that divides {gpus}, or a GPU count that {value} divides)"
        )
    flag = f"--{field_name.replace('_', '-')}"
    limit = f", or raise --max-{field_name}" if field_name in ("tp", "pp", "cp", "ep", "vpp") else ""
    listed = ", or add it to the comma list" if field_name in ("zero", "recompute", "precision", "schedule") else ""
    return f"it is outside the search space (fix it with {flag} {value}{listed}{limit})"
