"""Time of the kernels one layer runs, from the hardware's measured curves and the engine's kernel choices.

GEMMs: FLOPs / (peak × the GEMM efficiency measured for that size, hardware.Efficiency.matmul). Attention:
a fused kernel (FlashAttention-2, or cuDNN / FlashAttention-3 through Transformer Engine) runs the causal
half of the FLOPs at the efficiency measured for its sequence block; the unfused path of 2021-22 Megatron
runs QKᵀ and attention×V as batched GEMMs over the whole s×s matrix and writes the scores to HBM.
Memory-bound work (norms, residual adds, activation, rotary, dropout, unfused softmax): HBM bytes /
(bandwidth × efficiency.hbm), counted op by op for fused kernels (one read and one write per tensor) and
for eager PyTorch (several passes, fp32 intermediates).
"""

from __future__ import annotations

import math

from planner.engine import Kernels
from planner.hardware import Efficiency
from planner.precision import GEMM_OPERAND_BYTES, activation_bytes, gemm_format
from planner.specs import PRECISIONS

# Bytes per activation element for memory-bound work and communication (fp8 and the recipes keep 16-bit ones).
ACT_BYTES: dict[str, int] = {p: activation_bytes(p) for p in PRECISIONS}
# FlashAttention's backward recomputes QKᵀ and P: 5 GEMM-shaped products against 2 in the forward
# (Dao et al. 2022, Sec. 3.1 / Algorithm 4; Dao 2023, the 2.5x of its TFLOP/s convention).
FLASH_BACKWARD_FACTOR = 2.5
# Elementwise backward ≈ 2 × the forward's bytes (read the upstream gradient and the saved input, write the
# input gradient, for ops that read one tensor and write one). An estimate, not measured.
MEMORY_BACKWARD_FACTOR = 2.0
# Eager PyTorch RMSNorm (torch 2.x nn.RMSNorm / torchtitan): x.float() (read a, write 4), pow (4 + 4), mean
# (read 4), x * rsqrt (4 + 4), type_as (4 + a), * weight (a + a): 28 + 4a bytes per element, against 2a fused.
EAGER_RMSNORM_BYTES = 28.0
# Eager rotary in torchtitan's complex form: x.float() (a + 4), complex multiply (read 4, write 4), type_as
# (4 + a): 16 + 2a bytes per element of q and k, against 2a fused (TE apply_rope_fusion).
EAGER_ROPE_BYTES = 16.0


def gemm_s(flops: float, peak: float, eff: Efficiency, precision: str) -> float:
    return flops / (peak * eff.matmul_efficiency(flops, precision)) if flops > 0 else 0.0


# Rows per tile of the grouped GEMM kernels (CUTLASS / cuBLASLt grouped GEMMs tile M by 128; TE's GroupedLinear):
# an expert with fewer rows leaves the rest of its last tile idle.
GROUPED_TILE_ROWS = 128


def grouped_utilisation(rows: float) -> float:
    """The share of the tiles' rows an expert's tokens fill: rows / (tile · ceil(rows / tile))."""
    if rows <= 0:
        return 1.0
    return rows / (GROUPED_TILE_ROWS * math.ceil(rows / GROUPED_TILE_ROWS))


def grouped_weights_s(weight_elements: float, precision: str, hbm_bw: float) -> float:
    """Reading every local expert's weights once from HBM. With few tokens per expert, fewer than the GPU's FLOPs
    per byte (about 300 on H100 and B200 in bf16), this is most of a grouped expert GEMM's time, whatever its total
    size."""
    return weight_elements * GEMM_OPERAND_BYTES[gemm_format(precision)] / hbm_bw


def grouped_gemm_s(
    flops: float, util: float, weight_elements: float, *, peak: float, eff: Efficiency, precision: str, hbm_bw: float
) -> float:  # fmt: skip
    """One grouped expert GEMM: its tiles' FLOPs (the experts' rows padded to whole tiles, at the efficiency of
    that size) plus one read of the local experts' weights; the sum, not the larger of the two. Measured on one
    H200 (benchmarks/gpu_grouped.py; benchmarks/results/h200-2026-11-26-casts/grouped.json: torch._grouped_mm
    forward at the expert shapes of DeepSeek-V3, Qwen3-30B-A3B, Mixtral 8x7B and GPT-OSS 120B, 16 to 4,096 rows
    per expert): the sum is within 8% of the 30 times at the median and 27% at worst; the larger of the two was
    29% and 100% off, twice too fast at 64-128 rows, where the time stays at about twice the weights' read."""
    return gemm_s(flops / util, peak, eff, precision) + grouped_weights_s(weight_elements, precision, hbm_bw)


