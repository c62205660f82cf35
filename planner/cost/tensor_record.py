"""One tensor a layer saves for its backward pass (saved_tensors.py lists them, cost/activations.py keeps what
recompute and the parallel split leave): its bytes per token, its region (what splits it), and the recompute and
offload modules that drop it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SavedTensor:
    name: str
    bytes_per_token: float
    region: str  # "seq" | "col_in" | "tp" | "core" | "expert_in": what splits it (the module's docstring)
    needed: bool = True  # kept without recompute (False: only an op-policy checkpoint keeps it)
    op_keep: bool = False  # kept by the "op" selective policy
    backward_reads: bool = True  # some backward (or recompute) reads it; compiled graphs keep only these
    modules: tuple[str, ...] = ()  # Megatron recompute modules that drop it (--recompute-modules; core_attn: region)
    quantized: str = ""  # a linear's input, saved quantized by a TE recipe: "own" instead of it, "copy" beside it
    offload: tuple[str, ...] = ()  # Megatron offload modules (--offload-modules) that must all be offloaded to free it
    routed: bool = False  # rows the routed experts receive: the busiest rank keeps its load of them (moe.routed_load)


CORE = ("core_attn",)  # what the attention core saves: Q, K, V, the softmax statistics or scores
OUT = ("core_attn", "attn_proj")  # the attention output: the core's output and the output projection's input
