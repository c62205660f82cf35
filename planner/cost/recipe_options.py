"""The memory and speed options of current Megatron-Bridge / NeMo recipes (issue 20 item 5), as engine settings
(engine.Memory and engine.Kernels; which engine offers which is its `rules.options`, engine/recipes.py):

- recompute of named modules (`kernels.recompute_modules`, Megatron --recompute-modules; what each drops is tagged
  on the saved tensors in activations.py, what each re-runs is `modules_recompute_s` and its FLOPs
  `modules_recompute_flops_per_token`);
- activation offload (`memory.activation_offload`, `memory.offload_modules`): a share of the offload groups of the
  named modules held in host memory (what each group holds is tagged on the saved tensors in saved_tensors.py);
- optimizer CPU offload (`memory.optimizer_offload`): a share of the optimizer state kept and updated on the CPU;
- CUDA graphs (`kernels.cuda_graphs`): the per-kernel host cost gone (layer_time.py), a graph memory pool held.

The precision-aware optimizer's bytes per parameter are cost.states' (the one home of state bytes); fp8 parameter
gather is cost.quantization's. Sources: Megatron-LM @d98e8a64 unless said.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from planner.cost.saved_tensors import layer_tensors
from planner.engine import Engine, Kernels
from planner.engine import Memory as EngineMemory
from planner.engine.settings import EXPERT_GROUPS, GRAPH_CROSSING_MODULES, OFFLOAD_MODULES
from planner.layers import LayerKind
from planner.specs import ModelSpec

DEFAULT_MODULES: tuple[str, ...] = ("core_attn",)  # transformer_config.py l.1940-1941
# Fine-grained activation offloading copies each offloaded group's saved inputs to pinned host memory on a side
# stream as the forward goes and brings them back one group ahead of the backward (docs/user-guide/features/
# fine_grained_activation_offloading.md): about one layer's offloaded share is in flight each way. An estimate.
OFFLOAD_LAYERS_IN_FLIGHT = 2
# CUDA graphs' private memory pool: static inputs, outputs and the captured intermediates of each graphed layer.
# Neither Megatron-LM nor Transformer Engine gives a formula (cuda_graphs.py logs the captured memory at capture,
# l.625-705); NVIDIA's NeMo CUDA-graph notes state "cudagraphs increases the memory usage of activations by ~20%
# ... roughly an increase of about 10-20GB" (NVIDIA-NeMo/NeMo PR #10500, docs/source/performance/cudagraphs.md,
# 2024). A named parameter with that default, bounded to [0, CUDA_GRAPH_POOL_MAX]: the share of a rank's saved
# activations the pool adds. Measured with torch's own per-layer capture (make_graphed_callables, one shared pool)
# of four Llama 3 8B layers at 4096 tokens on one H200: the pool and a replayed step's allocations came to 16.5%
# over the eager step's peak (benchmarks/gpu_graphs.py, benchmarks/results/h200-2026-11-26/graphs.json).
CUDA_GRAPH_POOL_FRACTION = 0.20
CUDA_GRAPH_POOL_MAX = 0.50
# The CPU Adam step of an offloaded shard is bound by host memory: it reads the gradient, the fp32 master and both
# moments and writes the three and the 16-bit parameter, 30 bytes per parameter. Host bandwidth per GPU, derived
# for a DGX H100 (2 x Xeon 8480C, 8 channels of DDR5-4800 each: 614 GB/s per node, 77 GB/s per GPU) at half its
# peak for a streaming update: 38 GB/s. An estimate, not a measurement.
CPU_ADAM_BYTES_PER_PARAM = 30.0
HOST_OPTIMIZER_BYTES_PER_S = 38e9


def offload_modules(engine: Engine, recompute: str) -> tuple[str, ...]:
    """The modules whose groups activation offload moves (none without it): those named, else the default."""
    m = engine.memory
    if not m.activation_offload:
        return ()
    named = m.offload_modules
    return tuple(named) if named is not None else default_offload_modules(engine.kernels, recompute)


def default_offload_modules(kernels: Kernels, recompute: str) -> tuple[str, ...]:
    """Every module Megatron offers (settings.OFFLOAD_MODULES; those a model's layers lack hold nothing), less the
    norms under CUDA graphs, whose groups cross the graphs' boundaries (docs/user-guide/features/
    fine_grained_activation_offloading.md, "CUDA Graph Integration"), and the experts' groups inside a recomputed
    MoE layer, which Megatron refuses (transformer_config.py l.2165-2175) and which would hold nothing."""
    moe = recompute == "selective" and "moe" in (kernels.recompute_modules or ())
    return tuple(
        x
        for x in OFFLOAD_MODULES
        if not (kernels.cuda_graphs and x in GRAPH_CROSSING_MODULES) and not (moe and x in EXPERT_GROUPS)
    )


def original_inputs(offloaded: tuple[str, ...], precision: str) -> tuple[str, ...]:
    """The offload groups whose linear keeps its 16-bit input rather than a quantized copy: the experts' fc1 when its
    input is offloaded under an fp8 recipe but MXFP8's and NVFP4's (moe/experts.py l.276-284,
    set_save_original_input)."""
    keeps = "expert_fc1" in offloaded and precision not in ("mxfp8", "nvfp4")
    return ("expert_fc1",) if keeps else ()


def offload_groups(model: ModelSpec) -> frozenset[str]:
    """The Megatron offload modules whose groups hold some tensor of the model's layers (saved_tensors.py)."""
    kernels = Kernels()
    return frozenset(
        m
        for kind in model.kind_params
        for t in layer_tensors(model, seq_len=model.max_seq_len, act_bytes=2, kernels=kernels, kind=kind)
        for m in t.offload
    )