def attention_core_s(
    *,
    tokens: float,
    seq_len: int,
    cp: int,
    q_loc: float,
    head_dim: int,
    peak: float,
    eff: Efficiency,
    kernels: Kernels,
    keys: float | None = None,
    v_loc: float | None = None,
    causal: float = 0.5,
) -> tuple[float, float]:
    """(forward, backward) seconds of one layer's attention core for `tokens` local query tokens.

    Fused: 4·t·keys·q FLOPs (keys: the sequence, or the window of a sliding or chunked layer; q the query/key
    width, averaged with the value width where they differ, as in MLA) times the share the causal mask leaves
    (the kernels skip masked blocks, Dao 2023: half for global or chunked attention, 1 − w/2s for a sliding
    window w), at the kernel's efficiency for a block of min(keys, s/cp) tokens (context parallelism runs
    s/cp × s/cp blocks); backward 2.5 × the forward FLOPs. Unfused: the whole 4·t·keys·q as batched GEMMs at the
    efficiency of one head's (s/cp)·keys·d matrix; backward two GEMMs per forward GEMM. Attention runs in bf16
    in fp8 recipes (TE and torchao convert the Linear layers only)."""
    keys = seq_len if keys is None else keys
    width = q_loc if v_loc is None else (q_loc + v_loc) / 2
    full_flops = 4.0 * tokens * keys * width
    kernel = eff.attention.get(kernels.flash_kernel) or eff.attention.get("flash2") if kernels.flash else None
    if kernel is not None:
        block = min(keys, seq_len / cp)
        flops = causal * full_flops
        forward = flops / (peak * kernel.efficiency(block, backward=False))
        backward = FLASH_BACKWARD_FACTOR * flops / (peak * kernel.efficiency(block, backward=True))
        return forward, backward
    per_head = 2.0 * (seq_len / cp) * keys * head_dim
    forward = full_flops / (peak * eff.matmul_efficiency(per_head))
    return forward, 2.0 * forward


def ssd_scan_s(
    *,
    tokens: float,
    seq_len: int,
    heads_loc: float,
    groups_loc: float,
    head_dim: int,
    state: int,
    chunk: int,
    peak: float,
    eff: Efficiency,
    kernels: Kernels,
) -> tuple[float, float]:
    """(forward, backward) seconds of one Mamba-2 layer's state-space scan for `tokens` local tokens.

    SSD, the chunked algorithm of Dao & Gu 2024 ("Transformers are SSMs", section 6): per token, the quadratic
    intra-chunk part 2·Q·(N·G + P·H) (chunk Q, state N, groups G, head dim P, heads H) and the chunk states and
    their output 2·N·P·H each. Its matmuls run like fused attention's (the paper's SSD kernel "matches
    FlashAttention-2 at sequence length 2K and is faster beyond"), so the FLOPs run at the hardware's fused
    attention efficiency at the sequence length; backward 2 × the forward. An assumption with that source, not
    a measurement of an SSD kernel."""
    q = min(chunk, seq_len)
    per_token = 2.0 * q * (state * groups_loc + head_dim * heads_loc) + 4.0 * state * head_dim * heads_loc
    flops = tokens * per_token
    kernel = eff.attention.get(kernels.flash_kernel) or eff.attention.get("flash2")
    if kernel is None:
        forward = flops / (peak * eff.matmul_efficiency(flops))
        return forward, 2.0 * forward
    forward = flops / (peak * kernel.efficiency(seq_len, backward=False))
    return forward, 2.0 * flops / (peak * kernel.efficiency(seq_len, backward=True))


def elementwise_bytes_per_token(
    *,
    h: float,
    q_loc: float,
    kv_loc: float,
    ffn_loc: float,
    gated: bool,
    rms: bool,
    rope: bool,
    seq_split: float,
    heads_loc: float,
    seq_len: int,
    dropout: bool,
    flash: bool,
    kernels: Kernels,
    act_b: int,
    permute: float = 0.0,
    blocks: int = 2,
    keys: float | None = None,
    mixer_elements: float = 0.0,
) -> tuple[float, float]:
    """(all, unfused-softmax share) forward HBM bytes per token of one layer's memory-bound ops.

    Fused (Megatron/TE, torch.compile), counted from Megatron's layer: 2 norms (read h, write h) + 2 residual
    adds (read 2h, write h) = 10h; dropout 2 × (read h, write h, a 1-byte mask) ≈ 5h; these run on s/tp
    tokens with SP (Korthikanti 2022 Sec. 4.2.2). The activation reads 1 (gelu) or 2 (swiglu) ffn-wide
    tensors and writes one; rotary reads and writes q and k; the unfused scale-mask-softmax reads and writes
    heads·s scores (+ 3 more passes with dropout). Eager PyTorch: RMSNorm and rotary in several fp32 passes
    (EAGER_RMSNORM_BYTES, EAGER_ROPE_BYTES), SwiGLU as SiLU then a product (read 2f + f, write 2f).
    """
    fused = kernels.fused
    norm = 2 * act_b if (fused or not rms) else EAGER_RMSNORM_BYTES + 4 * act_b
    hidden = (2 * norm + 2 * 3 * act_b + (5 * act_b if dropout else 0)) * h / seq_split + permute * act_b
    activation = (3 if gated else 2) if (fused or not gated) else 5
    rotary = (2 * act_b if fused else EAGER_ROPE_BYTES + 2 * act_b) * (q_loc + kv_loc) if rope else 0.0
    softmax = 0.0 if flash else heads_loc * seq_len * (2 + (3 if dropout else 0)) * act_b
    return hidden + activation * ffn_loc * act_b + rotary + softmax, softmax
