"""What each Hugging Face model family means by what it leaves out of `config.json`, and what cannot be imported.

Tables only (hf_config.py reads them). A key absent from a config takes the default of the family's transformers
config class, cited per family; an explicit null stays null (DeepSeek-V2-Lite's `q_lora_rank: null` means a
full-rank query projection).
"""

from __future__ import annotations

from typing import Any

# Absent keys: the transformers config classes' defaults (only the keys the importer reads).
_DEEPSEEK_V3: dict[str, Any] = {  # transformers/models/deepseek_v3/configuration_deepseek_v3.py, DeepseekV3Config
    "vocab_size": 129280,
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "n_shared_experts": 1,
    "n_routed_experts": 256,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "qk_nope_head_dim": 128,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
    "attention_bias": False,
}
# transformers/models/glm4_moe/configuration_glm4_moe.py, Glm4MoeConfig (GLM-4.5, GLM-4.5-Air)
_GLM4_MOE: dict[str, Any] = {
    "hidden_act": "silu",
    "rms_norm_eps": 1e-5,  # Glm4MoeRMSNorm throughout
    "tie_word_embeddings": False,
    "attention_bias": False,
    "use_qk_norm": False,
    "n_group": 1,
    "topk_group": 1,
}
FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "glm4_moe": _GLM4_MOE,
    "deepseek_v3": _DEEPSEEK_V3,
    "kimi_k2": _DEEPSEEK_V3,  # Kimi-K2's config.json maps AutoConfig to configuration_deepseek.DeepseekV3Config
    # transformers/models/qwen3_moe/configuration_qwen3_moe.py, Qwen3MoeConfig
    "qwen3_moe": {
        "decoder_sparse_step": 1,
        "moe_intermediate_size": 768,
        "num_experts_per_tok": 8,
        "num_experts": 128,
        "mlp_only_layers": [],
        "tie_word_embeddings": False,
        "use_sliding_window": False,
    },
    # transformers/models/gpt_oss/configuration_gpt_oss.py, GptOssConfig
    "gpt_oss": {
        "num_hidden_layers": 36,
        "num_local_experts": 128,
        "vocab_size": 201088,
        "hidden_size": 2880,
        "intermediate_size": 2880,
        "head_dim": 64,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "sliding_window": 128,
        "tie_word_embeddings": False,
        "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-5,
        "num_experts_per_tok": 4,
        "attention_bias": True,
        "mlp_bias": True,  # GptOssExperts' gate_up_proj_bias and down_proj_bias, always; the router's too
        "swiglu_limit": 7.0,
    },
    # transformers/models/llama4/configuration_llama4.py, Llama4TextConfig
    "llama4_text": {
        "vocab_size": 202048,
        "hidden_size": 5120,
        "intermediate_size": 8192,
        "intermediate_size_mlp": 16384,
        "num_hidden_layers": 48,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": 4096 * 32,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False,
        "num_experts_per_tok": 1,
        "num_local_experts": 16,
        "interleave_moe_layer_step": 1,
        "use_qk_norm": True,
        "no_rope_layer_interval": 4,
        "attention_chunk_size": 8192,
        "attention_bias": False,
    },
    # transformers/models/gemma3/configuration_gemma3.py, Gemma3TextConfig
    "gemma3_text": {
        "vocab_size": 262208,
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1_000_000.0,  # the global layers' (the sliding-window layers': rope_local_base_freq 10,000)
        "tie_word_embeddings": True,
        "attention_bias": False,
        "sliding_window": 4096,
        "sliding_window_pattern": 6,
        "hidden_activation": "gelu_pytorch_tanh",
    },
    # transformers/models/gpt_bigcode/configuration_gpt_bigcode.py, GPTBigCodeConfig (StarCoder, SantaCoder)
    "gpt_bigcode": {"multi_query": True, "activation_function": "gelu_pytorch_tanh"},
    # transformers/models/nemotron_h/configuration_nemotron_h.py, NemotronHConfig
    "nemotron_h": {
        "vocab_size": 131072,
        "hidden_size": 4096,
        "tie_word_embeddings": False,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 4096,
        "attention_bias": False,
        "intermediate_size": 21504,
        "mlp_bias": False,
        "ssm_state_size": 128,
        "mamba_num_heads": 128,
        "mamba_head_dim": 64,
        "n_groups": 8,
        "conv_kernel": 4,
        "use_conv_bias": True,
        "chunk_size": 128,
        "mamba_proj_bias": False,
        "n_routed_experts": 8,
        "n_shared_experts": 1,
        "moe_intermediate_size": 7688,
        "moe_shared_expert_intermediate_size": 7688,
        "num_experts_per_tok": 2,
        "num_nextn_predict_layers": 0,
        "rms_norm_eps": 1e-5,
    },
}

