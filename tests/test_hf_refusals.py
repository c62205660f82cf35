"""What a Hugging Face config.json says that the importer cannot represent, or that transformers itself would not
build, is refused in one line naming the key, its value and what is valid (never a traceback, never an import
that quietly drops or rereads it); and families whose keys mean something of their own are read their way."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from helpers import run_planner

from planner.errors import PlannerError
from planner.io.catalog import load_model

CONFIGS = Path(__file__).parent / "data" / "hf_configs"


def _fixture(name: str, **changes: Any) -> dict[str, Any]:
    cfg = json.loads((CONFIGS / f"{name}.json").read_text())
    cfg.update(changes)
    return cfg


def _write(tmp_path: Path, cfg: dict[str, Any]) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def _refused_in_one_line(tmp_path: Path, cfg: dict[str, Any]) -> str:
    """The CLI's whole answer to `models show` on `cfg`: exit 2 and one line on stderr, which is returned."""
    code, out, err = run_planner("models", "show", str(_write(tmp_path, cfg)))
    assert code == 2 and out == "" and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    return err


def test_gemma3_sliding_window_pattern_0_is_refused_not_a_traceback(tmp_path):
    """Gemma3TextConfig: a layer is global where (layer + 1) % sliding_window_pattern == 0; 0 divides by zero."""
    cfg = _fixture("gemma3_27b")
    cfg["text_config"]["sliding_window_pattern"] = 0
    err = _refused_in_one_line(tmp_path, cfg)
    assert "sliding_window_pattern=0" in err and ">= 1" in err


# bigcode/starcoder config.json, the architecture keys (the StarCoder paper, arXiv:2305.06161: 15.5B parameters,
# multi-query attention)
STARCODER = {
    "model_type": "gpt_bigcode",
    "activation_function": "gelu_pytorch_tanh",
    "multi_query": True,
    "n_embd": 6144,
    "n_head": 48,
    "n_inner": 24576,
    "n_layer": 40,
    "n_positions": 8192,
    "vocab_size": 49152,
    "layer_norm_epsilon": 1e-05,
}


def test_starcoder_multi_query_has_one_kv_head_and_15_5b_params(tmp_path):
    """modeling_gpt_bigcode.py: kv_heads = 1 if multi_query else num_heads; GPTBigCodeConfig's default is true.
    Read as 48 key/value heads, StarCoder was 18.47B."""
    model = load_model(_write(tmp_path, STARCODER))
    assert model.kv_heads == 1 and model.num_params == pytest.approx(15.5e9, rel=0.005)
    absent = {k: v for k, v in STARCODER.items() if k != "multi_query"}
    assert load_model(_write(tmp_path, absent)).kv_heads == 1
    assert load_model(_write(tmp_path, {**STARCODER, "multi_query": False})).kv_heads == 48


@pytest.mark.parametrize(
    ("cfg", "named"),
    [
        ({**STARCODER, "multi_query": "yes"}, "multi_query='yes'"),
        (_fixture("llama3.1_8b", multi_query=True), "multi_query in model_type 'llama'"),
    ],
)
def test_multi_query_is_read_only_as_gpt_bigcode_defines_it(tmp_path, cfg, named):
    with pytest.raises(PlannerError, match=named):
        load_model(_write(tmp_path, cfg))


@pytest.mark.parametrize(
    ("cfg", "named"),
    [
        (_fixture("deepseek_v3", kv_lora_rank=None), "kv_lora_rank=null in model_type 'deepseek_v3' (with q_lora_rank"),
        (_fixture("llama3.1_8b", qk_rope_head_dim=64, v_head_dim=128), "no kv_lora_rank in model_type 'llama'"),
    ],
)
def test_mla_keys_without_kv_lora_rank_are_refused_not_read_as_plain_attention(tmp_path, cfg, named):
    """DeepSeek-V3 with kv_lora_rank null imported as plain attention of head_dim 56, its MLA widths dropped."""
    assert named in _refused_in_one_line(tmp_path, cfg)


