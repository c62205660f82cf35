"""Activation bytes one transformer layer keeps for its backward pass, from the layer's structure.

The reference case is Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer
Models", Table 2): for a GPT layer with dropout and no fused attention, per micro-batch,

    s·b·h·(34 + 5·a·s/h)   bytes      no parallelism
    s·b·h·(10 + 24/t + 5·a·s/(h·t))   tensor parallel (t)
    s·b·h·(34/t + 5·a·s/(h·t))        tensor + sequence parallel
    s·b·h·34/t                        + selective recompute (attention core recomputed)
    2·s·b·h                           full recompute (only the layer input is kept)

Rather than hard-coding 34, the layer is listed tensor by tensor (section 4.1 of the paper walks
through the same list: cost/saved_tensors.py) so GQA, SwiGLU, MoE, CP, flash attention and dropout come out of the
same sum; this module keeps what the recompute policy and the parallel split leave of each.
"""

from __future__ import annotations

from typing import Any

from planner.cost.cache import spec_cache
from planner.cost.saved_tensors import default_kind, layer_tensors
from planner.cost.tensor_record import SavedTensor
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


def _keeps(
    tensor: SavedTensor, recompute: str, policy: str, compiled: bool, modules: tuple[str, ...], offloaded: tuple | None
) -> bool:
    """Whether the layer keeps the tensor (of those the groups of the `offloaded` modules hold, when given)."""
    if offloaded is not None and not (tensor.offload and set(tensor.offload) <= set(offloaded)):
        return False
    core = offloaded is not None and "core_attn" in tensor.offload and "core_attn" in modules
    if core and recompute == "selective" and policy == "attention":
        return False  # a checkpointed attention core skips its offload group (attention.py, multi_latent_attention.py)
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


@spec_cache(maxsize=65536)
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
    autocast: bool = False,
    col_in_bytes: float = 0.0,
    offloaded: tuple[str, ...] | None = None,
    original: tuple[str, ...] = (),
    load: float = 1.0,
) -> float:
    """Bytes per token (of the rank's micro-batch share) one layer keeps until its backward (`etp`: the expert
    tensor-parallel degree, default tp); `saved_quant`: bytes per element of a quantized saved linear input
    (cost.quantization.saved_input_bytes; 0: none); `autocast`: computed under torch.autocast from fp32 weights
    (engine.ZeroStage.autocast: an fp32 residual stream); `col_in_bytes`: bytes per element of the column-parallel
    inputs where tensor parallelism casts them before it gathers them (Kernels.tp_fp8_inputs; 0: as computed),
    those of quantized linears only: an MoE block's input is gathered in 16 bits for its router and experts
    (torchtitan v0.2.2 models/llama4/infra/parallelize.py apply_moe_ep_tp: "moe" gets PrepareModuleInputOutput to
    Replicate, not PrepareFloat8ModuleInput). `offloaded`: only what these Megatron modules' offload groups hold
    (saved_tensors.py); under full recompute the checkpointed layer input is in no group. `original`: the offload
    groups whose linear keeps its 16-bit input, not a quantized copy (memory.kind_pieces says which). `load`: the
    routed rows the busiest expert-parallel rank receives over the mean (moe.routed_load), which its routed
    experts' tensors keep."""
    if recompute == "full":  # only the layer input is checkpointed: 2·s·b·h (Korthikanti 2022, Table 2), split by SP
        return 0.0 if offloaded is not None else model.hidden_size * (4 if autocast else act_bytes) / (tp if sp else 1)
    total = 0.0
    tensors = layer_tensors(
        model, seq_len=seq_len, act_bytes=act_bytes, kernels=kernels, moe_layer=moe_layer, kind=kind, autocast=autocast
    )
    modules = kernels.recompute_modules if kernels.recompute_modules is not None else DEFAULT_RECOMPUTE_MODULES
    quant = (act_bytes, saved_quant, col_in_bytes, original)
    for tensor in tensors:
        if _keeps(tensor, recompute, kernels.selective_recompute, kernels.compile, modules, offloaded):
            kept = _kept_bytes(tensor, tp=tp, sp=sp, etp=etp, kernels=kernels, quant=quant)
            total += kept * load if tensor.routed else kept
    return total


