"""What teams train in 2026: catalog entries and real config.json files pinned to the published parameter counts, each
layer's kind, and what the importer refuses (one line naming the field).

Active parameters: sources count them two ways. DeepSeek (README_WEIGHTS.md), Kimi and OpenAI (gpt-oss model card,
Table 1) leave the input embedding out (a lookup, not a matmul) and count the output head; Qwen and Meta count the
whole model less the idle experts. `num_active_params` counts the embedding, so for the first group the test takes it
off: each row says which.
"""

from __future__ import annotations

import json
import re
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import run_planner
from pydantic import ValidationError

from planner.errors import PlannerError
from planner.io.catalog import load_model
from planner.layers import LayerKind, mamba_params, mla_params
from planner.specs import AttentionSpec, GateSpec, MambaSpec, ModelSpec, MoESpec

CONFIGS = Path(__file__).parent / "data" / "hf_configs"


# name: (config.json fixture, published total, tolerance, published active or None (dense), embedding in active?,
#        active tolerance, cite)
PUBLISHED: dict[str, tuple[str, float, float, float | None, bool, float, str]] = {
    "deepseek-v3": (
        "deepseek_v3",
        671e9,
        0.005,
        36.6e9,
        False,
        0.01,
        "DeepSeek-V3 report section 1; README_WEIGHTS.md: 36.6B activated including the 0.9B head",
    ),
    "kimi-k2": (
        "kimi_k2_instruct",
        1.04e12,
        0.02,
        32e9,
        False,
        0.02,
        "Kimi K2 report (arXiv:2507.20534) 1.04T total; model card 32B activated (rounded)",
    ),
    "qwen3-8b": ("qwen3_8b", 8.2e9, 0.01, None, True, 0.0, "HF Qwen/Qwen3-8B model card"),
    "qwen3-32b": ("qwen3_32b", 32.8e9, 0.01, None, True, 0.0, "HF Qwen/Qwen3-32B model card"),
    "qwen3-30b-a3b": ("qwen3_30b_a3b", 30.5e9, 0.01, 3.3e9, True, 0.02, "HF Qwen/Qwen3-30B-A3B model card"),
    "qwen3-235b-a22b": ("qwen3_235b_a22b", 235e9, 0.01, 22e9, True, 0.015, "HF Qwen/Qwen3-235B-A22B model card"),
    "gpt-oss-20b": ("gpt_oss_20b", 20.91e9, 0.005, 3.61e9, False, 0.005, "gpt-oss model card, Table 1"),
    "gpt-oss-120b": ("gpt_oss_120b", 116.83e9, 0.005, 5.13e9, False, 0.005, "gpt-oss model card, Table 1"),
    # 109B counts the vision encoder the spec leaves out (the language model is 107.8B)
    "llama4-scout": ("llama4_scout", 109e9, 0.015, 17e9, True, 0.02, "Llama 4 model card: 109B total, 17B active"),
    "llama4-maverick": ("llama4_maverick", 400e9, 0.01, 17e9, True, 0.02, "Llama 4 model card: 400B, 17B active"),
    "gemma3-27b": ("gemma3_27b", 27.016e9, 0.005, None, True, 0.0, "Gemma 3 report, Table 1: 1,416M + 25,600M"),
    "nemotron-h-56b": ("nemotron_h_56b", 56e9, 0.01, None, True, 0.0, "Nemotron-H paper (arXiv:2504.03624): 56B"),
    "nemotron-h-8b": ("nemotron_h_8b", 8e9, 0.02, None, True, 0.0, "Nemotron-H paper: 8B (rounded)"),
    "llama3.1-8b": ("llama3.1_8b", 8.03e9, 0.005, None, True, 0.0, "HF meta-llama/Llama-3.1-8B model card"),
    "llama3.1-70b": ("llama3.1_70b", 70e9, 0.01, None, True, 0.0, "Llama 3 Herd paper, Table 3"),
    "llama3.1-405b": ("llama3.1_405b", 405e9, 0.005, None, True, 0.0, "Llama 3 Herd paper, Table 3"),
}


def _import(fixture: str) -> ModelSpec:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the multimodal configs warn that the vision tower is left out
        return load_model(CONFIGS / f"{fixture}.json")


def _active(model: ModelSpec, with_embedding: bool) -> int:
    return model.num_active_params - (0 if with_embedding else model.embedding_params)


