"""Activation bytes one transformer layer keeps for its backward pass, from the layer's structure.

The reference case is Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer
Models", Table 2): for a GPT layer with dropout and no fused attention, per micro-batch,

    s·b·h·(34 + 5·a·s/h)   bytes      no parallelism
    s·b·h·(10 + 24/t + 5·a·s/(h·t))   tensor parallel (t)
    s·b·h·(34/t + 5·a·s/(h·t))        tensor + sequence parallel
    s·b·h·34/t                        + selective recompute (attention core recomputed)
    2·s·b·h                           full recompute (only the layer input is kept)

Rather than hard-coding 34, the layer is listed tensor by tensor (section 4.1 of the paper walks
through the same list) so GQA, SwiGLU, MoE, CP, flash attention and dropout come out of the same sum.
Each tensor belongs to a region: "seq" tensors live outside the tensor-parallel region and are split
by t only with sequence parallelism; "tp" tensors are split by t always; "core" tensors are the s×s
attention scores (absent with flash attention).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from planner.engine import Kernels
from planner.layers import LayerKind
from planner.specs import ModelSpec

DEFAULT_KERNELS = Kernels()
# Megatron's default --recompute-modules (transformer_config.py l.1940-1941): the attention core.
DEFAULT_RECOMPUTE_MODULES = ("core_attn",)

# What `--recompute selective` recomputes depends on the policy (the engine's kernels.selective_recompute):
#   "attention": only the attention core (Korthikanti et al. 2022 section 5; Megatron's
#                --recompute-granularity selective). With flash attention nothing is left to drop.
#   "op":        per-op selective checkpointing as torchtitan does it: keep the layer input, the
#                attention output and the outputs of every other matmul (1st, 3rd, ...); recompute
#                the rest (torchtitan, torchtitan/models/llama3/infra/parallelize.py `_save_list`).


@dataclass(frozen=True)
class SavedTensor:
    name: str
    bytes_per_token: float
    region: str  # "seq": split by tp only with sp | "tp": split by tp | "core": the s×s scores | "expert_in": rows
    # gathered over the expert tensor-parallel ranks (tp/etp of a rank's sequence shard with sp; all without)
    needed: bool = True  # kept without recompute (False: only an op-policy checkpoint keeps it)
    op_keep: bool = False  # kept by the "op" selective policy
    backward_reads: bool = True  # some backward (or recompute) reads it; compiled graphs keep only these
    modules: tuple[str, ...] = ()  # Megatron recompute modules that drop it (--recompute-modules; core_attn: region)
    quantized: str = ""  # a linear's input, saved quantized by a TE recipe: "own" instead of it, "copy" beside it


def layer_matmuls(model: ModelSpec, moe_layer: bool = False) -> tuple[str, ...]:
    """The layer's GEMMs in forward order (separate Q, K, V projections as in Llama/torchtitan)."""
    mlp = ("w1", "w3", "w2") if model.mlp == "swiglu" else ("fc1", "fc2")
    return ("wq", "wk", "wv", "wo", *mlp)


def op_policy_recomputed(model: ModelSpec) -> tuple[str, ...]:
    """GEMMs the "op" selective policy runs again in backward: every second one."""
    return layer_matmuls(model)[1::2]


def _mlp_tensors(
    model: ModelSpec, ffn: int, a: int, copies: float, prefix: str, fused: bool, modules: tuple[str, ...] = ()
) -> list[SavedTensor]:
    """Per MLP: fc1 (gate) output, the up projection (gated MLPs), the fc2 input and, for the op
    policy only, the fc2 output. Fused SwiGLU keeps gate, up and their product (Megatron's
    bias_swiglu fusion): 3·f values per token; eager SwiGLU (silu, then a product) keeps the SiLU
    output too: 4·f; GELU keeps its input and output: 2·f (Korthikanti). `modules`: the Megatron recompute
    modules that drop this MLP's tensors (the fc2 input is the activation's output: moe_act drops the experts')."""
    h = model.hidden_size
    out = [SavedTensor(f"{prefix}fc1 output", ffn * a * copies, "tp", op_keep=True, modules=modules)]
    if model.mlp == "swiglu":
        out.append(SavedTensor(f"{prefix}up-projection output", ffn * a * copies, "tp", modules=modules))
        if not fused:
            out.append(SavedTensor(f"{prefix}SiLU output (eager SwiGLU)", ffn * a * copies, "tp", modules=modules))
    act = (*modules, "moe_act") if prefix == "expert " else modules
    out.append(
        SavedTensor(f"{prefix}fc2 input (activation output)", ffn * a * copies, "tp", modules=act, quantized="own")
    )
    # The fc2 (down-projection) output feeds only the residual add, whose backward reads nothing: eager per-op
    # SAC stores it because the policy names every other matmul, while a compiled layer's partitioner keeps only
    # what backward reads. torchtitan's Llama 3.1 8B H100 benchmarks (Dec 2024): compile lowers the per-op-SAC
    # peak by 5.4 GiB at 8 GPUs and 5.0 at 128, and not at all under full AC (calibration_runs.yaml).
    out.append(
        SavedTensor(
            f"{prefix}fc2 output", h * a * copies, "seq", needed=False, op_keep=True, backward_reads=False,
            modules=modules,
        )
    )  # fmt: skip
    return out


