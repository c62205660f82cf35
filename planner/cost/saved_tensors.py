"""Every tensor a layer saves for its backward pass, bytes per token of the micro-batch before any split, block by
block: the norms, the mixer's (attention, MLA, Mamba-2), the FFN's (dense or MoE), as Korthikanti et al. 2022
(section 4.1) list them for a GPT layer. cost/activations.py keeps what the recompute policy and the parallel split
leave of each.

Each tensor belongs to a region: "seq" tensors live outside the tensor-parallel region and are split by t only
with sequence parallelism; "col_in" tensors are the norm outputs that column-parallel linears multiply, split by t
with sequence parallelism unless the engine keeps them all-gathered (kernels.tp_gathered_inputs); "tp" tensors are
split by t always; "core" tensors are the s×s attention scores (absent with flash attention); "expert_in" rows are
gathered over the expert tensor-parallel ranks (tp/etp of a rank's sequence shard with sp; all without).

Each tensor also names the Megatron offload groups that must all be offloaded for it to leave the GPU
(--offload-modules; a group holds what autograd saves inside a module: megatron/core @d98e8a64 attention.py
l.1386-1626, multi_latent_attention.py l.343-463, transformer_layer.py l.709-819, moe/experts.py l.928-941). The
attention output is kept by the core and the output projection both. No group holds the dense MLP's, the shared
experts', the expert fc2 input or the router's tensors.
"""

from __future__ import annotations