def _check_published(model: ModelSpec, name: str) -> None:
    _, total, tol, active, with_embedding, active_tol, cite = PUBLISHED[name]
    assert model.num_params == pytest.approx(total, rel=tol), f"{name} total vs {cite}"
    if active is None:
        assert model.num_active_params == model.num_params
    else:
        assert _active(model, with_embedding) == pytest.approx(active, rel=active_tol), f"{name} active vs {cite}"


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_catalog_entry_matches_published_total_and_active(name):
    model = load_model(name)
    _check_published(model, name)
    assert model.params == PUBLISHED[name][1]


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_config_json_imports_to_the_published_counts_and_the_catalog_layout(name):
    imported, entry = _import(PUBLISHED[name][0]), load_model(name)
    _check_published(imported, name)
    assert imported.num_params == entry.num_params and imported.num_active_params == entry.num_active_params
    assert imported.layer_kinds == entry.layer_kinds
    assert imported.mtp_params == entry.mtp_params
    # what --emit megatron writes as --rotary-base and --norm-epsilon: the config's, or its class's defaults
    # (Gemma 3's config.json states neither: Gemma3TextConfig's 1e6 and 1e-6)
    assert (imported.rope_theta, imported.norm_eps) == (entry.rope_theta, entry.norm_eps)
    assert imported.gate == entry.gate  # what --emit megatron writes as --quick-geglu and its offset and clamp


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_per_layer_counts_add_up(name):
    model = load_model(name)
    layers = sum(model.layer_param_counts(i).total for i in range(model.num_layers))
    assert layers + model.embedding_params + model.output_params == model.num_params
    assert [model.layer_params(i) for i in range(3)] == [model.layer_param_counts(i).total for i in range(3)]
    assert model.num_moe_layers == sum(model.is_moe_layer(i) for i in range(model.num_layers))


# ---- per-layer kinds ---------------------------------------------------------------------------------
def _kinds(model: ModelSpec) -> Counter[tuple[str, str, str | None]]:
    return Counter((k.mixer, k.ffn, k.attention) for k in model.layer_kinds)


def test_deepseek_v3_three_dense_then_58_moe_layers_of_mla():
    m = _import("deepseek_v3")
    assert _kinds(m) == {("mla", "dense", "global"): 3, ("mla", "moe", "global"): 58}
    assert [m.is_moe_layer(i) for i in (0, 2, 3, 60)] == [False, False, True, True]
    # MLA by hand (DeepSeek-V3 report, section 2.1): q 7168 -> 1536 -> 128x192; kv 7168 -> 512 + 64, 512 -> 128x256;
    # output 128x128 -> 7168
    split = 1536 * 128 * 192 + 512 * 128 * 256 + 128 * 128 * 7168
    replicated = 7168 * 1536 + 1536 + 7168 * 576 + 512
    assert mla_params(m) == (split, replicated) and m.attention_params == 187_107_328
    moe = m.layer_param_counts(3)
    assert (moe.mixer, moe.mixer_replicated, moe.dense_mlp) == (split, replicated, 0)
    assert moe.routed_experts == 256 * 3 * 7168 * 2048 and moe.shared_experts == 3 * 7168 * 2048
    assert moe.router == 7168 * 256 and moe.norms == 2 * 7168
    assert m.layer_param_counts(0).dense_mlp == 3 * 7168 * 18432
    # README_WEIGHTS.md: the MTP module holds 11.5B unique parameters (embedding and head shared with the main model)
    assert m.mtp_layers == 1 and m.mtp_params == pytest.approx(11.5e9, rel=0.02)
    assert m.mtp_params == 3 * 7168 + 2 * 7168 * 7168 + moe.total


def test_kimi_k2_one_dense_layer_and_384_experts():
    m = _import("kimi_k2_instruct")
    assert _kinds(m) == {("mla", "dense", "global"): 1, ("mla", "moe", "global"): 60}
    assert m.moe is not None and (m.moe.num_experts, m.moe.num_shared_experts, m.mtp_layers) == (384, 1, 0)
    assert m.num_params == pytest.approx(1.026e12, rel=0.001)  # what the config gives: 1.3% under the published 1.04T


def test_gemma3_five_sliding_layers_to_one_global():
    m = _import("gemma3_27b")
    assert _kinds(m) == {("attention", "dense", "sliding"): 52, ("attention", "dense", "global"): 10}
    assert [k.attention for k in m.layer_kinds[:6]] == ["sliding"] * 5 + ["global"]
    assert {k.window for k in m.layer_kinds if k.attention == "sliding"} == {1024}
    # absent from the file, so Gemma3TextConfig's defaults: vocab 262208, 131072 positions, tied embeddings
    assert (m.vocab_size, m.max_seq_len, m.tied_embeddings) == (262208, 131072, True)
    # sandwich norms (4 per layer) and RMSNorm q/k norms over head_dim 128
    assert m.layer_param_counts(0).norms == 4 * 5376 + 2 * 128
    # the report's 25,600M non-embedding parameters, to 0.01%
    assert m.num_params - m.embedding_params == pytest.approx(25.6e9, rel=1e-4)


