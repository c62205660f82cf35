"""Frozen, validated specs: the model (hardware profiles are hardware.py, training stacks engine.py).

Validated once at the edge (pydantic, ``extra="forbid"`` so a misspelt YAML key is an error), SI units
inside. Loading from catalogs, YAML files and Hugging Face ``config.json`` lives in ``io/``.

A model is a decoder-only stack of `num_layers` layers. The optional parts say what differs from a plain
transformer (DESIGN.md, "Model spec"):

- ``moe``: routed and shared experts, which layers are MoE (every layer_freq-th after first_k_dense, or an
  explicit list), the capacity factor (null = dropless);
- ``attention``: the mixer (``mha``, or DeepSeek's multi-head latent attention ``mla``), the per-layer pattern of
  global / sliding / chunked attention and its window, learned attention sinks, q/k norms;
- ``layer_pattern`` with ``mamba``: a hybrid stack, one letter per layer (M Mamba-2, * attention, - MLP, E MoE);
- ``mtp_layers``: DeepSeek-V3's multi-token-prediction modules, counted apart from ``num_params`` as DeepSeek
  counts them (``mtp_params``);
- ``sandwich_norm``: Gemma 2/3's extra post-attention and post-MLP norms.

Which kind each layer is and what each piece holds is computed in one place, layers.py: ``layer_kinds`` and
``layer_param_counts(layer)`` are the per-layer API; the older whole-model properties below (``attention_params``,
``dense_layer_params``, ``moe_layer_params``, ...) are read from it.
"""

from __future__ import annotations

import warnings
from functools import cached_property
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, Strict, model_validator

from planner.layers import (
    ATTENTION_LETTERS,
    PATTERN_LETTERS,
    LayerKind,
    LayerParams,
    Mixer,
    layer_kinds,
    layer_params,
    mha_params,
    mla_params,
    mtp_layer_params,
)

# fp8 = the engine's default fp8 recipe as the planner has always costed it; the named recipes after it are
# precision.py's (Transformer Engine / torchao recipes with their own memory and time terms).
Precision = Literal[
    "fp32",
    "bf16",
    "fp16",
    "fp8",
    "fp8-delayed",
    "fp8-current",
    "fp8-rowwise",
    "fp8-rowwise-gw-hp",
    "fp8-blockwise",
    "mxfp8",
    "nvfp4",
]
PRECISIONS: tuple[Precision, ...] = get_args(Precision)

PARAMS_WARN_FRACTION = 0.03  # warn when the declared params differ from the derived count by more


# Upper limits on what a spec or plan may say: far beyond any model or cluster, and small enough that every
# count the cost model forms stays a finite float and no loop over layers, ranks or divisors runs for long.
MAX_LAYERS = 100_000
MAX_WIDTH = 10_000_000  # hidden, FFN and head sizes, heads
MAX_VOCAB = 100_000_000
MAX_SEQ_LEN = 1 << 26  # 67M tokens
MAX_TOKENS_PER_STEP = MAX_SEQ_LEN << 31  # the largest --max-tokens-per-step: a batch of 2^31 of the longest sequences
MAX_EXPERTS = 100_000
MAX_PARAMS = 1e16


# Counts and widths: a strict int, so that YAML's `true` is refused by name (pydantic's lax mode reads a bool as 1)
# rather than reported as hidden_size=1 by the checks after it; likewise a string or a float.
Int = Annotated[int, Strict()]


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _width(description: str) -> Any:
    """An optional width: null, or a positive int below MAX_WIDTH."""
    return Field(None, gt=0, le=MAX_WIDTH, description=description)


