"""The model's architecture as Megatron-LM's pretrain_gpt.py arguments (pure).

Every flag, its default and its validation, from NVIDIA/Megatron-LM main @d98e8a64:
megatron/training/arguments.py (_add_network_size_args, _add_moe_args, validate_args) and the TransformerConfig fields
that megatron/training/argument_utils.py ArgumentGroupFactory turns into flags (`--field-name`, or the field's
`argparse_meta` name: layernorm_epsilon is `--norm-epsilon`, add_bias_linear `--disable-bias-linear`), in
megatron/core/transformer/transformer_config.py. What the spec leaves unknown is said in the file, never guessed.
"""

from __future__ import annotations

from planner.launch.emit.bridge_recipes import NEMO2_LLAMA4
from planner.specs import ModelSpec

VOCAB_DIVISIBLE_BY = 128  # --make-vocab-size-divisible-by default (arguments.py), what the cost model pads to
ROTARY_BASE_DEFAULT = 10000  # arguments.py: --rotary-base, type=int, default=10000
NORM_EPSILON_DEFAULT = 1e-5  # transformer_config.py: layernorm_epsilon = 1e-5 (--norm-epsilon)
# arguments.py --moe-aux-loss-coeff help: "a starting value of 1e-2 is recommended" (its default 0.0 turns the
# load-balancing loss off); the router's balancing is a hyperparameter no model spec states.
MOE_AUX_LOSS_COEFF = 1e-2


def model_problems(model: ModelSpec) -> list[str]:
    """What Megatron's arguments cannot say for this model: never written approximately."""
    out = []
    if model.position_embedding == "rope":
        if model.rope_theta is None:
            out.append(
                f"model {model.name} uses position_embedding: rope but gives no rope_theta; Megatron would train "
                f"with its default --rotary-base {ROTARY_BASE_DEFAULT}: add rope_theta (the RoPE base) to the model "
                "spec"
            )
        elif model.rope_theta != int(model.rope_theta):
            out.append(f"rope_theta={model.rope_theta}: Megatron's --rotary-base takes an integer (arguments.py)")
    if model.layer_pattern is not None:
        out.append(
            f"model {model.name} has a hybrid layer pattern ({model.layer_pattern[:12]}...: Mamba, attention-only or "
            "MLP-only layers); pretrain_gpt.py builds every layer as attention + MLP, and Megatron's hybrid "
            "models (pretrain_mamba.py, --hybrid-override-pattern) are not written by this emitter"
        )
    a = model.attention
    if a is not None and "C" in a.pattern:
        out.append(
            f"model {model.name} has chunked attention layers (attention.pattern {a.pattern!r}); Megatron's "
            "arguments offer sliding windows (--window-size) but no chunked attention, nor does Megatron-Bridge; "
            + NEMO2_LLAMA4
        )
    if a is not None and a.qk_norm == "rmsnorm" and model.norm != "rmsnorm":
        out.append(
            f"model {model.name} norms q and k with RMSNorm but its layers with {model.norm}; Megatron's "
            "--qk-layernorm applies the layers' --normalization to q and k"
        )
    if model.mtp_layers and model.position_embedding == "learned":
        out.append(
            f"model {model.name} has multi-token prediction with learned position embeddings; Megatron runs MTP with "
            "rope or none only (arguments.py MTP validation)"
        )
    if model.sandwich_norm:
        out.append(
            f"model {model.name} has norms after attention and MLP too (sandwich_norm); Megatron's arguments have "
            "no flag for them (transformer_config.py). Megatron-Bridge builds Gemma 2 and 3 on Megatron-Core "
            "(models/gemma/gemma2_provider.py, gemma3_provider.py) from the Hugging Face config, in recipes of its own "
            "sizes (recipes/gemma/), a file the planner does not write"
        )
    return out


def model_notes(model: ModelSpec) -> list[str]:
    """Comment lines for what the spec does not state and Megatron's default fills in."""
    out = []
    if model.norm_eps is None:
        out.append(
            f"# model spec gives no norm_eps: Megatron's default --norm-epsilon {NORM_EPSILON_DEFAULT:g} applies"
        )
    if model.is_mla:
        out.append(
            "# MLA takes YaRN RoPE in Megatron; at its default --rotary-scaling-factor 1.0 that is plain RoPE with "
            "--rotary-base, as the spec states (set the scaling of a long-context run yourself)"
        )
    if model.moe is not None:
        out.append(
            "# the router's score function, expert bias and top-k scaling are not in the model spec: Megatron's "
            "defaults (softmax, no bias, no scaling) apply unless you set --moe-router-score-function and its kin; "
            f"--moe-aux-loss-coeff {MOE_AUX_LOSS_COEFF:g} is arguments.py's recommended start, not your model's"
        )
    return out


