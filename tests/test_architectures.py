"""Which model architectures each engine trains (engine/architectures.py, rules.model_features): a model with a
feature the engine does not implement is refused by name, in single-plan commands and in the search."""

from __future__ import annotations

import pytest

from planner.engine import plan_problems
from planner.engine.architectures import MODEL_FEATURES, architecture_problems, model_features
from planner.explore.pipeline import search, search_engines
from planner.explore.space import Space
from planner.io.catalog import list_engines, list_models, load_engine, load_hardware, load_model
from planner.launch.worker_support import architecture_limits
from planner.plan import Plan

H100 = load_hardware("h100-sxm")


@pytest.mark.parametrize(
    ("model", "feature"),
    [("nemotron-h-8b", "mamba"), ("gemma3-27b", "sandwich_norm"), ("deepseek-v3", "mtp")],
)
def test_torchtitan_refuses_what_its_models_do_not_have(model, feature):
    """torchtitan v0.2.2's models (llama3, llama4, deepseek_v3, qwen3, gpt_oss) have no Mamba-2 layers, no Gemma
    sandwich norms and no multi-token prediction."""
    spec, titan = load_model(model), load_engine("torchtitan")
    assert feature in model_features(spec)
    (problem,) = architecture_problems(titan.name, titan.rules.model_features, spec)
    assert problem.reason.startswith("torchtitan has no") and model in problem.detail
    assert problem in plan_problems(spec, Plan(dp=8, global_batch=8, seq_len=4096), titan, 8, H100)


@pytest.mark.parametrize("model", ["gpt-oss-20b", "qwen3-30b-a3b", "llama4-maverick", "kimi-k2", "llama3-8b"])
def test_torchtitan_runs_its_own_architectures(model):
    titan = load_engine("torchtitan")
    assert not architecture_problems(titan.name, titan.rules.model_features, load_model(model), titan.rules.model_files)


def test_torchtitan_refuses_features_that_none_of_its_model_files_has_together():
    """Llama 4 Scout has chunked attention and q/k norms: torchtitan v0.2.2 has the first in llama4 only and the
    second in qwen3 only (llama4/model/model.py has no q/k norm), so it would train another model. Each feature
    alone is one torchtitan has, so the union of its features (model_features) let it through."""
    spec, titan = load_model("llama4-scout"), load_engine("torchtitan")
    assert {"chunked_attention", "qk_norm"} <= set(model_features(spec))
    assert not architecture_problems(titan.name, titan.rules.model_features, spec)  # the union alone
    (problem,) = architecture_problems(titan.name, titan.rules.model_features, spec, titan.rules.model_files)
    assert problem.reason == "torchtitan has no model with moe + chunked_attention + qk_norm"
    assert "llama4 irope: mixture-of-experts layers, chunked attention;" in problem.detail
    plan = Plan(dp=8, ep=8, global_batch=8, seq_len=4096)
    assert problem in plan_problems(spec, plan, titan, 8, H100)


@pytest.mark.parametrize(
    ("model", "dim", "file"),
    [("qwen3-8b", "pp", "qwen3"), ("qwen3-30b-a3b", "pp", "qwen3"), ("gpt-oss-20b", "pp", "gpt_oss"),
     ("gpt-oss-20b", "cp", "gpt_oss"), ("kimi-k2", "cp", "deepseek_v3"), ("llama4-maverick", "cp", "llama4 irope")],
)  # fmt: skip
def test_torchtitan_refuses_the_dimensions_its_model_file_does_not_run(model, dim, file):
    """torchtitan v0.2.2: qwen3 and gpt_oss have no pipelining (get_train_spec pipelining_fn=None), gpt_oss raises
    on CP, and the flex-attention flavors (deepseek_v3, llama4 irope) raise on CP (model/args.py)."""
    spec, titan = load_model(model), load_engine("torchtitan")
    plan = Plan(dp=4, global_batch=64, seq_len=4096, **{dim: 2})
    reason = f"torchtitan's {file} has no {dim}"
    assert reason in {r.reason for r in plan_problems(spec, plan, titan, 8, H100)}
    assert reason not in {r.reason for r in plan_problems(spec, plan, load_engine("megatron"), 8, H100)}


@pytest.mark.parametrize("dim", ["pp", "cp"])
def test_torchtitan_runs_llama3_with_pipelining_and_context_parallelism(dim):
    plan = Plan(dp=4, global_batch=64, seq_len=4096, **{dim: 2})
    reasons = {r.reason for r in plan_problems(load_model("llama3-8b"), plan, load_engine("torchtitan"), 8, H100)}
    assert not any("torchtitan's" in r for r in reasons), reasons


def test_a_model_file_with_a_feature_the_engine_does_not_list_is_refused():
    titan = load_engine("torchtitan")
    rules = titan.rules.model_dump()
    rules["model_files"] = [*rules["model_files"], {"name": "nemotron", "features": ["mamba"]}]
    with pytest.raises(ValueError, match=r"model_files: \['mamba'\] are not in model_features"):
        type(titan.rules).model_validate(rules)


def test_the_planner_engine_refuses_exactly_what_the_launch_worker_cannot_build():
    """engine_profiles/planner.yaml (the search's view of the worker) and launch/worker_support.py (the worker's
    pre-flight) agree on every catalog model: the worker's limits plus its missing MoE."""
    engine = load_engine("planner")
    for name in list_models():
        spec = load_model(name)
        refused = bool(architecture_problems(engine.name, engine.rules.model_features, spec))
        assert refused == bool(architecture_limits(spec) or spec.moe is not None), name


def test_the_engines_that_take_any_module_refuse_no_catalog_model_and_megatron_only_alibi():
    for engine in ("deepspeed", "llm-foundry"):
        e = load_engine(engine)
        assert e.rules.model_features is None
        assert all(not architecture_problems(e.name, None, load_model(m)) for m in list_models())
    # Megatron-Core's --position-embedding-type has no ALiBi (arguments.py @d98e8a64): BLOOM's positions, which the
    # catalog once gave as RoPE ('the closest option of the schema') and Megatron priced and emitted as RoPE
    megatron = load_engine("megatron")
    refused = {m for m in list_models() if architecture_problems("megatron", megatron.rules.model_features,
                                                                 load_model(m))}  # fmt: skip
    assert refused == {"bloom-176b"} and load_model("bloom-176b").position_embedding == "alibi"
    assert set(megatron.rules.model_features or ()) == set(MODEL_FEATURES) - {"alibi"}


def test_the_search_counts_every_candidate_of_an_engine_that_cannot_train_the_model():
    spec = load_model("nemotron-h-8b")
    space = Space(gpus=8, global_batch=64, seq_len=4096)
    res = search(spec, H100, space, load_engine("torchtitan"))
    assert not res.top and res.rejected == {"torchtitan has no Mamba-2 / hybrid layer patterns": res.evaluated}
    engines = [load_engine(e) for e in list_engines()]
    both = search_engines(load_model("gpt-oss-20b"), H100, space, engines, jobs=1)
    ranked = {r.estimate.engine.name for r in both.top}
    assert ranked and ranked <= {"megatron", "torchtitan", "deepspeed", "llm-foundry"}
    assert both.rejected["planner has no mixture-of-experts layers"] > 0
