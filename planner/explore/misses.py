"""When nothing fits: the plans that came closest, and what would make each fit (a higher ZeRO stage the
engine runs, full recompute, a smaller micro-batch, the fewest layers the engine's CPU offload must move, more
GPUs), each re-evaluated by the memory screen."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from planner.cost.coster import Coster
from planner.engine import plan_problems
from planner.explore.results import Miss, Variant
from planner.explore.screening import Overshoot
from planner.plan import Plan
from planner.specs import ModelSpec

MAX_DP_DOUBLINGS = 14  # more GPUs are tried up to dp x 2^14 (16384 times as many)


@dataclass(frozen=True)
class _Trial:
    """What the variants of one miss are tried with: the model, the cost model and the GPU's capacity."""

    model: ModelSpec
    coster: Coster

    def runs(self, q: Plan) -> bool:
        """Whether the engine runs `q` on this GPU (a setting a variant adds may need what the GPU states: the
        offload its host link)."""
        return not plan_problems(self.model, q, self.coster.engine, None, self.coster.hw)

    def variant(self, change: str, q: Plan, settings: dict[str, object] | None = None) -> Variant | None:
        """`q`'s peak memory, or None when the engine does not run it; `settings`: the engine settings the change
        adds (the coster's engine has them)."""
        if not self.runs(q):
            return None
        nbytes, _ = self.coster.peak(q)
        return Variant(change, q, nbytes, nbytes <= self.coster.capacity_bytes, settings or {}, self.risky(q, nbytes))

    def risky(self, q: Plan, nbytes: float) -> bool:
        """`q` fits at `nbytes`, but the high end of the 80% interval of its memory passes the GPU."""
        return self.coster.memory_trust(q, nbytes).may_not_fit_at(nbytes, self.coster.capacity_bytes)


def closest_misses(
    model: ModelSpec, coster: Coster, near: Sequence[Overshoot], n: int = 3, *, grow_when_stuck: bool = False
) -> list[Miss]:
    """The `n` plans with the smallest overshoot (distinct degrees), each re-evaluated with more GPUs,
    a higher ZeRO stage, full recompute and a smaller micro-batch; `grow_when_stuck`: more GPUs only where no
    change on the GPUs the plan has fits with its 80% interval of memory too."""
    trial = _Trial(model, coster)
    out: list[Miss] = []
    seen: set[tuple] = set()
    for o in near:
        p = o.plan
        shape = (p.tp, p.pp, p.cp, p.vpp, p.ep, p.etp)
        if shape in seen:
            continue
        seen.add(shape)
        variants, saver = _changes(trial, p)
        base = saver.plan if saver.plan != p and trial.runs(saver.plan) else p  # grown with every saver on
        grow = not (grow_when_stuck and any(v.fits and not v.may_not_fit for v in variants))  # a sure fit
        more = _more_gpus(trial, base, p, saver) if grow else None
        if more is not None:
            variants.append(more)
        needed = more.plan.gpus if more else None
        out.append(Miss(p, o.nbytes, coster.capacity_bytes, variants, coster.engine.name, needed))
        if len(out) >= n:
            break
    return out


def what_would_fit(model: ModelSpec, coster: Coster, plan: Plan, nbytes: float) -> Miss:
    """One plan that does not fit (`planner memory`, `estimate`), with what would make it fit, as the search's
    closest misses try it; more GPUs only where no change on the GPUs the plan has fits surely (a user who can
    switch on ZeRO-3 is not told to buy twice the GPUs; one whose only change fits by a hair is)."""
    (miss,) = closest_misses(model, coster, [Overshoot(plan, nbytes)], n=1, grow_when_stuck=True)
    return miss


@dataclass(frozen=True)
class _Saver:
    """Every memory saver at once: the highest ZeRO stage the engine runs, full recompute, micro-batch 1."""

    change: str
    plan: Plan


