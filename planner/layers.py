"""The layer layout of a model spec, and each layer's parameters split the way parallelism splits them.

`ModelSpec` (specs.py) says what a stack is made of; this module is the one home of *which kind each layer is*
and *how many parameters each piece of a layer holds*. The cost model reads `ModelSpec.layer_kinds` and
`ModelSpec.layer_param_counts(layer)`, so a new architecture is a new kind here, not a branch in every cost function.

Layer kinds: one frozen `LayerKind` per layer (hashable, so per-kind results are computed once):

    mixer      attention | mla | mamba | none    what mixes tokens (none: a hybrid model's MLP-only layer)
    attention  global | sliding | chunked        for attention and mla mixers, with `window` tokens for the
                                                 sliding window or the chunk (None for other mixers)
    ffn        dense | moe | none                (none: a hybrid model's mixer-only layer)

A transformer layer (no `layer_pattern`) has one mixer and one FFN and two norms, four with Gemma 2/3's sandwich
norms. A hybrid layer (`layer_pattern`, one letter per layer as Nemotron-H's hybrid_override_pattern writes it:
M Mamba-2, * attention, - MLP, E MoE) has exactly one of the two and one norm (Megatron-Core's hybrid stack,
megatron/core/ssm/mamba_block.py, builds one pre-norm block per letter).

`LayerParams` splits a layer by how Megatron-Core shards each piece (Shoeybi et al. 2019, section 3, and the files
named below):

    mixer             split over tp by heads: q, k, v, o with their biases and GPT-OSS's attention sinks (one
                      logit per head); MLA's up-projections and output; all of Mamba-2 (mamba_mixer.py shards
                      in_proj, conv1d, dt_bias, A_log, D and the gated norm by heads)
    mixer_replicated  a full copy on every tp rank: MLA's query and key-value down-projections and their norms
                      (megatron/core/transformer/multi_latent_attention.py builds them parallel_mode='duplicated')
    dense_mlp         split over tp (column, then row)
    routed_experts    all routed experts of the layer: whole experts over ep, each over the expert-tp degree
    shared_experts    split over tp, a copy on every ep rank
    router            replicated
    norms             the layer's norms and q/k norms: replicated

`total` is the sum. Where tp exceeds num_kv_heads Megatron replicates k and v heads; that is a per-rank question
and stays with the cost model (cost/params.py).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from planner.specs import ModelSpec

Mixer = Literal["attention", "mla", "mamba", "none"]
AttentionKind = Literal["global", "sliding", "chunked"]
Ffn = Literal["dense", "moe", "none"]

# layer_pattern letters (Nemotron-H's hybrid_override_pattern) -> (mixer, ffn)
PATTERN_LETTERS: dict[str, tuple[Mixer, Ffn]] = {
    "M": ("mamba", "none"),
    "*": ("attention", "none"),
    "-": ("none", "dense"),
    "E": ("none", "moe"),
}
# AttentionSpec.pattern letters -> attention kind
ATTENTION_LETTERS: dict[str, AttentionKind] = {"G": "global", "S": "sliding", "C": "chunked"}


@dataclass(frozen=True)
class LayerKind:
    """What one layer is: its token mixer, the attention's reach, and its feed-forward block."""

    mixer: Mixer
    ffn: Ffn
    attention: AttentionKind | None = None  # for attention and mla mixers
    window: int | None = None  # tokens of the sliding window or the chunk; None for global attention

    @property
    def has_attention(self) -> bool:
        return self.mixer in ("attention", "mla")

    @property
    def blocks(self) -> int:
        """Residual blocks, each with its norm: a mixer and an FFN; a hybrid layer holds one of them."""
        return (self.mixer != "none") + (self.ffn != "none")

    def __hash__(self) -> int:
        """The fields' hash, kept on the record once computed: the search's caches look kinds up some 10^5 times
        a search (dataclass's own __hash__ would rebuild the tuple each time)."""
        try:
            return self.__dict__["_hash"]
        except KeyError:
            h = hash((self.mixer, self.ffn, self.attention, self.window))
            object.__setattr__(self, "_hash", h)
            return h

    def __getstate__(self) -> dict[str, object]:
        """The fields only: a str's hash, hence the kept one, holds in this process only."""
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}


