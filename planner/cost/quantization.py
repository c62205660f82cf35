"""What a named precision recipe (precision.py) costs beyond its GEMM rate: the quantization kernels' HBM traffic,
NVFP4's Hadamard transform, the router kept in bf16, and the memory it holds — quantized weight copies, their
scales, amax histories, quantized saved inputs — as the engine's quantization library keeps them.

Time, per layer and micro-batch (layer_time.py adds it to the memory-bound work; backward is MEMORY_BACKWARD_FACTOR
times the forward, the gradients' casts being about the inputs' size):
- each GEMM input is read once in 16 bits (twice when the recipe takes the tensor's amax first: current scaling,
  quantizer.cpp l.1008-1028; NVFP4's per-tensor scale, l.2630-2650) and written once per quantized copy, data and
  scales: rowwise for fprop, columnwise for wgrad (one copy for per-tensor fp8 on Blackwell, utils.py l.658-663);
- weights the same way, every micro-batch where the engine casts them at each GEMM (torchao), once per step where
  it caches them (Transformer Engine's is_first_microbatch: `weight_cast_step_s`, charged to the optimizer step);
- NVFP4: a 16-point Hadamard transform of the wgrad operands, fused into the cast on the tensor cores
  (quantizer.cpp l.2699-2710): 2·16 FLOPs per element at the 16-bit peak;
- torchao's rowwise fp8 casts each copy when its GEMM runs, each with its own amax read: the forward the
  input's and the weight's fprop copy, the backward their other copy and both of the output gradient, and it
  rescales the backward GEMMs' outputs after them (precision.py: float8_ops.py addmm_float8_unwrapped); its
  backward is stated (stated_backward_bytes) rather than taken as the factor times the forward;
- the MoE router's GEMM stays bf16 (Megatron's TopKRouter is not a TE module; DeepSeek-V3 §3.3.2 keeps the gating
  in bf16), as do attention (TE "Not applying quantization to attention", recipe l.573) and the output layer
  (precision.head_precision).

Plain `fp8` keeps the planner's calibrated convention (3 bytes per element of every GEMM input and weight, every
micro-batch; an fp8 copy of every local weight and a 2x1024 fp32 amax history per GEMM in memory.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.cost.cache import spec_cache
from planner.cost.kernels import MEMORY_BACKWARD_FACTOR, gemm_s
from planner.cost.params import RankParams, kind_params_per_rank
from planner.cost.stages import Layout, plan_layout
from planner.engine import Engine, ZeroStage
from planner.hardware import Efficiency, HardwareProfile
from planner.layers import LayerKind
from planner.plan import Plan
from planner.precision import RECIPES, Recipe, is_low_precision
from planner.specs import ModelSpec

AUTOCAST_CAST_BYTES = 2.0  # torch.autocast's cached cast of an fp32 weight: bf16 or fp16
HADAMARD_FLOPS_PER_ELEMENT = 2.0 * 16  # a 16x16 matrix per 16 elements (TE NVFP4 RHT, recipe l.516-519)
# Delayed scaling keeps, per TE module GEMM, fp8 metadata for 3 forward tensors (input, weight, output) and 2
# backward ones (output gradient, input gradient): an amax history and a scale and its inverse each (TE
# DelayedScaling; Micikevicius et al. 2022, FP8 Formats §3).
DELAYED_SCALED_TENSORS_PER_GEMM = 5
LEGACY_FP8_CAST_BYTES = 3.0  # plain fp8: read 2, write 1 per element of every GEMM input and weight
RESCALE_BYTES_PER_ELEMENT = 4.0  # torchao's `output *= post_inverse_scale`: read and write a 16-bit output


@dataclass(frozen=True)
class LayerCasts:
    """What one layer's quantization adds, one micro-batch forward on one GPU."""

    hbm_bytes: float = 0.0  # memory-bound cast traffic
    flops: float = 0.0  # tensor-core work of the casts (NVFP4's Hadamard transform), at the 16-bit peak
    router_delta_s: float = 0.0  # the router GEMM at bf16 rather than at the recipe's rate
    # where the recipe states its backward (torchao rowwise: stated_backward_bytes), what that moves beyond the
    # backward's MEMORY_BACKWARD_FACTOR x this forward (layer_time.py), negative where it moves less; 0 elsewhere
    backward_hbm_bytes: float = 0.0