def _changes(trial: _Trial, p: Plan) -> tuple[list[Variant], _Saver]:
    """The variants of `p` on the same GPUs (each higher ZeRO stage, full recompute, smaller micro-batches and
    all of the savers at once), and the all-savers plan."""
    tries: list[tuple[str, Plan]] = []
    if p.zero < 3 and p.dp * p.cp > 1:  # ZeRO shards over dp·cp: nothing to gain at 1
        tries += [(f"zero {z}", p.model_copy(update={"zero": z})) for z in range(p.zero + 1, 4)]
    if p.recompute != "full":
        tries.append(("recompute full", p.model_copy(update={"recompute": "full"})))
    if p.micro_batch > 1:
        tries.append((f"micro-batch {p.micro_batch // 2}", p.model_copy(update={"micro_batch": p.micro_batch // 2})))
        if p.micro_batch > 2:
            tries.append(("micro-batch 1", p.model_copy(update={"micro_batch": 1})))
    engine = trial.coster.engine
    top_zero = max((z for z in engine.rules.zero if trial.runs(p.model_copy(update={"zero": z}))), default=p.zero)
    saver = p.model_copy(update={"zero": top_zero, "recompute": "full", "micro_batch": 1})
    others = ["recompute full"] * (p.recompute != "full") + ["micro-batch 1"] * (p.micro_batch != 1)  # not p's own
    saver_text = " + ".join([f"zero {top_zero}"] * (top_zero != p.zero) + others)
    shown, shown_text = saver, saver_text
    if p.dp * p.cp == 1:  # ZeRO shards nothing over one rank (ZeRO-3 adds FSDP's fp32 parameters): kept for growth
        shown = p.model_copy(update={"recompute": "full", "micro_batch": 1})
        shown_text = " + ".join(others)
    if shown != p and all(q != shown for _what, q in tries):
        tries.append((shown_text, shown))
    variants = [v for v in (trial.variant(what, q) for what, q in tries) if v is not None]
    offload = _offload_variant(trial, p)
    return variants + ([offload] if offload else []), _Saver(saver_text, saver)


def _offload_variant(trial: _Trial, p: Plan) -> Variant | None:
    """The fewest layers whose activations the engine's layer-wise CPU offload (--offload-layers: Megatron's
    --cpu-offloading-num-layers) must move for `p` to fit, more than the run offloads already, where the engine
    offers it and `p` can run it on this GPU (pp 1, no recompute, a host link: engine/offload_rules.py), found by
    bisection up to L-1 (more layers never hold more): the fewest whose 80% interval of memory fits too where
    L-1's does, so that the suggestion is not one at the edge of the GPU; None where even L-1 do not fit, or it
    cannot run."""
    engine, layers = trial.coster.engine, trial.model.num_layers
    start = engine.memory.offload_layers + 1  # more than the run offloads already
    if "offload_layers" not in engine.rules.options or start > layers - 1:
        return None

    def tried(n: int) -> Variant | None:
        coster = Coster(trial.model, trial.coster.hw, engine.configured(offload_layers=n))
        return _Trial(trial.model, coster).variant(f"--offload-layers {n}", p, {"offload_layers": n})

    last = tried(layers - 1)
    if last is None or not last.fits:
        return None
    sure = not last.may_not_fit  # then ask as much of each n

    def enough(v: Variant) -> bool:
        return v.fits and not (sure and v.may_not_fit)

    lo, hi, best = start, layers - 1, last  # the least n that fits lies in [lo, hi]
    while lo < hi:
        mid = (lo + hi) // 2
        v = tried(mid)
        if v is not None and enough(v):
            hi, best = mid, v
        else:
            lo = mid + 1
    return best


def _more_gpus(trial: _Trial, base: Plan, p: Plan, saver: _Saver) -> Variant | None:
    """The fewest GPUs (dp doubled, the global batch grown to a whole micro-batch per rank where needed; for a
    mixture-of-experts model ep doubled with it as far as the experts go, since EP is carved from dp and spreads
    the experts' weights) at which `base` fits, or None within MAX_DP_DOUBLINGS."""
    experts = trial.model.moe.num_experts if trial.model.moe is not None else 1
    ep_max = base.ep
    while ep_max * 2 <= experts and experts % (ep_max * 2) == 0:
        ep_max *= 2
    for k in range(1, MAX_DP_DOUBLINGS + 1):
        dp = base.dp * 2**k
        gb = max(base.global_batch, dp * base.micro_batch)
        gb = -(-gb // (dp * base.micro_batch)) * dp * base.micro_batch
        grown = [base.model_copy(update={"dp": dp, "global_batch": gb})]
        if ep_max > base.ep:
            grown.insert(0, grown[0].model_copy(update={"ep": min(base.ep * 2**k, ep_max)}))
        for q in grown:
            if not trial.runs(q):
                continue
            nbytes, _ = trial.coster.peak(q)
            if nbytes <= trial.coster.capacity_bytes:
                ep = f", ep {q.ep}" if q.ep != base.ep else ""
                desc = f"{q.gpus} GPUs (dp {dp}{ep}" + (f", global batch {gb}" if gb != base.global_batch else "") + ")"
                if base is saver.plan and saver.plan != p:
                    desc += " with " + saver.change
                return Variant(desc, q, nbytes, True, may_not_fit=trial.risky(q, nbytes))
    return None