class MoESpec(Frozen):
    """Mixture-of-experts feed-forward layers (Switch/GShard style routing, DeepSeek's shared experts)."""

    num_experts: Int = Field(gt=0, le=MAX_EXPERTS, description="routed experts per MoE layer")
    top_k: Int = Field(gt=0, le=MAX_EXPERTS, description="experts each token is routed to")
    expert_ffn_hidden_size: Int = Field(gt=0, le=MAX_WIDTH, description="FFN width of one expert")
    num_shared_experts: Int = Field(0, ge=0, le=MAX_EXPERTS, description="always-active experts (DeepSeek style)")
    shared_expert_ffn_hidden_size: Int | None = _width("FFN width of one shared expert; default the expert's")
    layer_freq: Int = Field(1, gt=0, le=MAX_LAYERS, description="every layer_freq-th layer is MoE; 1 = all layers")
    first_k_dense: Int = Field(0, ge=0, le=MAX_LAYERS, description="the first k layers stay dense (DeepSeek)")
    layers: tuple[Int, ...] | None = Field(None, description="0-based MoE layer indices, instead of layer_freq")
    capacity_factor: float | None = Field(None, gt=0, le=1e6, allow_inf_nan=False, description="null = dropless")
    routing_groups: Int | None = Field(
        None, gt=0, le=MAX_EXPERTS, description="experts in this many groups (DeepSeek-V3 n_group: one per node)"
    )
    group_top_k: Int | None = Field(
        None, gt=0, le=MAX_EXPERTS, description="a token reaches experts of at most this many groups (topk_group)"
    )

    @model_validator(mode="after")
    def _check(self) -> MoESpec:
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k={self.top_k} must be <= num_experts={self.num_experts}")
        if self.layers is not None:
            if self.layer_freq != 1 or self.first_k_dense:
                raise ValueError(
                    f"give moe.layers or layer_freq/first_k_dense, not both (layers={list(self.layers)}, "
                    f"layer_freq={self.layer_freq}, first_k_dense={self.first_k_dense})"
                )
            if list(self.layers) != sorted(set(self.layers)) or any(i < 0 for i in self.layers):
                raise ValueError(f"moe.layers={list(self.layers)} must be distinct 0-based indices in order")
        groups, reached = self.routing_groups, self.group_top_k
        if groups is not None and self.num_experts % groups:  # DeepseekV3 splits the experts evenly (n_group)
            raise ValueError(f"routing_groups={groups} must divide num_experts={self.num_experts}")
        if reached is not None and (groups is None or reached > groups):
            raise ValueError(f"group_top_k={reached} needs routing_groups of at least it (got {groups})")
        return self