# Families whose MLP is gated (three matrices) whatever `hidden_act` says (Gemma uses a GELU gate).
GATED_FAMILIES = {
    "llama",
    "llama4_text",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
    "gemma",
    "gemma2",
    "gemma3_text",
    "phi3",
    "olmo",
    "olmo2",
    "deepseek_v2",
    "deepseek_v3",
    "kimi_k2",
    "gpt_oss",
    "granite",
    "cohere",
    "internlm2",
    "glm4_moe",
}
# Families with a learned absolute position table; nemotron_h has none at all; everything else is taken as RoPE.
LEARNED_POSITION_FAMILIES = {"gpt2", "opt", "gpt_bigcode", "gpt_neo", "biogpt"}
# Families whose MLP the importer knows without an activation key (gated whatever it says, or the two-matrix GELU of
# the learned-position GPTs, or Nemotron-H's relu²); elsewhere an absent one is asked for (FAMILY_DEFAULTS may give it).
KNOWN_ACTIVATION_FAMILIES = GATED_FAMILIES | LEARNED_POSITION_FAMILIES | {"nemotron_h"}
NO_POSITION_FAMILIES = {"nemotron_h"}  # Nemotron-H's attention layers carry no position encoding (the paper, 2.1)
UNTIED_BY_DEFAULT = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "phi3", "olmo2"}
RMSNORM_FAMILIES = {"nemotron_h"}  # RMSNorm although the config names only layer_norm_epsilon (modeling_nemotron_h)
# Biases on q, k and v only, always, unless the config's qkv_bias says otherwise (Qwen2Attention: bias=True on
# q/k/v, False on o_proj; Qwen2MoeAttention the same, by Qwen2MoeConfig.qkv_bias).
# Qwen2-VL and Qwen2.5-VL's language models are Qwen2's (Qwen2_5_VLAttention: q/k/v bias=True, o_proj bias=False).
QWEN2_VL_FAMILIES = {"qwen2_vl", "qwen2_5_vl", "qwen2_vl_text", "qwen2_5_vl_text"}
# MiMo-7B's too (XiaomiMiMo/MiMo-7B-Base modeling_mimo.py: MiMoModel(Qwen2Model); its attention_bias unread).
QKV_BIAS_FAMILIES = {"qwen2", "qwen2_moe", "mimo"} | QWEN2_VL_FAMILIES
# attention_bias biases q, k and v only (Glm4Attention / Glm4MoeAttention: o_proj bias=False; SeedOssAttention:
# o_proj by its own attention_out_bias). Elsewhere (LlamaAttention, Qwen3, GPT-OSS) it biases all four.
QKV_ONLY_ATTENTION_BIAS_FAMILIES = {"glm4", "glm4_moe", "seed_oss"}
# One switch biases every linear, by its own name and default: Starcoder2Config(use_bias=True) (Starcoder2Attention's
# q/k/v/o and Starcoder2MLP's c_fc/c_proj, modeling_starcoder2.py); InternLM2Config(bias=True) (wqkv, wo, w1/w2/w3,
# internlm/internlm2 configuration_internlm2.py and modeling_internlm2.py).
ALL_LINEAR_BIAS_KEYS = {"starcoder2": ("use_bias", True), "internlm2": ("bias", True)}

