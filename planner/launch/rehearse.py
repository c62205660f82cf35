"""A plan shrunk to run on this machine with the same parallel shape: `planner launch --rehearse` (pure).

What is kept: which of dp, tp, pp, vpp and cp are above 1 (each becomes 2), the schedule, the ZeRO stage,
recompute, sequence parallelism, gradient accumulation (up to 2 micro-batches per pipeline stage), the mlp,
norm, position embedding, bias and tied-embedding choices, and whether attention is grouped (GQA). What
shrinks: the degrees, the model (layers: 2 per pipeline chunk; 4 heads of 16, kv heads alike; the FFN in
its ratio to the hidden size; vocab 256), the sequence (64 tokens) and the batch.

What cannot run here is decided, not approximated silently:
- a mixture-of-experts model or ep > 1 is refused (exit 2): the worker has no expert layers yet, and a dense
  stand-in would rehearse a different model;
- cp > 1 on CPU is dropped with a note: torch has no ring attention for the CPU SDPA kernel
  (torch_cpu_notes.md row 11), and the other axes still run as the plan has them;
- fp8 recipes (the worker runs fp8 only at the plan's own shapes, launch/float8.py) and fp16 on CPU (no loss
  scaler) run in bf16, with a note: the rehearsal checks the layout, not the number format;
- when the axes at 2 need more processes than this machine allows (machine.py), dp goes first, then cp,
  pp and tp, each with a note; a plan left with none of its parallel axes is refused;
- dp goes to 1, with a note, where the worker's ZeRO stage cannot combine data parallelism with the
  plan's other axes (DDP cannot wrap tensor-parallel parameters).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from planner.engine import Engine
from planner.engine.zero_rules import zero_problems
from planner.errors import PlannerError
from planner.launch.worker_support import architecture_limits
from planner.plan import Plan
from planner.precision import is_low_precision
from planner.specs import ModelSpec

AXES = ("dp", "tp", "pp", "vpp", "cp")
DROP_ORDER = ("dp", "cp", "pp", "tp")  # which axis gives way first when the processes do not fit
HEAD_DIM, MAX_HEADS, LAYERS_PER_CHUNK, VOCAB, SEQ_LEN = 16, 4, 2, 256, 64
MAX_MICRO_BATCH, MICROBATCHES_PER_STAGE = 2, 2


@dataclass(frozen=True)
class Rehearsal:
    model: ModelSpec
    plan: Plan
    changes: tuple[str, ...]  # "tp 8 -> 2", in the order of the plan's fields, then the model's
    notes: tuple[str, ...] = field(default=())  # what the rehearsal does not run, and why

    def lines(self) -> list[str]:
        head = "rehearsal: " + (", ".join(self.changes) or "nothing to shrink")
        return [head, *(f"rehearsal note: {n}" for n in self.notes)]

    def to_dict(self) -> dict:
        return {"changes": list(self.changes), "notes": list(self.notes), "model": self.model.model_dump()}


def rehearsal_model_path(profile_out: Path) -> Path:
    """Where a rehearsal's shrunk model is written for the workers to read: beside the profile."""
    return profile_out.with_name(profile_out.stem + ".model.yaml")


def _elsewhere(model: ModelSpec, plan: Plan) -> str:
    """Where a plan the worker cannot rehearse can run: the engine targets that write it (emit/checks.py)."""
    from planner.launch.emit.checks import targets_writing
    from planner.launch.emit.refusal import engine_targets

    writing = targets_writing(engine_targets(), model, plan)
    if not writing:
        return "no --emit target writes this model either"
    return f"emit the plan for an engine that has it (--emit {'|'.join(writing)})"


def rehearse(model: ModelSpec, plan: Plan, engine: Engine, *, device_type: str, max_processes: int | None) -> Rehearsal:
    """The plan and model shrunk to fit `max_processes` workers on `device_type` (None: no limit)."""
    if model.moe is not None or plan.ep > 1:
        what = f"{model.name} has {model.moe.num_experts} experts per MoE layer" if model.moe else f"ep={plan.ep}"
        raise PlannerError(
            f"--rehearse: {what}, and the launch worker has no expert layers yet, so no rehearsal here would run "
            f"them; {_elsewhere(model, plan)}"
        )
    if limits := architecture_limits(model):
        raise PlannerError(f"--rehearse: {limits[0]}; {_elsewhere(model, plan)}")
    notes: list[str] = []
    degrees = {a: min(getattr(plan, a), 2) for a in AXES}
    if device_type != "cuda" and degrees["cp"] > 1:
        degrees["cp"] = 1
        notes.append(
            f"cp {plan.cp} -> 1: context parallelism needs CUDA (torch has no ring attention for the CPU SDPA "
            "kernel); the other axes run as planned"
        )
    _fit_processes(degrees, plan, max_processes, notes)
    precision = _precision(plan.precision, device_type, notes)
    small = _shrink_model(model, degrees)
    shaped = _plan(plan, degrees, small, precision)
    alone = _plan(plan, {**degrees, "dp": 1}, small, precision)
    if shaped.dp > 1 and zero_problems(engine, shaped) and not zero_problems(engine, alone):
        notes.append(
            f"dp {plan.dp} -> 1: {zero_problems(engine, shaped)[0].detail}; the rehearsal keeps the other axes"
        )
        shaped = alone
    return Rehearsal(small, shaped, tuple(_changes(model, plan, small, shaped)), tuple(notes))