def selected_modules(kernels: Kernels) -> tuple[str, ...]:
    """The modules recompute=selective re-runs under the 'attention' policy (Megatron's default: core_attn)."""
    return tuple(kernels.recompute_modules) if kernels.recompute_modules is not None else DEFAULT_MODULES


# ---- memory --------------------------------------------------------------------------------------------
Groups = tuple[float, ...]  # one layer's eligible offload groups, in forward order: the bytes each frees


def offload_group_bytes(moved_by: Callable[[tuple[str, ...]], float], modules: tuple[str, ...], share: float) -> Groups:
    """One layer's eligible offload groups of `modules` in forward order (settings.OFFLOAD_MODULES is Megatron's
    forward order), each as the bytes it frees beyond the groups before it (`moved_by`: the bytes offloading a set of
    modules frees; a tensor a later group also holds leaves with the later one). A group that frees nothing is not
    eligible: Megatron counts the groups that hold bytes (fine_grained_activation_offload.py l.650-656). Where the
    whole share moves, one entry: the total."""
    order = tuple(m for m in OFFLOAD_MODULES if m in modules)
    if share >= 1.0:
        total = moved_by(order)
        return (total,) if total > 0 else ()
    out: list[float] = []
    before = 0.0
    for i in range(1, len(order) + 1):
        now = moved_by(order[:i])
        if now > before:
            out.append(now - before)
        before = max(before, now)
    return tuple(out)


def offloaded_bytes(runs: Iterable[tuple[Groups, int]], chunk_sizes: tuple[int, ...], share: float) -> float:
    """Bytes one micro-batch's activation offload moves off a pipeline rank whose layers are `runs` ((one layer's
    groups, how many such layers), in the order the kinds first appear) over its model chunks of `chunk_sizes`
    layers, in model order (what the layers beyond them, the multi-token-prediction modules, join: the last). In
    each chunk's forward, Megatron offloads the first n − int(n(1 − share)) of its n eligible groups and keeps the
    later ones (fine_grained_activation_offload.py l.650-669 @d98e8a64: the fraction counts groups, not bytes).
    The kinds are laid out in the order they first appear: exact where each kind's layers are one block (a uniform
    stack, DeepSeek-V3's dense layers first), an approximation where kinds alternate. The last-group margin and the
    minimum tensor size Megatron also keeps back are not modelled."""
    if not share:
        return 0.0
    runs = [(g, n) for g, n in runs if n]
    if share >= 1.0:
        return sum(sum(g) * n for g, n in runs)
    sizes = list(chunk_sizes) or [0]
    sizes[-1] += sum(n for _g, n in runs) - sum(sizes)
    left = [n for _g, n in runs]
    moved, i = 0.0, 0
    for size in sizes:
        chunk: list[tuple[Groups, int]] = []
        while size > 0 and i < len(runs):
            take = min(left[i], size)
            chunk.append((runs[i][0], take))
            size, left[i] = size - take, left[i] - take
            i += left[i] == 0
        moved += _first_groups_bytes(chunk, share)
    return moved