NO_CASTS = LayerCasts()


def quantized_kind_params(model: ModelSpec, kind: LayerKind, *, tp: int, ep: int, etp: int) -> float:
    """Weights of one layer of this kind on one rank that a recipe quantizes: its linear layers' weights (the
    mixer's projections, MLA's down-projections, the dense MLP, the shared and routed experts), not its norms nor
    the router (kind_params_per_rank less those)."""
    dense, expert = kind_params_per_rank(model, kind, tp, ep, etp)
    lp = model.kind_params[kind]
    return dense - lp.norms - lp.router + expert


def local_kind_params(model: ModelSpec, kind: LayerKind, *, tp: int, ep: int, etp: int) -> float:
    """Parameters of one layer of this kind on one GPU: the layer's over tp, an MoE layer's own split (only the
    rank's experts)."""
    if kind.ffn != "moe":
        return model.kind_params[kind].total / tp
    dense, expert = kind_params_per_rank(model, kind, tp, ep, etp)
    return dense + expert


def copy_bytes(r: Recipe, *, weight: bool) -> float:
    """Bytes per element of one quantized copy: data and its scales."""
    return r.data_bytes + (r.weight_scale_bytes if weight else r.act_scale_bytes)


def cast_bytes_per_element(r: Recipe, architecture: str | None, *, weight: bool) -> float:
    """HBM bytes one cast moves per element: read the 16-bit tensor (twice with an amax pass), write each copy it
    makes (one where each copy is cast when its own GEMM runs: Recipe.axis_casts)."""
    copies = 1 if r.axis_casts else r.copies(architecture)
    return 2.0 * (2 if r.amax_pass else 1) + copies * copy_bytes(r, weight=weight)


def stated_backward_bytes(
    r: Recipe, architecture: str | None, *, input_elements: float, weights: float, weight_grads: float
) -> float:
    """What the backward of a recipe cast at each GEMM moves (torchao float8_linear.py backward, l.94-204): the
    weight's dgrad copy (`weights`: none where cached) and the output gradient's (about the inputs' size, as this
    module counts the gradients); where the wgrad GEMM is quantized too, the input's and the output gradient's wgrad
    copies; and, where the quantized backward GEMMs are rescaled after they run, each dgrad output (the inputs'
    size) and quantized wgrad output (`weight_grads`, the weights' size) read and written once more. A bf16 wgrad
    reads the saved input and the gradient as they are (rowwise_with_gw_hp: ScalingType.DISABLED)."""
    act = cast_bytes_per_element(r, architecture, weight=False)
    quantized_wgrad = r.wgrad_format() == r.gemm
    out = weights * cast_bytes_per_element(r, architecture, weight=True) + input_elements * act
    if quantized_wgrad:
        out += 2 * input_elements * act
    if r.rescaled_backward:
        out += RESCALE_BYTES_PER_ELEMENT * (input_elements + (weight_grads if quantized_wgrad else 0.0))
    return out


def layer_casts(
    model: ModelSpec, kind: LayerKind, precision: str, *, input_elements: float, tp: int, ep: int, etp: int,
    architecture: str | None, weight_cache: bool, eff: Efficiency, gemm_peak: float, core_peak: float, tokens: float,
) -> LayerCasts:  # fmt: skip
    """The casts of one layer for one micro-batch forward (module docstring). `input_elements`: the elements of
    every GEMM input on this GPU (tokens x the layer's GEMM input widths)."""
    if precision == "fp8":
        return LayerCasts(
            LEGACY_FP8_CAST_BYTES * (input_elements + local_kind_params(model, kind, tp=tp, ep=ep, etp=etp))
        )
    r = RECIPES.get(precision)
    if r is None:
        return NO_CASTS
    weights = 0.0 if weight_cache else quantized_kind_params(model, kind, tp=tp, ep=ep, etp=etp)
    hbm = input_elements * cast_bytes_per_element(r, architecture, weight=False)
    hbm += weights * cast_bytes_per_element(r, architecture, weight=True)
    flops = HADAMARD_FLOPS_PER_ELEMENT * input_elements if r.hadamard else 0.0
    router = 0.0
    if kind.ffn == "moe" and model.moe is not None:
        f = 2 * tokens * model.hidden_size * model.moe.num_experts
        router = gemm_s(f, core_peak, eff, "bf16") - gemm_s(f, gemm_peak, eff, precision)
    beyond = 0.0  # a recipe cast at each GEMM states its backward: what it moves beyond the factor x the forward
    if r.axis_casts:
        q = quantized_kind_params(model, kind, tp=tp, ep=ep, etp=etp)
        stated = stated_backward_bytes(r, architecture, input_elements=input_elements, weights=weights, weight_grads=q)
        beyond = stated - MEMORY_BACKWARD_FACTOR * hbm
    return LayerCasts(hbm, flops, router, beyond)


