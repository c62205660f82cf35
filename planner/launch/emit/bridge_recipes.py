"""Which Megatron-Bridge recipe builds which catalog model, field for field (pure data, read by megatron_bridge.py).

Megatron-Bridge main @067f987d: src/megatron/bridge/recipes/__init__.py re-exports each family's recipes/<family>/
__init__.py, whose pretrain names are aliases of the H100 recipes in recipes/<family>/h100/ (the names
scripts/training/run_recipe.py --recipe takes). Each loads a Hugging Face config.json through AutoBridge
(models/conversion/model_bridge.py CONFIG_MAPPING: layers, hidden, heads, experts, top-k, MLA ranks, n_group/topk_group,
num_nextn_predict_layers) and the family's bridge; model_specs/ holds those config.json files' architectures, and
tests/data/hf_configs/ the files, which import to the catalog model field for field.
"""

from __future__ import annotations

# Recipe -> the catalog model whose architecture it builds.
CATALOG_RECIPES = {
    # recipes/qwen/qwen3.py, qwen3_moe.py: the qwen3_*_h100_bf16 recipes of recipes/qwen/h100/, which build
    # AutoBridge.from_hf_pretrained("Qwen/Qwen3-8B"), ("Qwen/Qwen3-32B"), ("Qwen/Qwen3-30B-A3B") and
    # ("Qwen/Qwen3-235B-A22B"): q/k norms, explicit head_dim, the experts
    "qwen3_8b_pretrain_config": "qwen3-8b",
    "qwen3_32b_pretrain_config": "qwen3-32b",
    "qwen3_30b_a3b_pretrain_config": "qwen3-30b-a3b",
    "qwen3_235b_a22b_pretrain_config": "qwen3-235b-a22b",
    # recipes/deepseek/deepseek_v3.py: deepseek_v3_pretrain_config = h100/deepseek_v3.py
    # deepseek_v3_pretrain_1024gpu_h100_bf16_config, from_hf_pretrained("deepseek-ai/DeepSeek-V3")
    # (models/deepseek/deepseek_v3_bridge.py: MLA, moe_layer_freq from first_k_dense_replace, the shared expert,
    # 8 groups top-4) and mtp_num_layers 1. Its own: a pipeline layout per (pp, vp) (_get_deepseek_v3_pipeline_layout,
    # rebuilt by recipe_runner.py sync_model_pipeline_layout unless the layout is overridden), HybridEP, the
    # precision-aware optimizer with bf16 moments and main grads, a MixedPrecisionConfig reducing in bf16,
    # make_vocab_size_divisible_by 1280
    "deepseek_v3_pretrain_config": "deepseek-v3",
    # recipes/kimi/kimi_k2.py: kimi_k2_pretrain_config = h100/kimi_k2.py kimi_k2_pretrain_512gpu_h100_bf16_config,
    # from_hf_pretrained("moonshotai/Kimi-K2-Instruct") (models/kimi/kimi_bridge.py: DeepSeek-V3's layers with 384
    # experts, 64 heads, 1 dense layer, no MTP). Its own: Muon (_apply_kimi_k2_optimizer "muon": optimizer
    # "dist_muon", no distributed optimizer), DeepEP, selective recompute, a layout per (pp, vp)
    "kimi_k2_pretrain_config": "kimi-k2",
    # recipes/gpt_oss/gpt_oss.py: gpt_oss_20b_pretrain_config / gpt_oss_120b_pretrain_config = h100/gpt_oss.py
    # gpt_oss_20b_pretrain_16gpu_h100_bf16_config / gpt_oss_120b_pretrain_64gpu_h100_bf16_config, from_hf_pretrained
    # ("openai/gpt-oss-20b") / ("openai/gpt-oss-120b") (models/gpt_oss/gpt_oss_bridge.py: window (127, 0) skipped on
    # every second layer, learnable softmax sinks, biases). Their own: DeepEP
    "gpt_oss_20b_pretrain_config": "gpt-oss-20b",
    "gpt_oss_120b_pretrain_config": "gpt-oss-120b",
}
# Llama 4 (chunked attention, no RoPE on every fourth layer): no recipe under recipes/llama/ (llama2.py, llama3.py)
# and no bridge for Llama4ForConditionalGeneration at @067f987d; its Llama4ModelProvider went in #2599 (217de1a2,
# "remove specific model provider dataclasses") and models/llama/llama4_utils.py is imported by nothing. NeMo 2 builds
# it: nemo/collections/llm/recipes/llama4_e16.py and llama4_e128.py (Llama4Experts16Config / Llama4Experts128Config).
NEMO2_LLAMA4 = (
    "NeMo 2 pretrains Llama 4 with chunked attention (`nemo llm pretrain --factory llama4_e16` or `llama4_e128`, "
    "nemo/collections/llm/recipes/llama4_e*.py), a file the planner does not write"
)
CHUNKED_ATTENTION = (
    "Megatron-Bridge has no Llama 4 recipe or model (no chunked attention; its Llama4ModelProvider was removed in "
    f"#2599); {NEMO2_LLAMA4}"
)
