"""Peak memory per GPU of many plans at once: what the search screens candidates with, by cost.memory's own
formula (``state_terms`` and ``stage_total_bytes``, the sum of the ``stage_terms`` that ``memory_report``
uses), with its inputs cached by what they depend on (keys.py) — the parameters and layer mix per rank, the
states per structure and ZeRO stage, each layer kind's activations per micro-batch shape and recompute level —
and evaluated only on the pipeline ranks that can hold the peak."""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.cost.keys import ACTIVATIONS, RANK_PARAMS, STATES
from planner.cost.memory import (
    Pieces,
    PipelineBuffers,
    StateTerms,
    activation_pieces,
    alive_share,
    first_layers,
    layers_work_bytes,
    logits_bytes,
    loss_apart,
    mix_pieces,
    pipeline_buffers,
    rank_moments,
    rank_reserved,
    stage_total_bytes,
    state_terms,
)
from planner.cost.moe import routed_load
from planner.cost.moments import Moment
from planner.cost.params import RankParams, chunk_shares, padded_vocab, rank_params
from planner.cost.quantization import recipe_memory
from planner.cost.recipe_options import held_activations
from planner.cost.stages import Mix, layer_layout, plan_split, rank_mix
from planner.cost.stages import v_shape as plan_v_shape
from planner.cost.states import state_bytes_per_param
from planner.engine import Engine
from planner.engine.split import SplitPolicy
from planner.hardware import HardwareProfile
from planner.layers import LayerKind
from planner.plan import Plan, Recompute
from planner.specs import ModelSpec


@dataclass(frozen=True)
class RankShape:
    """One pipeline rank that can hold the peak: its parameters, the layer kinds it holds, and the loss."""

    rank: int
    params: RankParams
    mix: Mix
    last: bool
    chunk_sizes: tuple[int, ...] = ()  # the layers of each of its chunks: what activation offload counts groups over
    first: bool = False  # it holds the first chunk (the embedding): no receive buffers for that chunk
    shares: tuple[float, ...] = (1.0,)  # each chunk's share of its parameters (params.chunk_shares)


@dataclass(frozen=True)
class RankLoad:
    """What a plan's micro-batches put on one rank: how many are in flight and its logits."""

    shape: RankShape
    logits: float
    apart: bool  # cost.memory.loss_apart: the logits and the layers' backward working set peak apart
    # cost.memory.rank_moments, each with its pipeline_buffers and the shares of the weights and gradients it holds
    moments: tuple[tuple[Moment, PipelineBuffers, float, float], ...]


# The ranks that can hold the peak, shared by the searches of one model (search --gpus ranges and the advice run
# a search per GPU count and batch): by the model's identity, the engine's split and vocab padding, and the degrees.
_RANK_SHAPES: dict[tuple, tuple[ModelSpec, list[RankShape]]] = {}
MAX_SHARED_RANK_SHAPES = 4096


