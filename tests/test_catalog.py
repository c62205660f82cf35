"""The catalogs load, their parameter counts match the published sizes, and bad input fails in one clear line."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from helpers import byte_fields, run_planner

from planner.errors import PlannerError
from planner.io.catalog import (
    catalog_root,
    list_hardware,
    list_models,
    load_engine,
    load_hardware,
    load_model,
    load_yaml,
)
from planner.precision import gemm_format
from planner.specs import PRECISIONS

# Published total parameter counts and where they come from (the YAML files cite the architecture numbers).
PUBLISHED_PARAMS = {
    "gpt2-1.5b": (1.542e9, "Radford et al. 2019, Table 2 (1542M)"),
    "gpt3-125m": (125e6, "Brown et al. 2020, Table 2.1"),
    "gpt3-350m": (350e6, "Brown et al. 2020, Table 2.1"),
    "gpt3-760m": (760e6, "Brown et al. 2020, Table 2.1"),
    "gpt3-1.3b": (1.3e9, "Brown et al. 2020, Table 2.1"),
    "gpt3-2.7b": (2.7e9, "Brown et al. 2020, Table 2.1"),
    "gpt3-6.7b": (6.7e9, "Brown et al. 2020, Table 2.1"),
    "gpt3-13b": (13e9, "Brown et al. 2020, Table 2.1"),
    "gpt3-175b": (175e9, "Brown et al. 2020, Table 2.1"),
    "megatron-1t": (1008e9, "Narayanan et al. 2021, Table 1 (1008B row)"),
    "bloom-176b": (176.2e9, "BigScience 2022, BLOOM paper; HF bigscience/bloom model card (176,247M)"),
    "opt-175b": (175e9, "Zhang et al. 2022, OPT, Table 1"),
    "mt-nlg-530b": (530e9, "Smith et al. 2022, MT-NLG, section 3.1"),
    "llama2-7b": (6.74e9, "HF meta-llama/Llama-2-7b-hf model card (6.74B; '7B' nominal)"),
    "llama2-13b": (13e9, "Touvron et al. 2023, Llama 2, Table 1"),
    "llama2-70b": (70e9, "Touvron et al. 2023, Llama 2, Table 1"),
    "llama3-8b": (8.03e9, "HF meta-llama/Meta-Llama-3-8B model card (8.03B)"),
    "llama3-70b": (70e9, "Llama Team 2024, The Llama 3 Herd of Models, Table 3"),
    "llama3-405b": (405e9, "Llama Team 2024, The Llama 3 Herd of Models, Table 3"),
    "mixtral-8x7b": (46.7e9, "Jiang et al. 2024, Mixtral of Experts, section 2"),
    "mixtral-8x22b": (141e9, "Mistral AI 2024, Mixtral 8x22B announcement (141B total)"),
    "llama3.1-8b": (8.03e9, "HF meta-llama/Llama-3.1-8B model card (8.03B)"),
    "llama3.1-70b": (70e9, "Llama Team 2024, The Llama 3 Herd of Models, Table 3"),
    "llama3.1-405b": (405e9, "Llama Team 2024, The Llama 3 Herd of Models, Table 3"),
    "deepseek-v3": (671e9, "DeepSeek-AI 2024, DeepSeek-V3 Technical Report, section 1 (671B total, MTP apart)"),
    "kimi-k2": (1.04e12, "Kimi Team 2025, Kimi K2 report (arXiv:2507.20534): 1.04T total"),
    "qwen3-8b": (8.2e9, "HF Qwen/Qwen3-8B model card (8.2B)"),
    "qwen3-32b": (32.8e9, "HF Qwen/Qwen3-32B model card (32.8B)"),
    "qwen3-30b-a3b": (30.5e9, "HF Qwen/Qwen3-30B-A3B model card (30.5B total)"),
    "qwen3-235b-a22b": (235e9, "HF Qwen/Qwen3-235B-A22B model card (235B total)"),
    "gpt-oss-20b": (20.91e9, "OpenAI 2025, gpt-oss model card, Table 1 (20.91B)"),
    "gpt-oss-120b": (116.83e9, "OpenAI 2025, gpt-oss model card, Table 1 (116.83B)"),
    "llama4-scout": (109e9, "Meta 2025, Llama 4 model card (109B total, vision encoder included)"),
    "llama4-maverick": (400e9, "Meta 2025, Llama 4 model card (400B total)"),
    "gemma3-27b": (27.016e9, "Gemma Team 2025, Gemma 3 report, Table 1 (1,416M embedding + 25,600M non-embedding)"),
    "nemotron-h-56b": (56e9, "NVIDIA 2025, Nemotron-H (arXiv:2504.03624): 56B"),
    "nemotron-h-8b": (8e9, "NVIDIA 2025, Nemotron-H (arXiv:2504.03624): 8B"),
    "tiny": (295_488, "hand count: 2*256*64 embeddings/output + 4*(4*64*64 + 3*64*256 + 2*64) + 64"),
}


def test_catalog_lists_every_model_with_a_published_size():
    assert set(list_models()) == set(PUBLISHED_PARAMS)
    assert (catalog_root() / "model_specs").is_dir()


@pytest.mark.parametrize("name", sorted(PUBLISHED_PARAMS))
def test_model_loads_and_derived_params_within_3pct(name):
    published, source = PUBLISHED_PARAMS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the loader's own 3% warning must not fire either
        model = load_model(name)
    assert model.name == name
    assert model.params == pytest.approx(published, rel=1e-9), f"{name}: params: differs from {source}"
    assert model.num_params == pytest.approx(published, rel=0.03), f"{name} vs {source}"


def test_every_model_yaml_cites_its_source():
    for name in list_models():
        first = (catalog_root() / "model_specs" / f"{name}.yaml").read_text().splitlines()[0]
        assert first.startswith("# Source:"), name


def test_gpt3_175b_within_1pct():
    # Brown et al. 2020, Table 2.1: 175.0B
    assert load_model("gpt3-175b").num_params == pytest.approx(175e9, rel=0.01)


def test_llama3_8b_within_1pct():
    # HF meta-llama/Meta-Llama-3-8B: 8.03B
    assert load_model("llama3-8b").num_params == pytest.approx(8.03e9, rel=0.01)


def test_mixtral_8x7b_total_and_active():
    # Jiang et al. 2024, section 2: 46.7B total, 12.9B active per token (top-2 of 8)
    model = load_model("mixtral-8x7b")
    assert model.num_params == pytest.approx(46.7e9, rel=0.02)
    assert model.num_active_params == pytest.approx(12.9e9, rel=0.02)


def test_tiny_is_the_launch_test_shape():
    m = load_model("tiny")
    assert (m.num_layers, m.hidden_size, m.num_attention_heads, m.ffn_hidden_size) == (4, 64, 4, 256)
    assert (m.vocab_size, m.max_seq_len, m.mlp, m.position_embedding, m.norm) == (256, 64, "swiglu", "rope", "rmsnorm")
    assert m.tied_embeddings is False and m.has_bias is False


def test_bias_flags():
    assert not load_model("llama3-8b").has_bias
    assert not load_model("mixtral-8x7b").has_bias
    assert load_model("gpt3-175b").has_bias
    assert load_model("bloom-176b").has_bias


def test_catalog_loads_are_cached():
    assert load_model("gpt3-175b") is load_model("gpt3-175b")
    assert load_hardware("h100-sxm") is load_hardware("h100-sxm")


# ---- hardware ------------------------------------------------------------------------------------
EXPECTED_HARDWARE = {
    "v100-32gb",
    "a100-40gb",
    "a100-80gb",
    "h100-sxm",
    "h100-pcie",
    "h200",
    "h800",
    "b200",
    "b200-700w",
    "b300",
    "gb200-nvl72",
    "gb300-nvl72",
    "mi300x",
    "mi325x",
    "mi350x",
    "mi355x",
    "cpu",
}
# Precisions a GPU has tensor cores for: no bf16 before Ampere, no fp8 before Hopper / CDNA 3, fp4 from Blackwell
# and CDNA 4 on (vendor datasheets).
WITH_FP4 = {"b200", "b200-700w", "b300", "gb200-nvl72", "gb300-nvl72", "mi350x", "mi355x"}
FEWER_PRECISIONS = {
    "v100-32gb": {"fp32", "fp16"},
    "a100-40gb": {"fp32", "fp16", "bf16"},
    "a100-80gb": {"fp32", "fp16", "bf16"},
    "cpu": {"fp32", "fp16", "bf16"},
}


def test_hardware_catalog():
    assert set(list_hardware()) >= EXPECTED_HARDWARE


@pytest.mark.parametrize("name", sorted(EXPECTED_HARDWARE))
def test_hardware_profile_loads(name):
    hw = load_hardware(name)
    assert hw.name == name
    plain = {"fp32", "bf16", "fp16", "fp8"}  # the precisions that are GEMM formats (the named recipes run in fp8/fp4)
    expected = FEWER_PRECISIONS.get(name, plain | ({"fp4"} if name in WITH_FP4 else set()))
    assert set(hw.gpu.peak_flops) == expected
    assert all(hw.supports(p) == (gemm_format(p) in hw.gpu.peak_flops) for p in PRECISIONS)
    assert hw.inter_node.bandwidth_bytes_per_s <= hw.intra_node.bandwidth_bytes_per_s
    assert 0 < hw.efficiency.matmul_efficiency(1e12) <= 1
    assert hw.nvlink_domain % hw.gpus_per_node == 0
    if name != "cpu":
        assert hw.gpus_per_node == (4 if name.startswith(("gb200", "gb300")) else 8)
        assert hw.peak("fp32") < hw.peak("fp16")
        if hw.supports("fp8"):
            assert hw.peak("bf16") <= hw.peak("fp8")


def test_every_number_in_a_profile_has_a_comment():
    for name in list_hardware():
        for i, line in enumerate((catalog_root() / "hardware_profiles" / f"{name}.yaml").read_text().splitlines()):
            code = line.split("#")[0]
            if any(ch.isdigit() for ch in code.split(":", 1)[-1]) and not code.lstrip().startswith(
                ("name:", "aliases:", "description:", "source:")
            ):
                assert "#" in line, f"{name}.yaml:{i + 1}: number without a source comment: {line.strip()}"


def test_peaks_ordered_by_generation():
    fp16 = {n: load_hardware(n).peak("fp16") for n in ("v100-32gb", "a100-80gb", "h100-sxm", "b200")}
    assert fp16["b200"] > fp16["h100-sxm"] > fp16["a100-80gb"] > fp16["v100-32gb"]
    assert load_hardware("h200").gpu.hbm_bytes > load_hardware("h100-sxm").gpu.hbm_bytes
    assert load_hardware("a100-80gb").gpu.hbm_bytes > load_hardware("a100-40gb").gpu.hbm_bytes
    assert (
        load_hardware("h800").intra_node.bandwidth_bytes_per_s
        < load_hardware("h100-sxm").intra_node.bandwidth_bytes_per_s
    )


def test_yaml_si_numbers_are_floats(tmp_path):
    f = tmp_path / "n.yaml"
    f.write_text("a: 80.0e9\nb: 1e9\nc: 3.0e-6\nd: 8\ne: 2.5\n")
    assert load_yaml(f) == {"a": 80.0e9, "b": 1e9, "c": 3.0e-6, "d": 8, "e": 2.5}
    assert isinstance(load_yaml(f)["d"], int)


# ---- Hugging Face config.json --------------------------------------------------------------------
LLAMA3_8B_CONFIG = {  # HF meta-llama/Meta-Llama-3-8B config.json (abridged)
    "_name_or_path": "meta-llama/Meta-Llama-3-8B",
    "model_type": "llama",
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "vocab_size": 128256,
    "attention_bias": False,
}
MIXTRAL_CONFIG = {  # HF mistralai/Mixtral-8x7B-v0.1 config.json (abridged, no _name_or_path)
    "model_type": "mixtral",
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 32768,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
    "vocab_size": 32000,
}
GPT2_XL_CONFIG = {  # HF openai-community/gpt2-xl config.json (abridged)
    "model_type": "gpt2",
    "activation_function": "gelu_new",
    "n_ctx": 1024,
    "n_embd": 1600,
    "n_head": 25,
    "n_inner": None,
    "n_layer": 48,
    "n_positions": 1024,
    "layer_norm_epsilon": 1e-5,
    "vocab_size": 50257,
}


def _write(tmp_path, cfg, folder="model", filename="config.json"):
    d = tmp_path / folder
    d.mkdir()
    (d / filename).write_text(json.dumps(cfg))
    return d / filename


def test_hf_llama_config_matches_catalog(tmp_path):
    m = load_model(_write(tmp_path, LLAMA3_8B_CONFIG))
    ref = load_model("llama3-8b")
    assert m.name == "Meta-Llama-3-8B"
    assert (m.mlp, m.norm, m.position_embedding, m.tied_embeddings, m.has_bias) == (
        "swiglu",
        "rmsnorm",
        "rope",
        False,
        False,
    )
    assert m.kv_heads == 8 and m.max_seq_len == 8192 and m.moe is None
    assert m.num_params == ref.num_params


def test_hf_mixtral_config_is_moe(tmp_path):
    path = _write(tmp_path, MIXTRAL_CONFIG, folder="Mixtral-8x7B-v0.1")
    m = load_model(str(path.parent))  # a model directory works too
    assert m.name == "Mixtral-8x7B-v0.1"  # the folder name when there is no _name_or_path
    assert m.moe is not None and (m.moe.num_experts, m.moe.top_k, m.moe.expert_ffn_hidden_size) == (8, 2, 14336)
    assert m.num_params == load_model("mixtral-8x7b").num_params


def test_hf_gpt2_config(tmp_path):
    m = load_model(str(_write(tmp_path, GPT2_XL_CONFIG, filename="gpt2-xl.json")))
    assert m.name == "gpt2-xl"
    assert (m.mlp, m.norm, m.position_embedding, m.tied_embeddings, m.has_bias) == (
        "gelu",
        "layernorm",
        "learned",
        True,
        True,
    )
    assert m.ffn_hidden_size == 4 * 1600 and m.max_seq_len == 1024
    assert m.num_params == load_model("gpt2-1.5b").num_params


# ---- errors: one line naming the bad value -------------------------------------------------------
def _error(fn, arg) -> str:
    with pytest.raises(PlannerError) as info:
        fn(arg)
    msg = str(info.value)
    assert "\n" not in msg
    return msg


def test_unknown_model_name_lists_known():
    msg = _error(load_model, "gpt5")
    assert '"gpt5"' in msg and "gpt3-175b" in msg and "config.json" in msg
    assert 'did you mean "gpt3-175b"' in _error(load_model, "gpt3-175")


def test_unknown_hardware_name_lists_known():
    msg = _error(load_hardware, "h100-sx")  # "h100" itself is an alias of h100-sxm
    assert '"h100-sx"' in msg and 'did you mean "h100-sxm"' in msg and "a100-80gb" in msg


def test_missing_file(tmp_path):
    assert "no such file" in _error(load_model, str(tmp_path / "nope.yaml"))
    assert "nope.json" in _error(load_model, str(tmp_path / "nope.json"))
    assert "no such file" in _error(load_hardware, str(tmp_path / "nope.yaml"))


def test_misspelt_key_names_the_field_and_valid_ones(tmp_path):
    text = (catalog_root() / "model_specs" / "tiny.yaml").read_text().replace("num_layers:", "num_layerz:")
    (tmp_path / "bad.yaml").write_text(text)
    msg = _error(load_model, str(tmp_path / "bad.yaml"))
    assert "num_layerz: unknown field (valid fields: name, num_layers" in msg
    assert "num_layers: missing" in msg and "bad.yaml" in msg


def test_several_unknown_fields_are_said_once_with_the_valid_ones(tmp_path):
    text = (catalog_root() / "model_specs" / "tiny.yaml").read_text()
    (tmp_path / "bad.yaml").write_text(text + "".join(f"extra_{i}: 1\n" for i in range(5)))
    msg = _error(load_model, str(tmp_path / "bad.yaml"))
    assert "extra_0, extra_1, extra_2 and 2 more: unknown fields (valid fields: name, num_layers" in msg
    assert msg.count("valid fields") == 1 and "extra_3" not in msg


@pytest.mark.parametrize(
    ("command", "given", "said"),
    [
        ("models", "hardware_profiles/h100-sxm.yaml", "looks like a hardware profile, not a model spec"),
        ("hardware", "model_specs/tiny.yaml", "looks like a model spec, not a hardware profile"),
        ("hardware", "data/hf_configs/deepseek_v3.json", "looks like a Hugging Face config.json"),
        ("models", "data/best.yaml", "looks like a plan file (search --save), not a model spec: --plan reads it"),
    ],
)
def test_a_file_of_another_kind_is_named_as_such_in_a_short_line(tmp_path, command, given, said):
    """It was refused field by field, each unknown one with the valid list: one line of thousands of characters."""
    path = tmp_path / ("extra" + Path(given).suffix)
    if given == "data/best.yaml":  # what `search --save` writes
        assert run_planner("search", "-m", "llama3-8b", "--gpus", "8", "--save", str(path))[0] == 0
    else:
        path.write_text(
            next(p for p in (catalog_root() / given, Path(__file__).parent / given) if p.is_file()).read_text()
        )
    code, out, err = run_planner(command, "show", str(path))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert said in err and len(err) < 200


def test_bad_value_and_nested_misspelling_in_profile(tmp_path):
    text = (catalog_root() / "hardware_profiles" / "h100-sxm.yaml").read_text()
    text = text.replace("  hbm: ", "  hbmm: ").replace("hbm_bytes: 85.0e9", "hbm_bytes: -1")
    (tmp_path / "hw.yaml").write_text(text)
    msg = _error(load_hardware, str(tmp_path / "hw.yaml"))
    assert "gpu.hbm_bytes: Input should be greater than 0" in msg
    assert "efficiency.hbmm: unknown field (valid fields: matmul," in msg


def test_cross_field_rule_message(tmp_path):
    text = (
        (catalog_root() / "model_specs" / "tiny.yaml")
        .read_text()
        .replace("num_attention_heads: 4", "num_attention_heads: 5")
    )
    (tmp_path / "heads.yaml").write_text(text)
    assert "hidden_size=64 is not divisible by num_attention_heads=5" in _error(
        load_model, str(tmp_path / "heads.yaml")
    )


@pytest.mark.parametrize("value", ["true", "4096.0", '"4096"'])
def test_a_count_that_is_no_int_is_refused_as_written(tmp_path, value):
    """`hidden_size: true` was read as 1 (pydantic's lax mode) and reported as `hidden_size=1 is not divisible`."""
    text = (
        (catalog_root() / "model_specs" / "tiny.yaml").read_text().replace("hidden_size: 64", f"hidden_size: {value}")
    )
    (tmp_path / "m.yaml").write_text(text)
    code, out, err = run_planner("models", "show", str(tmp_path / "m.yaml"))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "hidden_size: Input should be a valid integer" in err and "hidden_size=1" not in err


def test_yaml_syntax_error_names_line(tmp_path):
    (tmp_path / "broken.yaml").write_text("name: x\nnum_layers: [1,\n")
    msg = _error(load_model, str(tmp_path / "broken.yaml"))
    assert "broken.yaml:3" in msg and "YAML syntax error" in msg


def test_malformed_json(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"hidden_size": 4096,')
    assert "malformed JSON" in _error(load_model, str(path))


def test_config_json_missing_field(tmp_path):
    cfg = {k: v for k, v in LLAMA3_8B_CONFIG.items() if k != "hidden_size"}
    assert "config.json lacks hidden_size (or n_embd)" in _error(load_model, str(_write(tmp_path, cfg)))


def test_params_mismatch_stays_a_warning(tmp_path):
    text = (catalog_root() / "model_specs" / "tiny.yaml").read_text().replace("params: 295488", "params: 1.0e9")
    (tmp_path / "t.yaml").write_text(text)
    with pytest.warns(UserWarning, match="declared params"):
        load_model(str(tmp_path / "t.yaml"))


def test_shipped_catalog_files_read_the_same_with_libyaml():
    """The package's own catalog files are parsed by libyaml when it is there (about ten times faster); the
    result must be what the pure-Python loader, with its float rules, reads."""
    files = sorted(catalog_root().glob("*/*.yaml"))
    assert len(files) > 30
    for path in files:
        assert load_yaml(path, shipped=True) == load_yaml(path), path


@pytest.mark.parametrize(
    ("groups", "reached", "said"),
    [(7, 4, "routing_groups=7 must divide num_experts=256"), (8, 9, "group_top_k=9 needs routing_groups"),
     (None, 4, "group_top_k=4 needs routing_groups")],
)  # fmt: skip
def test_a_hand_written_moe_spec_checks_its_routing_groups(tmp_path, groups, reached, said):
    """The import refused these (hf_moe.py); a model YAML written by hand is checked the same way by the spec."""
    import yaml

    doc = yaml.safe_load((catalog_root() / "model_specs" / "deepseek-v3.yaml").read_text())
    doc["moe"].update(routing_groups=groups, group_top_k=reached)
    path = tmp_path / "deepseek-v3.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert said in _error(load_model, str(path))


@pytest.mark.parametrize("name", ["deepseek-v3", "gpt-oss-120b", "llama4-maverick", "bloom-176b"])
def test_models_show_prints_a_spec_that_loads_as_the_same_model(tmp_path, name, monkeypatch):
    """`planner models show NAME > mine.yaml` is the copy a user edits (mtp_layers: 0 for an engine without MTP):
    it printed a second `derived:` key after the YAML, and a narrow terminal folded long lines, so the file did not
    load. The derived counts are a comment now, and no line is folded."""
    monkeypatch.setenv("COLUMNS", "40")
    code, out, err = run_planner("models", "show", name)
    assert code == 0, err
    assert out.rstrip().splitlines()[-1].startswith("# derived: ")
    # the convention of the active count is said: GPT-OSS 120B's 5.71B against its card's 5.13B read as an import
    # error (audit)
    assert "active per token (the embedding table counted whole" in out
    (tmp_path / "mine.yaml").write_text(out)
    assert load_model(str(tmp_path / "mine.yaml")).model_dump() == load_model(name).model_dump()


@pytest.mark.parametrize(("kind", "name"), [("hardware", "b200"), ("hardware", "gb200-nvl72"), ("engines", "megatron")])
def test_a_profile_shown_loads_as_the_same_profile(tmp_path, kind, name, monkeypatch):
    """`planner hardware show b200 > mine.yaml` folded its descriptions at the terminal's width, which broke the
    YAML: the copy a user edits (a power cap, a bandwidth) did not load."""
    monkeypatch.setenv("COLUMNS", "40")
    code, out, err = run_planner(kind, "show", name)
    assert code == 0, err
    (tmp_path / "mine.yaml").write_text(out)
    load = load_hardware if kind == "hardware" else load_engine
    assert load(str(tmp_path / "mine.yaml")).model_dump() == load(name).model_dump()
    # --json gives sizes in whole bytes (85000000000, not 85000000000.0: DESIGN.md), and reads back the same
    code, out, err = run_planner(kind, "show", name, "--json")
    assert code == 0, err
    doc = json.loads(out)
    sizes = list(byte_fields(doc))
    assert sizes and all(isinstance(v, int) for v in sizes), sizes  # a list of sizes too
    (tmp_path / "mine.json").write_text(out)
    assert load(str(tmp_path / "mine.json")).model_dump() == load(name).model_dump()


CATALOG_FIXTURES = {  # catalog spec -> the config.json its rope_theta and norm_eps cite (tests/data/hf_configs)
    "deepseek-v3": "deepseek_v3", "kimi-k2": "kimi_k2_instruct", "qwen3-235b-a22b": "qwen3_235b_a22b",
    "qwen3-30b-a3b": "qwen3_30b_a3b", "qwen3-32b": "qwen3_32b", "qwen3-8b": "qwen3_8b", "gpt-oss-120b": "gpt_oss_120b",
    "gpt-oss-20b": "gpt_oss_20b", "llama4-scout": "llama4_scout", "llama4-maverick": "llama4_maverick",
    "llama3.1-405b": "llama3.1_405b", "llama3.1-70b": "llama3.1_70b", "llama3.1-8b": "llama3.1_8b",
}  # fmt: skip


@pytest.mark.parametrize(("name", "fixture"), sorted(CATALOG_FIXTURES.items()))
def test_catalog_specs_state_their_configs_rope_and_norm_epsilon(name, fixture):
    """`--emit megatron` writes --norm-epsilon from the spec: without it Megatron's default 1e-5 stood for
    DeepSeek's, Kimi's and Qwen3's 1e-6 (a comment in the file said so, the flag did not)."""
    cfg = json.loads((Path(__file__).parent / "data" / "hf_configs" / f"{fixture}.json").read_text())
    text = cfg.get("text_config", cfg)
    spec = load_model(name)
    assert spec.norm_eps == text["rms_norm_eps"] and spec.rope_theta == float(text["rope_theta"])


def test_json_syntax_error_says_json(tmp_path):
    """A runs file given as .json is read as YAML (JSON is a subset); its syntax error had said "YAML"."""
    (tmp_path / "runs.json").write_text('{"a": [1,\n')
    msg = _error(load_yaml, str(tmp_path / "runs.json"))
    assert "runs.json:2" in msg and "JSON syntax error" in msg and "YAML" not in msg


@pytest.mark.parametrize("group,name", [("models", "llama3-8b"), ("hardware", "b200"), ("engines", "megatron")])
def test_the_groups_json_reaches_show(group, name):
    """`planner models --json show llama3-8b` printed YAML: the group's --json, which its help offers, was dropped
    when a subcommand ran. It is carried to `show`; `engines --wide show` is refused, not ignored."""
    code, out, err = run_planner(group, "--json", "show", name)
    assert code == 0 and json.loads(out)["name"] == name, err
    if group == "engines":
        code, out, err = run_planner("engines", "--wide", "show", name)
        assert code == 2 and out == "" and "--wide" in err and "Traceback" not in err


def test_a_json_input_is_read_as_json(tmp_path):
    """A .json input was parsed as YAML: a tab-indented file (valid JSON) was refused as a 'JSON syntax error', and a
    trailing comma (invalid JSON) was accepted. It is read as JSON, a key given twice refused as in YAML."""
    doc = {"name": "x", "plan": {"dp": 2}}
    (tmp_path / "tabs.json").write_text(json.dumps(doc, indent="\t"))
    assert load_yaml(str(tmp_path / "tabs.json")) == doc
    (tmp_path / "comma.json").write_text('{"name": "x", "a": 1,}')
    assert "comma.json:1:22: JSON syntax error" in _error(load_yaml, str(tmp_path / "comma.json"))
    (tmp_path / "twice.json").write_text('{"a": 1, "a": 2}')
    assert "key 'a' is given twice" in _error(load_yaml, str(tmp_path / "twice.json"))


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("engines", "show", "/dev/zero"), "not a regular file (a device or a socket)"),
        (("memory", "--model", "/dev/zero", "--gpus", "8"), "not a regular file (a device or a socket)"),
        (("estimate", "--plan", "/dev/null"), "not a regular file (a device, a pipe or a socket)"),
        (("estimate", "-m", "llama3-8b", "--gpus", "8", "--cluster", "/dev/null"), "not a regular file"),
        (("estimate", "--model", "{fifo}", "--gpus", "8"), "expected a mapping of ModelSpec fields"),
    ],
)
def test_a_device_is_refused_and_a_pipe_without_a_writer_read_as_empty(args, said, tmp_path):
    """/dev/zero grew memory without bound and a FIFO waited forever for a writer; /dev/null was 'no such file'
    (audit): a device is said so in one line before it is read, and a pipe without a writer reads as empty at once
    (a shell's <(...) has one, and is read: the next test)."""
    import os

    fifo = tmp_path / "f.yaml"
    os.mkfifo(fifo)
    code, out, err = run_planner(*(str(fifo) if a == "{fifo}" else a for a in args))
    assert code == 2 and not out and said in err, err


