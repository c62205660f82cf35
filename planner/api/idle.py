"""Settings a run gives that change nothing for its model and plan, each said in one line (a warning): a user
who asked for a recompute module or an offload that moves nothing, or for a restart time with no failure rate to
price it, should hear so, not read the same figures."""

from __future__ import annotations

from typing import Any

from planner.cost.memory import activation_pieces
from planner.cost.overlap import ep_overlap_applies
from planner.cost.recipe_options import modules_recompute_flops_per_token, offload_groups, offload_modules
from planner.engine import Engine
from planner.engine.settings import given_settings
from planner.plan import Plan
from planner.specs import ModelSpec

# The per-run settings that act on MoE layers alone (engine/settings.py SETTINGS): a dense model has none to act on.
MOE_SETTINGS = ("moe_dispatcher", "moe_imbalance", "moe_dispatch_dtype")


def changing_nothing(spec: ModelSpec, plan: Plan, eng: Engine) -> list[str]:
    """The recipe settings given that change nothing for this model and plan."""
    return (
        _recompute_modules_idle(spec, plan, eng) + _offload_idle(spec, plan, eng) + _moe_idle(spec, eng)
        + _ep_overlap_idle(spec, plan, eng) + _megatron_fsdp_idle(plan, eng)
    )  # fmt: skip


def _megatron_fsdp_idle(plan: Plan, eng: Engine) -> list[str]:
    """--megatron-fsdp where the plan's ZeRO stage is not 3: the planner prices Megatron-FSDP as zero 3
    (optim_grads_params), its one sharding that zero 1 and 2 do not already price (the distributed optimizer); and
    with ep > 1, where zero 3 runs as Megatron-FSDP without it."""
    if not eng.comm.megatron_fsdp or (plan.zero == 3 and plan.ep == 1):
        return []
    if plan.zero == 3:
        return [f"--megatron-fsdp with ep={plan.ep}: zero 3 with experts runs as Megatron-FSDP; it changes nothing"]
    return [f"--megatron-fsdp with zero {plan.zero}: Megatron-FSDP is priced as zero 3; it changes nothing here"]


def _ep_overlap_idle(spec: ModelSpec, plan: Plan, eng: Engine) -> list[str]:
    """--ep-overlap / --no-ep-overlap where the plan decides it (cost/overlap.py ep_hidden): DualPipe's schedule
    overlaps the all-to-alls whatever the flag (hai-llm echoed ep_overlap=False and priced the overlap, audit); other
    schedules need pp 1 or interleaving and no full recompute."""
    if "ep_overlap" not in given_settings(eng) or spec.moe is None or plan.ep == 1:
        return []
    flag = "--ep-overlap" if eng.moe.ep_overlap else "--no-ep-overlap"
    if plan.schedule == "dualpipev":
        return [f"{flag}: the dualpipev schedule overlaps the all-to-alls by itself; it changes nothing"]
    if not ep_overlap_applies(plan):
        return [f"{flag}: the overlap needs pp 1 or the interleaved schedule and no full recompute; it changes nothing"]
    return []


def _moe_idle(spec: ModelSpec, eng: Engine) -> list[str]:
    """MoE settings given for a model without MoE layers: no token is dispatched, no expert loaded."""
    given = [n for n in MOE_SETTINGS if n in given_settings(eng)]
    if spec.moe is not None or not given:
        return []
    flags = ", ".join(f"--{n.replace('_', '-')}" for n in given)
    return [f"{flags}: {spec.name} has no MoE layers; {'they change' if len(given) > 1 else 'it changes'} nothing"]


def _recompute_modules_idle(spec: ModelSpec, plan: Plan, eng: Engine) -> list[str]:
    """--recompute-modules outside selective recompute, or naming modules none of the model's layers has: they
    re-run no FLOPs and free no bytes (core_attn under flash attention frees little but re-runs the core: a choice,
    not a no-op)."""
    named = eng.kernels.recompute_modules
    if named is None:
        return []
    if plan.recompute != "selective":
        # Megatron's --recompute-modules choose what --recompute-granularity selective re-runs
        return [
            f"--recompute-modules applies to --recompute selective; with recompute={plan.recompute} it changes nothing"
        ]
    kept = _kept(spec, plan, eng)

    def without(m: str) -> Engine:
        return eng.configured(recompute_modules=[x for x in named if x != m])

    idle = [
        m
        for m in named
        if not modules_recompute_flops_per_token(spec, plan.seq_len, (m,)) and _kept(spec, plan, without(m)) == kept
    ]
    if not idle:
        return []
    return [f"--recompute-modules {','.join(idle)}: no layer of {spec.name} keeps what it re-runs; it changes nothing"]


def _offload_idle(spec: ModelSpec, plan: Plan, eng: Engine) -> list[str]:
    """Activation offload that moves nothing: modules named at a share of 0, recompute that keeps nothing in the
    groups, or modules whose groups the model's layers lack."""
    m = eng.memory
    if m.offload_modules and not m.activation_offload:
        return [f"--offload-modules {','.join(m.offload_modules)} with --activation-offload 0: nothing is offloaded"]
    if not m.activation_offload:
        return []
    if plan.recompute == "full":
        return ["activation offload moves nothing with recompute=full: the layer inputs it keeps are in no group"]
    named = m.offload_modules
    idle = [x for x in named if x not in offload_groups(spec)] if named else []
    if idle:
        return [f"--offload-modules {','.join(idle)}: no tensor of {spec.name}'s layers is in their groups"]
    if not any(groups for _keep, _work, groups in activation_pieces(spec, plan, eng).values()):
        modules = ",".join(offload_modules(eng, plan.recompute))
        return [
            f"activation offload moves nothing with recompute={plan.recompute}: what the groups of {modules} hold "
            "is recomputed, not kept"
        ]
    return []


def _kept(spec: ModelSpec, plan: Plan, eng: Engine) -> list[float]:
    """Bytes each layer kind keeps per micro-batch (what recompute modules change)."""
    return [keep for keep, _work, _groups in activation_pieces(spec, plan, eng).values()]


# The run options that describe failures, each with the value it has when not given.
FAILURE_OPTIONS = {"restart_minutes": None, "checkpoint_bandwidth": None}


def failures_unpriced(given: dict[str, Any], *, priced: bool, rates: str = "--mtbf-hours or --cluster") -> list[str]:
    """--restart-minutes and --checkpoint-bandwidth describe failures: with no failure rate to price (`rates` says
    where one comes from) they change nothing; --mtbf-per node says what --mtbf-hours is per, and changes nothing
    without it (a cluster's rate, or the goodput objective's, is per GPU). Said rather than passed over."""
    out = []
    named = [f"--{k.replace('_', '-')}" for k, unset in FAILURE_OPTIONS.items() if given.get(k, unset) != unset]
    if named and not priced:
        verb = "changes" if len(named) == 1 else "change"
        out.append(f"{', '.join(named)} {verb} nothing without a failure rate to price ({rates})")
    if given.get("mtbf_per", "gpu") != "gpu" and given.get("mtbf_hours") is None:
        out.append(
            f"--mtbf-per {given['mtbf_per']} says what --mtbf-hours is per; without --mtbf-hours it changes nothing"
        )
    return out
