"""Settings a run gives that change nothing for its model and plan, each said in one line (a warning): a user
who asked for a recompute module or an offload that moves nothing should hear so, not read the same figures."""

from __future__ import annotations

from typing import Any

from planner.cost.memory import activation_pieces
from planner.cost.recipe_options import modules_recompute_flops_per_token, offload_groups, offload_modules
from planner.engine import Engine
from planner.plan import Plan
from planner.specs import ModelSpec


def changing_nothing(spec: ModelSpec, plan: Plan, eng: Engine) -> list[str]:
    """The recipe settings given that change nothing for this model and plan."""
    return _recompute_modules_idle(spec, plan, eng) + _offload_idle(spec, plan, eng)


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


# The run options that price failures, and the value each means when left as it is.
FAILURE_OPTIONS = {"restart_minutes": None, "checkpoint_bandwidth": None, "mtbf_per": "gpu"}


def failures_unpriced(given: dict[str, Any], *, priced: bool, rates: str = "--mtbf-hours or --cluster") -> list[str]:
    """--restart-minutes, --checkpoint-bandwidth and --mtbf-per node describe failures: with no failure rate to
    price (`rates` says where one comes from) they change nothing, which is said rather than passed over."""
    if priced:
        return []
    named = [
        f"--{k.replace('_', '-')}" + (f" {given[k]}" if k == "mtbf_per" else "")
        for k, unset in FAILURE_OPTIONS.items()
        if given.get(k, unset) != unset
    ]
    if not named:
        return []
    verb = "changes" if len(named) == 1 else "change"
    return [f"{', '.join(named)} {verb} nothing without a failure rate to price ({rates})"]
