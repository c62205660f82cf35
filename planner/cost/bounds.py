"""Lower bounds of a plan's step time, for the search's branch and bound: each is at most
``step_time(plan).step_s``, and much cheaper, so plans that cannot beat the K-th best are never timed.

- ``cheap_s``: the busiest pipeline rank's layers over the schedule's slots (bubble included), plus the fixed
  overhead; everything else the step has (the embedding and the head, communication, the optimizer) only adds.
- ``tight_s``: also the embedding and the output head and the exposed TP/CP/EP of each slot
  (schedule.slot_lower_bound_s), on the ranks whose shapes differ.

Both are cached by what they depend on (keys.py): the layer shapes, the pipeline and its schedule, the
recompute level; never by the data-parallel degree or the ZeRO stage.
"""

from __future__ import annotations

from planner.cost.compute import fitted_compute, layer_time, plan_stage_shapes
from planner.cost.keys import LAYER, PIPELINE, SLOT
from planner.cost.overlap import ep_hidden
from planner.cost.schedule import layer_exposed_s, pipeline_slots, slot_lower_bound_s, step_overhead_s
from planner.cost.stages import Mix
from planner.engine import Engine
from planner.hardware import HardwareProfile
from planner.layers import LayerKind
from planner.plan import Plan
from planner.specs import ModelSpec


class StepBounds:
    """Step-time lower bounds for one (model, hardware, engine)."""

    def __init__(self, model: ModelSpec, hw: HardwareProfile, engine: Engine) -> None:
        self.model, self.hw, self.engine = model, hw, engine
        self.overhead_s = step_overhead_s(hw, engine)
        self._factor = fitted_compute(hw, engine)
        self._layers: dict[tuple, dict[LayerKind, float]] = {}  # (LAYER, recompute) -> each kind's layer seconds
        self._mixes: dict[tuple, set[Mix]] = {}  # PIPELINE -> the ranks' distinct layer mixes
        self._busiest: dict[tuple, float] = {}  # (LAYER, recompute, PIPELINE) -> busiest rank's layers seconds
        self._exposed: dict[tuple, dict[LayerKind, float]] = {}  # (LAYER, recompute) -> layer_exposed_s
        self._slot: dict[tuple, float] = {}  # SLOT -> tight slot bound

    def cheap_s(self, plan: Plan, recompute: str) -> float:
        """The busiest rank's layers (at this recompute level) over the schedule's slots, plus the overhead."""
        layer = LAYER(plan)
        key = (layer, recompute, PIPELINE(plan))
        busiest = self._busiest.get(key)
        if busiest is None:
            per_kind = self._layer_s(plan, layer, recompute)
            busiest = self._busiest[key] = self._factor * max(
                sum(n * per_kind[kind] for kind, n in mix) for mix in self._rank_mixes(plan)
            )
        return pipeline_slots(plan) * busiest + self.overhead_s

    def tight_s(self, plan: Plan) -> float:
        """Also the embedding, the head and the exposed TP/CP/EP of each slot, on each distinct rank shape."""
        key = SLOT(plan)
        slot = self._slot.get(key)
        if slot is None:
            # the all-to-all a schedule hides (DualPipeV, Megatron's 1F1B overlap) is no field of LAYER: keyed apart,
            # a 1F1B plan's exposed all-to-all stood in for a DualPipeV plan's of the same layers, in evaluation order
            lkey = (LAYER(plan), plan.recompute, ep_hidden(plan, self.engine))
            exposed = self._exposed.get(lkey)
            if exposed is None:
                exposed = self._exposed[lkey] = layer_exposed_s(self.model, self.hw, plan, self.engine)
            shapes = plan_stage_shapes(self.model, plan, self.engine)
            first = {s: r for r, s in reversed(list(enumerate(shapes)))}
            slot = self._slot[key] = max(
                slot_lower_bound_s(self.model, self.hw, plan, self.engine, r, exposed) for r in first.values()
            )
        return pipeline_slots(plan) * slot + self.overhead_s

    def _layer_s(self, plan: Plan, layer: tuple, recompute: str) -> dict[LayerKind, float]:
        key = (layer, recompute)
        hit = self._layers.get(key)
        if hit is None:
            p = plan if plan.recompute == recompute else plan.model_copy(update={"recompute": recompute})
            kinds = self.model.kind_params
            hit = self._layers[key] = {k: layer_time(self.model, self.hw, p, self.engine, kind=k).total for k in kinds}
        return hit

    def _rank_mixes(self, plan: Plan) -> set[Mix]:
        key = PIPELINE(plan)
        hit = self._mixes.get(key)
        if hit is None:
            shapes = plan_stage_shapes(self.model, plan, self.engine)
            hit = self._mixes[key] = {s.mix for s in shapes}
        return hit