def test_gpt_oss_alternates_sliding_and_full_attention_with_sinks():
    m = _import("gpt_oss_120b")
    kinds = m.layer_kinds
    assert [(k.attention, k.window) for k in kinds[:2]] == [("sliding", 128), ("global", None)]
    assert _kinds(m) == {("attention", "moe", "sliding"): 18, ("attention", "moe", "global"): 18}
    assert m.attention is not None and m.attention.sinks and m.head_size == 64
    q, kv = 64 * 64, 8 * 64  # 64 heads of 64 on a 2880-wide model: head_dim != hidden / heads
    assert m.attention_params == 2880 * q * 2 + 2 * 2880 * kv + (q + 2 * kv + 2880) + 64
    assert m.layer_param_counts(0).router == 2880 * 128 + 128  # the router has a bias


def test_llama4_maverick_interleaves_dense_and_moe_layers():
    m = _import("llama4_maverick")
    moe = [i for i in range(48) if m.is_moe_layer(i)]
    assert moe == list(range(1, 48, 2))
    assert m.layer_param_counts(0).dense_mlp == 3 * 5120 * 16384  # intermediate_size_mlp
    moe_layer = m.layer_param_counts(1)
    assert moe_layer.routed_experts == 128 * 3 * 5120 * 8192 and moe_layer.shared_experts == 3 * 5120 * 8192
    # chunked attention (8192 tokens) on RoPE layers, global on every fourth (NoPE) layer
    assert [(k.attention, k.window) for k in m.layer_kinds[:4]] == [("chunked", 8192)] * 3 + [("global", None)]


def test_llama4_scout_every_layer_moe():
    m = _import("llama4_scout")
    assert m.num_moe_layers == 48 and m.moe is not None and m.moe.num_shared_experts == 1
    assert m.attention is not None and m.attention.qk_norm == "l2"


@pytest.mark.parametrize(
    ("fixture", "counts", "mamba_heads"),
    [("nemotron_h_56b", (54, 10, 54), 256), ("nemotron_h_8b", (24, 4, 24), 128)],
)
def test_nemotron_h_hybrid_pattern(fixture, counts, mamba_heads):
    m = _import(fixture)
    assert _kinds(m) == {
        ("mamba", "none", None): counts[0],
        ("attention", "none", "global"): counts[1],
        ("none", "dense", None): counts[2],
    }
    assert m.mamba is not None and m.mamba.num_heads == mamba_heads and m.position_embedding == "none"
    h, mb = m.hidden_size, m.mamba
    d_inner, bc = mb.d_inner, 2 * mb.num_groups * mb.state_size
    # mamba_ssm Mamba2: in_proj, conv1d with bias, dt_bias + A_log + D, gated norm, out_proj
    by_hand = h * (2 * d_inner + bc + mb.num_heads) + (d_inner + bc) * 5 + 3 * mb.num_heads + d_inner + d_inner * h
    assert mamba_params(m) == by_hand
    assert m.layer_param_counts(0).norms == h and m.layer_param_counts(1).dense_mlp == 2 * h * m.ffn_hidden_size


def test_nemotron_h_infinity_in_the_file_is_not_passed_on():
    """nemotron_h_56b.json says "time_step_limit": [0.0, Infinity]; Python's json reads it, nothing uses it, and the
    planner's JSON output stays standard JSON."""
    assert "Infinity" in (CONFIGS / "nemotron_h_56b.json").read_text()
    code, out, err = run_planner("memory", "--model", str(CONFIGS / "nemotron_h_56b.json"), "--gpus", "8", "--json")
    assert code == 0, err
    json.loads(out, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))


def test_qwen3_moe_every_layer_and_qk_norm():
    m = _import("qwen3_30b_a3b")
    assert m.num_moe_layers == 48 and m.head_size == 128 and m.hidden_size == 2048
    assert m.layer_param_counts(0).norms == 2 * 2048 + 2 * 128


