"""The worker builds, for each pipeline rank, exactly the parameters the cost model counts for it
(cost.params.rank_params over the one layout, cost.stages): built on the meta device, no memory used."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from planner.cost.params import rank_params  # noqa: E402
from planner.io.catalog import load_model  # noqa: E402
from planner.launch.layout import plan_layout  # noqa: E402
from planner.launch.model import GPT  # noqa: E402
from planner.plan import Plan  # noqa: E402


@pytest.mark.parametrize(
    "name,pp,vpp",
    [("tiny", 1, 1), ("tiny", 2, 1), ("tiny", 2, 2), ("llama3-8b", 3, 1), ("gpt3-1.3b", 4, 2), ("llama3-405b", 16, 1)],
)
def test_worker_stage_parameters_equal_the_cost_model(name, pp, vpp):
    model = load_model(name)
    plan = Plan(pp=pp, vpp=vpp, global_batch=pp, schedule="interleaved" if vpp > 1 else "1f1b")
    layout = plan_layout(plan, model.num_layers)
    for rank in range(pp):
        built = 0
        for chunk in layout.rank_chunks(rank):
            tied = model.tied_embeddings and pp == 1  # the worker unties across stages, as Megatron keeps a copy
            with torch.device("meta"):
                part = GPT(model, tied=tied).keep_only(tuple(chunk.layers), first=chunk.embedding, last=chunk.loss)
            built += sum(p.numel() for p in part.parameters())
        assert built == rank_params(model, layout, tp=1, ep=1, rank=rank).total, (name, pp, vpp, rank)