def wgrad_delta_s(
    precision: str, each_s: dict[float, float], flops: list[float], core_peak: float, eff: Efficiency, *,
    forward_16bit_s: float,
) -> float:  # fmt: skip
    """What a recipe whose weight-gradient GEMMs run in another format (Recipe.wgrad: bf16 for torchao's
    rowwise_with_gw_hp) adds over running them as the forward's: each GEMM of the layer at the 16-bit rate, less
    its time in the recipe's format (`each_s`), less `forward_16bit_s`, what the forward already runs at the 16-bit
    rate beyond `each_s` (the MoE router: LayerCasts.router_delta_s). The experts' grouped GEMMs keep the recipe's
    rate (no engine runs this recipe on them)."""
    r = RECIPES.get(precision)
    if r is None or r.wgrad_format() == r.gemm:
        return 0.0
    return sum(gemm_s(f, core_peak, eff, r.wgrad_format()) - each_s[f] for f in flops) - forward_16bit_s


# ---- memory --------------------------------------------------------------------------------------------
@spec_cache(maxsize=4096)
def rank_quantized_params(model: ModelSpec, layout: Layout, *, tp: int, ep: int, etp: int, rank: int) -> float:
    """Quantized weights one GPU of pipeline rank `rank` holds: its layers' linear weights (and those of the
    multi-token-prediction modules' layers with the loss); the embedding, the output layer and norms stay 16-bit."""
    kinds = model.layer_kinds
    per: dict[LayerKind, float] = {}
    total = 0.0
    layers = list(layout.rank_layers(rank))
    extra = [kinds[-1]] * model.mtp_layers if layout.holds_loss(rank) else []
    for kind in [kinds[i] for i in layers] + extra:
        if kind not in per:
            per[kind] = quantized_kind_params(model, kind, tp=tp, ep=ep, etp=etp)
        total += per[kind]
    return total


@dataclass(frozen=True)
class RecipeMemory:
    """What a recipe changes in one rank's model-state memory: the weights term (quantized weights replace the
    16-bit ones with fp8 parameter gather) and the buffers (quantized copies, amax histories)."""

    weights_bytes: float = 0.0
    buffers_bytes: float = 0.0


NO_RECIPE_MEMORY = RecipeMemory()


def recipe_memory(
    model: ModelSpec, plan: Plan, engine: Engine, hw: HardwareProfile, stage: ZeroStage, *, rank: int,
    params: RankParams,
) -> RecipeMemory:  # fmt: skip
    """A named recipe's persistent memory on one rank, as Transformer Engine keeps it (engine.memory.fp8_weight_cache;
    torchao keeps none: it casts at each GEMM and frees the copy).

    - weight caches: every local quantized weight, in `copies` quantized copies, data and scales, reused across a
      step's micro-batches (TE module/linear.py l.479: the workspace is refreshed at the first micro-batch only); a
      stage that gathers weights unit by unit (FSDP) holds the current and the prefetched unit's;
    - fp8 parameter gather (Megatron --fp8-param-gather, zero 1): the quantized weight is the parameter (no 16-bit
      copy: the weights term loses 16-bit minus one quantized copy per quantized weight) and the other direction
      stays cached (the Hopper transpose, the columnwise block copy);
    - delayed scaling: each GEMM's amax histories and scales (DELAYED_SCALED_TENSORS_PER_GEMM x (history + 2) fp32).
    """
    r = RECIPES.get(plan.precision)
    if not engine.memory.fp8_weight_cache:
        return _uncached_under_autocast(model, plan, engine, stage, rank=rank)
    if r is None:
        return NO_RECIPE_MEMORY
    layout = plan_layout(model, plan, engine)
    q = rank_quantized_params(model, layout, tp=plan.tp, ep=plan.ep, etp=plan.expert_tp, rank=rank)
    copies = r.copies(hw.gpu.architecture)
    one = copy_bytes(r, weight=True)
    gemms = params.num_gemms
    history = DELAYED_SCALED_TENSORS_PER_GEMM * (r.amax_history + 2) * 4.0 * gemms if r.amax_history else 0.0
    if engine.memory.fp8_param_gather:
        return RecipeMemory(-q * (2.0 - one), q * (copies - 1) * one + history)
    unit = params.unit(engine.memory.fsdp_edge_groups)
    cached = q if stage.gathered_weights != "unit" else 2 * unit * q / max(params.total, 1.0)
    return RecipeMemory(0.0, cached * copies * one + history)