# ---- the CLI ----------------------------------------------------------------------------------------------
def test_memory_on_the_deepseek_v3_config_exits_0():
    code, out, err = run_planner("memory", "--model", str(CONFIGS / "deepseek_v3.json"), "--gpus", "8", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["params"] == pytest.approx(671e9, rel=0.005)  # the rest of the numbers are the cost model's


@pytest.mark.parametrize(
    ("fixture", "names"),
    [("qwen3_next_80b_a3b", "linear_num_value_heads"), ("t5_small", "encoder-decoder")],
)
def test_cli_refuses_an_unrepresentable_config_in_one_line(fixture, names):
    code, out, err = run_planner("memory", "--model", str(CONFIGS / f"{fixture}.json"), "--gpus", "8")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and names in err and "Traceback" not in err


def test_multimodal_import_says_what_it_leaves_out():
    with pytest.warns(UserWarning, match=r"left out: vision_config \(27 layers, hidden 1152\)"):
        load_model(CONFIGS / "gemma3_27b.json")


# ---- refusals: one line naming the field ----------------------------------------------------------------
def _config(**changes: Any) -> dict[str, Any]:
    cfg = json.loads((CONFIGS / "qwen3_8b.json").read_text())
    cfg.update(changes)
    return cfg


REFUSALS = {
    "encoder-decoder": ({"is_encoder_decoder": True}, "encoder-decoder"),
    "linear attention layers": ({"layer_types": ["linear_attention"] * 35 + ["full_attention"]}, "layer_types"),
    "other SSM layouts": ({"model_type": "jamba"}, "'jamba'"),
    "DeepSeek sparse attention": ({"index_topk": 2048}, "index_topk=2048"),
    "latent MoE": ({"moe_latent_size": 1024}, "moe_latent_size=1024"),
    "cross-attention layers": ({"cross_attention_layers": [3, 8, 13]}, "cross_attention_layers=[3, 8, 13]"),
    "unknown layer type": ({"layer_types": ["full_attention"] * 35 + ["mystery"]}, "'mystery'"),
    "layer_types of the wrong length": ({"layer_types": ["full_attention"] * 3}, "3 entries"),
    "sliding window with no known rule": (
        {"model_type": "newfamily", "sliding_window": 4096, "use_sliding_window": True},
        "sliding_window=4096",
    ),
    "Infinity where an integer is read": ({"max_position_embeddings": float("inf")}, "=Infinity"),
    "NaN where an integer is read": ({"num_key_value_heads": float("nan")}, "num_key_value_heads=NaN"),
    "fractional width": ({"intermediate_size": 12288.5}, "intermediate_size=12288.5"),
    "experts without top-k": ({"model_type": "newfamily", "num_local_experts": 8}, "num_experts_per_tok"),
    "an expert count under another name": (
        {"model_type": "ernie4_5_moe", "moe_num_experts": 64, "moe_k": 8},
        "moe_num_experts=64",
    ),
    "Granite 4.0-H's Mamba layers": ({"model_type": "granitemoehybrid"}, "'granitemoehybrid' has SSM layers"),
    "DeciLM's per-layer blocks": ({"block_configs": [{"ffn": {"ffn_mult": 2.5}}]}, "block_configs"),
    "MiniMax's MTP modules": ({"num_mtp_modules": 3}, "num_mtp_modules=3"),
    "hybrid pattern length": (
        {"model_type": "nemotron_h", "hybrid_override_pattern": "M*-", "num_hidden_layers": 4},
        "num_hidden_layers=4",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_importer_refuses_by_name(tmp_path, case):
    changes, needle = REFUSALS[case]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_config(**changes)))  # json.dumps writes inf and nan as Infinity and NaN
    with pytest.raises(PlannerError) as info:
        load_model(path)
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_absent_deepseek_keys_take_deepseek_v3_config_defaults(tmp_path):
    """transformers/models/deepseek_v3/configuration_deepseek_v3.py: every architecture key has a default."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "deepseek_v3", "max_position_embeddings": 163840}))
    m = load_model(path)
    assert m.num_params == _import("deepseek_v3").num_params and m.mtp_layers == 0


# ---- the spec's own two-field rules ------------------------------------------------------------------------
def _spec(**changes: Any) -> dict[str, Any]:
    base = load_model("gpt-oss-20b").model_dump()
    base.update(changes, params=None)
    return base


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"attention": {"pattern": "SG"}}, "pattern='SG' has sliding or chunked layers but attention.window is null"),
        ({"attention": {"window": 128}}, "window=128 but attention.pattern='G'"),
        ({"attention": {"pattern": "SXG", "window": 8}}, "['X']"),
        ({"attention": {"kind": "mla", "kv_lora_rank": 512}}, "kind=mla needs qk_rope_head_dim"),
        ({"attention": {"q_lora_rank": 64}}, "kind=mha but MLA fields are set (q_lora_rank)"),
        ({"attention": {"pattern": "G" * 25}}, "attention.pattern has 25 letters but num_layers=24"),
        ({"layer_pattern": "*-" * 11}, "layer_pattern has 22 letters but num_layers=24"),
        ({"layer_pattern": "*-" * 12, "moe": None}, None),
        ({"layer_pattern": "M-" * 12, "moe": None}, "Mamba layers need both"),
        (
            {"moe": {"num_experts": 8, "top_k": 2, "expert_ffn_hidden_size": 64, "first_k_dense": 24}},
            "first_k_dense=24",
        ),
        ({"moe": {"num_experts": 8, "top_k": 2, "expert_ffn_hidden_size": 64, "layers": [30]}}, "index 30"),
        (
            {"moe": {"num_experts": 8, "top_k": 2, "expert_ffn_hidden_size": 64, "layers": [1], "layer_freq": 2}},
            "layer_freq=2",
        ),
    ],
)
def test_spec_rules_name_both_values(changes, message):
    if message is None:  # a valid hybrid: attention and MLP letters only
        assert ModelSpec(**_spec(**changes)).layer_kinds[0] == LayerKind("attention", "none", "sliding", 128)
        return
    with pytest.raises(ValueError, match=None) as info:
        ModelSpec(**_spec(**changes))
    assert message in str(info.value)


def test_mamba_groups_must_divide_heads():
    with pytest.raises(ValueError, match="num_groups=3 must divide num_heads=8"):
        MambaSpec(num_heads=8, head_dim=64, state_size=16, num_groups=3)


def test_sub_specs_default_to_a_plain_transformer():
    assert AttentionSpec().kind == "mha" and AttentionSpec().pattern == "G"
    moe = MoESpec(num_experts=8, top_k=2, expert_ffn_hidden_size=64)
    assert (moe.first_k_dense, moe.layers, moe.capacity_factor, moe.shared_expert_ffn_hidden_size) == (
        0,
        None,
        None,
        None,
    )


def test_glm_moe_imports_as_a_gated_mlp_with_its_family_defaults():
    """GLM-4.7's config.json (the copy names no hidden_act) takes Glm4MoeConfig's defaults: a gated SiLU MLP of three
    matrices, so 355B total and 32B activated as the GLM-4.5 report (arXiv:2508.06471) counts the same architecture
    (92 layers, 160 experts of width 1536, 3 dense; THUDM/slime scripts/models/glm4.5-355B-A32B.sh gives the same
    sizes): 1% total, 3% active without the input embedding (the report does not say how it counts). Read as a
    two-matrix MLP, the file was 240B."""
    glm = _import("glm4.7")
    assert glm.mlp == "swiglu" and glm.num_moe_layers == 89
    assert glm.num_params == pytest.approx(355e9, rel=0.01)
    assert _active(glm, with_embedding=False) == pytest.approx(32e9, rel=0.03)
    flagged = {**json.loads((CONFIGS / "glm4.7.json").read_text()), "use_qk_norm": True, "hidden_act": "silu"}
    assert _spec_of(flagged).attention.qk_norm == "rmsnorm"  # Glm4MoeAttention's q_norm / k_norm


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"model_type": "somefamily", "use_qk_norm": True, "hidden_act": "silu"}, "use_qk_norm in model_type"),
        ({"model_type": "somefamily"}, "does not know the default of model_type 'somefamily'"),
    ],
)
def test_a_family_default_the_planner_does_not_know_is_refused_by_name(change, named):
    """An unknown family's q/k-norm flag (RMSNorm or L2 is the family's) and its absent activation (two or three
    MLP matrices) are asked for, not guessed."""
    with pytest.raises(PlannerError, match=named):
        _spec_of({**json.loads((CONFIGS / "glm4.7.json").read_text()), **change})


def _spec_of(cfg: dict[str, Any]) -> ModelSpec:
    from planner.io.hf_config import hf_fields

    return ModelSpec(**hf_fields(cfg, CONFIGS / "glm4.7.json", "test-config"))


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"hybrid_override_pattern": "M-" * 46}, "hybrid_override_pattern in model_type 'glm4_moe'"),
        ({"attention_chunk_size": 8192}, "attention_chunk_size in model_type 'glm4_moe'"),
        ({"hidden_act": "weirdact"}, "hidden_act='weirdact' is no activation"),
    ],
)
def test_a_key_only_another_family_reads_or_an_unknown_activation_is_refused(change, named):
    """Read outside the family whose rule defines it, a hybrid pattern or a chunk size would be dropped (a Mamba
    stack imported as attention); an activation transformers cannot build is no model to price."""
    with pytest.raises(PlannerError, match=re.escape(named)):
        _spec_of({**json.loads((CONFIGS / "glm4.7.json").read_text()), **change})


def test_an_unknown_family_imports_from_its_keys_with_a_warning(tmp_path):
    cfg = {**json.loads((CONFIGS / "llama3.1_8b.json").read_text()), "model_type": "foobar"}
    with pytest.warns(UserWarning, match="model_type 'foobar' is not a family the importer has rules for"):
        spec = _spec_of(cfg)
    assert spec.num_params == pytest.approx(8.03e9, rel=0.01)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    code, out, err = run_planner("memory", "-m", str(path), "--gpus", "8", "--json")
    assert code == 0 and "model_type 'foobar'" in err and json.loads(out)["params"] > 8e9
    path.write_text(json.dumps({**cfg, "num_hidden_layers": 0}))
    code, out, err = run_planner("memory", "-m", str(path), "--gpus", "8")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "foobar" not in err  # the error alone, no warning


def test_the_file_s_own_expert_count_beats_its_family_default():
    """GPT-OSS's family default names num_local_experts (128); a file that says num_experts: 32 has 32."""
    cfg = {k: v for k, v in json.loads((CONFIGS / "gpt_oss_120b.json").read_text()).items() if k != "num_local_experts"}
    assert _spec_of({**cfg, "num_experts": 32}).moe.num_experts == 32


