"""The memory screen of `planner search` (step 3 of the pipeline): the peak memory per GPU of a candidate,
by the same formula as ``cost.memory.memory_report`` (``stage_terms``), with its inputs cached per structure
and evaluated only on the pipeline ranks that can hold the peak."""

from __future__ import annotations

from planner.cost.memory import activation_pieces, in_flight_microbatches, logits_bytes, stage_terms
from planner.cost.params import RankParams, rank_params
from planner.cost.stages import layer_layout
from planner.cost.states import StateBytes, state_bytes_per_param
from planner.plan import Plan
from planner.engine import Engine
from planner.specs import HardwareProfile, ModelSpec

RankShape = tuple[int, RankParams, int, bool]  # (rank, parameters, layers, holds the loss)


class MemoryScreen:
    """Peak per-GPU bytes of a plan, equal to ``memory_report(...).total_bytes``, from cached pieces on the
    pipeline ranks that can be the peak only."""

    def __init__(self, model: ModelSpec, hw: HardwareProfile, engine: Engine) -> None:
        self.model, self.hw, self.engine = model, hw, engine
        self._ranks: dict[tuple[int, int, int, int], list[RankShape]] = {}
        self._act: dict[tuple, tuple[float, float]] = {}
        self._state: dict[tuple[str, int], StateBytes] = {}
        self.capacity = hw.gpu.hbm_bytes

    def ranks(self, tp: int, pp: int, vpp: int, ep: int) -> list[RankShape]:
        """The ranks that can hold the peak: the first, the last, and each middle rank not dominated by an
        earlier one (memory is monotone in parameters and layers held, and the micro-batches in flight
        never grow with the rank)."""
        key = (tp, pp, vpp, ep)
        hit = self._ranks.get(key)
        if hit is not None:
            return hit
        layout = layer_layout(self.model.num_layers, pp, vpp)
        keep: list[RankShape] = []
        middle: list[tuple[float, float, float, int, int]] = []
        for r in range(pp):
            params = rank_params(self.model, layout, tp=tp, ep=ep, rank=r)
            layers = layout.num_rank_layers(r)
            first, last = layout.holds_embedding(r), layout.holds_loss(r)
            if not (first or last):
                sig = (params.dense, params.expert, params.largest_unit, params.num_gemms, layers)
                if any(all(a >= b for a, b in zip(m, sig)) for m in middle):
                    continue
                middle.append(sig)
            keep.append((r, params, layers, last))
        self._ranks[key] = keep
        return keep

    def _activations(self, p: Plan) -> tuple[float, float]:
        key = (p.micro_batch, p.seq_len, p.tp, p.sp, p.cp, p.recompute, p.precision)
        hit = self._act.get(key)
        if hit is None:
            hit = self._act[key] = activation_pieces(self.model, p, self.engine)
        return hit

    def peak(self, p: Plan) -> tuple[float, int]:
        """(bytes, rank) of the most loaded pipeline rank."""
        stage = self.engine.zero_stage(p)
        per = self._state.get((p.precision, p.zero))
        if per is None:
            per = self._state[(p.precision, p.zero)] = state_bytes_per_param(p.precision, self.engine, stage)
        per_layer, workspace = self._activations(p)
        best, best_rank = -1.0, 0
        logits = None
        for r, params, layers, last in self.ranks(p.tp, p.pp, p.vpp, p.ep):
            if last and logits is None:
                logits = logits_bytes(self.model, p)
            total = sum(stage_terms(p, self.hw.reserved, params, per, stage, layers=layers,
                                    in_flight=in_flight_microbatches(p, r), per_layer_bytes=per_layer,
                                    workspace_bytes=workspace, logits=logits if last else 0.0))
            if total > best:
                best, best_rank = total, r
        return best, best_rank