# what transformers would not build, or would build other than the import read it: (config, the line names)
NOT_BUILT = {
    # DeepseekV3MoE views the experts as n_group equal groups and keeps topk_group of them per token
    "groups that do not divide the experts": (_fixture("deepseek_v3", n_group=7), "n_group=7 must divide the 256"),
    "more groups kept than there are": (_fixture("deepseek_v3", topk_group=9), "topk_group=9 must be <= n_group=8"),
    "no groups": (_fixture("deepseek_v3", n_group=0), "n_group=0; it must be an integer >= 1"),
    # modeling_deepseek.py: MoE where layer >= first_k_dense_replace and layer % moe_layer_freq == 0
    "moe_layer_freq 0 (was read as 1)": (_fixture("deepseek_v3", moe_layer_freq=0), "moe_layer_freq=0; it must be"),
    "moe_layer_freq negative": (_fixture("deepseek_v3", moe_layer_freq=-2), "moe_layer_freq=-2; it must be"),
    "first_k_dense_replace negative": (_fixture("deepseek_v3", first_k_dense_replace=-1), "first_k_dense_replace=-1"),
    "first_k_dense_replace past the last layer": (
        _fixture("deepseek_v3", first_k_dense_replace=100),
        "first_k_dense_replace=100 leaves no MoE layer; it must be below num_hidden_layers=61",
    ),
    # modeling_qwen3_moe.py: MoE where layer not in mlp_only_layers and (layer + 1) % decoder_sparse_step == 0
    "decoder_sparse_step 0 (was every layer)": (
        _fixture("qwen3_30b_a3b", decoder_sparse_step=0),
        "decoder_sparse_step=0; it must be an integer >= 1",
    ),
    "mlp_only_layers past the last layer": (
        _fixture("qwen3_30b_a3b", mlp_only_layers=[100]),
        "mlp_only_layers has [100]; layer indices are 0 to 47",
    ),
    "every layer in mlp_only_layers": (
        _fixture("qwen3_30b_a3b", mlp_only_layers=list(range(48))),
        "leaves none of the 48 layers MoE",
    ),
    "layer_types a string (was ignored)": (_fixture("llama3.1_8b", layer_types="full_attention"), "layer_types='full"),
    # the expert count named, not the top-k beside it
    "no routed experts": (_fixture("deepseek_v3", n_routed_experts=0), "n_routed_experts=0 with num_experts_per_tok=8"),
    "a top-k without an expert count": (
        _fixture("llama3.1_8b", num_experts_per_tok=2),
        "num_experts_per_tok=2 but no expert count",
    ),
    # an expert width of null or 0 fell through to the dense width: DeepSeek-V3 at 5.9T parameters (audit)
    "no expert width": (_fixture("deepseek_v3", moe_intermediate_size=None), "moe_intermediate_size is null; the"),
    "an expert width of 0": (_fixture("qwen3_30b_a3b", moe_intermediate_size=0), "moe_intermediate_size=0; it must"),
    # Qwen3-MoE reads num_experts; the first key found won (a 16B model read for the 30B): refused, both named
    "two expert counts": (
        _fixture("qwen3_30b_a3b", num_local_experts=64),
        "num_local_experts=64, num_experts=128 disagree: give the expert count once",
    ),
    "tie_word_embeddings not a boolean": (_fixture("llama3.1_8b", tie_word_embeddings="false"), "'false' is not true"),
}


@pytest.mark.parametrize("case", sorted(NOT_BUILT))
def test_a_value_transformers_would_not_build_is_refused_naming_it(tmp_path, case):
    cfg, named = NOT_BUILT[case]
    with pytest.raises(PlannerError) as info:
        load_model(_write(tmp_path, cfg))
    assert named in str(info.value) and "\n" not in str(info.value)


def test_the_cli_refuses_first_k_dense_replace_naming_it_not_the_spec_s_field(tmp_path):
    """It said `first_k_dense=0`: the spec's field, after the placement had lost the value."""
    err = _refused_in_one_line(tmp_path, _fixture("deepseek_v3", first_k_dense_replace=100))
    assert "first_k_dense_replace=100" in err and "first_k_dense=0" not in err


