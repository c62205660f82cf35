"""One concept, one home: the memory breakdown, the step-time model, the gradient traffic and the launch
worker's rank layout agree, plan by plan, on layers per stage and parameters per rank (issue 10)."""

from __future__ import annotations

import pytest
from helpers import make_engine, make_hw
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.cost.compute import stage_shapes
from planner.cost.memory import memory_report
from planner.cost.params import plan_params, rank_params
from planner.cost.stages import layer_layout, plan_layout
from planner.cost.states import state_bytes_per_param
from planner.cost.traffic import dp_traffic
from planner.engine import plan_problems
from planner.io.catalog import load_model
from planner.launch.layout import layout as rank_layouts
from planner.plan import Plan

ENGINES = [make_engine(name) for name in ("megatron", "torchtitan", "deepspeed", "llm-foundry", "planner")]
MODELS = ["llama3-405b", "gpt3-175b", "mixtral-8x7b", "llama3-8b", "tiny"]


@st.composite
def plans(draw: st.DrawFn) -> tuple[str, Plan]:
    name = draw(st.sampled_from(MODELS))
    model = load_model(name)
    pp = draw(st.sampled_from([1, 2, 3, 4, 8, 16]).filter(lambda p: p <= model.num_layers))
    vpp = draw(st.sampled_from([1, 2, 3]).filter(lambda v: (pp > 1 and pp * v <= model.num_layers) or v == 1))
    tp = draw(st.sampled_from([1, 2, 4, 8]).filter(lambda t: model.num_attention_heads % t == 0))
    dp = draw(st.sampled_from([1, 2, 4]))
    ep = draw(st.sampled_from([1, 2]).filter(lambda e: (model.moe is not None and dp % e == 0) or e == 1))
    plan = Plan(
        tp=tp,
        pp=pp,
        vpp=vpp,
        dp=dp,
        ep=ep,
        zero=draw(st.sampled_from([0, 1, 2, 3])),
        global_batch=dp * pp * 4,
        seq_len=64,
        schedule="interleaved" if vpp > 1 else "1f1b",
    )
    return name, plan


@settings(max_examples=60, deadline=None)
@given(case=plans(), engine=st.sampled_from(ENGINES))
def test_memory_compute_traffic_and_worker_agree(case, engine):
    name, plan = case
    model = load_model(name)
    if plan_problems(model, plan, engine):
        return
    layout = plan_layout(model, plan, engine)
    report = memory_report(model, make_hw(), plan, engine)
    shapes = stage_shapes(model, plan.pp, plan.vpp, engine.rules.pipeline_split)
    worker = {r.pp: sum(len(ls) for ls in r.layers) for r in rank_layouts(plan, model.num_layers)}
    per = state_bytes_per_param(plan.precision, engine, engine.zero_stage(plan))
    for stage in report.stages:
        r = stage.stage
        layers = layout.num_rank_layers(r)
        # layers per stage: memory, compute, the worker's rank layout
        assert stage.layers == layers == shapes[r].layers
        if engine.name == "planner":  # the launch worker builds the planner engine's layout
            assert layers == worker[r]
        assert (stage.first, stage.last) == (shapes[r].first, shapes[r].last)
        # parameters per rank: the gradient traffic covers exactly the parameters memory holds
        params = plan_params(model, plan, engine, r)
        traffic = dp_traffic(model, make_hw(), plan, engine, stage=r)
        assert traffic.reduce_bytes == pytest.approx(params.total * per.gradients, rel=1e-12)
        zero = engine.zero_stage(plan)
        if not zero.shards and zero.gathered_weights == "none":  # nothing sharded: weights are params x bytes
            assert stage.breakdown.weights_bytes == pytest.approx(params.total * per.weights, rel=1e-12)


@pytest.mark.parametrize("pp,vpp", [(1, 1), (2, 1), (4, 1), (3, 2), (16, 1)])
def test_every_layer_embedding_and_loss_on_exactly_one_chunk(pp, vpp):
    model = load_model("llama3-405b")  # 126 layers: uneven over 16 stages
    layout = layer_layout(model.num_layers, pp, vpp)
    layers = [i for c in layout.chunks for i in c.layers]
    assert layers == list(range(model.num_layers))
    assert sum(c.embedding for c in layout.chunks) == 1 and layout.chunks[0].embedding
    assert sum(c.loss for c in layout.chunks) == 1 and layout.chunks[-1].loss
    total = sum(rank_params(model, layout, tp=1, ep=1, rank=r).total for r in range(pp))
    copies = model.vocab_size * model.hidden_size if (model.tied_embeddings and pp > 1) else 0
    assert total == pytest.approx(model.num_params + copies, rel=1e-12)