def _fit_processes(degrees: dict[str, int], plan: Plan, max_processes: int | None, notes: list[str]) -> None:
    """Drop axes (DROP_ORDER) until dp·tp·pp·cp processes fit; refuse when no parallel axis is left."""
    if max_processes is None:
        return
    used = [a for a in ("dp", "tp", "pp", "cp") if degrees[a] > 1]
    for axis in DROP_ORDER:
        world = degrees["dp"] * degrees["tp"] * degrees["pp"] * degrees["cp"]
        if world <= max_processes:
            break
        if degrees[axis] > 1:
            degrees[axis] = 1
            lost = f"; zero={plan.zero} shards nothing without dp" if axis == "dp" and plan.zero else ""
            notes.append(
                f"{axis} {getattr(plan, axis)} -> 1: {world} processes exceed the {max_processes} this machine "
                f"runs{lost}"
            )
            if axis == "pp":
                degrees["vpp"] = 1
    if used and all(degrees[a] == 1 for a in used):
        raise PlannerError(
            f"--rehearse: this machine runs at most {max_processes} worker process(es), so none of the plan's "
            f"parallel axes ({', '.join(f'{a}={getattr(plan, a)}' for a in used)}) could be kept; rehearse on a "
            "machine with more cores or GPUs"
        )


def _precision(precision: str, device_type: str, notes: list[str]) -> str:
    if is_low_precision(precision):
        notes.append(
            f"precision {precision} -> bf16: the rehearsal checks the layout, not the number format (the worker's "
            "fp8 runs on the plan's own shapes: launch it without --rehearse on a GPU of compute capability 8.9+)"
        )
        return "bf16"
    if precision == "fp16" and device_type != "cuda":
        notes.append("precision fp16 -> bf16: the worker has no loss scaler for fp16 on CPU")
        return "bf16"
    return precision


def _shrink_model(model: ModelSpec, degrees: dict[str, int]) -> ModelSpec:
    """A model of the same family small enough for a few CPU processes, and divisible as the plan needs:
    tp divides heads, kv heads, the FFN and the vocabulary; every pipeline chunk holds LAYERS_PER_CHUNK layers."""
    tp = degrees["tp"]
    group = model.num_attention_heads // model.kv_heads
    kv = min(model.kv_heads, max(tp, MAX_HEADS // min(group, 2)))
    heads = min(model.num_attention_heads, kv * min(group, 2))
    hidden = heads * HEAD_DIM
    step = 8 * tp
    ffn = max(step, round(model.ffn_hidden_size * hidden / model.hidden_size / step) * step)
    layers = min(model.num_layers, max(LAYERS_PER_CHUNK * degrees["pp"] * degrees["vpp"], 2))
    vocab = min(model.vocab_size, VOCAB)
    update = {
        "name": f"{model.name}-rehearsal",
        "num_layers": layers,
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_kv_heads": kv if model.num_kv_heads is not None else None,
        "head_dim": None,
        "ffn_hidden_size": ffn,
        "vocab_size": vocab + (-vocab) % tp,
        "max_seq_len": min(model.max_seq_len, SEQ_LEN),
        "params": None,
        "aliases": (),
    }
    return ModelSpec(**{**model.model_dump(), **update})


def _plan(plan: Plan, degrees: dict[str, int], model: ModelSpec, precision: str) -> Plan:
    """The plan's own fields with the shrunk degrees and a batch of a few micro-batches per pipeline."""
    pp, vpp = degrees["pp"], degrees["vpp"]
    micro = min(plan.micro_batch, MAX_MICRO_BATCH)
    per_step = min(plan.num_microbatches, MICROBATCHES_PER_STAGE * pp) or 1
    if pp > 1:  # the pipelines' schedules take micro-batches in multiples of pp (and of vpp, interleaved)
        unit = math.lcm(pp, vpp)
        per_step = max(unit, per_step - per_step % unit)
    seq = min(plan.seq_len, model.max_seq_len)
    return plan.model_copy(
        update={
            **degrees,
            "ep": 1,
            "sp": plan.sp and degrees["tp"] > 1,
            "micro_batch": micro,
            "global_batch": degrees["dp"] * micro * per_step,
            "seq_len": seq,
            "precision": precision,
            "schedule": "1f1b" if plan.schedule == "interleaved" and vpp == 1 else plan.schedule,
        }
    )


def _changes(model: ModelSpec, plan: Plan, small: ModelSpec, shaped: Plan) -> list[str]:
    out = [
        f"{name.replace('_', ' ')} {getattr(plan, name)} -> {getattr(shaped, name)}"
        for name in (*AXES, "micro_batch", "global_batch", "seq_len", "precision", "schedule")
        if getattr(plan, name) != getattr(shaped, name)
    ]
    if plan.sp != shaped.sp:
        out.append("sp off (tp 1)")
    for label, before, after in (
        ("layers", model.num_layers, small.num_layers),
        ("hidden", model.hidden_size, small.hidden_size),
        ("heads", model.num_attention_heads, small.num_attention_heads),
        ("kv heads", model.kv_heads, small.kv_heads),
        ("ffn", model.ffn_hidden_size, small.ffn_hidden_size),
        ("vocab", model.vocab_size, small.vocab_size),
    ):
        if before != after:
            out.append(f"{label} {before} -> {after}")
    return out