def layer_tensors(
    model: ModelSpec,
    *,
    seq_len: int,
    act_bytes: int,
    kernels: Kernels,
    moe_layer: bool = False,
    kind: LayerKind | None = None,
) -> list[SavedTensor]:
    """Every tensor a layer of this kind saves for backward, bytes per token of the micro-batch (before any
    split). `kind` defaults to the model's plain transformer layer, MoE when `moe_layer`. A transformer layer is
    two pre-norm blocks (the mixer's, the FFN's); a hybrid layer (layer_pattern) one block, its mixer or its FFN
    (Megatron-Core's hybrid stack, megatron/core/ssm/mamba_block.py)."""
    kind = kind if kind is not None else default_kind(model, moe_layer)
    h, a = model.hidden_size, act_bytes
    fused = kernels.fused
    hybrid = model.layer_pattern is not None
    first = "mixer" if kind.mixer != "none" else "MLP"
    # Megatron fuses a norm into the linear after it (TE LayerNormLinear) except before MLA's two down-projections
    # and before an MoE layer's router and experts (gpt_layer_specs.py l.244-336): only those are `layernorm`'s.
    router_in = hybrid and kind.ffn == "moe"  # a hybrid MoE layer's only norm feeds the router (kept 16-bit)
    norm1 = ("layernorm",) if kind.mixer == "mla" or router_in else ("mlp",) if hybrid and kind.ffn == "dense" else ()
    t: list[SavedTensor] = [
        SavedTensor("norm1 input (layer input)", h * a, "seq", op_keep=True),
        SavedTensor(f"norm1 output ({'QKV' if kind.mixer == 'attention' else first} input)", h * a, "seq",
                    modules=norm1, quantized="" if router_in else "own"),
    ]  # fmt: skip
    mixer_head, mixer_tail = _mixer_tensors(model, kind, seq_len, a, kernels)
    t += mixer_head
    if not hybrid:
        moe = kind.ffn == "moe"
        t.append(SavedTensor("norm2 input (residual)", h * a, "seq"))
        t.append(SavedTensor("norm2 output (MLP input)", h * a, "seq", modules=("layernorm",) if moe else ("mlp",),
                             quantized="" if moe else "own"))  # fmt: skip
    t += mixer_tail
    if kernels.dropout:
        t.append(SavedTensor("attention dropout mask", h, "seq"))
        t.append(SavedTensor("MLP dropout mask", h, "seq"))
    t += _ffn_tensors(model, kind, a, fused)
    norms = 1 if hybrid else 2
    if not fused and model.norm == "rmsnorm":
        # Eager RMSNorm (ATen's composite rms_norm; torchtitan's own RMSNorm of 2024, models/norms.py
        # `self._norm(x.float()).type_as(x) * self.weight`) upcasts its input and keeps that fp32 copy (pow and
        # the normalising mul read it) and the normalised value cast back to the a-byte dtype (the weight's mul
        # reads it), where a fused kernel keeps the a-byte input: 4 + a in place of a, 4 bytes more per norm. In
        # fp32 the upcast is the input itself and the normalised value is fp32 (a = 4: the same 4 more), as
        # measured on CPU with saved-tensor hooks (tests/launch/test_activation_count.py).
        t.append(SavedTensor(f"fp32 copies in the {'two ' if norms == 2 else ''}eager RMSNorms", norms * 4 * h,
                             "seq"))  # fmt: skip
    return t + _extra_norm_tensors(model, kind, a)


