"""Searches side by side (explore/fanout.py): the engines of `--engine all` on forked workers give the result a
search in turn gives, in the same order, with the same counts; errors come back where the sequential loop has them."""

import os
import sys

import pytest

from planner.api.resolve import resolve_engines
from planner.api.searching import SEARCH_OPTIONS, make_space
from planner.errors import PlannerError
from planner.explore.fanout import JOBS_ENV, fan_out, workers
from planner.explore.pipeline import _heaviest_first, search_engines
from planner.explore.results import SearchResult
from planner.explore.space import structures
from planner.io.catalog import load_hardware, load_model

FORKS = sys.platform.startswith("linux")
pytestmark = pytest.mark.timeout(120)


def _square_or_refuse(n: int) -> int:
    if n == 3:
        raise PlannerError("three is refused")
    return n * n


def _crash(n: int) -> int:
    raise ValueError(f"not a planner error: {n}")


@pytest.mark.skipif(not FORKS, reason="workers are forked on Linux only")
def test_results_come_back_in_the_order_asked_with_planner_errors_in_place() -> None:
    out = fan_out(_square_or_refuse, [5, 1, 3, 4], processes=2)
    assert out[:2] == [25, 1] and out[3] == 16
    assert isinstance(out[2], PlannerError) and str(out[2]) == "three is refused"
    assert out[:2] + out[3:] == [r for r in fan_out(_square_or_refuse, [5, 1, 3, 4], processes=1) if isinstance(r, int)]


@pytest.mark.skipif(not FORKS, reason="workers are forked on Linux only")
def test_an_error_that_is_not_the_users_is_raised() -> None:
    with pytest.raises(ValueError, match="not a planner error"):
        fan_out(_crash, [1, 2], processes=2)


def _die_in_a_worker(n: int) -> int:
    if os.getpid() != PARENT:
        os._exit(1)  # as the kernel's OOM killer would leave it
    return n + 1


PARENT = os.getpid()


@pytest.mark.skipif(not FORKS, reason="workers are forked on Linux only")
def test_a_killed_worker_leaves_the_work_to_this_process() -> None:
    assert fan_out(_die_in_a_worker, [1, 2, 3], processes=2) == [2, 3, 4]


def test_progress_counts_the_items_finished() -> None:
    seen: list[tuple[int, int]] = []
    fan_out(_square_or_refuse, [1, 2, 4], processes=2 if FORKS else 1, progress=lambda d, t: seen.append((d, t)))
    if FORKS:
        assert seen == [(1, 3), (2, 3), (3, 3)]


def test_workers_never_exceed_the_tasks_and_read_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(JOBS_ENV, "8")
    assert workers(3) == (3 if FORKS else 1)
    assert workers(3, jobs=1) == 1
    monkeypatch.setenv(JOBS_ENV, "1")
    assert workers(6) == 1
    monkeypatch.delenv(JOBS_ENV)
    assert 1 <= workers(6) <= max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    for bad in ("0", "two", "-1", ""):
        monkeypatch.setenv(JOBS_ENV, bad)
        with pytest.raises(PlannerError, match=f"{JOBS_ENV}=.* is not valid; give a whole number"):
            workers(6)


def _fingerprint(res: SearchResult) -> tuple:
    return (
        [(r.estimate.engine.name, r.plan, r.time.step_s, r.estimate.memory.total_bytes) for r in res.top],
        res.evaluated,
        dict(res.rejected),
        dict(res.pruned),
        res.timed,
        res.examples,
        [e.name for e in res.engines],
        res.engine.name,
        len(res.structures),
    )


@pytest.mark.skipif(not FORKS, reason="workers are forked on Linux only")
def test_engines_side_by_side_rank_what_a_search_in_turn_ranks() -> None:
    model, hw = load_model("mixtral-8x7b"), load_hardware("h100-sxm")
    space = make_space(model, 64, dict.fromkeys(SEARCH_OPTIONS))
    engines = resolve_engines("all", {})
    apart = search_engines(model, hw, space, engines, jobs=2, top=5)
    in_turn = search_engines(model, hw, space, engines, jobs=1, top=5)
    assert _fingerprint(apart) == _fingerprint(in_turn)
    assert len(apart.top) == 5 and len(apart.engines) == len(engines) > 2


def test_when_every_engine_refuses_the_last_ones_reason_is_raised() -> None:
    model, hw = load_model("llama3-8b"), load_hardware("h100-sxm")
    space = make_space(model, 8, {**dict.fromkeys(SEARCH_OPTIONS), "tp": 16})  # tp 16 cannot make up 8 GPUs
    engines = resolve_engines("megatron,torchtitan", {})
    with pytest.raises(PlannerError, match="no candidate plans"):
        search_engines(model, hw, space, engines, jobs=2)


def test_the_heaviest_engine_starts_first() -> None:
    """An engine offering every parallelism has more plans to screen than one offering data parallelism only."""
    model, hw = load_model("mixtral-8x7b"), load_hardware("h100-sxm")
    space = make_space(model, 256, dict.fromkeys(SEARCH_OPTIONS))
    engines = resolve_engines("llm-foundry,megatron", {})
    assert [engines[i].name for i in _heaviest_first(engines, structures(model, hw, space), space)] == [
        "megatron",
        "llm-foundry",
    ]


def _workers_here(_n: int) -> int:
    return workers(8, jobs=8)


@pytest.mark.skipif(not FORKS, reason="workers are forked on Linux only")
def test_a_worker_runs_its_own_work_in_turn() -> None:
    """No worker forks workers of its own (`planner scale --engine all`): the CPUs are the first workers'."""
    assert fan_out(_workers_here, [1, 2], processes=2) == [1, 1]
    assert workers(8, jobs=8) == 8


def test_scale_side_by_side_is_scale_in_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    from planner.api.scaling import scale

    args = {"gpus": "1024..16384", "tokens": 15e12, "global_batch": "auto"}
    monkeypatch.setenv(JOBS_ENV, "2")
    apart = scale("llama3-70b", **args).as_json()
    monkeypatch.setenv(JOBS_ENV, "1")
    assert apart == scale("llama3-70b", **args).as_json()
    assert [p["gpus"] for p in apart["points"]] == [1024, 2048, 4096, 8192, 16384]