def test_an_empty_moe_layers_list_is_refused_not_read_as_every_layer(tmp_path):
    """Llama4TextConfig keeps `moe_layers: []` as given and builds every layer dense; the import read it as absent
    and made Scout all-MoE (107.8B parameters where transformers builds about 17B, audit)."""
    cfg = _fixture("llama4_scout")
    cfg["text_config"] = {**cfg["text_config"], "moe_layers": []}
    err = _refused_in_one_line(tmp_path, cfg)
    assert "moe_layers is empty, so no layer has experts" in err


def test_group_limited_routing_still_imports():
    """DeepSeek-V3: 8 groups of 32 experts, 4 groups per token; GLM's 1 of 1 is no limit."""
    moe = load_model(CONFIGS / "deepseek_v3.json").moe
    assert moe is not None and (moe.routing_groups, moe.group_top_k) == (8, 4)
    glm = load_model(CONFIGS / "glm4.7.json").moe
    assert glm is not None and glm.routing_groups is None


@pytest.mark.parametrize("value", [{"a": 1}, 7, ["llama"]])
def test_a_model_type_that_is_no_name_is_refused(tmp_path, value):
    """model_type names a transformers family: a mapping, number or list is refused, not read as an unknown family
    whose name is its repr."""
    err = _refused_in_one_line(tmp_path, _fixture("llama3.1_8b", model_type=value))
    assert "model_type" in err and "must be a string" in err


def test_a_name_or_path_that_is_no_string_does_not_name_the_model(tmp_path):
    """`_name_or_path` names the model only as a path or hub id: a mapping's repr is no name; the folder is."""
    folder = tmp_path / "my-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(_fixture("llama3.1_8b", _name_or_path={"a": [1]})))
    assert load_model(str(folder / "config.json")).name == "my-llama"


def test_shared_experts_named_num_shared_experts_are_read(tmp_path):
    """Ling's bailing_moe names its shared-expert count num_shared_experts (each of moe_intermediate_size): read
    as DeepSeek's n_shared_experts is, not dropped (Ling-lite 1.5 had imported 16.32B of its 16.8B)."""
    base = load_model(_write(tmp_path, _fixture("qwen3_30b_a3b")))
    shared = load_model(_write(tmp_path, _fixture("qwen3_30b_a3b", num_shared_experts=2)))
    assert shared.moe is not None and shared.moe.num_shared_experts == 2
    width, h = shared.moe.expert_ffn_hidden_size, shared.hidden_size
    added = 2 * 3 * h * width * shared.num_layers  # two gated experts of the routed experts' width, every layer
    assert shared.num_params - base.num_params == pytest.approx(added, rel=1e-6)


def test_shared_experts_under_a_name_the_import_does_not_read_are_refused(tmp_path):
    err = _refused_in_one_line(tmp_path, _fixture("qwen3_30b_a3b", moe_num_shared_experts=2))
    assert "moe_num_shared_experts=2" in err and "shared experts" in err
    # a switch about shared experts is no count of them (Nemotron 3's moe_shared_expert_overlap: true)
    assert load_model(_write(tmp_path, _fixture("qwen3_30b_a3b", moe_shared_expert_overlap=True))).moe is not None


def test_lightning_attention_layers_in_attn_type_list_are_refused(tmp_path):
    """MiniMax-M1 / Text-01: attn_type_list marks each layer 0 (Lightning, a linear attention) or 1 (softmax); 70
    of M1's 80 had been imported as softmax attention."""
    err = _refused_in_one_line(tmp_path, _fixture("llama3.1_8b", attn_type_list=[0] * 7 * 4 + [1] * 4))
    assert "attn_type_list" in err and "28 linear-attention (Lightning) layers of 32" in err
    assert load_model(_write(tmp_path, _fixture("llama3.1_8b", attn_type_list=[1] * 32))).num_layers == 32