@dataclass(frozen=True)
class LayerParams:
    """One layer's parameters, split the way parallelism splits them (module docstring)."""

    mixer: int = 0
    mixer_replicated: int = 0
    dense_mlp: int = 0
    routed_experts: int = 0
    shared_experts: int = 0
    router: int = 0
    norms: int = 0

    @property
    def total(self) -> int:
        return sum(getattr(self, f.name) for f in fields(self))


# ---- which kind each layer is --------------------------------------------------------------------
def is_moe_index(model: ModelSpec, layer: int) -> bool:
    """A transformer stack's MoE layers: moe.layers when given, else every layer_freq-th layer (1-based count,
    as Megatron's --moe-layer-freq and Llama 4's interleave_moe_layer_step place them) after first_k_dense."""
    m = model.moe
    if m is None:
        return False
    if m.layers is not None:
        return layer in m.layers
    return layer >= m.first_k_dense and (layer + 1) % m.layer_freq == 0


def layer_kinds(model: ModelSpec) -> tuple[LayerKind, ...]:
    attention = model.attention
    pattern = attention.pattern if attention is not None else "G"
    window = attention.window if attention is not None else None
    attention_mixer: Mixer = "mla" if attention is not None and attention.kind == "mla" else "attention"
    out = []
    interned: dict[LayerKind, LayerKind] = {}  # one record per kind: the search's lookups by kind hit by identity
    for i in range(model.num_layers):
        if model.layer_pattern is not None:
            mixer, ffn = PATTERN_LETTERS[model.layer_pattern[i]]
        else:
            mixer, ffn = attention_mixer, ("moe" if is_moe_index(model, i) else "dense")
        if mixer in ("attention", "mla"):
            kind = ATTENTION_LETTERS[pattern[i % len(pattern)]]
            layer = LayerKind(mixer, ffn, kind, None if kind == "global" else window)
        else:
            layer = LayerKind(mixer, ffn)
        out.append(interned.setdefault(layer, layer))
    return tuple(out)


# ---- what each kind holds ------------------------------------------------------------------------
def layer_params(model: ModelSpec, kind: LayerKind) -> LayerParams:
    mixer = replicated = 0
    if kind.mixer == "attention":
        mixer = mha_params(model)
    elif kind.mixer == "mla":
        mixer, replicated = mla_params(model)
    elif kind.mixer == "mamba":
        mixer = mamba_params(model)
    moe = model.moe if kind.ffn == "moe" else None
    routed = shared = router = 0
    if moe is not None:
        h, n = model.hidden_size, moe.num_experts
        router = h * n + (n if model.has_bias else 0)  # GPT-OSS's router has a bias (modeling_gpt_oss.py)
        routed = n * model.expert_params
        shared = moe.num_shared_experts * model.mlp_params(
            moe.shared_expert_ffn_hidden_size or moe.expert_ffn_hidden_size
        )
    return LayerParams(
        mixer=mixer,
        mixer_replicated=replicated,
        dense_mlp=model.mlp_params(model.ffn_hidden_size) if kind.ffn == "dense" else 0,
        routed_experts=routed,
        shared_experts=shared,
        router=router,
        norms=norm_params(model, kind),
    )


def norm_params(model: ModelSpec, kind: LayerKind) -> int:
    """Pre-norms (two a transformer layer, four with sandwich norms: Gemma 2/3 add post-attention and
    post-MLP norms, modeling_gemma3.py; one a hybrid layer), plus RMSNorm q/k norms over head_dim (Qwen3,
    Gemma 3: one weight vector each for q and k). Llama 4's L2 q/k norm has no weights."""
    count = 1 if model.layer_pattern is not None else (4 if model.sandwich_norm else 2)
    qk = model.attention is not None and model.attention.qk_norm == "rmsnorm" and kind.mixer == "attention"
    return count * model.norm_params + (2 * model.head_size if qk else 0)


def mha_params(model: ModelSpec) -> int:
    """Q, K, V and output projections with their biases (GQA/MQA: num_kv_heads K and V heads of head_size), plus
    one learned sink logit per head where the spec has sinks (GPT-OSS, GptOssAttention.sinks): one rank's at tp 1."""
    return round(attention_params_per_rank(model, 1))


