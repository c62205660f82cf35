"""`read_log`: a training log's text in, one `IngestedRun` out. Detects the family, reads it with the family's
parser, keeps the steady state, derives what the log does not print, and fills the rest from the options."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from planner.errors import PlannerError
from planner.io.logs.composer_log import HEADER, read_composer
from planner.io.logs.deepspeed_log import PIPE, THROUGHPUT, read_deepspeed
from planner.io.logs.devices import given_against_log, log_hardware
from planner.io.logs.given import fill_given, implied_by_count, log_software
from planner.io.logs.log_text import ANSI, DEFAULT_WARMUP, LogFacts, Selection, Step, read_complete
from planner.io.logs.megatron_log import DEEPSPEED_MARKERS, GPT_NEOX, ITERATION, read_megatron
from planner.io.logs.nemo_lines import NEMO_TIMING
from planner.io.logs.record import OPTIONAL_FIELDS, PLAN_FIELDS, IngestedRun, run_id
from planner.io.logs.step_times import steady_steps, step_measurements
from planner.io.logs.torchtitan_log import METRICS, TPS, read_torchtitan
from planner.io.logs.unreadable import why_unreadable
from planner.specs import ModelSpec

ENGINES = ("megatron", "torchtitan", "deepspeed", "megatron-deepspeed", "llm-foundry")
READERS: dict[str, Callable[[str], LogFacts]] = {
    "megatron": read_megatron,
    "megatron-deepspeed": read_megatron,
    "torchtitan": read_torchtitan,
    "deepspeed": read_deepspeed,
    "llm-foundry": read_composer,
}
EXPECTED = {
    "megatron": "Megatron 'iteration N/M | ... elapsed time per iteration (ms)' or NeMo 'train_step_timing in s'",
    "megatron-deepspeed": "Megatron-DeepSpeed 'iteration N/M | ... elapsed time per iteration (ms|s)'",
    "torchtitan": "torchtitan 'step: N  loss: ...  tps: ...'",
    "deepspeed": "DeepSpeed 'SamplesPerSec=' or 'steps: N loss: ... iter time (s)'",
    "llm-foundry": "Composer '[batch=N/M]:' blocks with 'Train throughput/...'",
}


def detect(text: str) -> str | None:
    """The log family the text is from, or None; "gpt-neox" for a family no engine here runs."""
    text = ANSI.sub("", text)
    return _family(text, step_families(text))


def _family(text: str, found: list[str]) -> str | None:
    """detect, given the families whose step lines the (uncoloured) text holds."""
    if found and found[0] == "megatron":
        if GPT_NEOX.search(text):
            return "gpt-neox"
        return "megatron-deepspeed" if DEEPSPEED_MARKERS.search(text) else "megatron"
    if found:
        return found[0]
    if THROUGHPUT.search(text) or PIPE.search(text):
        return "deepspeed"
    return None


def step_families(text: str) -> list[str]:
    """The families whose step lines the text holds, of those whose lines no other family prints (DeepSpeed's
    throughput lines show in Megatron-DeepSpeed logs too): more than one is logs joined into one file."""
    lines = text.splitlines()
    found = []
    if any(ITERATION.search(line) for line in lines) or NEMO_TIMING.search(text):
        found.append("megatron")
    # each pattern searched only where its fixed text is: METRICS' look-behind over a whole Megatron log took 0.65 s
    if "ps:" in text and "loss:" in text and TPS.search(text) and METRICS.search(text):
        found.append("torchtitan")
    if re.search(r"Train (throughput|time|memory)/", text) or any(HEADER.match(x) for x in lines):
        found.append("llm-foundry")
    return found


def _model(facts: LogFacts, option: ModelSpec | None, seq_len: int | None, rid: str) -> tuple[Any, list[str]]:
    config, notes = facts.config, []
    model = config.get("model")
    if model is not None:
        model = {"name": config.get("model_label") or f"{rid}-model", **model}
        if option is not None:
            notes.append(f"--model {option.name} not used: the log states the model's shape")
        try:
            ModelSpec(**model)
        except ValidationError as e:
            notes.append(f"model: the shape the log states is not a valid model ({e.errors()[0]['msg']})")
            model = None
    if model is None and option is not None:
        model = option.model_dump(mode="json", exclude_none=True, exclude={"aliases", "params"})
        if seq_len and model.get("max_seq_len") != seq_len:
            model["max_seq_len"] = seq_len
            notes.append(f"model.max_seq_len: {seq_len}, the sequence length the run trains at")
    unrepresented = config.get("model_unrepresented")
    if unrepresented:  # said whether or not --model stands in for it
        notes.append(
            f"model: the log's model has {', '.join(unrepresented)}, which a model spec cannot represent: not read "
            "as another model" + (f"; --model {option.name} stands in for it" if option is not None else "")
        )
    if model is None and not unrepresented:
        lacking = config.get("model_missing")
        detail = f" (its configuration lacks {', '.join(lacking)})" if lacking else ""
        notes.append(f"model: the log does not state the model's shape{detail}; give --model")
    elif model is None and option is None:
        notes.append("model: give --model with a spec to price the run with")
    return model, notes


def _readable_family(text: str, engine: str, source: str) -> str:
    """The family to read the log as (`engine`, or detected), or one PlannerError saying why there is none: logs of
    two families joined, a GPT-NeoX log, what unreadable.py names, no log at all."""
    family: str | None = engine
    clean = ANSI.sub("", text)  # once, for detection and for what unreadable.py names
    if engine == "auto":
        mixed = step_families(clean)
        family = _family(clean, mixed)
        if len(mixed) > 1:  # the first family's lines were read and the others' dropped without a word
            raise PlannerError(
                f"{source}: holds the step lines of {' and '.join(mixed)} (logs joined into one file?): give each "
                "log its own file, or --engine to read one family's lines"
            )
    if family == "gpt-neox":
        raise PlannerError(
            f"{source}: a GPT-NeoX log ('samples/sec: ... | iteration', 'approx flops per GPU'), and GPT-NeoX is not "
            "an engine the planner models: `planner ingest LOG --engine ENGINE -o runs.yaml` reads it as one that is, "
            "for validate and calibrate"
        )
    if family not in READERS:
        raise PlannerError(why_unreadable(clean, source, EXPECTED))
    return family


def read_log(
    text: str,
    *,
    engine: str = "auto",
    source: str = "<text>",
    warmup: int = DEFAULT_WARMUP,
    model: ModelSpec | None = None,
    hardware: str | None = None,
    gpus: int | None = None,
    given_plan: Mapping[str, Any] | None = None,
    given_software: Mapping[str, Any] | None = None,
) -> IngestedRun:
    """The run a training log describes. PlannerError when the text is no known log or prints no step.
    `given_plan`, `given_software`: plan fields and runs-file software settings (a plan file's, `ingest --plan`)
    for what the log does not state."""
    family = _readable_family(text, engine, source)
    try:
        facts = read_complete(READERS[family], text)
    except PlannerError as e:  # a value no number (log_text.number): said with the log it is in
        raise PlannerError(f"{source}: {e}") from None
    if engine != "auto":
        facts.engine = engine
    if not facts.steps and facts.cut_off:
        raise PlannerError(
            f"{source}: its one step line is its last, with no line end (still being written?): its numbers may be "
            "cut off; end the line if it is whole"
        )
    if not facts.steps:
        raise PlannerError(f"{source}: no step time or throughput in it (expected {EXPECTED[facts.engine]})")
    return _assemble(
        facts, source=source, warmup=warmup, model=model, hardware=hardware, gpus=gpus, given_plan=given_plan,
        given_software=given_software,
    )  # fmt: skip


def _contradictions(plan: dict[str, Any], gpus: int | None) -> list[str]:
    """What the log says twice, differently: its world size against its degrees, its global batch against its
    data-parallel ranks' micro-batches."""
    out = []
    degrees = {k: v for k in ("dp", "tp", "pp", "cp") if isinstance(v := plan.get(k), int)}
    if gpus and len(degrees) == 4:
        product = math.prod(degrees.values())
        if product != gpus:
            named = " x ".join(f"{k} {v}" for k, v in degrees.items())
            out.append(f"world size {gpus}, but {named} = {product}")
    gb, mb, dp = plan.get("global_batch"), plan.get("micro_batch"), plan.get("dp")
    if gb and mb and dp and gb % (mb * dp):
        out.append(f"global batch {gb} is not a multiple of micro-batch {mb} x dp {dp}")
    return out


def _refuse_contradictions(source: str, contradictions: list[str], options: dict[str, Any]) -> None:
    """One line naming what disagrees: the log with itself, or with the options given (what the user gave may be
    the half that is wrong: not blamed on the log)."""
    if not contradictions:
        return
    names = ["the log", *(o for o, v in options.items() if v)]
    who = f"{', '.join(names[:-1])} and {names[-1]} disagree" if len(names) > 1 else "the log contradicts itself"
    raise PlannerError(f"{source}: {who}: {'; '.join(contradictions)}")


def _assemble(
    facts: LogFacts,
    *,
    source: str,
    warmup: int,
    model: Any,
    hardware: Any,
    gpus: Any,
    given_plan: Any,
    given_software: Any,
) -> IngestedRun:
    rid = run_id(source)
    stated = facts.config.get("plan", {})
    plan = {k: stated.get(k) for k in PLAN_FIELDS} | {k: stated[k] for k in OPTIONAL_FIELDS if stated.get(k)}
    assumed_fields = facts.config.get("assumed_fields", {})
    n_gpus, plan_notes, gpu_notes = fill_given(plan, given_plan, facts.config.get("gpus"), gpus, source, assumed_fields)
    replaced = {k for k in assumed_fields if plan.get(k) != stated.get(k)}  # --plan's: the reader's note is not
    _refuse_contradictions(source, [*facts.config.get("conflicts", []), *_contradictions(plan, n_gpus)],
                           {"--plan": given_plan, "--gpus": gpus})  # fmt: skip
    sel, select_notes = steady_steps(facts, warmup, plan.get("global_batch"))
    measured, derived = step_measurements(sel, facts, plan, n_gpus)
    _require_measured(source, measured, sel, plan.get("global_batch"), facts)
    spec, model_notes = _model(facts, model, plan.get("seq_len"), rid)
    plan_notes += implied_by_count(plan, n_gpus, spec)
    unknown = [k for k in PLAN_FIELDS if plan[k] is None]
    by_field = facts.config.get("assumed_notes", {})  # a reader's note on a field it filled by default, by field
    read = [n for k, n in by_field.items() if k not in replaced] + facts.config.get("assumed", [])
    assumed = [*model_notes, *plan_notes, *gpu_notes, *read, *facts.notes]
    if hardware is None:
        hardware, said = log_hardware(facts.config.get("device"))
        assumed.append(said)
    elif other := given_against_log(facts.config.get("device"), hardware):
        raise PlannerError(f"{source}: {other}")
    if unknown:
        assumed.append(f"plan: the log does not state {', '.join(unknown)} (null)")
    if facts.config.get("overflow_skipped"):
        assumed.append(
            f"DeepSpeed skipped {facts.config['overflow_skipped']} steps (loss-scale overflow); its "
            "throughput lines do not say which, so they are kept"
        )
    software, software_notes = log_software(facts.engine, facts.config.get("software", {}), given_software)
    assumed += software_notes
    return IngestedRun(
        id=rid, source=source, engine=facts.engine, plan=plan, software=software, measured=measured,
        assumed=assumed + select_notes,
        derived=[*_read_from(facts, sel, measured), *facts.config.get("derived", []), *derived],
        model=spec,
        hardware=hardware, gpus=n_gpus, steps_used=len(sel.used), steps_left_out=sel.left_out,
        iterations=facts.printed(sel),
    )  # fmt: skip


def _timed(step: Step) -> bool:
    """Whether a step line prints a time or a rate."""
    rates = (step.step_s, step.tokens_per_s_per_gpu, step.samples_per_s, step.batches_per_s, step.tflops_per_gpu)
    return any(v is not None for v in (*rates, step.mfu))


def _require_measured(
    source: str, measured: dict[str, Any], sel: Selection, global_batch: Any, facts: LogFacts
) -> None:
    """A run with nothing measured is no run (validate and calibrate could only skip it): one line saying what was
    read and what is missing. Samples/s without a batch to divide by; steps left out (--warmup 0 named where the
    warm-up's lines are the timed ones); step lines that print no time at all; a batch ramp-up that never ends in the
    log, which leaves no step at the run's batch."""
    if not sel.used and sel.left_out.get("ramp-up"):
        raise PlannerError(
            f"{source}: every step line ran at a global batch other than the run's {global_batch} (its "
            "ramp-up does not end in the log): no step to time at the batch the run is planned with"
        )
    if any(v is not None for k, v in measured.items() if k != "peak_memory_kind"):
        return
    if any(s.samples_per_s for s in sel.used):
        raise PlannerError(
            f"{source}: samples/s read from its steps, but no global batch to turn it into a step time (the log "
            "states none): give --plan with a plan file or YAML mapping that states global_batch"
        )
    if not any(_timed(s) for s in facts.steps):
        raise PlannerError(
            f"{source}: its step lines print no step time, throughput or memory (expected {EXPECTED[facts.engine]})"
        )
    left = ", ".join(f"{n} {why}" for why, n in sel.left_out.items() if n)
    hint = "; --warmup 0 keeps the warm-up" if sel.left_out.get("warm-up") else ""
    said = f" (left out: {left}{hint})" if left else ""  # a timed step not used was left out: never empty
    readings = "".join(f"; {note}" for note in facts.notes)  # memory readings left out, and why
    raise PlannerError(f"{source}: no step time, throughput or memory read from its steps{said}{readings}")


def _read_from(facts: LogFacts, sel: Selection, measured: dict[str, Any]) -> list[str]:
    out = []
    if facts.config.get("read_from"):
        what = "plan and model" if facts.config.get("model") else "plan"
        out.append(f"{what} from the log's {facts.config['read_from']}")
    rated = [s for s in sel.used if (s.step_s, s.tokens_per_s_per_gpu, s.samples_per_s, s.batches_per_s) != (None,) * 4]
    timed = measured.get("step_s") or measured.get("tokens_per_s_per_gpu")  # else the rate was read and not used
    if rated and facts.time_basis and timed:
        out.append(f"median over {len(rated)} logged steps of '{facts.time_basis}'")
    return out