from planner.cost.mixer_tensors import mamba_tensors, mla_tensors
from planner.cost.tensor_record import CORE, OUT, SavedTensor
from planner.engine import Kernels
from planner.layers import LayerKind
from planner.specs import ModelSpec


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
    h, routed = model.hidden_size, prefix == "expert "
    act_in = ("moe_act",) if routed else ()  # the experts' fc1 output is their activation's input
    out = [SavedTensor(f"{prefix}fc1 output", ffn * a * copies, "tp", op_keep=True, modules=modules, offload=act_in,
                       routed=routed)]  # fmt: skip
    if model.mlp == "swiglu":
        out.append(SavedTensor(f"{prefix}up-projection output", ffn * a * copies, "tp", modules=modules,
                               offload=act_in, routed=routed))  # fmt: skip
        if not fused:
            out.append(SavedTensor(f"{prefix}SiLU output (eager SwiGLU)", ffn * a * copies, "tp", modules=modules,
                                   offload=act_in, routed=routed))  # fmt: skip
    act = (*modules, "moe_act") if routed else modules
    out.append(SavedTensor(f"{prefix}fc2 input (activation output)", ffn * a * copies, "tp", modules=act,
                           quantized="own", routed=routed))  # fmt: skip
    # The fc2 output feeds only the residual add, whose backward reads nothing: eager per-op SAC keeps it where it is
    # one of the every-other matmuls kept (a SwiGLU layer's 7th, not a GELU's 6th), a compiled layer never (torchtitan
    # Llama 3.1 8B H100, Dec 2024: compile lowers the per-op-SAC peak by 5.4 GiB at 8 GPUs; calibration_runs.yaml).
    fc2_kept = layer_matmuls(model)[-1] not in op_policy_recomputed(model)
    out.append(
        SavedTensor(
            f"{prefix}fc2 output", h * a * copies, "seq", needed=False, op_keep=fc2_kept, backward_reads=False,
            modules=modules, routed=routed,
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
    autocast: bool = False,
) -> list[SavedTensor]:
    """Every tensor a layer of this kind saves for backward, bytes per token of the micro-batch (before any
    split). `kind` defaults to the model's plain transformer layer, MoE when `moe_layer`. A transformer layer is
    two pre-norm blocks (the mixer's, the FFN's); a hybrid layer (layer_pattern) one block, its mixer or its FFN
    (Megatron-Core's hybrid stack, megatron/core/ssm/mamba_block.py).

    Under torch.autocast from fp32 weights (`autocast`) the residual stream is fp32: the norms keep fp32 inputs
    and give fp32 outputs, and each linear reading a norm's output keeps its own 16-bit cast of it (autocast casts
    per op): three for separate Q, K and V projections, two for a gated MLP's gate and up projections. Counted
    with saved-tensor hooks on the worker's GPT-3 1.3B layer (benchmarks/saved_tensors.py): 40 bytes per token
    and hidden unit, where the 16-bit layer keeps 32."""
    kind = kind if kind is not None else default_kind(model, moe_layer)
    h, a = model.hidden_size, act_bytes
    r = 4 if autocast else a  # the residual stream's bytes per element
    fused = kernels.fused
    hybrid = model.layer_pattern is not None
    # Megatron fuses a norm into the linear after it (TE LayerNormLinear) except before MLA's two down-projections
    # and before an MoE layer's router and experts (gpt_layer_specs.py l.244-336): only those are `layernorm`'s.
    router_in = hybrid and kind.ffn == "moe"  # a hybrid MoE layer's only norm feeds the router (kept 16-bit)
    norm1 = ("layernorm",) if kind.mixer == "mla" or router_in else ("mlp",) if hybrid and kind.ffn == "dense" else ()
    qkv_casts = 3 if autocast and kind.mixer == "attention" else 1  # wq, wk, wv (layer_matmuls)
    t = _norm1_tensors(model, kind, h * r, qkv_casts * h * a, norm1=norm1, router_in=router_in)
    mixer_head, mixer_tail = _mixer_tensors(model, kind, seq_len, a, kernels)
    t += mixer_head
    if not hybrid:
        t += _norm2_tensors(model, kind, a, autocast)
    t += mixer_tail
    if kernels.dropout:
        t.append(SavedTensor("attention dropout mask", h, "seq"))
        t.append(SavedTensor("MLP dropout mask", h, "seq"))
    t += _ffn_tensors(model, kind, a, fused, combine_fp32=kernels.moe_combine_fp32)
    norms = 1 if hybrid else 2
    if not fused and model.norm == "rmsnorm":
        t.append(SavedTensor(f"fp32 copies in the {'two ' if norms == 2 else ''}eager RMSNorms",
                             norms * eager_rmsnorm_extra_bytes(kernels.rmsnorm, r) * h, "seq"))  # fmt: skip
    return t + _extra_norm_tensors(model, kind, a)


def _norm1_tensors(
    model: ModelSpec, kind: LayerKind, in_bytes: float, out_bytes: float, *, norm1: tuple[str, ...], router_in: bool
) -> list[SavedTensor]:
    """The first block's norm: its input (the layer input) and output. An attention layer's is fused into its QKV
    linear, whose group holds both (hybrid_layer_specs.py too); MLA's is a module (attn_norm) before the QKV group; a
    hybrid MoE layer's is its pre-MLP norm (mlp_norm), its output kept by the router, in no group."""
    hybrid = model.layer_pattern is not None
    moe_norm = ("mlp_norm", "") if hybrid and kind.ffn == "moe" else ("", "")
    groups = {"attention": ("qkv_linear", "qkv_linear"), "mla": ("attn_norm", "qkv_linear")}.get(kind.mixer, moe_norm)
    first = "QKV" if kind.mixer == "attention" else "mixer" if kind.mixer != "none" else "MLP"
    return [
        SavedTensor("norm1 input (layer input)", in_bytes, "seq", op_keep=True, offload=_group(groups[0])),
        SavedTensor(f"norm1 output ({first} input)", out_bytes, "seq" if hybrid else "col_in", modules=norm1,
                    quantized="" if router_in else "own", offload=_group(groups[1])),
    ]  # fmt: skip


def _group(name: str) -> tuple[str, ...]:  # an offload group by name ("": none)
    return (name,) if name else ()


def _norm2_tensors(model: ModelSpec, kind: LayerKind, a: int, autocast: bool) -> list[SavedTensor]:
    """The FFN block's norm in a transformer layer: its input (the residual, fp32 under autocast) and its output,
    once per linear that casts it under autocast (a gated MLP's w1 and w3, layer_matmuls)."""
    h, moe = model.hidden_size, kind.ffn == "moe"
    casts = 2 if autocast and model.mlp == "swiglu" and not moe else 1
    return [
        SavedTensor("norm2 input (residual)", h * (4 if autocast else a), "seq", offload=("mlp_norm",) if moe else ()),
        SavedTensor("norm2 output (MLP input)", casts * h * a, "col_in", modules=("layernorm",) if moe else ("mlp",),
                    quantized="" if moe else "own"),
    ]  # fmt: skip


def eager_rmsnorm_extra_bytes(impl: str, a: int) -> float:
    """Bytes per element an eager RMSNorm keeps beyond a fused one's a-byte input (kernels.rmsnorm). fused:
    nn.RMSNorm on GPUs from torch 2.9 (2.9.0's native_functions.yaml: `CUDA: _fused_rms_norm_cuda`) keeps the a-byte
    input and a per-row fp32 rstd (not counted): measured on an H200 (tests/test_memory_fits.py). composite: nn.RMSNorm
    before 2.9 and on CPU keeps the fp32 input and fp32 normalised value (4 + 4, no a-byte input): 8 − a more. cast:
    the Llama reference `self._norm(x.float()).type_as(x) * self.weight` (torchtitan's models/norms.py until 3b39d7a)
    keeps the fp32 input and the value cast back (4 + a): 4 more. The last two measured with saved-tensor hooks in
    fp32 and bf16 (tests/launch/test_activation_count.py)."""
    return {"fused": 0.0, "composite": 8.0 - a, "cast": 4.0}[impl]


def default_kind(model: ModelSpec, moe_layer: bool) -> LayerKind:
    """The model's plain transformer layer: its attention mixer (MLA or not), global, dense or MoE."""
    return LayerKind("mla" if model.is_mla else "attention", "moe" if moe_layer else "dense", "global")


def _mixer_tensors(
    model: ModelSpec, kind: LayerKind, seq_len: int, a: int, kernels: Kernels
) -> tuple[list[SavedTensor], list[SavedTensor]]:
    """(the mixer's tensors, its attention-core state): the second part comes after the FFN block's norm tensors
    in a transformer layer (the order the sum adds them in is kept from the first version of this model)."""
    if kind.mixer == "mamba":
        return mamba_tensors(model, a), []
    if kind.mixer == "none":
        return [], []
    heads = model.num_attention_heads
    out_q = "copy" if kernels.flash else "own"  # flash attention keeps its output O for its own backward
    if kind.mixer == "mla":
        head = mla_tensors(model, a, out_q)
    else:
        q_dim, kv_dim = heads * model.head_size, model.kv_heads * model.head_size
        head = [
            SavedTensor("Q", q_dim * a, "tp", op_keep=True, offload=CORE),
            SavedTensor("K", kv_dim * a, "tp", offload=CORE),
            SavedTensor("V", kv_dim * a, "tp", op_keep=True, offload=CORE),
            SavedTensor("attention output (out-proj input)", q_dim * a, "tp", op_keep=True, quantized=out_q,
                        offload=OUT),
        ]  # fmt: skip
    if kernels.flash:
        # Flash attention keeps only the softmax log-sum-exp, fp32, one per head (Dao et al. 2022).
        return head, [SavedTensor("attention log-sum-exp", 4 * heads, "tp", op_keep=True, offload=CORE)]
    # softmax output 2·a·s, dropout mask a·s, dropout output 2·a·s = 5·a·s per token (Korthikanti 2022 section
    # 4.1); without dropout the softmax output alone feeds attn×V. Each query attends to every key of its window
    # (the whole sequence for global attention), also when context parallelism splits the queries.
    per_key = 5 if kernels.dropout else 2
    keys = seq_len if kind.window is None else min(kind.window, seq_len)
    return head, [SavedTensor("attention scores (softmax, dropout)", per_key * heads * keys, "core", offload=CORE)]


def _ffn_tensors(model: ModelSpec, kind: LayerKind, a: int, fused: bool, *, combine_fp32: bool) -> list[SavedTensor]:
    h = model.hidden_size
    if kind.ffn == "moe" and model.moe is not None:
        m = model.moe
        t = [SavedTensor("router logits (fp32)", 4 * m.num_experts, "seq", op_keep=True, modules=("moe",))]
        if combine_fp32:  # the op policy recomputes the bmm (not a saved matmul), which frees it
            t.append(SavedTensor("routed outputs in fp32 (combine)", 4 * m.top_k * h, "expert_in", modules=("moe",),
                                 routed=True))  # fmt: skip
        # The permuted input (k copies per token) is kept for the expert fc1 backward; with sp the dispatcher gathers
        # the etp ranks' rows (Megatron alltoall), so a rank keeps k·h per token of its ep group's etp shards.
        t.append(SavedTensor("permuted expert input", m.top_k * h * a, "expert_in", op_keep=True, modules=("moe",),
                             quantized="own", offload=("expert_fc1",), routed=True))  # fmt: skip
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
        out.append(SavedTensor("q and k norm inputs", qk * a, "tp", offload=("qkv_linear",)))
    return out
