"""What a log leaves unstated, from what the user gives (`ingest --plan`: a plan file's fields and its engine
settings), and the software settings a log's configuration states. Pure."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from planner.errors import PlannerError
from planner.io.logs.record import OPTIONAL_FIELDS

# The runs file's software keys (fit/runs.py SOFTWARE_KEYS) a log's configuration can state.
LOG_SOFTWARE_KEYS = (
    "attention", "tp_overlap", "compile", "p2p_overlap", "grad_dtype", "fp8_param_gather", "precision_aware_optimizer",
    "optimizer_moment_dtype", "recompute_modules", "moe_dispatcher", "ep_overlap", "optimizer_offload",
    "activation_offload", "offload_modules", "offload_layers", "cuda_graphs", "megatron_fsdp",
)  # fmt: skip


# A field a log reader filled with its engine's default rather than read (the reader's `assumed_fields`): --plan
# may give another of these values (None: any), as it gives what the log leaves unstated.
Assumed = Mapping[str, tuple[Any, ...] | None]


def fill_plan(plan: dict[str, Any], given: Mapping[str, Any] | None, assumed: Assumed | None = None) -> list[str]:
    """The plan fields the log leaves unstated or only assumes (`assumed`: torchtitan's FSDP resharding, which no
    line prints), from `given` (--plan), in place; notes naming what was filled and what `given` says otherwise
    than the log (the log wins: it is what ran). An expert tensor-parallel degree the log's fields do not carry,
    or a stated pipeline split, is taken when given (OPTIONAL_FIELDS)."""
    if not given:
        return []
    filled, differ = [], []
    for k, v in given.items():
        if v is None or (k not in plan and k not in OPTIONAL_FIELDS):
            continue
        if plan.get(k) is None or (plan[k] != v and _may_replace(assumed or {}, k, v)):
            plan[k] = v
            filled.append(k)
        elif plan[k] != v:
            differ.append(f"{k} {v}")
    notes = [f"plan: {', '.join(filled)} from --plan (the log does not state them)"] if filled else []
    if differ:
        notes.append(f"--plan's {', '.join(differ)} not used: the log says otherwise")
    return notes


def _may_replace(assumed: Assumed, field: str, value: Any) -> bool:
    """Whether --plan's `value` may replace what the log reader assumed for `field`."""
    return field in assumed and (assumed[field] is None or value in (assumed[field] or ()))


def fill_given(
    plan: dict[str, Any], given_plan: Mapping[str, Any] | None, log_gpus: int | None, option: int | None, source: str,
    assumed: Assumed | None = None,
) -> tuple[int | None, list[str], list[str]]:  # fmt: skip
    """The plan with what --plan gives where the log is silent, the GPU count (the log's, its degrees', --gpus) and dp
    from it, and what is implied, in place; (gpus, plan notes, GPU notes). --plan's dp is taken last: the log's
    world size decides dp first. Where neither the log nor its count states dp, --plan's dp and --gpus must agree."""
    given = dict(given_plan or {})
    given_dp = {"dp": given.pop("dp")} if "dp" in given else {}
    plan_notes = fill_plan(plan, given, assumed)
    log_dp = plan.get("dp") is not None or log_gpus is not None
    gpus, gpu_notes = _gpus(log_gpus, plan, option, source if not given_dp else None)
    if given_dp and not log_dp and option is not None and plan.get("dp") not in (None, given_dp["dp"]):
        raise PlannerError(  # it said "--plan's dp not used: the log says otherwise", of what --gpus made it
            f"{source}: --plan's dp {given_dp['dp']} and --gpus {option} disagree (tp {plan['tp']} x pp {plan['pp']} "
            f"x cp {plan['cp']} on {option} GPUs is dp {plan['dp']}); give one of them"
        )
    return gpus, plan_notes + fill_plan(plan, given_dp) + implied(plan), gpu_notes


def _gpus(
    log_gpus: int | None, plan: dict[str, Any], option: int | None, source: str | None
) -> tuple[int | None, list[str]]:
    """The GPU count: the log's, else from its degrees, else --gpus; dp from the count when the log lacks it, and a
    count the other degrees do not divide refused (`source` None: --plan gives dp, and the disagreement is said
    once dp is in: build.py _contradictions)."""
    gpus, notes = log_gpus, []
    tp, pp, cp = (plan.get(k) for k in ("tp", "pp", "cp"))
    model_parallel = tp * pp * cp if tp and pp and cp else None
    if gpus is None and plan.get("dp") and model_parallel:
        gpus = plan["dp"] * model_parallel
    if gpus is not None and option is not None and option != gpus:
        notes.append(f"--gpus {option} not used: the log says {gpus}")
    gpus = gpus or option
    if plan.get("dp") is None and gpus and model_parallel:
        if gpus % model_parallel == 0:
            plan["dp"] = gpus // model_parallel
        elif source is not None:  # dp was left null, and said as "the log does not state dp" (audit)
            where = f"--gpus {gpus}" if log_gpus is None else f"the log's {gpus} GPUs"
            raise PlannerError(f"{source}: {where} is not a multiple of tp {tp} x pp {pp} x cp {cp} = {model_parallel}")
    if gpus is None:
        notes.append("gpus: not in the log; give --gpus")
    return gpus, notes


def implied(plan: dict[str, Any]) -> list[str]:
    """The plan fields another field decides, filled where unstated, in place; a note naming them: one pipeline
    stage has no virtual stages and no schedule to choose (vpp 1, 1f1b); one tensor-parallel rank has no sequence
    parallelism (sp needs tp > 1)."""
    filled = []
    if plan.get("pp") == 1:
        for k, v in (("vpp", 1), ("schedule", "1f1b")):
            if plan.get(k) is None:
                plan[k] = v
                filled.append(f"{k} {v} (pp 1)")
    if plan.get("tp") == 1 and plan.get("sp") is None:
        plan["sp"] = False
        filled.append("sp false (tp 1)")
    return [f"plan: {', '.join(filled)}: implied"] if filled else []


def log_software(
    engine: str, stated: Mapping[str, Any], given: Mapping[str, Any] | None
) -> tuple[dict[str, Any], list[str]]:
    """The run's software block: the engine, the settings the log states (`stated`, those a runs file holds), and
    `given` (a plan file's training settings) for the ones it does not; a note naming those taken from `given`."""
    logged = {k: v for k, v in stated.items() if k in LOG_SOFTWARE_KEYS and v is not None}
    taken = {k: v for k, v in (given or {}).items() if k not in logged and k != "engine" and v is not None}
    notes = [f"software: {', '.join(taken)} from --plan's training settings"] if taken else []
    return {"engine": engine, **taken, **logged}, notes


def implied_by_count(plan: dict[str, Any], gpus: int | None, model: Mapping[str, Any] | None) -> list[str]:
    """Degrees the GPU count or the model decide, filled where unstated, in place; a note naming them: cp 1 where
    tp x pp x dp already fill the GPUs, ep 1 for a model without experts (a --plan mapping that leaves them out was
    ingested with cp and ep null, which validate and calibrate refused: audit)."""
    filled = []
    degrees = [int(d) for k in ("tp", "pp", "dp") if (d := plan.get(k))]
    if plan.get("cp") is None and gpus and len(degrees) == 3 and math.prod(degrees) == gpus:
        plan["cp"] = 1
        filled.append(f"cp 1 (tp x pp x dp = the {gpus} GPUs)")
    if plan.get("ep") is None and model is not None and model.get("moe") is None:
        plan["ep"] = 1
        filled.append("ep 1 (a model without experts)")
    return [f"plan: {', '.join(filled)}: implied"] if filled else []