def test_gemma4s_global_attention_is_refused_by_its_own_key_not_its_activation(tmp_path):
    """Gemma 4 names its activation hidden_activation and gives its global layers their own head size: the refusal
    names what cannot be represented, not the activation a user would add to get a wrong import."""
    cfg = _fixture("llama3.1_8b", model_type="gemma4_text", global_head_dim=512, num_global_key_value_heads=4)
    del cfg["hidden_act"]
    err = _refused_in_one_line(tmp_path, cfg)
    assert "global_head_dim=512" in err and "hidden_act" not in err


def test_a_vision_tower_beside_a_top_level_text_model_is_said_to_be_left_out(tmp_path):
    """Qwen2.5-VL keeps its language model's keys at the top level and its vision tower in vision_config (depth:
    its layer count): the import says it leaves the tower out, as it does for a text_config model."""
    cfg = _fixture("llama3.1_8b", vision_config={"depth": 32, "hidden_size": 1280})
    code, _out, err = run_planner("models", "show", str(_write(tmp_path, cfg)))
    assert code == 0 and "vision_config (32 layers, hidden 1280)" in " ".join(err.split()), err


def test_a_multimodal_config_without_its_language_model_is_refused_naming_that(tmp_path):
    """A Llama 4 config cut to its vision tower has no text_config: it said 'no hidden_act' and to add one."""
    cfg = {"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4", "vision_config": {"depth": 2}}
    err = _refused_in_one_line(tmp_path, cfg)
    assert "neither a text_config nor a language model at its top level" in err and "hidden_act" not in err


def test_a_partial_rotary_factor_is_imported_emitted_and_refused_where_an_engine_lacks_it(tmp_path):
    """GLM-4.5's partial_rotary_factor 0.5 was said in a warning, and --emit megatron wrote a file that rotates whole
    heads (audit): the spec holds it (rotary_percent), Megatron is told (--rotary-percent, arguments.py l.2420
    @d98e8a64; megatron_model_violations checks the flag for every emitted model), and an engine whose models
    rotate whole heads refuses it by name."""
    from planner.launch.emit.megatron_model import model_args

    whole = _write(tmp_path, _fixture("qwen3_8b"))
    assert load_model(str(whole)).rotary_percent == 1
    (tmp_path / "half").mkdir()
    cfg = _write(tmp_path / "half", _fixture("qwen3_8b", partial_rotary_factor=0.5))
    spec = load_model(str(cfg))
    assert spec.rotary_percent == 0.5
    code, out, err = run_planner("models", "show", str(cfg))
    assert code == 0 and "rotary_percent: 0.5" in out and "partial_rotary_factor" not in err, err
    args = model_args(spec, seq_len=4096)
    assert args[args.index("--rotary-percent") + 1] == "0.5"
    assert "--rotary-percent" not in model_args(load_model("qwen3-8b"), seq_len=4096)
    for engine in ("torchtitan", "planner"):
        code, _out, err = run_planner("estimate", "-m", str(cfg), "--gpus", "8", "--engine", engine)
        assert code == 2 and f"{engine} does not implement" in err and "RoPE on part of each head" in err, err
    code, _out, err = run_planner("estimate", "-m", str(cfg), "--gpus", "8", "--engine", "megatron")
    assert code == 0, err


def test_multi_token_prediction_of_hybrid_blocks_is_refused_by_its_key(tmp_path):
    """Nemotron 3.5 builds its MTP modules of the hybrid stack's block types (mtp_layers_block_type); the spec's
    are DeepSeek's: refused naming the config's key, not the spec's mtp_layers field."""
    cfg = _fixture("nemotron_h_8b", num_nextn_predict_layers=1, mtp_layers_block_type=["attention", "moe"])
    err = _refused_in_one_line(tmp_path, cfg)
    assert "mtp_layers_block_type=['attention', 'moe']" in err and "mtp_layers=" not in err


def test_qwen2_5_vls_language_model_is_read_as_qwen2s_with_its_qkv_biases(tmp_path):
    """Qwen2.5-VL's text model is Qwen2's (Qwen2_5_VLAttention: q/k/v biases, none on o_proj); it had imported as an
    unknown family without them."""
    cfg = _fixture("qwen3_8b", model_type="qwen2_5_vl", vision_config={"depth": 32, "hidden_size": 1280})
    code, _out, err = run_planner("models", "show", str(_write(tmp_path, cfg)))
    said = " ".join(err.split())
    assert code == 0 and "vision_config (32 layers" in said and "not a family the importer has rules for" not in said
    spec = load_model(_write(tmp_path, cfg))
    assert spec.qkv_bias and not spec.linear_bias