# ---- biases, q/k norms and keys as the families' modules read them ---------------------------------------------
def _glm(**changes: Any) -> dict[str, Any]:
    return {**json.loads((CONFIGS / "glm4.7.json").read_text()), "hidden_act": "silu", **changes}


def test_attention_bias_is_the_q_k_v_biases_alone_where_the_family_builds_them_so():
    """Glm4MoeAttention biases q, k and v by attention_bias and never o_proj; the MLPs and experts have none. The
    spec's qkv_bias counts exactly those: (heads + 2 kv heads) x head_dim per layer. linear_bias on every linear
    added the experts' and the output projection's (about 120M on GLM-4.5)."""
    plain, biased = _spec_of(_glm(attention_bias=False)), _spec_of(_glm(attention_bias=True))
    assert (biased.linear_bias, biased.qkv_bias, biased.has_bias) == (False, True, False)
    per_layer = (biased.num_attention_heads + 2 * biased.kv_heads) * biased.head_size
    assert biased.num_params - plain.num_params == biased.num_layers * per_layer


@pytest.mark.parametrize(
    ("family", "key", "extra"),
    [
        ("starcoder2", "use_bias", {"hidden_act": "gelu_pytorch_tanh", "norm_epsilon": 1e-5, "sliding_window": 4096}),
        ("internlm2", "bias", {"hidden_act": "silu", "rms_norm_eps": 1e-5}),
    ],
)
def test_a_familys_own_bias_switch_biases_every_linear(family, key, extra):
    """StarCoder2's use_bias and InternLM2's bias (each True by default) bias every linear; both were dropped
    without a word (audit): the importer read only attention_bias / mlp_bias."""
    cfg = {"hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 4, "num_hidden_layers": 24,
           "vocab_size": 50000, "max_position_embeddings": 4096, "intermediate_size": 8192, "model_type": family,
           **extra}  # fmt: skip
    on, off, default = _spec_of({**cfg, key: True}), _spec_of({**cfg, key: False}), _spec_of(cfg)
    assert (on.linear_bias, off.linear_bias, default.linear_bias) == (True, False, True)
    assert on.num_params > off.num_params