# One shared expert of the routed experts' width in every MoE layer (Llama4TextMoe.shared_expert, modeling_llama4.py).
SHARED_EXPERT_FAMILIES = {"llama4_text": 1}
# Learned RMSNorm q/k norms over head_dim (Qwen3Attention / Gemma3Attention / Qwen3VLTextAttention /
# ApertusAttention q_norm, k_norm), whatever a legacy `use_qk_norm` key says (Qwen3-Coder's config carries one).
QK_RMSNORM_FAMILIES = {"qwen3", "qwen3_moe", "gemma3_text", "qwen3_vl_text", "qwen3_vl_moe_text", "apertus"}
# RMSNorm q/k norms over the whole projection, heads x head_dim wide (Olmo2Attention / Olmo3Attention q_norm,
# k_norm): imported as per-head RMSNorms, which save the same activations, with fewer weights, said in a warning.
QK_FULL_WIDTH_RMSNORM_FAMILIES = {"olmo2", "olmo3"}
# What `use_qk_norm: true` means, per family: Glm4MoeAttention's q_norm/k_norm are RMSNorms over head_dim
# (modeling_glm4_moe.py), Llama 4's an L2 norm without weights (Llama4TextL2Norm). Elsewhere it is refused: the
# kind is the family's.
QK_NORM_FLAG_FAMILIES = {"glm4_moe": "rmsnorm", "llama4_text": "l2"}
# Norms after attention and after the MLP as well as before (Gemma2/Gemma3DecoderLayer: four per layer).
SANDWICH_NORM_FAMILIES = {"gemma2", "gemma3_text"}
# Learned attention sinks, one logit per head (GptOssAttention.sinks).
SINK_FAMILIES = {"gpt_oss"}
# `sliding_window` applies to every layer (MistralAttention, Phi3Attention, Starcoder2Attention pass it to each).
ALL_SLIDING_FAMILIES = {"mistral", "mixtral", "phi3", "starcoder2"}
# Alternating sliding, global (layer_types default: sliding where (i + 1) % 2, Gemma2Config, GptOssConfig).
ALTERNATING_FAMILIES = {"gemma2", "gpt_oss"}
# Multi-head latent attention (modeling_deepseek_v3.py DeepseekV3Attention: kv_a_proj_with_mqa is kv_lora_rank wide)
MLA_FAMILIES = {"deepseek_v2", "deepseek_v3", "kimi_k2"}
MLA_KEYS = ("q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")  # its keys beside kv_lora_rank
QWEN_FAMILIES = {"qwen2", "qwen2_moe", "qwen3", "qwen3_moe"} | QWEN2_VL_FAMILIES

LAYER_TYPE_LETTERS = {"full_attention": "G", "sliding_attention": "S", "chunked_attention": "C"}
# Nemotron-H's layers_block_type names (old remote code, and transformers' newer names) -> pattern letters.
BLOCK_TYPE_LETTERS = {
    "mamba": "M",
    "linear_attention": "M",
    "attention": "*",
    "full_attention": "*",
    "mlp": "-",
    "moe": "E",
}

