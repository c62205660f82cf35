"""Layout-independent initialisation: a stage built on meta and filled by name equals the 1-process model."""

from __future__ import annotations

import pytest
import torch

from planner.io.catalog import load_model
from planner.launch.model import GPT, canonical_name, init_weights
from planner.specs import ModelSpec


def test_meta_stage_filled_by_name_equals_the_full_model(tiny):
    torch.manual_seed(123)  # the global RNG must not matter
    full = GPT(tiny)
    full.reset_parameters(seed=7)
    with torch.device("meta"):
        stage = GPT(tiny).keep_only((2, 3), first=False, last=True)
    assert all(p.is_meta for p in stage.parameters())
    stage.to_empty(device="cpu")
    init_weights(stage, seed=7)
    reference = dict(full.named_parameters())
    names = [n for n, _ in stage.named_parameters()]
    assert names and all(n.startswith(("layers.2.", "layers.3.", "norm.", "output.")) for n in names)
    for name, p in stage.named_parameters():
        assert torch.equal(p, reference[name]), name


def test_initial_values_depend_on_seed_and_name_only(tiny):
    a, b, c = GPT(tiny), GPT(tiny), GPT(tiny)
    a.reset_parameters(seed=1)
    b.reset_parameters(seed=1)
    c.reset_parameters(seed=2)
    pa, pc = dict(a.named_parameters()), dict(c.named_parameters())
    for name, p in b.named_parameters():
        assert torch.equal(p, pa[name])
    w = "layers.0.attention.wq.weight"
    assert not torch.equal(pa[w], pc[w])
    assert not torch.equal(pa[w], pa["layers.1.attention.wq.weight"])  # each layer its own draw
    assert abs(pa[w].std().item() - 0.02) < 0.002  # N(0, 0.02), GPT-2
    assert torch.equal(pa["layers.0.ffn_norm.weight"], torch.ones(tiny.hidden_size))


def test_checkpoint_wrapper_names_map_to_the_plain_model():
    assert canonical_name("layers.3._checkpoint_wrapped_module.attention.wq.weight") == "layers.3.attention.wq.weight"


@pytest.mark.parametrize("biases", [{}, {"qkv_bias": True}, {"linear_bias": True}])
def test_the_worker_builds_the_parameters_the_spec_counts(biases):
    """q/k/v biases alone (Qwen2, GLM-4.5), every linear's, or none: the worker's model holds num_params."""
    spec = ModelSpec(**{**load_model("tiny").model_dump(), **biases, "params": None})
    assert sum(p.numel() for p in GPT(spec).parameters()) == spec.num_params