def test_qwen2_biases_q_k_v_without_a_key_saying_so():
    """Qwen2Attention builds q/k/v with bias=True and o_proj without; Qwen2 configs carry no bias key."""
    cfg = {k: v for k, v in json.loads((CONFIGS / "llama3.1_8b.json").read_text()).items() if "bias" not in k}
    qwen2 = _spec_of({**cfg, "model_type": "qwen2", "use_sliding_window": False})
    assert qwen2.qkv_bias is True and not qwen2.has_bias
    llama = _spec_of(cfg)
    assert qwen2.num_params - llama.num_params == 32 * (32 + 2 * 8) * 128


def test_attention_biases_on_all_four_projections_but_not_the_mlp_are_imported_as_q_k_v_and_said():
    cfg = {**json.loads((CONFIGS / "llama3.1_8b.json").read_text()), "attention_bias": True, "mlp_bias": False}
    with pytest.warns(UserWarning, match="output projection's, hidden_size per layer, left out"):
        spec = _spec_of(cfg)
    assert spec.qkv_bias is True and not spec.has_bias
    assert _spec_of({**cfg, "mlp_bias": True}).has_bias  # all of them: every linear


def test_qwen3_coder_s_legacy_flags_import():
    """Qwen3-Coder-480B-A35B's config (qwen3_moe) says use_qk_norm: true, which Qwen3MoeAttention's per-head
    RMSNorms are anyway, and shared_expert_intermediate_size: 0, no shared expert."""
    cfg = {**json.loads((CONFIGS / "qwen3_235b_a22b.json").read_text()), "use_qk_norm": True}
    spec = _spec_of({**cfg, "shared_expert_intermediate_size": 0})
    assert spec.attention.qk_norm == "rmsnorm" and spec.moe.num_shared_experts == 0
    assert spec.num_params == _spec_of(cfg).num_params


