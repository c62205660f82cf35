"""Precision recipes: what each `--precision` value is, as the engines' quantization libraries define it.

`fp32`, `bf16` and `fp16` run every GEMM in that format. A named recipe runs all three GEMMs of every linear layer of
the transformer layers in its format — fprop, dgrad and wgrad (TE's default; Megatron's `--no-fp8-wgrad`, which keeps
wgrad in bf16, is not a recipe here), but for `fp8-rowwise-gw-hp` (torchao's `rowwise_with_gw_hp`), whose wgrad runs
in bf16 — and keeps attention, the embedding, the output layer and the MoE router in bf16. Plain `fp8` is the
engine's default fp8 recipe as the planner has always modelled it: GEMMs at the fp8 peak, a cast of every GEMM input
and weight, an fp8 weight cache where the engine keeps one; its terms were calibrated on the published fp8 runs and
stay as they are. The named recipes below carry their own terms (cost/quantization.py): which tensors they quantize
and how (per tensor, per row, per block of 128, 32 or 16 elements), the scale tensors, the transposed copies, the
amax passes, NVFP4's Hadamard transform, torchao's rescaled backward GEMMs. GPU architectures and engines that run
each recipe are the engine profile's (`rules.precision_recipes`, engine/recipes.py), from the libraries' own support
checks.

Sources (read at the commits engine_profiles/megatron.yaml names): Transformer Engine @d0067d0d
transformer_engine/common/recipe/__init__.py (the recipe classes: DelayedScaling l.173-285, Float8CurrentScaling
l.286-335, MXFP8BlockScaling l.337-390, Float8BlockScaling l.392-487, NVFP4BlockScaling l.489-612); the scale
shapes in transformer_engine/pytorch/tensor/{float8_blockwise_tensor.py l.162-211, mxfp8_tensor.py l.139-176,
nvfp4_tensor.py l.273-307}; the quantize kernels' passes in transformer_engine/pytorch/csrc/quantizer.cpp
(current scaling: an amax kernel, then the cast, l.1008-1028; NVFP4: a per-tensor amax kernel, then the cast with
the random Hadamard transform fused on the columnwise output, l.2630-2720). torchao @36027d82 for `fp8-rowwise`:
torchao/float8/config.py Float8LinearConfig.from_recipe_name (ROWWISE: axiswise E4M3 input, weight and output
gradient, power-of-two scales, l.334-351; the output GEMM with fast accumulation, the backward ones without, l.215-217),
float8_scaling_utils.py hp_tensor_to_float8_dynamic (the scale from the amax, then the cast), float8_ops.py
addmm_float8_unwrapped (rowwise without fast accumulation: cuBLAS's per-tensor kernel at unit scales, the scales
multiplied into the output after it, l.47-59 and l.84-85; preprocess_addmm repeats a per-tensor scale into one per
column where the other operand is rowwise, l.348-359, which is how rowwise_with_gw_hp's input gradient runs; its
recipe, config.py l.353-378). The forward GEMM is CUTLASS's rowwise kernel, priced at
the fp8 matmul ceiling: pytorch/pytorch issue 147971 measures it at 90-100% of the per-tensor kernel's rate for most
shapes on an H100, with a tail down to 50%, which is not priced.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, get_args

from planner.specs import PRECISIONS, Precision

# GPU architectures, by what the quantization libraries check (compute capability on NVIDIA, gfx on AMD).
Architecture = Literal["volta", "ampere", "ada", "hopper", "blackwell", "cdna3", "cdna4", "cpu"]
ARCHITECTURES: tuple[Architecture, ...] = get_args(Architecture)
# The format a precision's GEMMs run in: the key of the hardware profile's peak_flops.
GemmFormat = Literal["fp32", "bf16", "fp16", "fp8", "fp4"]


@dataclass(frozen=True)
class Recipe:
    """One named low-precision training recipe (Transformer Engine's recipe classes; torchao's float8 and MX
    linears where an engine runs those)."""

    name: Precision
    gemm: GemmFormat  # the tensor-core format of fprop, dgrad and wgrad
    data_bytes: float  # bytes per element of one quantized copy (E4M3/E5M2: 1, E2M1: 0.5)
    act_scale_bytes: float  # scale bytes per element of an activation or gradient copy (1-D blocks)
    weight_scale_bytes: float  # scale bytes per element of a weight copy
    per_tensor: bool  # one scale per tensor: a copy's transpose is the same numbers (one copy on Blackwell)
    amax_pass: bool  # a separate kernel reads the tensor for its amax before the cast
    amax_history: int  # fp32 amax entries kept per scaled tensor (delayed scaling)
    hadamard: bool  # a 16x16 random Hadamard transform on the wgrad operands (NVFP4)
    param_gather_halves: bool  # --fp8-param-gather moves the quantized weights (half of bf16)
    description: str
    # each copy is cast from the 16-bit tensor when its own GEMM runs, with its own amax read: torchao's axiswise
    # scales run along each GEMM's reduction dimension, another axis for the fprop, dgrad and wgrad operands
    # (float8_linear.py: the forward casts the input and the weight, the backward the output gradient twice and
    # the input and the weight again)
    axis_casts: bool = False
    # the backward GEMMs (slow accumulation) run cuBLAS's per-tensor kernel at unit scales and multiply the scales
    # into their 16-bit output afterwards: one more read and write of each dgrad and wgrad output
    rescaled_backward: bool = False
    # the weight-gradient GEMM's format where it is not `gemm` (torchao rowwise_with_gw_hp: bf16, its operands the
    # saved 16-bit input and the output gradient, uncast); None: all three GEMMs in `gemm`
    wgrad: GemmFormat | None = None
    # what the recipe's runs are known to spend that its terms do not price, said beside each estimate at it
    unpriced: str | None = None

    def wgrad_format(self) -> GemmFormat:
        """The format the weight-gradient GEMM runs in."""
        return self.wgrad or self.gemm

    def copies(self, architecture: str | None) -> int:
        """Copies of a tensor used in both directions (fprop rowwise, dgrad/wgrad columnwise): per-tensor fp8 on
        Hopper and Ada needs a transposed copy (only TN fp8 GEMMs), on Blackwell one copy serves both
        (TE pytorch/utils.py l.658-663 is_non_tn_fp8_gemm_supported: sm100-119, sm130+); block recipes always
        keep both quantizations, each computed from the high-precision input (the recipe docstrings)."""
        return 1 if self.per_tensor and architecture == "blackwell" else 2


# Transformer Engine's DelayedScaling defaults amax_history_len to 1024 (quantization.py l.143, recipe l.255);
# Megatron-LM defaults --fp8-amax-history-len to 1 (transformer_config.py l.621) and Megatron-Bridge's delayed
# recipe sets 1024 (mixed_precision.py l.229): the larger is counted (a few kB per GEMM either way).
DELAYED_AMAX_HISTORY = 1024
# fp32 scale tensors of the blockwise recipe (float8_blockwise_tensor.py): 1x128 blocks for inputs and gradients,
# 128x128 for weights (recipe l.435-437); E8M0 (1 byte) per 32 elements for MXFP8; E4M3 (1 byte) per 16 for NVFP4.
FP32_BYTES = 4.0

# What torchao's rowwise recipes spend beyond their priced terms (precision.py's module docstring has the sources).
ROWWISE_UNPRICED = (
    "not priced: CUTLASS's rowwise forward GEMM runs at 90-100% of the per-tensor kernel's rate for most shapes and "
    "down to 50% for some (pytorch/pytorch issue 147971), and torchtitan calls its rowwise tensor-parallel path "
    "slow (torchtitan issue 1207)"
)

# torchao's rowwise float8 (the module docstring's sources); fp8-rowwise-gw-hp is it with its wgrad in bf16.
ROWWISE = Recipe(
    "fp8-rowwise",
    "fp8",
    1.0,
    0.0,  # one fp32 scale per row of a GEMM's reduction width (1,024 or more): under 0.4% of the data, not counted
    0.0,
    False,
    True,
    0,
    False,
    False,  # torchao asserts fp8 all-gather is tensorwise only (config.py __post_init__): the gather stays 16-bit
    "fp8 E4M3 with an fp32 scale per row along each GEMM's reduction dimension, powers of two (torchao "
    "Float8LinearRecipeName.ROWWISE, torchtitan's float8 recipe_name rowwise)",
    axis_casts=True,
    rescaled_backward=True,
    unpriced=ROWWISE_UNPRICED + "; torchtitan's own runs at it measured 6-23% below such estimates "
    "(tests/data/runs_fp8_rowwise.yaml): read its throughput as an upper bound",
)

RECIPES: dict[str, Recipe] = {
    "fp8-delayed": Recipe(
        "fp8-delayed",
        "fp8",
        1.0,
        0.0,
        0.0,
        True,
        False,
        DELAYED_AMAX_HISTORY,
        False,
        True,
        "per-tensor fp8 (E4M3 forward, E5M2 gradients) scaled from an amax history (TE DelayedScaling)",
    ),
    "fp8-current": Recipe(
        "fp8-current",
        "fp8",
        1.0,
        0.0,
        0.0,
        True,
        True,
        0,
        False,
        True,
        "per-tensor fp8 scaled from the tensor's own amax (TE Float8CurrentScaling, Megatron 'tensorwise', "
        "torchao tensorwise)",
    ),
    "fp8-rowwise": ROWWISE,
    "fp8-rowwise-gw-hp": replace(
        ROWWISE,
        name="fp8-rowwise-gw-hp",
        description="fp8-rowwise's forward; the input gradient from an axiswise E4M3 output gradient and a per-tensor "
        "weight, the weight gradient in bf16 (torchao Float8LinearRecipeName.ROWWISE_WITH_GW_HP, torchtitan's "
        "rowwise_with_gw_hp)",
        wgrad="bf16",
        unpriced=ROWWISE_UNPRICED + ": read its throughput as an upper bound",
    ),
    "fp8-blockwise": Recipe(
        "fp8-blockwise",
        "fp8",
        1.0,
        FP32_BYTES / 128,
        FP32_BYTES / (128 * 128),
        False,
        False,
        0,
        False,
        True,
        "fp8 E4M3 with fp32 scales per 1x128 block of inputs and gradients and per 128x128 block of weights "
        "(TE Float8BlockScaling, DeepSeek-V3's recipe)",
    ),
    "mxfp8": Recipe(
        "mxfp8",
        "fp8",
        1.0,
        1.0 / 32,
        1.0 / 32,
        False,
        False,
        0,
        False,
        False,
        "OCP MXFP8: E4M3 with an E8M0 scale per 32 elements (TE MXFP8BlockScaling, torchao MX)",
    ),
    "nvfp4": Recipe(
        "nvfp4",
        "fp4",
        0.5,
        1.0 / 16,
        1.0 / 16,
        False,
        True,
        0,
        True,
        True,
        "NVFP4: E2M1 with an E4M3 scale per 16 elements and an fp32 scale per tensor, 16x16 weight blocks, a "
        "random Hadamard transform on the wgrad operands, stochastic rounding of gradients (TE NVFP4BlockScaling)",
    ),
}
RECIPE_NAMES: tuple[str, ...] = tuple(RECIPES)
# torchao's float8 recipe names (torchao/float8/config.py Float8LinearRecipeName) of the precisions its Float8Linear
# runs: tensorwise for plain fp8 and fp8-current, rowwise for fp8-rowwise, rowwise_with_gw_hp for fp8-rowwise-gw-hp.
TORCHAO_FLOAT8_RECIPES: dict[str, str] = {
    "fp8": "tensorwise",
    "fp8-current": "tensorwise",
    "fp8-rowwise": "rowwise",
    "fp8-rowwise-gw-hp": "rowwise_with_gw_hp",
}
# Per-tensor dynamic fp8 ("tensorwise"): the recipe torchao's float8 tensor parallelism gathers in fp8
# (torchtitan apply_tp enable_float8_tensorwise_tp), and what plain fp8 is on torchtitan (its precision_recipes).
TENSORWISE_FP8: tuple[str, ...] = tuple(p for p, name in TORCHAO_FLOAT8_RECIPES.items() if name == "tensorwise")
assert set(RECIPE_NAMES) | {"fp32", "bf16", "fp16", "fp8"} == set(PRECISIONS), "specs.Precision and RECIPES agree"


def recipe(precision: str) -> Recipe | None:
    """The named recipe of a precision (None: fp32, bf16, fp16 and plain fp8)."""
    return RECIPES.get(precision)


def gemm_format(precision: str) -> str:
    """The format a precision's transformer-layer GEMMs run in: the key of the hardware's peak_flops."""
    r = RECIPES.get(precision)
    return r.gemm if r is not None else precision


# Bytes per element of a GEMM operand in each format (E2M1: half a byte; the block scales are the recipe's).
GEMM_OPERAND_BYTES: dict[str, float] = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp4": 0.5}


def is_low_precision(precision: str) -> bool:
    """Plain fp8 or a named recipe: the layers' GEMMs run quantized, attention and the head stay 16-bit."""
    return precision == "fp8" or precision in RECIPES


def head_precision(precision: str) -> str:
    """The precision of the output layer's GEMM: bf16 under a named recipe (Megatron builds the output layer
    outside the fp8 autocast unless --fp8-output-proj with MXFP8, transformer_config.py l.632-635; torchtitan's
    MX converter filters `output` by default, job_config.py v0.2.2 l.784); plain fp8 keeps the planner's
    calibrated convention (the head at the plan's rate)."""
    return "bf16" if precision in RECIPES else precision


def activation_bytes(precision: str) -> int:
    """Bytes per element of activations, their gradients and what memory-bound kernels move: fp32 keeps fp32,
    every other precision keeps 16-bit activations (quantized copies are counted by the recipe,
    cost/quantization.py)."""
    return 4 if precision == "fp32" else 2