def _kept_bytes(
    tensor: SavedTensor, *, tp: int, sp: bool, etp: int | None, kernels: Kernels, quant: tuple[int, float, float, tuple]
) -> float:
    """One kept tensor's bytes per token on a rank: its region's split, in the dtype it is kept in (`quant`:
    act_bytes, saved_quant, col_in_bytes and the offload groups whose linear keeps its original input)."""
    act_bytes, saved_quant, col_in_bytes, original = quant
    if tensor.region == "expert_in":
        split = (tp / (etp or tp)) if sp else 1
    elif tensor.region == "col_in":
        split = tp if sp and not kernels.tp_gathered_inputs else 1
        if col_in_bytes and tp > 1 and tensor.quantized:  # cast before the gather (an MoE input: 16-bit)
            return tensor.bytes_per_token * col_in_bytes / act_bytes / split
    else:
        split = tp if (tensor.region != "seq" or sp) else 1
    if tensor.offload and set(tensor.offload) <= set(original):  # the linear keeps its 16-bit input to offload it
        return tensor.bytes_per_token / split
    return _saved_bytes(tensor, act_bytes, saved_quant) / split


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
    autocast: bool = False,
    col_in_bytes: float = 0.0,
    offloaded: tuple[str, ...] | None = None,
    original: tuple[str, ...] = (),
    load: float = 1.0,
) -> float:
    """Bytes one layer keeps for one micro-batch on one rank (Korthikanti 2022, Table 2 generalised); with
    `offloaded`, those that offloading these modules moves (activation_bytes_per_token); `load` as there."""
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
        autocast=autocast,
        col_in_bytes=col_in_bytes,
        offloaded=offloaded,
        original=original,
        load=load,
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
    autocast: bool = False,
    col_in_bytes: float = 0.0,
    original: tuple[str, ...] = (),
    load: float = 1.0,
) -> float:
    """Transient memory of one layer's backward on top of what is kept (`load`: activation_bytes_per_token's).

    With full recompute the layer's activations are rematerialised one layer at a time (Chen et al.
    2016, "Training Deep Nets with Sublinear Memory Cost"); with selective recompute the recomputed
    tensors of one layer come back; in every case the gradients of the largest activations live
    briefly (an estimate: two tensors of the widest per-rank activation).
    """
    tokens = micro_batch * seq_len / cp
    kwargs: dict[str, Any] = {
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
        "autocast": autocast,
        "col_in_bytes": col_in_bytes,
        "original": original,
        "load": load,
    }
    everything = activation_bytes_per_token(model, recompute="none", **kwargs)
    kept = activation_bytes_per_token(model, recompute=recompute, **kwargs)
    kind = kind if kind is not None else default_kind(model, moe_layer)
    grads = 2 * widest_activation(model, kind, tp, load) * act_bytes
    return tokens * (max(0.0, everything - kept) + grads)


def widest_activation(model: ModelSpec, kind: LayerKind, tp: int, load: float = 1.0) -> float:
    """The widest activation of a layer per token on one rank: the (gated) FFN's, or a mixer-only layer's input
    projection output (a Mamba-2 in_proj; attention's Q, K and V), never less than the hidden size; the routed
    experts' at the busiest rank's `load` of rows (activation_bytes_per_token)."""
    h = model.hidden_size
    if kind.ffn == "moe" and model.moe is not None:
        ffn = model.moe.expert_ffn_hidden_size * model.moe.top_k * load
    elif kind.ffn == "dense":
        ffn = model.ffn_hidden_size
    elif kind.mixer == "mamba" and model.mamba is not None:
        m = model.mamba
        return max(h, (2 * m.d_inner + 2 * m.num_groups * m.state_size + m.num_heads) / tp)
    else:
        return max(h, (model.num_attention_heads + 2 * model.kv_heads) * model.head_size / tp)
    return max(h, (2 if model.mlp == "swiglu" else 1) * ffn / tp)


def pp_boundary_bytes(model: ModelSpec, micro_batch: int, seq_len: int, *, cp: int, tp: int, sp: bool,
                      act_bytes: int) -> float:  # fmt: skip
    """One micro-batch's activation at a pipeline-stage boundary, b·s·h/cp (/tp with sequence parallelism): what a
    stage sends forward and receives as a gradient backward (Narayanan 2021 Sec. 2.2, 4.1)."""
    return micro_batch * seq_len / cp * model.hidden_size * act_bytes / (tp if sp else 1)
