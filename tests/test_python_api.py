"""The Python API (`from planner import estimate, memory, search`) at its edge: bad input raises one PlannerError
with the line the command would print (the audit found mappings with misspelt fields and out-of-range run options
priced without a word, and TypeErrors and AttributeErrors for the wrong kinds), and a search plan's mapping prices as
the plan it ranked, engine included."""

from __future__ import annotations

import json

import pytest
from helpers import run_planner

from planner import estimate, search
from planner.errors import PlannerError


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"plan": {"tpp": 8}}, "unknown field(s) tpp"),
        ({"plan": {"tp": 2, "recompte": "full"}}, "unknown field(s) recompte"),
        ({"plan": [1, 2]}, "give a Plan, a mapping of plan fields"),
        ({"mtbf_hours": -3}, "--mtbf-hours -3"),
        ({"mtbf_hours": float("nan")}, "--mtbf-hours nan"),
        ({"tokens": -1}, "--tokens -1"),
        ({"tokens": "1e12"}, "--tokens '1e12'"),
        ({"mtbf_hours": 100, "checkpoint_bandwidth": -1}, "--checkpoint-bandwidth -1"),
        ({"gpus": "8"}, "gpus='8': give a whole number"),
    ],
)
def test_estimate_refuses_what_the_command_refuses(kwargs, said):
    with pytest.raises(PlannerError) as caught:
        estimate("llama3-8b", **{"gpus": 8, **kwargs})
    assert said in str(caught.value)


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [({"gpus": [32, 64]}, "gpus=[32, 64]"), ({"gpus": 8, "engine": 3}, "engine=3: give an engine name")],
)
def test_search_refuses_the_wrong_kinds_by_name(kwargs, said):
    with pytest.raises(PlannerError, match=said.replace("[", r"\[").replace("]", r"\]")):
        search("llama3-8b", **kwargs)


@pytest.mark.parametrize(
    ("model", "kwargs"),
    [
        ("llama3.1-405b", {"gpus": 1024, "hardware": "mi355x", "precision": "fp8-current"}),
        ("nemotron-h-56b", {"gpus": 64, "engine": "torchtitan"}),
    ],
)
def test_a_search_no_candidate_of_which_passes_the_rules_is_refused_as_the_command_refuses_it(model, kwargs):
    """The command exits 2 with why; the API returned an empty result without a word (audit)."""
    args = ["search", "-m", model, *(a for k, v in kwargs.items() for a in (f"--{k}", str(v)))]
    code, _out, err = run_planner(*args)
    assert code == 2
    with pytest.raises(PlannerError) as caught:
        search(model, **kwargs)
    assert str(caught.value).startswith("no plan is valid:") and str(caught.value) in err


def test_search_takes_a_range_and_auto_as_the_command_does():
    assert search("llama3-8b", gpus="32..64", top=1).gpus in (32, 64)
    assert search("llama3-8b", gpus=64, global_batch="auto", top=1).global_batch >= 1


def test_a_search_plans_mapping_prices_on_the_engine_that_ranked_it():
    best = search("llama3-70b", gpus=64, engine="torchtitan", top=1).plans[0]
    assert best.plan["engine"] == "torchtitan"
    alone = estimate("llama3-70b", gpus=64, plan=best.plan)  # no engine= given: the mapping's
    assert alone.engine == "torchtitan" and alone.tokens_per_s == pytest.approx(best.tokens_per_s)


def test_scale_is_a_function_of_the_api_too():
    """`from planner import scale`: the curve `planner scale --json` prints."""
    from planner import scale

    curve = scale("llama3-8b", gpus="64,128", tokens=1e12)
    code, out, err = run_planner("scale", "-m", "llama3-8b", "--gpus", "64,128", "--tokens", "1e12", "--json")
    assert code == 0, err
    assert curve.as_json() == json.loads(out)


def test_memory_gives_the_interval_of_its_memory_as_estimate_does():
    """`memory()` and `memory --json` carried no interval while estimate's did: one plan, one interval of its memory,
    the same bytes from both, and memory's around its own peak with no throughput beside it."""
    from planner import memory

    plan = {"tp": 8, "pp": 4}
    mem = memory("llama3-70b", gpus=64, hardware="h100-sxm", plan=plan).as_json()
    est = estimate("llama3-70b", gpus=64, hardware="h100-sxm", plan=plan).as_json()
    lo, hi = mem["uncertainty"]["peak_memory_interval"]
    assert lo < mem["total_bytes"] < hi and mem["uncertainty"]["tokens_per_s_interval"] is None
    assert [lo, hi] == est["uncertainty"]["peak_memory_interval"] and mem["may_not_fit"] is est["may_not_fit"] is False