def default_kind(model: ModelSpec, moe_layer: bool) -> LayerKind:
    """The model's plain transformer layer: its attention mixer (MLA or not), global, dense or MoE."""
    return LayerKind("mla" if model.is_mla else "attention", "moe" if moe_layer else "dense", "global")


def _mixer_tensors(
    model: ModelSpec, kind: LayerKind, seq_len: int, a: int, kernels: Kernels
) -> tuple[list[SavedTensor], list[SavedTensor]]:
    """(the mixer's tensors, its attention-core state): the second part comes after the FFN block's norm tensors
    in a transformer layer (the order the sum adds them in is kept from the first version of this model)."""
    if kind.mixer == "mamba":
        return _mamba_tensors(model, a), []
    if kind.mixer == "none":
        return [], []
    heads = model.num_attention_heads
    out_q = "copy" if kernels.flash else "own"  # flash attention keeps its output O for its own backward
    if kind.mixer == "mla":
        head = _mla_tensors(model, a, out_q)
    else:
        q_dim, kv_dim = heads * model.head_size, model.kv_heads * model.head_size
        head = [
            SavedTensor("Q", q_dim * a, "tp", op_keep=True),
            SavedTensor("K", kv_dim * a, "tp"),
            SavedTensor("V", kv_dim * a, "tp", op_keep=True),
            SavedTensor("attention output (out-proj input)", q_dim * a, "tp", op_keep=True, quantized=out_q),
        ]
    if kernels.flash:
        # Flash attention keeps only the softmax log-sum-exp, fp32, one per head (Dao et al. 2022).
        return head, [SavedTensor("attention log-sum-exp", 4 * heads, "tp", op_keep=True)]
    # softmax output 2·a·s, dropout mask a·s, dropout output 2·a·s = 5·a·s per token (Korthikanti 2022 section
    # 4.1); without dropout the softmax output alone feeds attn×V. Each query attends to every key of its window
    # (the whole sequence for global attention), also when context parallelism splits the queries.
    per_key = 5 if kernels.dropout else 2
    keys = seq_len if kind.window is None else min(kind.window, seq_len)
    return head, [SavedTensor("attention scores (softmax, dropout)", per_key * heads * keys, "core")]


def _mla_tensors(model: ModelSpec, a: int, out_q: str) -> list[SavedTensor]:
    """Multi-head latent attention as Megatron-Core runs it (multi_latent_attention.py): the replicated down-
    projections run on the rank's sequence shard and keep their outputs and norms ("seq": split by tp with SP);
    the up-projections give Q, K and V per head (split by tp), which `mla_up_proj` recompute drops (Megatron's
    recompute_modules)."""
    m = model.attention
    assert m is not None and m.kv_lora_rank is not None and m.qk_rope_head_dim is not None
    assert m.v_head_dim is not None
    heads, qk, v = model.num_attention_heads, model.head_size, m.v_head_dim
    out = []
    if m.q_lora_rank is not None:
        out.append(SavedTensor("q down-projection output (q norm input)", m.q_lora_rank * a, "seq"))
        out.append(SavedTensor("q norm output (q up-projection input)", m.q_lora_rank * a, "seq", quantized="own"))
    out += [
        SavedTensor("kv down-projection output (kv norm input, rope key)", (m.kv_lora_rank + m.qk_rope_head_dim) * a,
                    "seq"),
        SavedTensor("kv norm output (kv up-projection input)", m.kv_lora_rank * a, "seq", quantized="own"),
        SavedTensor("Q", heads * qk * a, "tp", op_keep=True, modules=("mla_up_proj",)),
        SavedTensor("K", heads * qk * a, "tp", modules=("mla_up_proj",)),
        SavedTensor("V", heads * v * a, "tp", op_keep=True, modules=("mla_up_proj",)),
        SavedTensor("attention output (out-proj input)", heads * v * a, "tp", op_keep=True, quantized=out_q),
    ]  # fmt: skip
    return out


