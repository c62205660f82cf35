"""Frozen, validated specs: the model (hardware profiles are hardware.py, training stacks engine.py).

Validated once at the edge (pydantic, ``extra="forbid"`` so a misspelt YAML key is an error), SI units
inside. Loading from catalogs, YAML files and Hugging Face ``config.json`` lives in ``catalog.py``.
"""

from __future__ import annotations

import warnings
from functools import cached_property
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

PRECISIONS = ("fp32", "bf16", "fp16", "fp8")
Precision = Literal["fp32", "bf16", "fp16", "fp8"]

PARAMS_WARN_FRACTION = 0.03  # warn when the declared params differ from the derived count by more


# Upper limits on what a spec or plan may say: far beyond any model or cluster, and small enough that every
# count the cost model forms stays a finite float and no loop over layers, ranks or divisors runs for long.
MAX_LAYERS = 100_000
MAX_WIDTH = 10_000_000  # hidden, FFN and head sizes, heads
MAX_VOCAB = 100_000_000
MAX_SEQ_LEN = 1 << 26  # 67M tokens
MAX_EXPERTS = 100_000
MAX_PARAMS = 1e16


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MoESpec(Frozen):
    """Mixture-of-experts feed-forward layers (Switch/GShard style routing)."""

    num_experts: int = Field(gt=0, le=MAX_EXPERTS, description="routed experts per MoE layer")
    top_k: int = Field(gt=0, le=MAX_EXPERTS, description="experts each token is routed to")
    expert_ffn_hidden_size: int = Field(gt=0, le=MAX_WIDTH, description="FFN width of one expert")
    num_shared_experts: int = Field(0, ge=0, le=MAX_EXPERTS, description="always-active experts (DeepSeek style)")
    layer_freq: int = Field(1, gt=0, le=MAX_LAYERS, description="every layer_freq-th layer is MoE; 1 = all layers")

    @model_validator(mode="after")
    def _check(self) -> MoESpec:
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k={self.top_k} must be <= num_experts={self.num_experts}")
        return self


class ModelSpec(Frozen):
    """A decoder-only transformer, in the schema of DESIGN.md (model_specs/NAME.yaml)."""

    name: str
    num_layers: int = Field(gt=0, le=MAX_LAYERS)
    hidden_size: int = Field(gt=0, le=MAX_WIDTH)
    num_attention_heads: int = Field(gt=0, le=MAX_WIDTH)
    num_kv_heads: int | None = Field(None, gt=0, le=MAX_WIDTH, description="< heads means GQA/MQA; default = heads")
    head_dim: int | None = Field(None, gt=0, le=MAX_WIDTH, description="default hidden_size / heads")
    ffn_hidden_size: int = Field(gt=0, le=MAX_WIDTH)
    mlp: Literal["gelu", "swiglu"] = "gelu"
    vocab_size: int = Field(gt=0, le=MAX_VOCAB)
    max_seq_len: int = Field(gt=0, le=MAX_SEQ_LEN)
    tied_embeddings: bool = True
    position_embedding: Literal["learned", "rope"] = "learned"
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    linear_bias: bool | None = Field(None, description="biases in linear layers; default: layernorm models yes")
    moe: MoESpec | None = None
    params: float | None = Field(
        None, gt=0, le=MAX_PARAMS, allow_inf_nan=False, description="declared size, checked against the derived count"
    )
    rope_theta: float | None = Field(
        None, gt=0, le=1e12, allow_inf_nan=False, description="RoPE base (rotary models); engines default to 10000"
    )
    norm_eps: float | None = Field(
        None, gt=0, lt=1, allow_inf_nan=False, description="epsilon of the LayerNorm / RMSNorm; engines default to 1e-5"
    )
    aliases: tuple[str, ...] = Field((), description="other names the catalog finds this entry by (case-insensitive)")

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        kv = self.kv_heads
        if kv > self.num_attention_heads or self.num_attention_heads % kv:
            raise ValueError(f"num_kv_heads={kv} must divide num_attention_heads={self.num_attention_heads}")
        if self.head_dim is None and self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size={self.hidden_size} is not divisible by num_attention_heads="
                f"{self.num_attention_heads}; give head_dim explicitly"
            )
        if self.params is not None:
            derived = self.num_params
            if abs(derived - self.params) > PARAMS_WARN_FRACTION * self.params:
                warnings.warn(
                    f"model {self.name}: declared params={self.params:.4g} but the architecture gives "
                    f"{derived:.4g} ({(derived / self.params - 1) * 100:+.1f}%)",
                    stacklevel=2,
                )
        return self

    # ---- derived sizes -------------------------------------------------------------------------
    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads or self.num_attention_heads

    @property
    def head_size(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def has_bias(self) -> bool:
        return self.norm == "layernorm" if self.linear_bias is None else self.linear_bias

    @property
    def mlp_matrices(self) -> int:
        """Gated MLPs (SwiGLU) have three weight matrices, plain ones two (Shazeer 2020)."""
        return 3 if self.mlp == "swiglu" else 2

    def is_moe_layer(self, layer: int) -> bool:
        return self.moe is not None and (layer + 1) % self.moe.layer_freq == 0

    @property
    def num_moe_layers(self) -> int:
        return sum(self.is_moe_layer(i) for i in range(self.num_layers))

    # ---- parameter counts, per piece, from the architecture --------------------------------------
    @property
    def attention_params(self) -> int:
        h, q, kv = self.hidden_size, self.num_attention_heads * self.head_size, self.kv_heads * self.head_size
        weights = h * q + 2 * h * kv + q * h
        bias = (q + 2 * kv + h) if self.has_bias else 0
        return weights + bias

    def mlp_params(self, ffn: int) -> int:
        h = self.hidden_size
        bias = ((self.mlp_matrices - 1) * ffn + h) if self.has_bias else 0
        return self.mlp_matrices * h * ffn + bias

    @property
    def norm_params(self) -> int:
        return (2 if self.norm == "layernorm" else 1) * self.hidden_size

    @property
    def dense_layer_params(self) -> int:
        return self.attention_params + self.mlp_params(self.ffn_hidden_size) + 2 * self.norm_params

    @property
    def expert_params(self) -> int:
        """One routed expert's MLP."""
        assert self.moe is not None
        return self.mlp_params(self.moe.expert_ffn_hidden_size)

    @property
    def moe_layer_params(self) -> int:
        """Attention + router + routed and shared experts + norms of one MoE layer."""
        assert self.moe is not None
        m = self.moe
        router = self.hidden_size * m.num_experts
        return (
            self.attention_params
            + router
            + (m.num_experts + m.num_shared_experts) * self.expert_params
            + 2 * self.norm_params
        )

    def layer_params(self, layer: int) -> int:
        return self.moe_layer_params if self.is_moe_layer(layer) else self.dense_layer_params

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
        layers = sum(self.layer_params(i) for i in range(self.num_layers))
        return self.embedding_params + layers + self.output_params

    @cached_property
    def num_active_params(self) -> int:
        """Parameters a token touches (top_k routed experts instead of all)."""
        if self.moe is None:
            return self.num_params
        inactive = (self.moe.num_experts - self.moe.top_k) * self.expert_params * self.num_moe_layers
        return self.num_params - inactive