@pytest.mark.parametrize(("family", "warned"), [("olmo2", True), ("apertus", False), ("qwen3_vl_text", False)])
def test_families_with_q_k_norms_import_them(family, warned):
    """Olmo2Attention normalises the whole q and k projections (said: imported per head), ApertusAttention and
    Qwen3VLTextAttention each head; all keep Q and K for the norms' backward."""
    cfg = {**json.loads((CONFIGS / "llama3.1_8b.json").read_text()), "model_type": family}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spec = _spec_of(cfg)
    assert spec.attention.qk_norm == "rmsnorm"
    assert any("whole projection" in str(w.message) for w in caught) == warned


def test_use_sliding_window_false_means_no_sliding_layer_in_any_family():
    """MiMo (Qwen2-derived, its own model_type) states sliding_window beside use_sliding_window: false."""
    cfg = {**json.loads((CONFIGS / "llama3.1_8b.json").read_text()), "model_type": "mimo", "sliding_window": 32768}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _spec_of({**cfg, "use_sliding_window": False}).attention is None
        with pytest.raises(PlannerError, match="sliding_window=32768"):
            _spec_of(cfg)


def test_glm_moe_without_its_norm_eps_is_still_rmsnorm():
    """Glm4MoeConfig defaults rms_norm_eps to 1e-5: a config that leaves it out is no LayerNorm model."""
    cfg = {k: v for k, v in _glm().items() if k != "rms_norm_eps"}
    assert _spec_of(cfg).norm == "rmsnorm"


def test_a_key_for_a_part_the_spec_lacks_is_refused_only_where_it_says_the_part_is_there():
    """num_mtp_modules: 0 (or block_configs: []) says there is none: imported; a long value is shown by its size."""
    cfg = json.loads((CONFIGS / "qwen3_8b.json").read_text())
    assert _spec_of({**cfg, "num_mtp_modules": 0, "block_configs": []}).num_layers == cfg["num_hidden_layers"]
    with pytest.raises(PlannerError, match=r"block_configs=\[36 entries\]"):
        _spec_of({**cfg, "block_configs": [{"attention": {"no_op": False}}] * 36})


def test_q_k_v_biases_alone_on_mla_are_refused():
    """MLA has no q/k/v projections to bias alone: the spec refuses qkv_bias there rather than ignore it."""
    spec = load_model("deepseek-v3").model_dump()
    with pytest.raises(ValidationError, match="qkv_bias with attention kind mla"):
        ModelSpec(**{**spec, "qkv_bias": True, "params": None})


