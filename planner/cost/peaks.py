"""Peak memory per GPU of many plans at once: what the search screens candidates with, by cost.memory's own
formula (``state_terms`` and ``stage_total_bytes``, the sum of the ``stage_terms`` that ``memory_report``
uses), with its inputs cached by what they depend on (keys.py) — the parameters per rank, the states per
structure and ZeRO stage, the activations per micro-batch shape and recompute level — and evaluated only on
the pipeline ranks that can hold the peak."""

from __future__ import annotations

import math

from planner.cost.keys import ACTIVATIONS, RANK_PARAMS, STATES
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


class PeakMemory:
    """Peak per-GPU bytes of a plan, equal to ``memory_report(...).total_bytes``, from cached pieces on the
    pipeline ranks that can be the peak only."""

    def __init__(self, model: ModelSpec, hw: HardwareProfile, engine: Engine) -> None:
        self.model, self.hw, self.engine = model, hw, engine
        self._ranks: dict[tuple[int, int, int, int], list[RankShape]] = {}
        self._act: dict[tuple, tuple[float, float]] = {}
        self._states: dict[tuple, list[StateTerms]] = {}
        self.capacity = hw.gpu.hbm_bytes
        self._last_shape: tuple[Plan, list[RankShape], list[tuple[int, int, float, float]], float, float] | None = None
        self._pairs: dict[tuple, tuple[list[tuple[float, float]], list[int]]] = {}

    def ranks(self, tp: int, pp: int, vpp: int, ep: int) -> list[RankShape]:
        """The ranks that can hold the peak: the first, the last, and each middle rank not dominated by an
        earlier one (memory is monotone in parameters and layers held, and the micro-batches in flight
        never grow with the rank)."""
        key = (tp, pp, vpp, ep)  # RANK_PARAMS
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
        key = (STATES(p), zero, accumulates)
        hit = self._states.get(key)
        if hit is None:
            stage = self.engine.rules.stages(p.pp)[zero]  # state_terms reads the stage from here, not p.zero
            per = state_bytes_per_param(p.precision, self.engine, stage)
            hit = self._states[key] = [
                state_terms(p, params, per, stage, self.engine.memory) for _r, params, _l, _last in ranks
            ]
        return hit

    def _activations(self, p: Plan, recompute: str) -> tuple[float, float]:
        key = (ACTIVATIONS(p), recompute)
        hit = self._act.get(key)
        if hit is None:
            plan = p if p.recompute == recompute else p.model_copy(update={"recompute": recompute})
            hit = self._act[key] = activation_pieces(self.model, plan, self.engine)
        return hit

    def _shape(self, p: Plan) -> tuple[list[RankShape], list[tuple[int, int, float, float]]]:
        """The ranks that can hold the peak, with their layers, micro-batches in flight and logits."""
        last = self._last_shape_of(p)
        return last[1], last[2]

    def _last_shape_of(
        self, p: Plan
    ) -> tuple[Plan, list[RankShape], list[tuple[int, int, float, float]], float, float]:
        """_shape's ranks and shape with the least and most layers·in-flight of those ranks, kept for the last
        plan asked about (the search asks about one plan's ZeRO stages and recompute levels in a row)."""
        last = self._last_shape
        if last is not None and last[0] is p:
            return last
        ranks = self.ranks(*RANK_PARAMS(p))
        logits = logits_bytes(self.model, p, self.engine) if any(r[3] for r in ranks) else 0.0
        shape = [(r, layers, in_flight_microbatches(p, r), logits if lst else 0.0) for r, _p, layers, lst in ranks]
        held = [layers * in_flight for _r, layers, in_flight, _l in shape]
        last = self._last_shape = (p, ranks, shape, min(held), max(held))
        return last

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
        """Whether each recompute level (least recompute first) fits, computing only what decides it.

        A level's activations are a pair (what a layer keeps, the backward working set), and a rank's peak is
        its states plus keeps·layers·in-flight plus working set (plus a share of that for the allocator): it
        never falls when either grows. So a level that is below an earlier level that fits, on every rank the
        screen checks, also fits (0.0: fits, not computed; it is only slower), and a level above one that does
        not fit on every rank does not fit either (inf: not computed, never the closest miss). More recompute
        keeps less per layer but re-runs a layer's forward in its backward, so the working set grows: a rank
        with few layers (one that holds only the loss) can need more with more recompute, and nothing is
        assumed beyond the arithmetic. The first and the last level are computed first; levels with the same
        pair share one evaluation."""
        _p, ranks, shape, lo, hi = self._last_shape_of(p)
        states = self._state(p, zero, ranks)
        pieces, same = self._pairs_of(p, recomputes)
        n, cap = len(recomputes), self.capacity
        first = self._peak(shape, states, pieces[0])[0]
        known: list[float | None] = [first] + [None] * (n - 1)  # peak bytes, by the first level with the pair
        fits = [first <= cap] + [False] * (n - 1)  # computed, and fits
        if not fits[0] and n > 1 and same[-1] != 0:
            known[same[-1]] = self._peak(shape, states, pieces[-1])[0]
        out = [first]
        for i in range(1, n):
            b = known[same[i]]
            if b is None:
                if any(fits[j] and _needs_less(pieces[i], pieces[j], lo, hi) for j in range(i)):
                    b = 0.0
                elif any(
                    j != i
                    and (k := known[same[j]]) is not None
                    and k > cap
                    and _needs_less(pieces[j], pieces[i], lo, hi)
                    for j in range(n)
                ):
                    b = math.inf
                else:
                    b = known[same[i]] = self._peak(shape, states, pieces[i])[0]
            fits[i] = 0.0 < b <= cap
            out.append(b)
        return dict(zip(recomputes, out, strict=True))

    def _pairs_of(self, p: Plan, recomputes: tuple[Recompute, ...]) -> tuple[list[tuple[float, float]], list[int]]:
        """Each level's activation pair and the first level with the same pair."""
        key = (ACTIVATIONS(p), recomputes)
        pairs = self._pairs.get(key)
        if pairs is None:
            pieces = [self._activations(p, rc) for rc in recomputes]
            pairs = self._pairs[key] = (pieces, [pieces.index(pc) for pc in pieces])
        return pairs

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


def _needs_less(a: tuple[float, float], b: tuple[float, float], lo: float, hi: float) -> bool:
    """Whether activation pair `a` (per-layer keeps, working set) needs less than `b` on every rank whose
    layers·in-flight lie in [lo, hi]: no larger in both, or keeps·held + working set smaller by a byte at both
    ends (the sum is linear in held; a byte is far above the rounding of sums below 10^13 bytes, so the
    computed peaks keep the order)."""
    (ka, wa), (kb, wb) = a, b
    return (ka <= kb and wa <= wb) or (ka * lo + wa + 1.0 <= kb * lo + wb and ka * hi + wa + 1.0 <= kb * hi + wb)
