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
from planner.specs import ModelSpec

DEFAULT_KERNELS = Kernels()

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
    region: str  # "seq": split by tp only with sp | "tp": split by tp | "core": the s×s scores
    needed: bool = True  # kept without recompute (False: only an op-policy checkpoint keeps it)
    op_keep: bool = False  # kept by the "op" selective policy
    backward_reads: bool = True  # some backward (or recompute) reads it; compiled graphs keep only these


def layer_matmuls(model: ModelSpec, moe_layer: bool = False) -> tuple[str, ...]:
    """The layer's GEMMs in forward order (separate Q, K, V projections as in Llama/torchtitan)."""
    mlp = ("w1", "w3", "w2") if model.mlp == "swiglu" else ("fc1", "fc2")
    return ("wq", "wk", "wv", "wo", *mlp)


def op_policy_recomputed(model: ModelSpec) -> tuple[str, ...]:
    """GEMMs the "op" selective policy runs again in backward: every second one."""
    return layer_matmuls(model)[1::2]


def _mlp_tensors(model: ModelSpec, ffn: int, a: int, copies: float, prefix: str, fused: bool) -> list[SavedTensor]:
    """Per MLP: fc1 (gate) output, the up projection (gated MLPs), the fc2 input and, for the op
    policy only, the fc2 output. Fused SwiGLU keeps gate, up and their product (Megatron's
    bias_swiglu fusion): 3·f values per token; eager SwiGLU (silu, then a product) keeps the SiLU
    output too: 4·f; GELU keeps its input and output: 2·f (Korthikanti)."""
    h = model.hidden_size
    out = [SavedTensor(f"{prefix}fc1 output", ffn * a * copies, "tp", op_keep=True)]
    if model.mlp == "swiglu":
        out.append(SavedTensor(f"{prefix}up-projection output", ffn * a * copies, "tp"))
        if not fused:
            out.append(SavedTensor(f"{prefix}SiLU output (eager SwiGLU)", ffn * a * copies, "tp"))
    out.append(SavedTensor(f"{prefix}fc2 input (activation output)", ffn * a * copies, "tp"))
    # The fc2 (down-projection) output feeds only the residual add, whose backward reads nothing: eager per-op
    # SAC stores it because the policy names every other matmul, while a compiled layer's partitioner keeps only
    # what backward reads. torchtitan's Llama 3.1 8B H100 benchmarks (Dec 2024): compile lowers the per-op-SAC
    # peak by 5.4 GiB at 8 GPUs and 5.0 at 128, and not at all under full AC (calibration_runs.yaml).
    out.append(
        SavedTensor(f"{prefix}fc2 output", h * a * copies, "seq", needed=False, op_keep=True, backward_reads=False)
    )
    return out


def layer_tensors(
    model: ModelSpec, *, seq_len: int, act_bytes: int, kernels: Kernels, moe_layer: bool
) -> list[SavedTensor]:
    """Every tensor a layer saves for backward, bytes per token of the micro-batch (before any split)."""
    h, a = model.hidden_size, act_bytes
    q_dim = model.num_attention_heads * model.head_size
    kv_dim = model.kv_heads * model.head_size
    heads = model.num_attention_heads
    fused = kernels.fused
    t: list[SavedTensor] = [
        SavedTensor("norm1 input (layer input)", h * a, "seq", op_keep=True),
        SavedTensor("norm1 output (QKV input)", h * a, "seq"),
        SavedTensor("Q", q_dim * a, "tp", op_keep=True),
        SavedTensor("K", kv_dim * a, "tp"),
        SavedTensor("V", kv_dim * a, "tp", op_keep=True),
        SavedTensor("attention output (out-proj input)", q_dim * a, "tp", op_keep=True),
        SavedTensor("norm2 input (residual)", h * a, "seq"),
        SavedTensor("norm2 output (MLP input)", h * a, "seq"),
    ]
    if kernels.flash:
        # Flash attention keeps only the softmax log-sum-exp, fp32, one per head (Dao et al. 2022).
        t.append(SavedTensor("attention log-sum-exp", 4 * heads, "tp", op_keep=True))
    else:
        # softmax output 2·a·s, dropout mask a·s, dropout output 2·a·s = 5·a·s per token
        # (Korthikanti 2022 section 4.1); without dropout the softmax output alone feeds attn×V.
        # Each query attends to the whole sequence, also when context parallelism splits the queries.
        per_key = 5 if kernels.dropout else 2
        t.append(SavedTensor("attention scores (softmax, dropout)", per_key * heads * seq_len, "core"))
    if kernels.dropout:
        t.append(SavedTensor("attention dropout mask", h, "seq"))
        t.append(SavedTensor("MLP dropout mask", h, "seq"))
    if moe_layer and model.moe is not None:
        m = model.moe
        t.append(SavedTensor("router logits (fp32)", 4 * m.num_experts, "seq", op_keep=True))
        # Each token is copied to top_k experts; the permuted input is kept for the expert fc1 backward.
        t.append(SavedTensor("permuted expert input", m.top_k * h * a, "tp", op_keep=True))
        t += _mlp_tensors(model, m.expert_ffn_hidden_size, a, m.top_k, "expert ", fused)
        if m.num_shared_experts:
            t += _mlp_tensors(model, m.expert_ffn_hidden_size, a, m.num_shared_experts, "shared expert ", fused)
    else:
        t += _mlp_tensors(model, model.ffn_hidden_size, a, 1, "", fused)
    if not fused and model.norm == "rmsnorm":
        # Eager nn.RMSNorm (torch 2.13) computes in fp32 and keeps the fp32 input and the fp32 normalised
        # value (4 + 4 bytes) where a fused kernel keeps the a-byte input: 8 − a more per norm, two norms.
        # Measured with saved-tensor hooks (tests/launch/test_activation_count.py).
        t.append(SavedTensor("fp32 copies in the two eager RMSNorms", 2 * (8 - a) * h, "seq"))
    return t


def _keeps(tensor: SavedTensor, recompute: str, policy: str, compiled: bool) -> bool:
    if recompute == "none":
        return tensor.needed
    if policy == "op":
        return tensor.op_keep and (tensor.backward_reads or not compiled)
    return tensor.needed and tensor.region != "core"


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
) -> float:
    """Bytes per token (of the rank's micro-batch share) one layer keeps until its backward."""
    if recompute == "full":
        # Only the layer input is checkpointed: 2·s·b·h (Korthikanti 2022, Table 2), split by SP.
        return model.hidden_size * act_bytes / (tp if sp else 1)
    total = 0.0
    for tensor in layer_tensors(model, seq_len=seq_len, act_bytes=act_bytes, kernels=kernels, moe_layer=moe_layer):
        if _keeps(tensor, recompute, kernels.selective_recompute, kernels.compile):
            split = tp if (tensor.region != "seq" or sp) else 1
            total += tensor.bytes_per_token / split
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
    }
    everything = activation_bytes_per_token(model, recompute="none", **kwargs)
    kept = activation_bytes_per_token(model, recompute=recompute, **kwargs)
    ffn = model.moe.expert_ffn_hidden_size * model.moe.top_k if (moe_layer and model.moe) else model.ffn_hidden_size
    widest = max(model.hidden_size, (2 if model.mlp == "swiglu" else 1) * ffn / tp)
    grads = 2 * widest * act_bytes
    return tokens * (max(0.0, everything - kept) + grads)