def model_args(model: ModelSpec, *, seq_len: int, dispatcher: str = "alltoall") -> list[str]:
    """The architecture: sizes, attention, position embedding, norm, MLP, embeddings, vocabulary, MTP, MoE."""
    a = [
        "--num-layers", str(model.num_layers),
        "--hidden-size", str(model.hidden_size),
        "--num-attention-heads", str(model.num_attention_heads),
        "--ffn-hidden-size", str(model.ffn_hidden_size),  # with --swiglu: the width of each gated matrix
        "--max-position-embeddings", str(max(model.max_seq_len, seq_len)),
    ]  # fmt: skip
    a += attention_args(model)
    if model.position_embedding == "rope":
        a += ["--position-embedding-type", "rope", "--rotary-base", str(int(model.rope_theta or ROTARY_BASE_DEFAULT))]
        if model.rotary_percent != 1:  # arguments.py l.2420 @d98e8a64: float, default 1.0; GPTModel rotary_percent
            a += ["--rotary-percent", f"{model.rotary_percent:g}"]
    else:
        a += ["--position-embedding-type", "learned_absolute" if model.position_embedding == "learned" else "none"]
    a += ["--normalization", "RMSNorm" if model.norm == "rmsnorm" else "LayerNorm"]
    if model.norm_eps is not None:
        a += ["--norm-epsilon", f"{model.norm_eps:g}"]
    a += mlp_args(model)
    if not model.has_bias:
        a.append("--disable-bias-linear")
        if model.qkv_bias:
            a.append("--add-qkv-bias")  # arguments.py: "Enable bias only in the QKV linear layers"
    if not model.tied_embeddings:
        a.append("--untie-embeddings-and-output-weights")
    # No dropout: the engine profile prices none (kernels.dropout); TransformerConfig defaults both to 0.1.
    a += ["--attention-dropout", "0.0", "--hidden-dropout", "0.0"]
    # The NullTokenizer has exactly --vocab-size tokens (megatron/core/tokenizers/text/libraries/null_tokenizer.py),
    # padded to a multiple of 128 x tp (build_tokenizer.py vocab_size_with_padding), as the cost model pads.
    a += ["--tokenizer-type", "NullTokenizer", "--vocab-size", str(model.vocab_size)]
    a += ["--make-vocab-size-divisible-by", str(VOCAB_DIVISIBLE_BY)]
    if model.mtp_layers:  # TransformerConfig mtp_num_layers: the MTP block, on the last pipeline stage
        a += ["--mtp-num-layers", str(model.mtp_layers)]
    return a + moe_args(model, dispatcher)


def attention_args(model: ModelSpec) -> list[str]:
    """Heads and their widths (GQA, or MLA's ranks and widths: _add_mla_args and MLATransformerConfig), q/k norms,
    sliding windows (--window-size as (window - 1, 0) and --window-attn-skip-freq with 1 for a windowed layer, as
    Megatron-Bridge's gpt_oss_bridge.py sets them) and attention sinks (softmax_type learnable, the same file)."""
    spec, a = model.attention, []
    if model.is_mla:
        assert spec is not None
        a.append("--multi-latent-attention")
        if spec.q_lora_rank is not None:  # None: Megatron's default, a full-rank query projection
            a += ["--q-lora-rank", str(spec.q_lora_rank)]
        a += ["--kv-lora-rank", str(spec.kv_lora_rank), "--qk-head-dim", str(spec.qk_nope_head_dim)]
        a += ["--qk-pos-emb-head-dim", str(spec.qk_rope_head_dim), "--v-head-dim", str(spec.v_head_dim)]
    else:
        if model.kv_heads < model.num_attention_heads:
            a += ["--group-query-attention", "--num-query-groups", str(model.kv_heads)]
        if model.head_size != model.hidden_size // model.num_attention_heads:  # arguments.py: kv_channels = h/heads
            a += ["--kv-channels", str(model.head_size)]
    if spec is None:
        return a
    if spec.qk_norm != "none":
        a.append("--qk-layernorm" if spec.qk_norm == "rmsnorm" else "--qk-l2-norm")
    windowed = [k.attention == "sliding" for k in model.layer_kinds if k.has_attention]
    if any(windowed) and spec.window is not None:
        a += ["--window-size", f"{spec.window - 1},0"]
        if not all(windowed):
            a += ["--window-attn-skip-freq", "[" + ",".join("1" if w else "0" for w in windowed) + "]"]
    if spec.sinks:
        a += ["--softmax-type", "learnable"]
    return a