def test_shared_experts_under_stepfun_s_name_and_per_layer_head_counts_are_refused(tmp_path):
    """Step-3.7-Flash's shared-expert width is share_expert_dim, which the importer does not read: refused by name
    (an edit to 5,120 would have left 2.0B parameters out); Laguna's head count per layer has no field."""
    step = json.loads((CONFIGS / "step3.7_flash.json").read_text())
    err = _refused_in_one_line(tmp_path, {**step, "hidden_act": "silu", "share_expert_dim": 5120})
    assert "share_expert_dim=5120: shared experts under a name the import does not read" in err
    err = _refused_in_one_line(tmp_path, json.loads((CONFIGS / "laguna_xs2_fp8.json").read_text()))
    assert "num_attention_heads_per_layer=[40 entries]: layers with attention head counts of their own" in err


def test_settings_read_past_are_said_by_name_and_value(tmp_path):
    """DeepSeek-V3's config was imported without a word of its sigmoid router, its no-aux-loss top-k, its 2.5 expert
    scale and its YaRN positions (the dogfood audit): none changes memory or step time, and no spec field holds
    them, so each is said in one warning with its value; a config without them (or at their no-op) says nothing."""
    import warnings

    from planner.io.hf_layout import HfConfig
    from planner.io.hf_unpriced import warn_unpriced

    data = Path(__file__).parent / "data" / "hf_configs"
    with pytest.warns(UserWarning, match="read past") as said:
        load_model(str(data / "deepseek_v3.json"))
    text = " ".join(str(w.message) for w in said if "read past" in str(w.message))
    for part in (
        "rope_scaling yarn x40",
        "scoring_func 'sigmoid'",
        "topk_method 'noaux_tc'",
        "routed_scaling_factor 2.5",
    ):
        assert part in text, text
    with pytest.warns(UserWarning, match="activation 'gelu_pytorch_tanh' of a gated MLP"):  # GeGLU, as SwiGLU
        load_model(str(data / "gemma3_27b.json"))
    plain = json.loads((data / "qwen3_8b.json").read_text())
    noop = {**plain, "scoring_func": "softmax", "routed_scaling_factor": 1.0, "topk_method": "greedy"}
    unstated = {k: v for k, v in plain.items() if k != "hidden_act"}  # SiLU by the family's default: no 'gelu' said
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_model(str(data / "qwen3_8b.json"))
        warn_unpriced(HfConfig(noop, "noop"))
        (tmp_path / "unstated.json").write_text(json.dumps(unstated))
        load_model(str(tmp_path / "unstated.json"))


@pytest.mark.parametrize(
    ("fixture", "parts"),
    [("llama4_scout", ["attn_temperature_tuning True (attention temperature tuning of the NoPE layers)"]),
     ("gemma3_27b", ["rope_local_base_freq 10000.0 (the sliding-window layers' RoPE base)",
                     "query_pre_attn_scalar 168 (the query scaling"]),
     ("nemotron_h_8b", ["activation 'relu2' of a plain MLP (the spec's gelu: the same shape and cost)"])],
)  # fmt: skip
def test_what_a_familys_config_class_turns_on_is_read_past_aloud(fixture, parts):
    """Llama 4's temperature tuning (on in Llama4TextConfig where the file is silent), Gemma 3's local RoPE base and
    query scaling, Nemotron-H's relu² priced as a plain GELU MLP: read past without a word (audit), now said."""
    with pytest.warns(UserWarning, match="read past") as said:
        load_model(str(CONFIGS / f"{fixture}.json"))
    text = " ".join(" ".join(str(w.message).split()) for w in said)
    assert all(part in text for part in parts), text