def test_a_pipe_with_a_writer_is_read_to_its_end(tmp_path):
    """`--model <(cat spec.yaml)`: the shell's pipe is read as the file it stands for."""
    import os
    import threading

    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    spec = (Path(__file__).parent.parent / "model_specs" / "llama3-8b.yaml").read_bytes()
    fd = os.open(fifo, os.O_RDWR)  # a writer holds it open before the planner opens it, as the shell's does

    def write() -> None:
        os.write(fd, spec)
        os.close(fd)

    writer = threading.Timer(0.2, write)
    writer.start()
    try:
        assert load_model(str(fifo)).name == "llama3-8b"
    finally:
        writer.join()


def test_a_yaml_over_the_size_bound_is_refused_before_it_is_read(tmp_path):
    from planner.io.readers import MAX_YAML_BYTES, load_yaml

    big = tmp_path / "big.yaml"
    with big.open("wb") as f:
        f.truncate(MAX_YAML_BYTES + 1)  # sparse: nothing written, the size alone refuses it
    with pytest.raises(PlannerError, match=f"{MAX_YAML_BYTES + 1} bytes is too large to read"):
        load_yaml(big)


@pytest.mark.parametrize(
    "name", ["qwen3-30b-a3b-instruct-2507", "qwen3-235b-a22b-instruct-2507", "kimi-k2-instruct-0905",
             "llama-4-scout-17b-16e"],
)  # fmt: skip
def test_a_release_with_another_context_is_no_alias_of_an_entry(name):
    """The 2507 Qwen3 releases train 262,144-token contexts, Kimi K2 0905 256K, Llama 4 Scout's base 262,144: as
    aliases they were read with the entry's 32,768 / 131,072 / 10M, and a long run was said to pass the model's
    context (audit). They are unknown names now, and their config.json imports them as they are."""
    with pytest.raises(PlannerError, match=f'unknown model "{name}"'):
        load_model(name)