def _mamba_tensors(model: ModelSpec, a: int) -> list[SavedTensor]:
    """A Mamba-2 mixer (mamba_ssm/modules/mamba2.py and its chunked-scan autograd function, which saves the scan
    output, x, dt, dA cumsum, B, C and z): the in_proj output (z, x, B, C, dt), the conv1d output (x, B, C), dt
    and its cumulative decay in fp32, the scan output and the gated norm's output (the out_proj input), all split
    by tp with the heads."""
    m = model.mamba
    assert m is not None
    bc = 2 * m.num_groups * m.state_size
    return [
        SavedTensor(
            "mamba in_proj output (z, x, B, C, dt)", (2 * m.d_inner + bc + m.num_heads) * a, "tp", op_keep=True
        ),
        SavedTensor("mamba conv1d output (x, B, C)", (m.d_inner + bc) * a, "tp"),
        SavedTensor("mamba dt and dA cumsum (fp32)", 8 * m.num_heads, "tp"),
        SavedTensor("mamba scan output", m.d_inner * a, "tp"),
        SavedTensor("mamba gated-norm output (out_proj input)", m.d_inner * a, "tp", op_keep=True, quantized="own"),
    ]


def _ffn_tensors(model: ModelSpec, kind: LayerKind, a: int, fused: bool) -> list[SavedTensor]:
    h = model.hidden_size
    if kind.ffn == "moe" and model.moe is not None:
        m = model.moe
        t = [SavedTensor("router logits (fp32)", 4 * m.num_experts, "seq", op_keep=True, modules=("moe",))]
        # Each token is copied to top_k experts; the permuted input is kept for the expert fc1 backward.
        # With sequence parallelism the dispatcher gathers the rows of the etp ranks (Megatron alltoall: all-gather
        # over ETP after the all-to-all), so a rank keeps k·h per token of its ep group's etp shards.
        t.append(SavedTensor("permuted expert input", m.top_k * h * a, "expert_in", op_keep=True, modules=("moe",),
                             quantized="own"))  # fmt: skip
        t += _mlp_tensors(model, m.expert_ffn_hidden_size, a, m.top_k, "expert ", fused, ("moe",))
        if m.num_shared_experts:
            width = m.shared_expert_ffn_hidden_size or m.expert_ffn_hidden_size
            t += _mlp_tensors(model, width, a, m.num_shared_experts, "shared expert ", fused, ("moe", "shared_experts"))
        return t
    if kind.ffn == "dense":
        return _mlp_tensors(model, model.ffn_hidden_size, a, 1, "", fused, ("mlp",))
    return []


def _extra_norm_tensors(model: ModelSpec, kind: LayerKind, a: int) -> list[SavedTensor]:
    """Gemma 2/3's post-attention and post-MLP norms keep their inputs; RMSNorm q/k norms keep Q and K before
    the norm (Qwen3, Gemma 3)."""
    h, out = model.hidden_size, []
    if model.sandwich_norm:
        out.append(SavedTensor("post-norm inputs (sandwich norms)", 2 * h * a, "seq"))
    att = model.attention
    if att is not None and att.qk_norm == "rmsnorm" and kind.mixer == "attention":
        qk = (model.num_attention_heads + model.kv_heads) * model.head_size
        out.append(SavedTensor("q and k norm inputs", qk * a, "tp"))
    return out


def _keeps(tensor: SavedTensor, recompute: str, policy: str, compiled: bool, modules: tuple[str, ...]) -> bool:
    if recompute == "none":
        return tensor.needed
    if policy == "op":
        return tensor.op_keep and (tensor.backward_reads or not compiled)
    if tensor.region == "core":
        return tensor.needed and "core_attn" not in modules
    return tensor.needed and not any(m in modules for m in tensor.modules)


def _saved_bytes(tensor: SavedTensor, act_bytes: int, saved_quant: float) -> float:
    """A tensor's bytes per token as kept: a linear's input saved quantized (saved_quant bytes per element, a TE
    recipe's columnwise copy) instead of its 16-bit self ("own"), or beside it ("copy": flash attention keeps
    its output for its own backward)."""
    if not saved_quant or not tensor.quantized:
        return tensor.bytes_per_token
    quant = tensor.bytes_per_token * saved_quant / act_bytes
    return quant if tensor.quantized == "own" else tensor.bytes_per_token + quant


