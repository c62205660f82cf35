"""The memory screen of `planner search` (step 3 of search.py's pipeline): peak memory per GPU with the
same arithmetic as memory.memory_report (a test holds them equal), cached per structure and evaluated
only on the pipeline ranks that can hold the peak."""

from __future__ import annotations

from typing import Any

from planner.cost.activations import activation_bytes_per_layer, layer_workspace_bytes
from planner.cost.memory import (act_bytes, buffer_bytes, in_flight_microbatches,
                     logits_bytes, rank_params, state_bytes_per_param)
from planner.plan import Plan, stage_layers
from planner.specs import HardwareProfile, ModelSpec, Training

# ---- the memory screen ---------------------------------------------------------------------------------
class MemoryScreen:
    """Peak per-GPU bytes of a plan, equal to ``memory_report(...).total_bytes`` (tests hold them equal),
    computed from cached pieces on the pipeline ranks that can be the peak only."""

    def __init__(self, model: ModelSpec, hw: HardwareProfile, training: Training) -> None:
        self.model, self.hw, self.training = model, hw, training
        self.moe_share = model.num_moe_layers / model.num_layers
        self._ranks: dict[tuple[int, int, int, int], list[tuple[int, Any, int, bool, bool]]] = {}
        self._act: dict[tuple, tuple[float, float]] = {}
        self._state: dict[str, Any] = {}
        self.capacity = hw.gpu.hbm_bytes

    def ranks(self, tp: int, pp: int, vpp: int, ep: int) -> list[tuple[int, Any, int, bool, bool]]:
        """(rank, RankParams, layers, first, last) of the ranks that can hold the peak."""
        key = (tp, pp, vpp, ep)
        hit = self._ranks.get(key)
        if hit is not None:
            return hit
        layers = [sum(c) for c in stage_layers(self.model.num_layers, pp, vpp)]
        last_rank = (pp * vpp - 1) % pp
        keep: list[tuple[int, Any, int, bool, bool]] = []
        middle: list[tuple[float, float, float, int, int]] = []
        for r in range(pp):
            params = rank_params(self.model, tp=tp, pp=pp, vpp=vpp, ep=ep, rank=r)
            first, last = r == 0, r == last_rank
            if not (first or last):
                sig = (params.dense, params.expert, params.largest_unit, params.num_gemms, layers[r])
                # an earlier middle rank holding at least as much, with at least as many
                # micro-batches in flight, dominates this one
                if any(all(a >= b for a, b in zip(m, sig)) for m in middle):
                    continue
                middle.append(sig)
            keep.append((r, params, layers[r], first, last))
        self._ranks[key] = keep
        return keep

    def _activations(self, p: Plan) -> tuple[float, float]:
        key = (p.micro_batch, p.seq_len, p.tp, p.sp, p.cp, p.recompute, p.precision)
        hit = self._act.get(key)
        if hit is not None:
            return hit
        kwargs = dict(micro_batch=p.micro_batch, seq_len=p.seq_len, tp=p.tp, sp=p.sp, cp=p.cp,
                      recompute=p.recompute, act_bytes=act_bytes(p.precision), training=self.training)
        per_layer = activation_bytes_per_layer(self.model, **kwargs)
        if self.moe_share:
            per_layer = (1 - self.moe_share) * per_layer + self.moe_share * activation_bytes_per_layer(
                self.model, moe_layer=True, **kwargs)
        workspace = layer_workspace_bytes(self.model, moe_layer=self.moe_share > 0, **kwargs)
        self._act[key] = (per_layer, workspace)
        return per_layer, workspace

    def peak(self, p: Plan) -> tuple[float, int]:
        """(bytes, rank) of the most loaded pipeline rank (memory.py's _stage_memory, term by term)."""
        per = self._state.get(p.precision)
        if per is None:
            per = self._state[p.precision] = state_bytes_per_param(p.precision, self.training)
        per_layer, workspace = self._activations(p)
        shard = p.dp * p.cp
        expert_shard = max(shard // p.ep, 1)
        r_cfg = self.hw.reserved
        best, best_rank = -1.0, 0
        logits = None
        for r, params, layers, _first, last in self.ranks(p.tp, p.pp, p.vpp, p.ep):
            total_p = params.dense + params.expert
            sharded_p = params.dense / shard + params.expert / expert_shard
            weights = per.weights * (sharded_p if p.zero >= 3 else total_p)
            grads = per.gradients * (sharded_p if p.zero >= 2 else total_p)
            optim = per.optimizer * (sharded_p if p.zero >= 1 else total_p)
            acts = per_layer * layers * in_flight_microbatches(p, r)
            if last:
                if logits is None:
                    logits = logits_bytes(self.model, p)
                acts += logits
            buffers = buffer_bytes(p, params, per, workspace_bytes=workspace)
            tensors = weights + grads + optim + acts + buffers
            total = tensors + r_cfg.cuda_context_bytes + r_cfg.comm_workspace_bytes + r_cfg.allocator_fraction * tensors
            if total > best:
                best, best_rank = total, r
        return best, best_rank