# ---- refused by name: the spec cannot represent these -----------------------------------------------
ENCODER_DECODER_FAMILIES = {
    "t5",
    "mt5",
    "umt5",
    "longt5",
    "switch_transformers",
    "t5gemma",
    "bart",
    "mbart",
    "pegasus",
    "marian",
    "whisper",
    "blenderbot",
    "led",
    "m2m_100",
    "nllb_moe",
    "plbart",
    "fsmt",
}
# SSM / hybrid families other than Nemotron-H's hybrid_override_pattern (Mamba-1, parallel attention + SSM, ...).
OTHER_SSM_FAMILIES = {
    "mamba", "mamba2", "falcon_mamba", "jamba", "falcon_h1", "zamba", "zamba2", "bamba", "plamo2",
    "granitemoehybrid",  # Granite 4.0-H: Mamba-2 and attention layers by layer_types ("mamba", "attention")
}  # fmt: skip
# The names transformers configs give the routed-expert count (Mixtral/GPT-OSS, Qwen-MoE/OLMoE, DeepSeek/Kimi).
EXPERT_COUNT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")
# The names of shared-expert counts and widths hf_moe.py reads (Qwen2-MoE, DeepSeek/Kimi/GLM, Ling, Nemotron-H).
SHARED_EXPERT_KEYS = (
    "shared_expert_intermediate_size", "n_shared_experts", "num_shared_experts", "moe_shared_expert_intermediate_size",
)  # fmt: skip
TOP_K_KEYS = ("num_experts_per_tok", "experts_per_token", "moe_topk")  # the experts each token is routed to
# Keys that mean linear-attention (Gated DeltaNet / KDA) layers: Qwen3-Next, Qwen3.5, Kimi-Linear.
LINEAR_ATTENTION_KEYS = (
    "linear_num_value_heads",
    "linear_key_head_dim",
    "full_attention_interval",
    "linear_attn_config",
)
# Every model_type the importer has a rule for: another family is read from its keys alone, with a warning.
KNOWN_FAMILIES = set(FAMILY_DEFAULTS).union(
    KNOWN_ACTIVATION_FAMILIES, ALL_SLIDING_FAMILIES, ALTERNATING_FAMILIES, QWEN_FAMILIES, QK_RMSNORM_FAMILIES,
    QKV_BIAS_FAMILIES,
)  # fmt: skip
# The MLP activations transformers builds by name (src/transformers/activations.py ACT2CLS), and swiglu, which
# custom configs write for a gated SiLU; any other name is no activation the importer can price.
ACTIVATION_NAMES = {
    "gelu", "gelu_10", "gelu_fast", "gelu_new", "gelu_python", "gelu_pytorch_tanh", "gelu_accurate", "laplace",
    "leaky_relu", "linear", "mish", "quick_gelu", "relu", "relu2", "relu6", "sigmoid", "silu", "swish", "tanh",
    "prelu", "xielu", "swiglu", "geglu",
}  # fmt: skip
# Keys a family's own rule reads: elsewhere they would be dropped, so they are refused outside these families.
FAMILY_ONLY_KEYS = {
    "hybrid_override_pattern": "nemotron_h",
    "attention_chunk_size": "llama4_text",
    "multi_query": "gpt_bigcode",  # FalconConfig's multi_query goes with its own num_kv_heads rules
}
# Keys of parts the spec has no field for, with why.
UNREPRESENTED_KEYS = {
    "index_topk": "DeepSeek sparse attention's indexer (its own heads and top-k selection)",
    "moe_latent_size": "MoE experts that work in a latent width other than hidden_size",
    "hc_mult": "hyper-connections (several residual streams)",
    "cross_attention_layers": "cross-attention layers (Llama 3.2 Vision's text model attends to the image there)",
    "block_configs": "layers of differing widths, some without attention or MLP (DeciLM / Llama-Nemotron's NAS)",
    "num_mtp_modules": "MiniMax's multi-token-prediction modules (the spec's are DeepSeek's, num_nextn_predict_layers)",
    "mtp_layers_block_type": "multi-token-prediction modules built of the hybrid stack's block types (Nemotron 3.5)",
    "global_head_dim": "global-attention layers with a head size of their own (Gemma 4)",
    "num_global_key_value_heads": "global-attention layers with key/value heads of their own (Gemma 4)",
    "attention_k_eq_v": "attention whose keys are its values (Gemma 4)",
    "num_attention_heads_per_layer": "layers with attention head counts of their own (Laguna)",
}