class PeakMemory:
    """Peak per-GPU bytes of a plan, equal to ``memory_report(...).total_bytes``, from cached pieces on the
    pipeline ranks that can be the peak only."""

    def __init__(self, model: ModelSpec, hw: HardwareProfile, engine: Engine) -> None:
        self.model, self.hw, self.engine = model, hw, engine
        self._ranks: dict[tuple, list[RankShape]] = {}
        self._act: dict[tuple, dict[LayerKind, Pieces]] = {}
        self._states: dict[tuple, list[StateTerms]] = {}
        self.capacity = hw.gpu.hbm_bytes
        self._reserved = rank_reserved(hw, engine)
        self._offloaded = first_layers(model, engine)  # the layers the layer-wise offload moves
        self._kinds = tuple(model.kind_params)
        self._last: tuple[Plan, list[RankLoad]] | None = None
        self._mixed: dict[tuple[int, int, tuple[int, ...]], tuple[float, float, float]] = {}  # ids, chunk sizes
        self._logits: dict[tuple, float] = {}  # the logits' shape -> bytes
        self._levels: dict[tuple, tuple[list[dict[LayerKind, Pieces]], list[int]]] = {}

    def ranks(
        self, tp: int, pp: int, vpp: int, ep: int, etp: int | None, v_shape: bool, split: SplitPolicy
    ) -> list[RankShape]:  # fmt: skip
        """The ranks that can hold the peak: the first, the last, and each middle rank not dominated by an
        earlier one (memory never falls with more parameters or more layers of each kind; the micro-batches in
        flight never grow with the rank, and each moment of a later rank has one of an earlier rank that holds as
        many and the same chunks' states (cost.moments; tests/test_schedule.py); a middle rank's pipeline buffers
        do not depend on them: cost.memory.pipeline_buffers)."""
        key = (tp, pp, vpp, ep, etp, v_shape, split)  # RANK_PARAMS, the expert tensor-parallel degree, the V, the split
        hit = self._ranks.get(key)
        if hit is not None:
            return hit
        rules = self.engine.rules
        shared = (id(self.model), rules.vocab_padding, key)  # other searches of this model
        held = _RANK_SHAPES.get(shared)
        if held is not None:
            self._ranks[key] = held[1]
            return held[1]
        layout = layer_layout(self.model.num_layers, pp, vpp, split, v_shape)
        vocab = padded_vocab(self.model.vocab_size, tp, self.engine.rules.vocab_padding)
        keep: list[RankShape] = []
        middle: list[tuple[float, ...]] = []  # kept middle ranks' signatures
        held_seen: set[tuple] = set()  # middle ranks' layers and chunks: a repeat has an equal signature
        kinds = self.model.layer_kinds
        for r in range(pp):
            first, last, sizes = layout.holds_embedding(r), layout.holds_loss(r), layout.chunk_sizes(r)
            if not (first or last):
                layers = (tuple(kinds[i] for i in layout.rank_layers(r)), sizes)
                if layers in held_seen:
                    continue
                held_seen.add(layers)
            params = rank_params(self.model, layout, tp=tp, ep=ep, rank=r, vocab=vocab, etp=etp)
            mix = rank_mix(self.model, layout, r)
            if not (first or last):
                counts = dict(mix)
                sig: tuple[float, ...] = (params.dense, params.expert, params.largest_unit, float(params.num_gemms))
                sig += tuple(float(counts.get(k, 0)) for k in self._kinds)
                sig += tuple(float(n) for n in sizes)  # offload counts its groups by chunk
                if sig in middle or any(all(a >= b for a, b in zip(m, sig)) for m in middle):
                    continue
                middle.append(sig)
            shares = chunk_shares(self.model, layout, tp=tp, ep=ep, rank=r, vocab=vocab, etp=etp)
            keep.append(RankShape(r, params, mix, last, sizes, first, shares))
        self._ranks[key] = keep
        if len(_RANK_SHAPES) >= MAX_SHARED_RANK_SHAPES:
            _RANK_SHAPES.clear()
        _RANK_SHAPES[shared] = (self.model, keep)  # the model kept alive: its id stays unique
        return keep

    def _state(self, p: Plan, zero: int, ranks: list[RankShape]) -> list[StateTerms]:
        accumulates = p.num_microbatches > 1 or p.pp > 1  # what cost.states' unsharded accumulation needs
        key = (STATES(p), p.expert_tp, zero, accumulates)
        hit = self._states.get(key)
        if hit is None:
            stage = self.engine.zero_stage(p, zero)
            per = state_bytes_per_param(p.precision, self.engine, stage)
            hit = self._states[key] = [
                state_terms(
                    p, r.params, per, stage, self.engine.memory,
                    recipe_memory(self.model, p, self.engine, self.hw, stage, rank=r.rank, params=r.params),
                )
                for r in ranks
            ]  # fmt: skip
        return hit

    def _activations(self, p: Plan, recompute: str, zero: int) -> dict[LayerKind, Pieces]:
        stage = self.engine.zero_stage(p, zero)
        autocast = stage.autocast  # what activations read
        key = (ACTIVATIONS(p), routed_load(self.model, self.engine, p.ep), recompute, autocast)
        hit = self._act.get(key)
        if hit is None:
            same = (p.recompute, p.zero) == (recompute, zero)
            plan = p if same else p.model_copy(update={"recompute": recompute, "zero": zero})
            hit = self._act[key] = activation_pieces(self.model, plan, self.engine)
        return hit

    def _loads(self, p: Plan) -> list[RankLoad]:
        """The ranks that can hold the peak with the plan's micro-batches in flight and logits, kept for the last
        plan asked about (the search asks about one plan's ZeRO stages and recompute levels in a row)."""
        last = self._last
        if last is not None and last[0] is p:
            return last[1]
        ranks = self.ranks(*RANK_PARAMS(p), p.expert_tp, plan_v_shape(p), plan_split(p, self.engine))
        logits = 0.0
        if any(r.last for r in ranks):
            key = (p.micro_batch, p.seq_len, p.cp, p.tp, p.precision)
            logits = self._logits.get(key) or self._logits.setdefault(key, logits_bytes(self.model, p, self.engine))
        loads, apart = [], loss_apart(p)
        for r in ranks:
            moments = tuple(
                (mo, pipeline_buffers(
                    self.model, p, self.engine, chunks=len(r.chunk_sizes), first=r.first, last=r.last, in_flight=mo.held
                ), alive_share(mo.weights, r.shares), alive_share(mo.grads, r.shares))
                for mo in rank_moments(p, self.engine, r.rank)
            )  # fmt: skip
            loads.append(RankLoad(r, logits if r.last else 0.0, apart, moments))
        self._last = (p, loads)
        return loads

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
        loads = self._loads(p)
        ranks = [ld.shape for ld in loads]
        out: dict[tuple[int, str], tuple[float, int]] = {}
        for zero in zeros:
            states = self._state(p, zero, ranks)
            for recompute in recomputes:
                out[(zero, recompute)] = self._peak(loads, states, self._activations(p, recompute, zero))
        return out

    def levels(self, p: Plan, zero: int, recomputes: tuple[Recompute, ...]) -> dict[Recompute, float]:
        """The peak bytes of each recompute level (given from least to most recompute) with this ZeRO stage,
        computing only what the search reads: the first level that fits, and the closest miss before it.

        More recompute never keeps more (cost.activations; the invariant tests/test_search.py checks), so the
        levels that fit are a suffix: the most recompute is tried first (it misses: nothing fits, and it is the
        closest miss), then the least (it fits: the rest fit too), then the ones between, in order. Levels not
        computed read 0.0 (fits) or inf (misses by more than the closest); levels whose activations are the
        same share one evaluation."""
        loads = self._loads(p)
        states = self._state(p, zero, [ld.shape for ld in loads])
        pieces, same = self._level_pieces(p, recomputes, zero)
        known: dict[int, float] = {}

        def peak(i: int) -> float:
            j = same[i]
            if j not in known:
                known[j] = self._peak(loads, states, pieces[j])[0]
            return known[j]

        last = len(recomputes) - 1
        first_fit = last + 1 if peak(last) > self.capacity else next(
            (i for i in range(last) if peak(i) <= self.capacity), last
        )  # fmt: skip
        out = dict.fromkeys(recomputes, math.inf)
        if first_fit <= last:
            out.update(dict.fromkeys(recomputes[first_fit:], 0.0))
            out[recomputes[first_fit]] = peak(first_fit)
        if first_fit > 0:
            out[recomputes[first_fit - 1]] = peak(first_fit - 1)
        return out

    def _level_pieces(
        self, p: Plan, recomputes: tuple[Recompute, ...], zero: int
    ) -> tuple[list[dict[LayerKind, Pieces]], list[int]]:
        """Each level's pieces and the first level with equal pieces (levels that keep the same activations
        share one evaluation), cached by the activations' shape."""
        stage = self.engine.zero_stage(p, zero)
        key = (ACTIVATIONS(p), routed_load(self.model, self.engine, p.ep), recomputes, stage.autocast)
        hit = self._levels.get(key)
        if hit is None:
            pieces = [self._activations(p, rc, zero) for rc in recomputes]
            hit = self._levels[key] = (pieces, [pieces.index(pc) for pc in pieces])
        return hit

    def _peak(
        self, loads: list[RankLoad], states: list[StateTerms], pieces: dict[LayerKind, Pieces]
    ) -> tuple[float, int]:
        """(bytes, rank) of the most loaded of the ranks, by cost.memory's stage_total_bytes."""
        reserved = self._reserved
        best, best_rank = -1.0, 0
        mixed, pid = self._mixed, id(pieces)  # the pieces dicts and the mixes are cached: their ids are stable
        engine = self.engine
        share, offloaded = engine.memory.activation_offload, self._offloaded
        for load, state in zip(loads, states):
            mix, sizes = load.shape.mix, load.shape.chunk_sizes
            rank_pieces = mixed.get((pid, id(mix), sizes))
            if rank_pieces is None:
                rank_pieces = mixed[(pid, id(mix), sizes)] = mix_pieces(
                    mix, pieces, chunk_sizes=sizes, share=share, offloaded=offloaded
                )
            layers = sum(n for _k, n in mix)
            for moment, pipeline, weights_share, grads_share in load.moments:
                held = moment.held
                keep, work = held_activations(*rank_pieces, in_flight=held, layers=layers, engine=engine)
                if load.logits:  # the loss's stage alone: elsewhere the working set adds in full
                    work = layers_work_bytes(work, load.logits, loss_apart=load.apart)
                at = state.alive(weights_share, grads_share)
                total = stage_total_bytes(at, reserved, held, keep, work, load.logits, pipeline)
                if total > best:
                    best, best_rank = total, load.shape.rank
        return best, best_rank
