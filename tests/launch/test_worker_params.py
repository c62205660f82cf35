"""The worker builds, for each pipeline rank, exactly the parameters the cost model counts for it
(cost.params.rank_params over the one layout, cost.stages): built on the meta device, no memory used."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from planner.cost.params import rank_params  # noqa: E402
from planner.io.catalog import load_hardware, load_model  # noqa: E402
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


TIED = {
    "name": "tiny-tied", "num_layers": 1, "hidden_size": 64, "num_attention_heads": 4, "ffn_hidden_size": 128,
    "mlp": "swiglu", "vocab_size": 8192, "max_seq_len": 64, "tied_embeddings": True, "position_embedding": "rope",
    "norm": "rmsnorm", "rope_theta": 10000.0,
}  # fmt: skip


@pytest.mark.timeout(200)
def test_a_tied_model_stays_tied_when_the_worker_allocates_it(tmp_path):
    """The worker builds on the meta device and allocates with to_empty, which gave the output projection its own
    vocab x hidden matrix (nn.Module._apply makes a new Parameter per module): a tied model trained untied, with
    up to twice the weights, gradients and optimizer state the host-memory check had priced."""
    import yaml

    from planner.specs import ModelSpec
    from tests.launch.conftest import torchrun

    path = tmp_path / "tied.yaml"
    path.write_text(yaml.safe_dump(TIED))
    args = ["--model", str(path), "--global-batch", "2", "--seq-len", "32", "--precision", "fp32",
            "--micro-batch", "2", "--steps", "2", "--warmup", "0"]  # fmt: skip
    run = torchrun(1, args, tmp_path / "run", timeout_s=180)
    assert run.rc == 0, run.output[-3000:]
    measured = run.profile["memory_per_rank"][0]["params_bytes"]
    assert measured == 4 * ModelSpec(**TIED).num_params  # fp32, the embedding counted once


@pytest.mark.timeout(200)
def test_the_profile_of_a_tp2_run_names_the_untied_model_the_worker_trained(tmp_path):
    """At tp > 1 the worker trains a tied model untied, and its profile had recorded the tied spec: `planner
    calibrate` on that profile (and `estimate --engine planner`) priced one vocab x hidden matrix fewer than ran."""
    import yaml

    from planner.fit.observations import observation_from_profile
    from planner.specs import ModelSpec
    from tests.launch.conftest import torchrun

    path = tmp_path / "tied.yaml"
    path.write_text(yaml.safe_dump(TIED))
    args = ["--model", str(path), "--tp", "2", "--global-batch", "2", "--seq-len", "32", "--precision", "fp32",
            "--micro-batch", "2", "--steps", "1", "--warmup", "0"]  # fmt: skip
    run = torchrun(2, args, tmp_path / "run", timeout_s=180)
    assert run.rc == 0, run.output[-3000:]
    tied = ModelSpec(**TIED)
    ran = observation_from_profile(run.profile, load_hardware("cpu"), "profile.json").model
    assert not ran.tied_embeddings and ran.num_params == tied.num_params + tied.vocab_size * tied.hidden_size
    # what the two ranks hold: the untied model's matrices split in two, its RMSNorm weights on each
    held = sum(r["params_bytes"] for r in run.profile["memory_per_rank"]) / 4
    assert held == ran.num_params + (2 * tied.num_layers + 1) * tied.hidden_size


def test_the_host_check_prices_a_tied_model_untied_where_the_worker_unties_it():
    """At tp > 1 the worker trains a tied model untied (trainer.py _part); the host-memory check and the prediction
    price the model it builds, one vocab x hidden matrix more than the tied one Megatron would run."""
    from planner.io.catalog import load_engine
    from planner.launch.host_memory import host_need
    from planner.launch.preflight import Environment
    from planner.launch.spec import as_built

    gpt, env, engine = load_model("gpt3-125m"), Environment("cpu", 0, "cpu"), load_engine("planner")
    tp2, one = Plan(tp=2, global_batch=1, seq_len=512), Plan(global_batch=1, seq_len=512)
    assert as_built(gpt, one) is gpt and not as_built(gpt, tp2).tied_embeddings
    assert as_built(gpt, tp2).num_params - gpt.num_params == gpt.vocab_size * gpt.hidden_size
    untied = host_need(as_built(gpt, tp2), tp2, engine, env, nproc_per_node=2).tensor_bytes_per_process
    assert untied > host_need(gpt, tp2, engine, env, nproc_per_node=2).tensor_bytes_per_process