def attention_params_per_rank(model: ModelSpec, tp: int) -> float:
    """`mha_params` on one of tp ranks: Megatron splits Q and the output projection by heads; K and V heads are
    split too, or replicated when tp exceeds num_kv_heads (each rank keeps one kv head). The q/k/v biases split
    with their projections, the output's is whole on each rank; sinks, one per head, split with the heads."""
    h, hd = model.hidden_size, model.head_size
    q = model.num_attention_heads * hd
    kv_per_rank = max(model.kv_heads / tp, 1) * hd
    weights = h * q / tp + 2 * h * kv_per_rank + q * h / tp
    bias = (q / tp + 2 * kv_per_rank if model.has_qkv_bias else 0) + (h if model.has_bias else 0)
    sinks = model.num_attention_heads / tp if model.attention is not None and model.attention.sinks else 0
    return weights + bias + sinks


def mla_params(model: ModelSpec) -> tuple[int, int]:
    """(split, replicated) parameters of multi-head latent attention (DeepSeek-V2 paper, section 2.1; HF
    modeling_deepseek_v3.py DeepseekV3Attention; Megatron multi_latent_attention.py):
    q: h -> q_lora_rank (+ RMSNorm) -> heads·(nope + rope), or one h -> heads·(nope + rope) projection without
    q_lora_rank; kv: h -> kv_lora_rank + rope (+ RMSNorm on kv_lora_rank) -> heads·(nope + v); out: heads·v -> h.
    With attention_bias the q_a, kv_a and output projections carry biases (HF), the up-projections none."""
    a = model.attention
    assert a is not None and a.kv_lora_rank is not None and a.qk_rope_head_dim is not None
    assert a.qk_nope_head_dim is not None and a.v_head_dim is not None
    h, heads, bias = model.hidden_size, model.num_attention_heads, model.has_bias
    qk_head = a.qk_nope_head_dim + a.qk_rope_head_dim
    kv_down = a.kv_lora_rank + a.qk_rope_head_dim
    replicated = h * kv_down + (kv_down if bias else 0) + a.kv_lora_rank
    split = a.kv_lora_rank * heads * (a.qk_nope_head_dim + a.v_head_dim) + heads * a.v_head_dim * h + (h if bias else 0)
    if a.q_lora_rank is None:
        split += h * heads * qk_head
    else:
        replicated += h * a.q_lora_rank + (a.q_lora_rank if bias else 0) + a.q_lora_rank
        split += a.q_lora_rank * heads * qk_head
    return split, replicated


def mamba_params(model: ModelSpec) -> int:
    """One Mamba-2 mixer as mamba_ssm builds it (mamba_ssm/modules/mamba2.py, Mamba2.__init__; the same shapes in
    megatron/core/ssm/mamba_mixer.py): in_proj h -> [z, x, B, C, dt] = 2·d_inner + 2·groups·state + heads;
    a depthwise conv1d of conv_kernel taps over [x, B, C] (with bias); dt_bias, A_log and D, one per head; the gated
    RMSNorm over d_inner; out_proj d_inner -> h. The block's pre-norm is counted in norms."""
    m = model.mamba
    assert m is not None
    h, d_inner, bc = model.hidden_size, m.d_inner, 2 * m.num_groups * m.state_size
    in_width, conv_width = 2 * d_inner + bc + m.num_heads, d_inner + bc
    in_proj = h * in_width + (in_width if m.proj_bias else 0)
    conv = conv_width * m.conv_kernel + (conv_width if m.conv_bias else 0)
    out_proj = d_inner * h + (h if m.proj_bias else 0)
    return in_proj + conv + 3 * m.num_heads + d_inner + out_proj


def mtp_layer_params(model: ModelSpec, last: LayerKind) -> int:
    """One multi-token-prediction module (DeepSeek-V3 report, section 2.2; Megatron
    megatron/core/transformer/multi_token_prediction.py): RMSNorms on the hidden state and on the next token's
    embedding, a 2h -> h projection of their concatenation (no bias), one transformer layer of the main stack's
    last kind, and a final norm. It shares the embedding and the output head with the main model."""
    h = model.hidden_size
    return 3 * model.norm_params + 2 * h * h + layer_params(model, last).total
