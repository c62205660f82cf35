"""The tensors multi-head latent attention and a Mamba-2 mixer save for their backward pass (saved_tensors.py
lists the rest of a layer's), bytes per token before any split."""

from __future__ import annotations

from planner.cost.tensor_record import CORE, OUT, SavedTensor
from planner.specs import ModelSpec


def mla_tensors(model: ModelSpec, a: int, out_q: str) -> list[SavedTensor]:
    """Multi-head latent attention as Megatron-Core runs it (multi_latent_attention.py): the replicated down-
    projections run on the rank's sequence shard and keep their outputs and norms ("seq": split by tp with SP);
    the up-projections give Q, K and V per head (split by tp), which `mla_up_proj` recompute drops (Megatron's
    recompute_modules)."""
    m = model.attention
    assert m is not None and m.kv_lora_rank is not None and m.qk_rope_head_dim is not None
    assert m.v_head_dim is not None
    heads, qk, v = model.num_attention_heads, model.head_size, m.v_head_dim
    out = []
    qkv = ("qkv_linear",)  # the down- and up-projections run in get_query_key_value_tensors, one group
    if m.q_lora_rank is not None:
        out.append(SavedTensor("q down-projection output (q norm input)", m.q_lora_rank * a, "seq", offload=qkv))
        out.append(SavedTensor("q norm output (q up-projection input)", m.q_lora_rank * a, "seq", quantized="own",
                               offload=qkv))  # fmt: skip
    up = ("mla_up_proj",)
    out += [
        SavedTensor("kv down-projection output (kv norm input, rope key)", (m.kv_lora_rank + m.qk_rope_head_dim) * a,
                    "seq", offload=qkv),
        SavedTensor("kv norm output (kv up-projection input)", m.kv_lora_rank * a, "seq", quantized="own",
                    offload=qkv),
        SavedTensor("Q", heads * qk * a, "tp", op_keep=True, modules=up, offload=CORE),
        SavedTensor("K", heads * qk * a, "tp", modules=up, offload=CORE),
        SavedTensor("V", heads * v * a, "tp", op_keep=True, modules=up, offload=CORE),
        SavedTensor("attention output (out-proj input)", heads * v * a, "tp", op_keep=True, quantized=out_q,
                    offload=OUT),
    ]  # fmt: skip
    return out


def mamba_tensors(model: ModelSpec, a: int) -> list[SavedTensor]:
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
