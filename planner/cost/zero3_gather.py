"""ZeRO-3 gathered one parameter at a time, synchronously: DeepSpeed's stage 3 before PR #1453.

DeepSpeed 0.3.12 (stage3.py, 2021-03-08, #834) to 0.5.10 gathers each parameter tensor of a sub-module with its own
all_gather over the whole data-parallel group (partition_parameters.py `_allgather_param`, v0.3.16 @a12aaed), after
a `torch.cuda.synchronize()`; `fetch_sub_module` then waits on the comm stream and synchronizes the device again
(stage3.py `_synchronize_communication`), and prefetches only when nothing is in flight, up to
stage3_prefetch_bucket_size = 5e7 elements (`prefetch_next_sub_modules`): the gathers do not run behind compute.
Gradients are reduce-scattered one parameter at a time too (`_reduce_scatter_gradient`). So every parameter tensor
pays a whole collective's latency on every pass: forward, the recompute's forward under full recompute (its
pre-forward hooks gather again) and backward, and one reduce-scatter of its gradient. DeepSpeed 0.6.0 (2022-03-07,
PR #1453 @4912e0a, "batching allgather calls to amortize fixed overhead") gathers a sub-module and its prefetch as
one `all_gather_coalesced` on its own stream without the device synchronize: `bucketed`, overlap.py's rule.

Each collective is the planner's alpha-beta ring (comm.collective_s: the hardware profile's NCCL base latency per
call and n − 1 ring steps at the group's link latency), none of it fitted to the runs it explains.
"""

from __future__ import annotations

from planner.cost.comm import collective_s, group_link
from planner.cost.params import plan_params
from planner.cost.stages import plan_layout
from planner.cost.states import state_bytes_per_param
from planner.cost.traffic import dp_groups
from planner.engine import Engine
from planner.hardware import HardwareProfile
from planner.layers import LayerKind
from planner.plan import Plan
from planner.specs import ModelSpec


def layer_param_tensors(model: ModelSpec, kind: LayerKind) -> int:
    """Parameter tensors of one layer as Megatron-LM's transformer layer builds them (megatron/model/transformer.py:
    ParallelAttention's fused query_key_value and dense, ParallelMLP's dense_h_to_4h, which holds SwiGLU's gate and
    up, and dense_4h_to_h; other mixers one tensor per weight matrix), each with its bias when the model has
    biases (or the fused q/k/v's alone), and the norms (weight, and bias for LayerNorm) before the mixer and the
    FFN (four with sandwich norms, two more for RMSNorm q/k norms)."""
    mixer = {"attention": 2, "mla": 5, "mamba": 2, "none": 0}[kind.mixer]
    ffn = 2 if kind.ffn != "none" else 0
    linears = (mixer + ffn) * (2 if model.has_bias else 1)
    qkv_bias = kind.mixer == "attention" and model.has_qkv_bias and not model.has_bias  # the fused qkv's bias alone
    blocks = (kind.mixer != "none") + (kind.ffn != "none")
    qk = model.attention is not None and model.attention.qk_norm == "rmsnorm" and kind.mixer == "attention"
    norms = blocks * (2 if model.sandwich_norm else 1) * (2 if model.norm == "layernorm" else 1)
    return linears + qkv_bias + norms + (2 if qk else 0)


def rank_param_tensors(model: ModelSpec, plan: Plan, engine: Engine, stage: int) -> int:
    """Parameter tensors pipeline rank `stage` gathers in one pass: its layers', the word (and learned position)
    embedding on the first rank, and the final norm and the output layer (the embedding again when tied) on the
    last."""
    layout = plan_layout(model, plan, engine)
    kinds = model.layer_kinds
    n = sum(layer_param_tensors(model, kinds[i]) for i in layout.rank_layers(stage))
    if layout.holds_embedding(stage):
        n += 1 + (model.position_embedding == "learned")
    if layout.holds_loss(stage):
        n += (2 if model.norm == "layernorm" else 1) + 1
    return n


def per_parameter_dp_s(
    model: ModelSpec, hw: HardwareProfile, plan: Plan, engine: Engine, *, stage: int
) -> tuple[float, float]:
    """(total, exposed) seconds per step of data-parallel communication when the engine gathers and reduces one
    parameter tensor at a time and synchronizes around each (module docstring): per micro-batch, one all-gather per
    tensor per pass (forward and backward, and the recompute's forward under full recompute) and one reduce-scatter
    of its gradient, each a collective of its own (a tensor of the rank's mean size: the bytes over the tensors);
    all of it exposed, and the host cost of each call."""
    zero = engine.zero_stage(plan)
    params = plan_params(model, plan, engine, stage)
    per = state_bytes_per_param(plan.precision, engine, zero)
    tensors = max(1, rank_param_tensors(model, plan, engine, stage))
    n, ne = dp_groups(plan)
    links = (
        group_link(hw, n=n, stride=plan.tp, gpus=plan.gpus),
        group_link(hw, n=ne, stride=plan.expert_tp * plan.ep, gpus=plan.gpus),
    )
    groups = ((params.dense, n, links[0]), (params.expert, ne, links[1]))

    def one_pass(kind: str, per_param_b: float) -> float:
        chunk = params.total * per_param_b / tensors
        return sum(collective_s(kind, p * per_param_b, g, link, chunk_bytes=chunk) for p, g, link in groups)

    passes = (2 if zero.weight_gather == "microbatch" else 1) + (1 if plan.recompute == "full" else 0)
    calls = tensors * (passes + 1) * (hw.efficiency.collective_overhead_s + engine.comm.collective_launch_s)
    one = passes * one_pass("all_gather", per.gather) + one_pass(zero.grad_collective, per.gradients) + calls
    total = plan.num_microbatches * one
    return total, total