def _first_groups_bytes(chunk: list[tuple[Groups, int]], share: float) -> float:
    """The bytes of the first n − int(n(1 − share)) of a chunk's n groups, layer after layer."""
    n = sum(len(g) * m for g, m in chunk)
    k = n - int(n * (1 - share))
    moved = 0.0
    for g, m in chunk:
        if not g:
            continue
        whole = min(m, k // len(g))
        moved += whole * sum(g)
        k -= whole * len(g)
        if whole < m:
            return moved + sum(g[:k])
    return moved


def held_activations(
    keep: float, work: float, moved: float, *, in_flight: float, layers: int, engine: Engine
) -> tuple[float, float]:
    """(bytes the rank's layers keep on the GPU per micro-batch, the working set) with activation offload and the
    CUDA graph pool: offload moves `moved` of what the layers keep (offloaded_bytes), plus OFFLOAD_LAYERS_IN_FLIGHT
    layers' moved share of one micro-batch in transit (never more than it moves: offload never raises GPU memory).
    The layer-wise offload (memory.offload_layers) has none in transit at its peak: Transformer Engine finishes
    layer i's offload before the forward of layer L - N + i and starts its reload at the backward of layer
    L - 1 - N + i, so that the saved activations peak at (L - N) layers' (transformer_engine/pytorch/cpu_offload.py
    OffloadSynchronizer._default_offload_sync_init @00382b96). The graph pool adds CUDA_GRAPH_POOL_FRACTION of the
    activations held."""
    if moved and not engine.memory.offload_layers:
        work += moved * min(OFFLOAD_LAYERS_IN_FLIGHT / max(layers, 1), in_flight)
    keep -= moved
    if engine.kernels.cuda_graphs:
        work += CUDA_GRAPH_POOL_FRACTION * keep * in_flight
    return keep, work


def gpu_optimizer_bytes(optimizer_bytes: float, memory: EngineMemory) -> float:
    """The optimizer state left on the GPU: Megatron's HybridDeviceOptimizer keeps the offloaded share's fp32
    master and moments on the CPU, filled by parameter count up to the fraction (optimizer/cpu_offloading/
    hybrid_optimizer.py l.251-285)."""
    f = memory.optimizer_offload
    return optimizer_bytes * (1.0 - f) if f else optimizer_bytes


# ---- time ----------------------------------------------------------------------------------------------
def modules_recompute_s(
    model: ModelSpec, kind: LayerKind, modules: tuple[str, ...], *, flops: list[float], mixer_gemms: int,
    gemm_time: dict[float, float], t: float, tp: int, etp: int, sp: bool, act_b: int, ffn_width: float,
    hbm_bw: float,
) -> float:  # fmt: skip
    """Forward time the modules other than core_attn re-run for one layer and micro-batch (the attention core is
    layer_time's). `flops`: the layer's forward GEMMs (layer_gemms: the mixer's `mixer_gemms` first, then the FFN's:
    an MoE layer's router, its experts, its shared experts last); `gemm_time`: their seconds.

    layernorm: the norms Megatron does not fuse into a linear (MLA's input norm, an MoE layer's pre-MLP norm),
    read and written once; mla_up_proj: the q and kv up-projections (and RoPE, as memory traffic); moe_act: the
    experts' activation on the routed tokens; mlp: the dense MLP; moe: the whole MoE layer but its input — router,
    experts, shared experts (its dispatch and combine all-to-alls again are cost.traffic's); shared_experts: the
    shared experts (transformer_config.py l.560-582 and the modules' checkpoint calls)."""
    h, split = model.hidden_size, (tp if sp else 1)
    ffn = flops[mixer_gemms:]
    s = 0.0
    if "layernorm" in modules:
        norms = (kind.mixer == "mla") + (kind.ffn == "moe")
        s += norms * t * 2 * h * act_b / split / hbm_bw
    if "mla_up_proj" in modules and kind.mixer == "mla":
        s += sum(gemm_time[f] for f in flops[mixer_gemms - 3 : mixer_gemms - 1])
    gated = 3 if model.mlp == "swiglu" else 2
    if "mlp" in modules and kind.ffn == "dense":
        s += sum(gemm_time[f] for f in ffn) + t * ffn_width * gated * act_b / hbm_bw
    if kind.ffn != "moe" or model.moe is None:
        return s
    m = model.moe
    shared = model.mlp_matrices if m.num_shared_experts else 0
    expert_act = t * m.top_k * m.expert_ffn_hidden_size / etp * gated * act_b / hbm_bw
    if "moe" in modules:
        return s + sum(gemm_time[f] for f in ffn) + t * ffn_width * gated * act_b / hbm_bw
    if "moe_act" in modules:
        s += expert_act
    if "shared_experts" in modules and shared:
        width = (m.shared_expert_ffn_hidden_size or m.expert_ffn_hidden_size) * m.num_shared_experts / tp
        s += sum(gemm_time[f] for f in ffn[-shared:]) + t * width * gated * act_b / hbm_bw
    return s


def moe_recomputed(kernels: Kernels, recompute: str) -> bool:
    """Whether selective recompute re-runs the whole MoE layer, its dispatch and combine all-to-alls included."""
    return (
        recompute == "selective" and kernels.selective_recompute == "attention" and "moe" in selected_modules(kernels)
    )


def modules_recompute_flops_per_token(model: ModelSpec, seq_len: int, modules: tuple[str, ...]) -> float:
    """Forward FLOPs per token the selected modules run again (what HFU adds), over every layer and the MTP
    modules' layers: core_attn the attention core; mla_up_proj the up-projections; mlp the dense MLPs; moe the MoE
    FFNs (router, experts, shared experts); shared_experts their share alone; layernorm and moe_act are elementwise
    (no FLOPs counted, as Megatron counts none)."""
    from planner.cost.flops import kind_flops_per_token

    kinds = [*model.layer_kinds, *[model.layer_kinds[-1]] * model.mtp_layers]
    total = 0.0
    for kind in kinds:
        f = kind_flops_per_token(model, kind, seq_len)
        if "core_attn" in modules:
            total += f.attention_core_flops
        if "mla_up_proj" in modules and kind.mixer == "mla":
            total += _mla_up_flops(model)
        if kind.ffn == "dense" and "mlp" in modules:
            total += f.mlp_flops
        if kind.ffn == "moe" and model.moe is not None:
            m = model.moe
            if "moe" in modules:
                total += f.mlp_flops + f.router_flops
            elif "shared_experts" in modules:
                width = m.shared_expert_ffn_hidden_size or m.expert_ffn_hidden_size
                total += 2.0 * model.mlp_matrices * model.hidden_size * width * m.num_shared_experts
    return total


def _mla_up_flops(model: ModelSpec) -> float:
    """Per token: q up-projection (q_lora_rank, or the hidden size without one, to heads x qk) and kv
    up-projection (kv_lora_rank to heads x (nope + v)) (Megatron multi_latent_attention.py)."""
    a = model.attention
    assert a is not None and a.kv_lora_rank is not None and a.qk_nope_head_dim is not None and a.v_head_dim
    heads = model.num_attention_heads
    q_in = a.q_lora_rank or model.hidden_size
    return 2.0 * (q_in * heads * model.head_size + a.kv_lora_rank * heads * (a.qk_nope_head_dim + a.v_head_dim))
