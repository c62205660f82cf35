"""The memory screen of `planner search` (step 3 of the pipeline): the peak memory per GPU of a candidate,
by cost.memory's own formula (``state_terms`` and ``stage_total_bytes``, the sum of the ``stage_terms`` that
``memory_report`` uses), with its inputs cached — the parameters and states per structure and ZeRO stage,
the activations per micro-batch and recompute — and evaluated only on the pipeline ranks that can hold the
peak."""

from __future__ import annotations

from planner.cost.memory import (
    StateTerms,
    activation_pieces,
    in_flight_microbatches,
    logits_bytes,
    stage_total_bytes,
    state_terms,
)
from planner.cost.params import RankParams, padded_vocab, rank_params
from planner.cost.stages import layer_layout
from planner.cost.states import state_bytes_per_param
from planner.engine import Engine
from planner.hardware import HardwareProfile
from planner.plan import Plan, Recompute
from planner.specs import ModelSpec

RankShape = tuple[int, RankParams, int, bool]  # (rank, parameters, layers, holds the loss)


class MemoryScreen:
    """Peak per-GPU bytes of a plan, equal to ``memory_report(...).total_bytes``, from cached pieces on the
    pipeline ranks that can be the peak only."""

    def __init__(self, model: ModelSpec, hw: HardwareProfile, engine: Engine) -> None:
        self.model, self.hw, self.engine = model, hw, engine
        self._ranks: dict[tuple[int, int, int, int], list[RankShape]] = {}
        self._act: dict[tuple, tuple[float, float]] = {}
        self._states: dict[tuple, list[StateTerms]] = {}
        self.capacity = hw.gpu.hbm_bytes
        self._last_shape: tuple[Plan, list[RankShape], list[tuple[int, int, float, float]]] | None = None

    def ranks(self, tp: int, pp: int, vpp: int, ep: int) -> list[RankShape]:
        """The ranks that can hold the peak: the first, the last, and each middle rank not dominated by an
        earlier one (memory is monotone in parameters and layers held, and the micro-batches in flight
        never grow with the rank)."""
        key = (tp, pp, vpp, ep)
        hit = self._ranks.get(key)
        if hit is not None:
            return hit
        layout = layer_layout(self.model.num_layers, pp, vpp, self.engine.rules.pipeline_split)
        vocab = padded_vocab(self.model.vocab_size, tp, self.engine.rules.vocab_padding)
        keep: list[RankShape] = []
        middle: list[tuple[float, float, float, int, int]] = []  # kept middle ranks' signatures
        for r in range(pp):
            params = rank_params(self.model, layout, tp=tp, ep=ep, rank=r, vocab=vocab)
            layers = layout.num_rank_layers(r)
            first, last = layout.holds_embedding(r), layout.holds_loss(r)
            if not (first or last):
                sig = (params.dense, params.expert, params.largest_unit, params.num_gemms, layers)
                if sig in middle or any(all(a >= b for a, b in zip(m, sig)) for m in middle):
                    continue
                middle.append(sig)
            keep.append((r, params, layers, last))
        self._ranks[key] = keep
        return keep

    def _state(self, p: Plan, zero: int, ranks: list[RankShape]) -> list[StateTerms]:
        accumulates = p.num_microbatches > 1 or p.pp > 1  # what cost.states' unsharded accumulation needs
        key = (p.tp, p.pp, p.vpp, p.ep, p.dp, p.cp, p.precision, zero, accumulates)
        hit = self._states.get(key)
        if hit is None:
            plan = p if p.zero == zero else p.model_copy(update={"zero": zero})
            stage = self.engine.rules.stages(p.pp)[zero]
            per = state_bytes_per_param(p.precision, self.engine, stage)
            hit = self._states[key] = [
                state_terms(plan, params, per, stage, self.engine.memory) for _r, params, _l, _last in ranks
            ]
        return hit

    def _activations(self, p: Plan, recompute: str) -> tuple[float, float]:
        key = (p.micro_batch, p.seq_len, p.tp, p.sp, p.cp, recompute, p.precision)
        hit = self._act.get(key)
        if hit is None:
            plan = p if p.recompute == recompute else p.model_copy(update={"recompute": recompute})
            hit = self._act[key] = activation_pieces(self.model, plan, self.engine)
        return hit

    def _shape(self, p: Plan) -> tuple[list[RankShape], list[tuple[int, int, float, float]]]:
        """The ranks that can hold the peak, with their layers, micro-batches in flight and logits; kept for
        the last plan asked about (the search asks about one plan's variants in a row)."""
        last = self._last_shape
        if last is not None and last[0] is p:
            return last[1], last[2]
        ranks = self.ranks(p.tp, p.pp, p.vpp, p.ep)
        logits = logits_bytes(self.model, p, self.engine) if any(r[3] for r in ranks) else 0.0
        shape = [(r, layers, in_flight_microbatches(p, r), logits if lst else 0.0) for r, _p, layers, lst in ranks]
        self._last_shape = (p, ranks, shape)
        return ranks, shape

    def peak(self, p: Plan) -> tuple[float, int]:
        """(bytes, rank) of the most loaded pipeline rank of `p`."""
        return self.peaks(p, (p.zero,), (p.recompute,))[(p.zero, p.recompute)]

    def peak_bytes(self, p: Plan, zero: int, recompute: str) -> float:
        """Bytes on the most loaded pipeline rank of `p` with this ZeRO stage and recompute level."""
        return self.peaks(p, (zero,), (recompute,))[(zero, recompute)][0]

    def peaks(
        self, p: Plan, zeros: tuple[int, ...], recomputes: tuple[str, ...]
    ) -> dict[tuple[int, str], tuple[float, int]]:
        """(bytes, rank) of the most loaded pipeline rank of `p` with each ZeRO stage and recompute level
        (no Plan is built for the variants; what they share is computed once)."""
        ranks, shape = self._shape(p)
        out: dict[tuple[int, str], tuple[float, int]] = {}
        for zero in zeros:
            states = self._state(p, zero, ranks)
            for recompute in recomputes:
                out[(zero, recompute)] = self._peak(shape, states, self._activations(p, recompute))
        return out

    def levels(self, p: Plan, zero: int, recomputes: tuple[Recompute, ...]) -> dict[Recompute, float]:
        """Peak bytes per recompute level (least recompute first), computing only what decides whether each
        fits: activation memory never grows with more recompute, so when the first level fits the rest are
        only slower (0.0: not computed), and when the last does not fit none does (its bytes, the smallest
        overshoot, stand for all). Levels that keep the same activations (selective recompute of a flash
        kernel that keeps no scores) share one evaluation."""
        ranks, shape = self._shape(p)
        states = self._state(p, zero, ranks)
        peaks: dict[tuple[float, float], float] = {}

        def peak(rc: str) -> float:
            pieces = self._activations(p, rc)
            hit = peaks.get(pieces)
            if hit is None:
                hit = peaks[pieces] = self._peak(shape, states, pieces)[0]
            return hit

        first = peak(recomputes[0])
        if first <= self.capacity or len(recomputes) == 1:
            return {recomputes[0]: first, **dict.fromkeys(recomputes[1:], 0.0)}
        last = peak(recomputes[-1])
        if last > self.capacity:
            return dict.fromkeys(recomputes, last)
        out = {recomputes[0]: first}
        for rc in recomputes[1:-1]:
            out[rc] = nbytes = peak(rc)
            if nbytes <= self.capacity:
                return {**out, **dict.fromkeys(recomputes[len(out) :], 0.0)}
        out[recomputes[-1]] = last
        return out

    def _peak(
        self, shape: list[tuple[int, int, float, float]], states: list[StateTerms], pieces: tuple[float, float]
    ) -> tuple[float, int]:
        """(bytes, rank) of the most loaded of the ranks in `shape`, by cost.memory's stage_total_bytes."""
        reserved = self.hw.reserved
        per_layer, workspace = pieces
        best, best_rank = -1.0, 0
        for (r, layers, in_flight, rank_logits), state in zip(shape, states):
            total = stage_total_bytes(state, reserved, layers, in_flight, per_layer, workspace, rank_logits)
            if total > best:
                best, best_rank = total, r
        return best, best_rank