class AttentionSpec(Frozen):
    """How attention layers attend: the mixer, which layers see a window, sinks and q/k norms."""

    kind: Literal["mha", "mla"] = Field("mha", description="mha (GQA/MQA via num_kv_heads) or DeepSeek's MLA")
    q_lora_rank: Int | None = _width("MLA: query down-projection rank; null = a full-rank query projection")
    kv_lora_rank: Int | None = _width("MLA: compressed key-value width")
    qk_rope_head_dim: Int | None = _width("MLA: per-head query/key width that carries RoPE")
    qk_nope_head_dim: Int | None = _width("MLA: per-head query/key width without RoPE")
    v_head_dim: Int | None = _width("MLA: per-head value width")
    pattern: str = Field("G", min_length=1, max_length=MAX_LAYERS, description="G global, S sliding, C chunked")
    window: Int | None = Field(None, gt=0, le=MAX_SEQ_LEN, description="tokens of the sliding window or chunk")
    sinks: bool = Field(False, description="a learned sink logit per head (GPT-OSS)")
    qk_norm: Literal["none", "rmsnorm", "l2"] = Field("none", description="rmsnorm: Qwen3, Gemma 3; l2: Llama 4")

    @model_validator(mode="after")
    def _check(self) -> AttentionSpec:
        mla = {k: getattr(self, k) for k in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")}
        if self.kind == "mla" and None in mla.values():
            missing = ", ".join(k for k, v in mla.items() if v is None)
            raise ValueError(f"kind=mla needs {missing}")
        given = [k for k, v in {**mla, "q_lora_rank": self.q_lora_rank}.items() if v is not None]
        if self.kind == "mha" and given:
            raise ValueError(f"kind=mha but MLA fields are set ({', '.join(given)}); use kind: mla")
        if bad := sorted(set(self.pattern) - set(ATTENTION_LETTERS)):
            raise ValueError(f"attention.pattern={self.pattern!r} has {bad}; letters are G, S, C")
        windowed = set(self.pattern) - {"G"}
        if windowed and self.window is None:
            raise ValueError(
                f"attention.pattern={self.pattern!r} has sliding or chunked layers but attention.window is null"
            )
        if self.window is not None and not windowed:
            raise ValueError(
                f"attention.window={self.window} but attention.pattern={self.pattern!r} has no S or C layer"
            )
        return self


class MambaSpec(Frozen):
    """A Mamba-2 mixer (Dao & Gu 2024), as mamba_ssm's Mamba2 and Megatron's MambaMixer build it."""

    num_heads: Int = Field(gt=0, le=MAX_WIDTH)
    head_dim: Int = Field(gt=0, le=MAX_WIDTH)
    state_size: Int = Field(gt=0, le=MAX_WIDTH, description="d_state")
    num_groups: Int = Field(1, gt=0, le=MAX_WIDTH, description="B/C groups (ngroups)")
    conv_kernel: Int = Field(4, gt=0, le=1024, description="d_conv")
    chunk_size: Int = Field(256, gt=0, le=MAX_SEQ_LEN, description="SSD scan chunk (mamba_ssm default 256)")
    conv_bias: bool = True
    proj_bias: bool = False

    @model_validator(mode="after")
    def _check(self) -> MambaSpec:
        if self.num_heads % self.num_groups:
            raise ValueError(f"mamba num_groups={self.num_groups} must divide num_heads={self.num_heads}")
        return self

    @property
    def d_inner(self) -> int:
        """Expand · hidden in the Mamba papers; heads · head_dim as Megatron and HF Nemotron-H build it."""
        return self.num_heads * self.head_dim


class GateSpec(Frozen):
    """The gate of a gated MLP where it is not SiLU. `mlp: swiglu` names the gated, three-matrix MLP; its gate's
    activation costs the same, so this changes what a run computes and what an engine file sets, not memory or step
    time. GPT-OSS's experts compute quick_gelu(min(x_gate, clamp)) * (clip(x_up, -clamp, clamp) + linear_offset),
    quick_gelu(x) = x * sigmoid(1.702 x) (transformers modeling_gpt_oss.py GptOssExperts, alpha 1.702 and the +1
    fixed, limit = swiglu_limit; Megatron-LM --quick-geglu, megatron/core/fusions/fused_bias_geglu.py)."""

    activation: Literal["quick_gelu"]
    linear_offset: float = Field(
        0.0, ge=-8, le=8, allow_inf_nan=False, description="added to the linear half (Megatron glu_linear_offset)"
    )
    clamp: float | None = Field(
        None,
        gt=0,
        le=1e4,
        allow_inf_nan=False,
        description="the gate half clamped above and the linear half to +-clamp (activation_func_clamp_value)",
    )


class ModelSpec(Frozen):
    """A decoder-only stack, in the schema of DESIGN.md (model_specs/NAME.yaml)."""

    name: str
    num_layers: Int = Field(gt=0, le=MAX_LAYERS)
    hidden_size: Int = Field(gt=0, le=MAX_WIDTH)
    num_attention_heads: Int = Field(gt=0, le=MAX_WIDTH)
    num_kv_heads: Int | None = Field(None, gt=0, le=MAX_WIDTH, description="< heads means GQA/MQA; default = heads")
    head_dim: Int | None = Field(None, gt=0, le=MAX_WIDTH, description="default hidden_size / heads")
    ffn_hidden_size: Int = Field(gt=0, le=MAX_WIDTH)
    mlp: Literal["gelu", "swiglu"] = "gelu"
    gate: GateSpec | None = Field(None, description="a gated MLP's gate where it is not SiLU (GPT-OSS)")
    vocab_size: Int = Field(gt=0, le=MAX_VOCAB)
    max_seq_len: Int = Field(gt=0, le=MAX_SEQ_LEN)
    tied_embeddings: bool = True
    position_embedding: Literal["learned", "rope", "alibi", "none"] = Field(
        "learned", description="alibi: a bias linear in distance on the attention scores, no table and no rotation "
        "(Press et al. 2022; BLOOM, MPT)",
    )  # fmt: skip
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    linear_bias: bool | None = Field(None, description="biases in linear layers; default: layernorm models yes")
    qkv_bias: bool | None = Field(
        None,
        description="biases on the q, k and v projections alone where linear_bias gives none (Qwen2; GLM-4.5's "
        "attention_bias; Megatron --add-qkv-bias); default: no",
    )
    moe: MoESpec | None = None
    params: float | None = Field(
        None, gt=0, le=MAX_PARAMS, allow_inf_nan=False, description="declared size, checked against the derived count"
    )
    rope_theta: float | None = Field(
        None, gt=0, le=1e12, allow_inf_nan=False, description="RoPE base (rotary models); engines default to 10000"
    )
    rotary_percent: float = Field(
        1.0,
        gt=0,
        le=1,
        allow_inf_nan=False,
        description="share of each query/key head RoPE rotates (HF "
        "partial_rotary_factor, Megatron --rotary-percent; GLM-4.5 0.5): it moves no count",
    )
    norm_eps: float | None = Field(
        None, gt=0, lt=1, allow_inf_nan=False, description="epsilon of the LayerNorm / RMSNorm; engines default to 1e-5"
    )
    attention: AttentionSpec | None = None
    layer_pattern: str | None = Field(None, min_length=1, max_length=MAX_LAYERS, description="M * - E per layer")
    mamba: MambaSpec | None = None
    mtp_layers: Int = Field(0, ge=0, le=MAX_LAYERS, description="multi-token-prediction modules (DeepSeek-V3)")
    sandwich_norm: bool = Field(False, description="norms after attention and MLP too (Gemma 2/3): four per layer")
    aliases: tuple[str, ...] = Field((), description="other names the catalog finds this entry by (case-insensitive)")

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        self._check_heads()
        self._check_layout()
        if self.gate is not None and self.mlp != "swiglu":
            raise ValueError(f"gate {self.gate.activation} needs mlp: swiglu (a gated MLP), got mlp: {self.mlp}")
        if self.rotary_percent != 1 and self.position_embedding != "rope":
            raise ValueError(f"rotary_percent {self.rotary_percent} needs position_embedding: rope")
        if self.qkv_bias and self.attention is not None and self.attention.kind == "mla":
            raise ValueError("qkv_bias with attention kind mla: MLA has no q/k/v projections to bias alone")
        if self.params is not None:
            derived = self.num_params
            if abs(derived - self.params) > PARAMS_WARN_FRACTION * self.params:
                warnings.warn(
                    f"model {self.name}: declared params={self.params:.4g} but the architecture gives "
                    f"{derived:.4g} ({(derived / self.params - 1) * 100:+.1f}%)",
                    stacklevel=2,
                )
        return self

    def _check_heads(self) -> None:
        kv = self.kv_heads
        if kv > self.num_attention_heads or self.num_attention_heads % kv:
            raise ValueError(f"num_kv_heads={kv} must divide num_attention_heads={self.num_attention_heads}")
        if self.head_dim is None and not self.is_mla and self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size={self.hidden_size} is not divisible by num_attention_heads="
                f"{self.num_attention_heads}; give head_dim explicitly"
            )

    def _check_layout(self) -> None:
        n, pattern, moe = self.num_layers, self.layer_pattern, self.moe
        if self.attention is not None and len(self.attention.pattern) > n:
            raise ValueError(f"attention.pattern has {len(self.attention.pattern)} letters but num_layers={n}")
        if moe is not None and moe.layers and moe.layers[-1] >= n:
            raise ValueError(f"moe.layers has index {moe.layers[-1]} but num_layers={n}")
        if pattern is not None:
            if len(pattern) != n:
                raise ValueError(f"layer_pattern has {len(pattern)} letters but num_layers={n}")
            if bad := sorted(set(pattern) - set(PATTERN_LETTERS)):
                raise ValueError(f"layer_pattern has {bad}; letters are M (Mamba-2), * (attention), - (MLP), E (MoE)")
            if ("E" in pattern) != (moe is not None):
                raise ValueError(f"layer_pattern {'has' if 'E' in pattern else 'has no'} E layers but moe is {moe}")
            if moe is not None and (moe.layers is not None or moe.layer_freq != 1 or moe.first_k_dense):
                raise ValueError("with layer_pattern the E letters place the MoE layers: drop moe.layers/layer_freq")
            if self.mtp_layers or self.is_mla:
                raise ValueError(
                    f"layer_pattern with mtp_layers={self.mtp_layers} or attention kind mla is not representable"
                )
        if (pattern is not None and "M" in pattern) != (self.mamba is not None):
            raise ValueError(f"layer_pattern={pattern!r} and mamba={self.mamba}: Mamba layers need both")
        if moe is not None and not any(k.ffn == "moe" for k in self.layer_kinds):
            raise ValueError(f"moe is set but no layer is MoE (first_k_dense={moe.first_k_dense}, num_layers={n})")

    # ---- derived sizes -------------------------------------------------------------------------
    @property
    def is_mla(self) -> bool:
        return self.attention is not None and self.attention.kind == "mla"

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads or self.num_attention_heads

    @property
    def head_size(self) -> int:
        """Per-head query/key width: head_dim, else MLA's nope + rope width, else hidden / heads."""
        if self.head_dim:
            return self.head_dim
        a = self.attention
        if a is not None and a.kind == "mla" and a.qk_nope_head_dim and a.qk_rope_head_dim:
            return a.qk_nope_head_dim + a.qk_rope_head_dim
        return self.hidden_size // self.num_attention_heads

    @property
    def has_bias(self) -> bool:
        return self.norm == "layernorm" if self.linear_bias is None else self.linear_bias

    @property
    def has_qkv_bias(self) -> bool:
        """Biases on q, k and v: with every linear's, or alone (Megatron: add_bias_linear or add_qkv_bias)."""
        return self.has_bias or bool(self.qkv_bias)

    @property
    def mlp_matrices(self) -> int:
        """Gated MLPs (SwiGLU) have three weight matrices, plain ones two (Shazeer 2020)."""
        return 3 if self.mlp == "swiglu" else 2

    # ---- the per-layer API (layers.py) -------------------------------------------------------------
    @cached_property
    def layer_kinds(self) -> tuple[LayerKind, ...]:
        """One record per layer: mixer, attention kind and window, FFN kind."""
        return layer_kinds(self)

    @cached_property
    def kind_params(self) -> dict[LayerKind, LayerParams]:
        """Each distinct layer kind's parameters, split the way parallelism splits them."""
        return {kind: layer_params(self, kind) for kind in dict.fromkeys(self.layer_kinds)}

    def layer_param_counts(self, layer: int) -> LayerParams:
        return self.kind_params[self.layer_kinds[layer]]

    def is_moe_layer(self, layer: int) -> bool:
        return self.layer_kinds[layer].ffn == "moe"

    @property
    def num_moe_layers(self) -> int:
        return sum(k.ffn == "moe" for k in self.layer_kinds)

    # ---- parameter counts, per piece, from the architecture --------------------------------------
    @property
    def attention_params(self) -> int:
        """One attention mixer: q, k, v, o (or MLA's projections and norms) with biases and sinks."""
        return sum(mla_params(self)) if self.is_mla else mha_params(self)

    def mlp_params(self, ffn: int) -> int:
        h = self.hidden_size
        bias = ((self.mlp_matrices - 1) * ffn + h) if self.has_bias else 0
        return self.mlp_matrices * h * ffn + bias

    @property
    def norm_params(self) -> int:
        return (2 if self.norm == "layernorm" else 1) * self.hidden_size

    def _attention_layer(self, ffn: Literal["dense", "moe"]) -> int:
        mixer: Mixer = "mla" if self.is_mla else "attention"
        return layer_params(self, LayerKind(mixer, ffn, "global")).total

    @property
    def dense_layer_params(self) -> int:
        """Attention + dense MLP + norms: one transformer layer without experts."""
        return self._attention_layer("dense")

    @property
    def expert_params(self) -> int:
        """One routed expert's MLP."""
        assert self.moe is not None
        return self.mlp_params(self.moe.expert_ffn_hidden_size)

    @property
    def moe_layer_params(self) -> int:
        """Attention + router + routed and shared experts + norms of one MoE layer."""
        assert self.moe is not None
        return self._attention_layer("moe")

    def layer_params(self, layer: int) -> int:
        return self.layer_param_counts(layer).total

    @property
    def embedding_params(self) -> int:
        pos = self.max_seq_len * self.hidden_size if self.position_embedding == "learned" else 0
        return self.vocab_size * self.hidden_size + pos

    @property
    def output_params(self) -> int:
        """Final norm plus the output projection when it is not tied to the embedding."""
        return self.norm_params + (0 if self.tied_embeddings else self.vocab_size * self.hidden_size)

    @cached_property
    def num_params(self) -> int:
        """Embedding, every layer, final norm and output projection; MTP modules apart (mtp_params)."""
        layers = sum(self.kind_params[k].total for k in self.layer_kinds)
        return self.embedding_params + layers + self.output_params

    @cached_property
    def num_active_params(self) -> int:
        """Parameters a token touches: num_params less the routed experts it is not sent to (top_k of them
        count). The embedding table is included whole, as num_params counts it."""
        if self.moe is None:
            return self.num_params
        return self.num_params - (self.moe.num_experts - self.moe.top_k) * self.expert_params * self.num_moe_layers

    @property
    def mtp_params(self) -> int:
        """The multi-token-prediction modules' own parameters (embedding and output head shared, not counted)."""
        return self.mtp_layers * mtp_layer_params(self, self.layer_kinds[-1]) if self.mtp_layers else 0