def test_mimo_is_qwen2_with_q_k_v_biases_and_one_mtp_layer():
    """MiMo-7B is Qwen2 with a multi-token-prediction layer (modeling_mimo.py: MiMoModel(Qwen2Model)): biases on q,
    k and v alone, whatever its attention_bias key says, said without a warning. 7.62B by hand from the config:
    embedding and head 2 x 151,680 x 4,096, 36 layers of 16.8M (q, o) + 8.4M (k, v) + 135.3M (SwiGLU 11,008)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        spec = load_model(CONFIGS / "mimo_7b_base.json")
    assert (spec.qkv_bias, spec.linear_bias, spec.mtp_layers) == (True, False, 1)
    assert spec.num_params == pytest.approx(7.62e9, rel=0.002)


def test_kimi_k2_5_is_kimi_k2_with_a_vision_tower_left_out_by_its_own_names():
    """Kimi-K2.5's language model is Kimi-K2's (text_config model_type kimi_k2); its MoonViT names its depth and width
    vt_num_hidden_layers / vt_hidden_size, said in the warning rather than '?'."""
    with pytest.warns(UserWarning, match=r"left out: vision_config \(27 layers, hidden 1152\)"):
        spec = load_model(CONFIGS / "kimi_k2.5.json")
    k2 = _import("kimi_k2_instruct")
    assert (spec.num_params, spec.num_active_params) == (k2.num_params, k2.num_active_params)


def test_mlp_layer_types_place_the_moe_layers():
    """Laguna's mlp_layer_types says "dense" or "sparse" for each layer: read as the MoE layers, not dropped (its
    first layer would have been priced as MoE); anything else is refused naming the key."""
    base = json.loads((CONFIGS / "qwen3_30b_a3b.json").read_text())
    n = base["num_hidden_layers"]
    spec = _spec_of({**base, "mlp_layer_types": ["dense"] + ["sparse"] * (n - 1)})
    assert spec.moe is not None and spec.moe.first_k_dense == 1
    assert spec.num_params < _import("qwen3_30b_a3b").num_params
    with pytest.raises(PlannerError, match=r'mlp_layer_types=.*give "dense" or "sparse" for each of the 48 layers'):
        _spec_of({**base, "mlp_layer_types": ["moe"] * n})


def test_gemma_s_hidden_activation_is_read_before_hidden_act():
    """GemmaMLP builds ACT2FN[config.hidden_activation] where given (modeling_gemma.py); Gemma 2 and 3 configs name
    their activation so alone: it is read, not refused as 'no hidden_act'."""
    llama = json.loads((CONFIGS / "llama3.1_8b.json").read_text())
    base = {k: v for k, v in llama.items() if k != "hidden_act"} | {"model_type": "muse_glimmer_text"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a family without rules: read from its keys, gated by its activation
        assert _spec_of({**base, "hidden_activation": "gelu_pytorch_tanh"}).mlp == "gelu"
        assert _spec_of({**base, "hidden_act": "gelu", "hidden_activation": "silu"}).mlp == "swiglu"
    with pytest.raises(PlannerError, match="hidden_activation='nonsense' is no activation"):
        _spec_of({**base, "hidden_activation": "nonsense"})


def test_a_text_config_without_model_type_is_named_by_the_whole_model_s():
    """MiniMax-M3's text_config has no model_type: its refusals and warnings name the top level's, not ''."""
    text = {k: v for k, v in json.loads((CONFIGS / "llama3.1_8b.json").read_text()).items() if k != "model_type"}
    cfg = {"model_type": "foo_vl", "text_config": text, "vision_config": {"num_hidden_layers": 2, "hidden_size": 64}}
    with pytest.warns(UserWarning, match="model_type 'foo_vl' is not a family the importer has rules for"):
        _spec_of(cfg)
    with warnings.catch_warnings():  # a family with rules of its own, named in no table before
        warnings.simplefilter("ignore")
        qwen3_vl = {**json.loads((CONFIGS / "qwen3_8b.json").read_text()), "model_type": "qwen3_vl_text"}
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            _spec_of(qwen3_vl)
    assert not [w for w in said if "not a family" in str(w.message)]


def test_gpt_oss_imports_its_clamped_quick_gelu_gate_and_says_nothing_of_it(tmp_path):
    """GPT-OSS's experts compute (clip(up, 7) + 1) * quick_gelu(min(gate, 7)) (modeling_gpt_oss.py GptOssExperts):
    the import holds it in the spec's gate, from the config's swiglu_limit or GptOssConfig's default of 7.0, and no
    longer reads it past with a warning."""
    from planner.io.hf_config import hf_fields

    cfg = json.loads((CONFIGS / "gpt_oss_20b.json").read_text())
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        spec = ModelSpec(**hf_fields(cfg, CONFIGS / "gpt_oss_20b.json", "gpt-oss"))
    told = " ".join(str(w.message) for w in said)
    assert "rope_scaling yarn" in told and "swiglu_limit" not in told and "SwiGLU" not in told
    assert spec.mlp == "swiglu" and spec.gate == GateSpec(activation="quick_gelu", linear_offset=1.0, clamp=7.0)
    tighter = {k: v for k, v in cfg.items() if k != "swiglu_limit"} | {"swiglu_limit": 5.0}
    assert ModelSpec(**hf_fields(tighter, CONFIGS / "gpt_oss_20b.json", "gpt-oss")).gate.clamp == 5.0
    unstated = {k: v for k, v in cfg.items() if k != "swiglu_limit"}
    assert ModelSpec(**hf_fields(unstated, CONFIGS / "gpt_oss_20b.json", "gpt-oss")).gate.clamp == 7.0
    assert spec.num_params == ModelSpec(**(spec.model_dump() | {"gate": None})).num_params  # the same shape
    with pytest.raises(ValueError, match="gate quick_gelu needs mlp: swiglu"):
        ModelSpec(**(spec.model_dump() | {"mlp": "gelu"}))
