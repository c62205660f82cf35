"""What a search says of its best plan beneath the ranking, each in one line: the settings it was given that change
nothing for that plan (idle.py), and where no file of its engine's --emit targets runs it."""

from __future__ import annotations

from planner.api.idle import changing_nothing
from planner.explore.results import SearchResult
from planner.launch.emit.refusal import engine_refusals


def best_plan_notes(result: SearchResult) -> list[str]:
    """The notes on the search's best plan ([] with none ranked)."""
    if not result.top:
        return []
    best = result.top[0]
    eng = best.estimate.engine
    said = [f"for the best plan, {s}" for s in changing_nothing(result.model, best.plan, eng)]
    unwritten = no_file_runs(engine_refusals(best.plan, result.model, eng, result.hardware), eng.name)
    return said + ([unwritten] if unwritten else [])


def no_file_runs(refused: dict[str, str | None], engine_name: str) -> str | None:
    """Where every --emit target of the engine refuses the plan (a model no configuration of it names, a layout its
    files cannot say): the first one's reason, the others by name; None where one writes it or there are none."""
    if not refused or any(why is None for why in refused.values()):
        return None
    first, *others = refused
    also = f"; {' and '.join(others)} {'refuse' if len(others) > 1 else 'refuses'} it too" if others else ""
    return (
        f"no --emit file runs the best plan on {engine_name} ({refused[first]}{also}); it is priced as "
        f"{engine_name}'s own layers would run it, given a model definition of yours"
    )