@lru_cache(maxsize=65536)
def activation_bytes_per_token(
    model: ModelSpec,
    *,
    seq_len: int,
    tp: int,
    sp: bool,
    cp: int,
    recompute: str,
    act_bytes: int,
    kernels: Kernels,
    moe_layer: bool = False,
    kind: LayerKind | None = None,
    etp: int | None = None,
    saved_quant: float = 0.0,
) -> float:
    """Bytes per token (of the rank's micro-batch share) one layer keeps until its backward (`etp`: the expert
    tensor-parallel degree, default tp); `saved_quant`: bytes per element of a quantized saved linear input
    (cost.precision.saved_input_bytes; 0: none)."""
    if recompute == "full":
        # Only the layer input is checkpointed: 2·s·b·h (Korthikanti 2022, Table 2), split by SP.
        return model.hidden_size * act_bytes / (tp if sp else 1)
    total = 0.0
    tensors = layer_tensors(
        model, seq_len=seq_len, act_bytes=act_bytes, kernels=kernels, moe_layer=moe_layer, kind=kind
    )
    modules = kernels.recompute_modules if kernels.recompute_modules is not None else DEFAULT_RECOMPUTE_MODULES
    for tensor in tensors:
        if _keeps(tensor, recompute, kernels.selective_recompute, kernels.compile, modules):
            if tensor.region == "expert_in":
                split = (tp / (etp or tp)) if sp else 1
            else:
                split = tp if (tensor.region != "seq" or sp) else 1
            total += _saved_bytes(tensor, act_bytes, saved_quant) / split
    return total


def activation_bytes_per_layer(
    model: ModelSpec,
    *,
    micro_batch: int,
    seq_len: int,
    tp: int = 1,
    sp: bool = False,
    cp: int = 1,
    recompute: str = "none",
    act_bytes: int = 2,
    kernels: Kernels = DEFAULT_KERNELS,
    moe_layer: bool = False,
    kind: LayerKind | None = None,
    etp: int | None = None,
    saved_quant: float = 0.0,
) -> float:
    """Bytes one layer keeps for one micro-batch on one rank (Korthikanti 2022, Table 2 generalised)."""
    tokens = micro_batch * seq_len / cp
    per_token = activation_bytes_per_token(
        model,
        seq_len=seq_len,
        tp=tp,
        sp=sp,
        cp=cp,
        recompute=recompute,
        act_bytes=act_bytes,
        kernels=kernels,
        moe_layer=moe_layer,
        kind=kind,
        etp=etp,
        saved_quant=saved_quant,
    )
    return tokens * per_token


def layer_workspace_bytes(
    model: ModelSpec,
    *,
    micro_batch: int,
    seq_len: int,
    tp: int,
    sp: bool,
    cp: int,
    recompute: str,
    act_bytes: int,
    kernels: Kernels,
    moe_layer: bool = False,
    kind: LayerKind | None = None,
    etp: int | None = None,
    saved_quant: float = 0.0,
) -> float:
    """Transient memory of one layer's backward on top of what is kept.

    With full recompute the layer's activations are rematerialised one layer at a time (Chen et al.
    2016, "Training Deep Nets with Sublinear Memory Cost"); with selective recompute the recomputed
    tensors of one layer come back; in every case the gradients of the largest activations live
    briefly (an estimate: two tensors of the widest per-rank activation).
    """
    tokens = micro_batch * seq_len / cp
    kwargs = {
        "seq_len": seq_len,
        "tp": tp,
        "sp": sp,
        "cp": cp,
        "act_bytes": act_bytes,
        "kernels": kernels,
        "moe_layer": moe_layer,
        "kind": kind,
        "etp": etp,
        "saved_quant": saved_quant,
    }
    everything = activation_bytes_per_token(model, recompute="none", **kwargs)
    kept = activation_bytes_per_token(model, recompute=recompute, **kwargs)
    grads = 2 * widest_activation(model, kind if kind is not None else default_kind(model, moe_layer), tp) * act_bytes
    return tokens * (max(0.0, everything - kept) + grads)


def widest_activation(model: ModelSpec, kind: LayerKind, tp: int) -> float:
    """The widest activation of a layer per token on one rank: the (gated) FFN's, or a mixer-only layer's input
    projection output (a Mamba-2 in_proj; attention's Q, K and V), never less than the hidden size."""
    h = model.hidden_size
    if kind.ffn == "moe" and model.moe is not None:
        ffn = model.moe.expert_ffn_hidden_size * model.moe.top_k
    elif kind.ffn == "dense":
        ffn = model.ffn_hidden_size
    elif kind.mixer == "mamba" and model.mamba is not None:
        m = model.mamba
        return max(h, (2 * m.d_inner + 2 * m.num_groups * m.state_size + m.num_heads) / tp)
    else:
        return max(h, (model.num_attention_heads + 2 * model.kv_heads) * model.head_size / tp)
    return max(h, (2 if model.mlp == "swiglu" else 1) * ffn / tp)