# The planner's dispatchers (engine moe.dispatcher) as Megatron's: TransformerConfig moe_token_dispatcher_type
# (allgather, alltoall, flex) and, for DeepEP, the flex dispatcher's backend (moe_flex_dispatcher_backend).
DISPATCHER_CONFIG: dict[str, tuple[str, str | None]] = {
    "alltoall": ("alltoall", None),
    "allgather": ("allgather", None),
    "deepep": ("flex", "deepep"),
}


def dispatcher_args(dispatcher: str) -> list[str]:
    """DISPATCHER_CONFIG as Megatron-LM's flags."""
    kind, backend = DISPATCHER_CONFIG[dispatcher]
    return ["--moe-token-dispatcher-type", kind] + (["--moe-flex-dispatcher-backend", backend] if backend else [])


def moe_args(model: ModelSpec, dispatcher: str = "alltoall") -> list[str]:
    """Routed (and shared) experts: token-choice top-k with an auxiliary load-balancing loss, grouped GEMM and the
    dispatcher the plan was priced with (alltoall unless the engine settings say otherwise); dropless unless the
    spec gives a capacity factor."""
    m = model.moe
    if m is None:
        return []
    a = [
        "--num-experts", str(m.num_experts),
        "--moe-router-topk", str(m.top_k),
        "--moe-ffn-hidden-size", str(m.expert_ffn_hidden_size),
        "--moe-router-load-balancing-type", "aux_loss",
        "--moe-aux-loss-coeff", f"{MOE_AUX_LOSS_COEFF:g}",
        "--moe-grouped-gemm",
        *dispatcher_args(dispatcher),
    ]  # fmt: skip
    if m.num_shared_experts:  # the shared experts as one MLP of their summed width (TransformerConfig)
        width = m.shared_expert_ffn_hidden_size or m.expert_ffn_hidden_size
        a += ["--moe-shared-expert-intermediate-size", str(m.num_shared_experts * width)]
    if m.routing_groups is not None:  # group-limited routing (TransformerConfig moe_router_num_groups)
        a += ["--moe-router-num-groups", str(m.routing_groups)]
        if m.group_top_k is not None:
            a += ["--moe-router-group-topk", str(m.group_top_k)]
    pattern = [1 if model.is_moe_layer(i) else 0 for i in range(model.num_layers)]
    if 0 in pattern:  # an explicit list: Megatron's integer form puts the first MoE layer at 0, the spec's at k-1
        a += ["--moe-layer-freq", "[" + ",".join(map(str, pattern)) + "]"]
    capacity = m.capacity_factor  # None: dropless
    if capacity is not None:
        a += ["--moe-expert-capacity-factor", f"{capacity:g}", "--moe-pad-expert-input-to-capacity"]
    return a


def mlp_args(model: ModelSpec) -> list[str]:
    """The gated MLP's flags: --swiglu, or GPT-OSS's gate as --quick-geglu (arguments.py, argument_utils.py: gated
    quick_gelu) with --glu-linear-offset and --activation-func-clamp-value (TransformerConfig fields, flags since
    Megatron-LM 639c08ab8, 2026-01: fused_bias_geglu.py applies both); a plain MLP is Megatron's default gelu."""
    gate = model.gate
    if model.mlp != "swiglu":
        return []
    if gate is None:
        return ["--swiglu"]
    a = ["--quick-geglu"]
    if gate.linear_offset:
        a += ["--glu-linear-offset", f"{gate.linear_offset:g}"]
    if gate.clamp is not None:
        a += ["--activation-func-clamp-value", f"{gate.clamp:g}"]
    return a
