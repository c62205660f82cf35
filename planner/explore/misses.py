"""When nothing fits: the plans that came closest, and what would make each fit (a higher ZeRO stage the
engine runs, full recompute, a smaller micro-batch, more GPUs), each re-evaluated by the memory screen."""

from __future__ import annotations

from planner.cost.coster import Coster
from planner.engine import plan_problems
from planner.explore.results import Miss
from planner.plan import Plan
from planner.specs import ModelSpec


def closest_misses(model: ModelSpec, coster: Coster, near: list[tuple[float, Plan]], n: int = 3) -> list[Miss]:
    """The `n` plans with the smallest overshoot (distinct degrees), each re-evaluated with more GPUs,
    a higher ZeRO stage, full recompute and a smaller micro-batch."""
    out: list[Miss] = []
    seen: set[tuple] = set()
    cap = coster.capacity_bytes
    engine = coster.engine

    def runs(q: Plan) -> bool:
        return not plan_problems(model, q, engine)

    for nbytes, p in near:
        shape = (p.tp, p.pp, p.cp, p.vpp, p.ep, p.etp)
        if shape in seen:
            continue
        seen.add(shape)
        variants: list[tuple[str, Plan, float, bool]] = []

        def try_(what: str, q: Plan, variants: list[tuple[str, Plan, float, bool]] = variants) -> None:
            if not runs(q):
                return
            b, _ = coster.peak(q)
            variants.append((what, q, b, b <= cap))

        if p.zero < 3 and p.dp * p.cp > 1:  # ZeRO shards over dp·cp: nothing to gain at 1
            for z in range(p.zero + 1, 4):
                try_(f"zero {z}", p.model_copy(update={"zero": z}))
        if p.recompute != "full":
            try_("recompute full", p.model_copy(update={"recompute": "full"}))
        if p.micro_batch > 1:
            try_(f"micro-batch {p.micro_batch // 2}", p.model_copy(update={"micro_batch": p.micro_batch // 2}))
            if p.micro_batch > 2:
                try_("micro-batch 1", p.model_copy(update={"micro_batch": 1}))
        top_zero = max((z for z in engine.rules.zero if runs(p.model_copy(update={"zero": z}))), default=p.zero)
        saver = p.model_copy(update={"zero": top_zero, "recompute": "full", "micro_batch": 1})
        saver_text = f"zero {top_zero} + recompute full + micro-batch 1"
        if saver != p:
            try_(saver_text, saver)
        gpus_needed = None
        base = saver if (variants and variants[-1][0] == saver_text) else p
        for k in range(1, 15):
            f = 2**k
            dp = base.dp * f
            gb = max(base.global_batch, dp * base.micro_batch)
            gb = -(-gb // (dp * base.micro_batch)) * dp * base.micro_batch
            q = base.model_copy(update={"dp": dp, "global_batch": gb})
            if not runs(q):
                continue
            b, _ = coster.peak(q)
            if b <= cap:
                gpus_needed = q.gpus
                desc = f"{q.gpus} GPUs (dp {dp}" + (f", global batch {gb}" if gb != base.global_batch else "") + ")"
                if base is saver and saver != p:
                    desc += " with " + saver_text
                variants.append((desc, q, b, True))
                break
        out.append(Miss(p, nbytes, cap, variants, gpus_needed))
        if len(out) >= n:
            break
    return out