def _uncached_under_autocast(
    model: ModelSpec, plan: Plan, engine: Engine, stage: ZeroStage, *, rank: int
) -> RecipeMemory:
    """Under torch.autocast from fp32 weights, autocast caches the 16-bit cast of every weight a GEMM reads
    (cost/states.py counts them all); a quantized linear that casts its own weight when its GEMM runs (torchao's
    Float8Linear, the worker's launch/float8.py) does not go through autocast's linear, so its weights have no cached
    copy. Measured on an H200: the worker's fp8 plans peaked 3.01 GiB under the same plans in bf16 for 8 Llama 2 7B
    layers (1.62B linear weights x 2 bytes = 3.02 GiB) and 2.25 GiB for GPT-3 1.3B's 24 (2.26 GiB)
    (benchmarks/results/h200-2026-11-26-fp8)."""
    kept_whole = stage.gathered_weights == "all" and "weights" not in stage.shards  # zero 0-2: autocast's cache
    if not (is_low_precision(plan.precision) and stage.autocast and kept_whole):
        return NO_RECIPE_MEMORY
    layout = plan_layout(model, plan, engine)
    q = rank_quantized_params(model, layout, tp=plan.tp, ep=plan.ep, etp=plan.expert_tp, rank=rank)
    return RecipeMemory(-q * AUTOCAST_CAST_BYTES, 0.0)


def saved_input_bytes(precision: str, engine: Engine) -> float:
    """Bytes per element of the quantized input a linear saves for its wgrad (the columnwise copy only, TE
    module/linear.py l.600-621); 0: the 16-bit input is saved (16-bit precisions, plain fp8, torchao)."""
    r = RECIPES.get(precision)
    if r is None or not engine.memory.quantized_activations:
        return 0.0
    return copy_bytes(r, weight=False)


# ---- the step ------------------------------------------------------------------------------------------
def weight_cast_step_s(model: ModelSpec, hw: HardwareProfile, plan: Plan, engine: Engine, *, rank: int) -> float:
    """Once per step, where the engine caches quantized weights: each local quantized weight cast into its copies
    at the first micro-batch (TE is_first_microbatch); with fp8 parameter gather, the fp32 master shard cast to
    the quantized parameter in the optimizer step, and the other direction's copy made from it after the gather."""
    r = RECIPES.get(plan.precision)
    if r is None or not engine.memory.fp8_weight_cache:
        return 0.0
    layout = plan_layout(model, plan, engine)
    q = rank_quantized_params(model, layout, tp=plan.tp, ep=plan.ep, etp=plan.expert_tp, rank=rank)
    arch, one = hw.gpu.architecture, copy_bytes(r, weight=True)
    if engine.memory.fp8_param_gather:
        shard = q / (plan.dp * plan.cp)
        nbytes = shard * (4.0 * (2 if r.amax_pass else 1) + one) + q * (one + (r.copies(arch) - 1) * one)
    else:
        nbytes = q * cast_bytes_per_element(r, arch, weight=True)
    return nbytes / (hw.gpu.hbm_bandwidth_bytes_per_s * hw.efficiency.hbm)


def gather_bytes_per_param(precision: str, engine: Engine) -> float | None:
    """Bytes per parameter the weight all-gather moves with fp8 parameter gather: one quantized copy (the
    halving of "FP8 Param Gather", Megatron moe/README.md), except MXFP8, whose gather stays 16-bit (the README's
    "except MXFP8"; --reuse-grad-buf-for-mxfp8-param-ag stages it in the gradient buffer); None: 16-bit."""
    r = RECIPES.get(precision)
    if r is None or not engine.memory.fp8_param_gather or not r.param_gather_halves:
        return None
    return copy_bytes(r, weight=True)