def test_an_empty_config_and_a_missing_ffn_size_are_said_plainly(tmp_path):
    """`{}` was refused as 'no hidden_act, and the planner does not know the default of model_type ''', and a Llama
    config without its FFN size as lacking Llama 4's intermediate_size_mlp first."""
    (tmp_path / "empty.json").write_text("{}")
    code, _, err = run_planner("models", "show", str(tmp_path / "empty.json"))
    assert code == 2 and "is no model config: it gives none of model_type, hidden_size, num_hidden_layers" in err
    cfg = json.loads((Path(__file__).parent / "data" / "hf_configs" / "llama3.1_8b.json").read_text())
    del cfg["intermediate_size"]
    (tmp_path / "noffn.json").write_text(json.dumps(cfg))
    code, _, err = run_planner("models", "show", str(tmp_path / "noffn.json"))
    assert code == 2 and "lacks intermediate_size (or ffn_dim, n_inner)" in err


def test_tie_word_embeddings_null_is_untied_as_transformers_reads_it(tmp_path):
    """transformers keeps a null tie_word_embeddings as None, which ties nothing: it imported as tied (7.50B for
    Llama 3.1 8B's 8.03B, audit)."""
    untied = load_model(_write(tmp_path, _fixture("llama3.1_8b", tie_word_embeddings=None)))
    assert not untied.tied_embeddings and untied.num_params == load_model("llama3.1-8b").num_params


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}, "quantization_config fp8"),
        ({"torch_dtype": "float8_e4m3fn"}, "torch_dtype float8_e4m3fn"),
        ({"dtype": "bfloat16"}, None),  # the plan's own precision: nothing to say
    ],
)
def test_a_quantized_checkpoint_is_said_not_dropped(tmp_path, changes, said):
    """DeepSeek-V3's fp8 blocks, GPT-OSS's mxfp4 and Kimi-K2's int4 were never read, nor said (audit): the import
    says how the checkpoint is stored and that a plan trains at --precision."""
    path = _write(tmp_path, _fixture("llama3.1_8b", **changes))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_model(path)
    stored = [str(w.message) for w in caught if "how the checkpoint is stored" in str(w.message)]
    assert (stored and said in stored[0] and "a plan trains at --precision" in stored[0]) if said else not stored


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"sliding_window": 0}, "attention.window: Input should be greater than 0, got 0 (attention.window is the "
                                "config's sliding_window)"),
        ({"sliding_window": None}, "has sliding or chunked layers but attention.window is null (attention.window is "
                                   "the config's sliding_window)"),
        ({"num_key_value_heads": 5}, "num_kv_heads=5 must divide num_attention_heads=64 (num_kv_heads is the config's "
                                     "num_key_value_heads)"),
    ],
)  # fmt: skip
def test_a_refusal_names_the_config_key_behind_the_spec_field(tmp_path, changes, said):
    """The spec's validators name its own fields: a sliding_window of 0 was refused as 'attention.window: ...', which
    a config.json has no such key as (audit). The config's key is said beside it."""
    assert said in _refused_in_one_line(tmp_path, _fixture("gpt_oss_120b", **changes))


# OPT-350m as OPTConfig describes it (transformers configuration_opt.py: word_embed_proj_dim, do_layer_norm_before)
OPT_350M = {
    "model_type": "opt", "hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "ffn_dim": 4096,
    "vocab_size": 50272, "max_position_embeddings": 2048, "word_embed_proj_dim": 512, "do_layer_norm_before": False,
    "activation_function": "relu", "enable_bias": True,
}  # fmt: skip


def test_opt_embedding_projections_are_refused_and_post_ln_said(tmp_path):
    """OPT-350m imported at 356M parameters, 331M published, without a word: its project_in/project_out (a 512-wide
    embedding) were dropped and its post-LN layers read as pre-LN (audit)."""
    err = _refused_in_one_line(tmp_path, OPT_350M)
    assert "word_embed_proj_dim=512 differs from hidden_size=1024" in err and "not representable" in err
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_model(_write(tmp_path, {**OPT_350M, "word_embed_proj_dim": 1024}))
    said = " ".join(str(w.message) for w in caught)
    assert "do_layer_norm_before False (where the norms sit (post-LN when false))" in said
