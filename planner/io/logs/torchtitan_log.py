"""torchtitan logs: the metrics line of every logged step and the set-up lines that state the layout, batch,
sequence length, model and features."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Any

from planner.io.logs.devices import device_in
from planner.io.logs.log_text import LogFacts, Memory, Step, clean_lines, events_in
from planner.io.logs.log_values import number, timestamp_s
from planner.io.logs.torchtitan_recipes import low_precision, peak_fallback, recipe_notes
from planner.units import GiB

# "step: 10  loss:  7.1234  grad_norm:  1.23  memory: 33.30GiB(35.01%)  tps: 6,123  tflops: 351.2  mfu: 35.5%"
# (torchtitan/components/metrics.py MetricsProcessor.log; before 2025 torchtitan/train.py, where "tps" was "wps",
# and grad_norm, tflops were added later). tps is tokens per second per device (ntokens_since_last_log /
# (time_delta * non_data_parallel_size)) averaged since the previous logged step; memory is the peak of
# torch.cuda.max_memory_reserved in GiB. "validate step:" lines are evaluations, not training steps.
METRICS = re.compile(r"(?<!validate )\bstep:\s*(\d+)\s+loss:")
MEMORY = re.compile(r"memory:\s*(-?[\d.]+)GiB")
TPS = re.compile(r"\b[tw]ps:\s*([\d,]+(?:\.\d+)?)")
TFLOPS = re.compile(r"tflops:\s*([\d,]+(?:\.\d+)?)")
MFU = re.compile(r"mfu:\s*([\d.]+)%")
# "Building device mesh with parallelism: pp=1, dp_replicate=1, dp_shard=8, cp=1, tp=1, ep=1"
# (torchtitan/distributed/parallel_dims.py); before: "Building 2-D device mesh with ['dp_shard', 'tp'], [4, 2]".
MESH_NEW = re.compile(r"device mesh with parallelism: (.*)$")
MESH_OLD = re.compile(r"Building \d-D device mesh with \[?\(?([^\]\)]*)\)?\]?,\s*\[([\d,\s]*)\]")
# "Training starts at step 1, with local batch size 1, global batch size 8, sequence length 8192, ..."
# (torchtitan/train.py until 12983cc48, 2025-03-27), then "Trainer is initialized with local batch size 2, global
# batch size 2, sequence length 4096, ..." and, since gradient accumulation (8570415c3, PR #1238, 2025-06-05), "...
# global batch size 64, gradient accumulation steps 1, sequence length 2048, ..." (train.py l.315-322 @8570415c3);
# a "with" before "gradient accumulation" is read too.
START = re.compile(
    r"local batch size (\d+), global batch size (\d+),(?: (?:with )?gradient accumulation steps (\d+),)?"
    r" sequence length (\d+)"
)
# torchtitan's token-based batches (main at 73aed7f6c, 2026-08, trainer.py): "Trainer is initialized with 65536 tokens
# per DP rank, 524288 tokens per train step, gradient accumulation steps 1, maximum context length 8192, ..." (the
# tokens per DP rank are num_tokens_per_microbatch_per_dp_rank x num_pp_microbatches). Read as sequences of the
# maximum context length, which documents are packed up to: local and global batch = tokens / context length.
START_TOKENS = re.compile(
    r"(\d+) tokens per DP rank, (\d+) tokens per train step, gradient accumulation steps (\d+), maximum context "
    r"length (\d+)"
)
# "Training starts at step N" (torchtitan v0.2.0 train.py, N = the step after a loaded checkpoint's), on the line
# above or, in 2025's, ahead of the batch and sequence length: either shows the run's start.
STARTS_AT = re.compile(r"Training starts at step (\d+)")
# "Model llama3 8B size: 8,030,261,248 total parameters" (torchtitan/trainer.py).
SIZE = re.compile(r"Model (.+?) size: ([\d,]+) total parameters")
# "Building llama3 8B with TransformerModelArgs(... dim=4096, n_layers=32, n_heads=32, n_kv_heads=8,
# vocab_size=128256, multiple_of=1024, ffn_dim_multiplier=1.3, ... max_seq_len=8192, ...)".
MODEL_ARGS = re.compile(r"Building (.+?) with (\w*ModelArgs)\((.*)\)")
# The ModelArgs read as a Llama's (models/llama3 TransformerModelArgs, and the llama2 and llama3 labels); other
# models' args (DeepSeek-V3's MLA and MoE, Qwen3's q/k norms, Llama 4's experts) hold what _llama_model would drop.
LLAMA_ARGS = ("TransformerModelArgs", "ModelArgs")
ARG = re.compile(r"(\w+)=([\w.\-]+)")
# "Applied selective activation checkpointing to the model" (torchtitan/distributed/activation_checkpoint.py),
# "Compiling each TransformerBlock with torch.compile" (torchtitan/distributed/compile.py), "Float8 training
# active" (torchtitan/components/quantization/float8.py), "Applied FSDP to the model" (parallelize.py).
AC = re.compile(r"Applied (\w+) activation checkpointing")
# "Using pipeline schedule Interleaved1F1B with 64 microbatches and 8 stages." (torchtitan/distributed/
# pipeline_parallel.py build_pipeline_schedule: n_microbatches = local_batch_size // pipeline_parallel_microbatch_size,
# num_total_stages = pp x stages per rank): the schedule, the micro-batch and the virtual stages.
PP_LINE = re.compile(r"Using pipeline schedule (\w+) with (\d+) microbatches and (\d+) stages")
PP_SCHEDULES = {"1F1B": "1f1b", "GPipe": "gpipe", "Interleaved1F1B": "interleaved"}  # torchtitan.yaml schedules


def _step(number_: int, rank: int | None, line: str, m: re.Match[str]) -> tuple[Step, Memory | None]:
    tail = line[m.start() :]
    tps, tflops, mfu, mem = TPS.search(tail), TFLOPS.search(tail), MFU.search(tail), MEMORY.search(tail)
    step = Step(
        step=int(m.group(1)),
        line=number_,
        rank=rank,
        # tps 0 measures no rate (no tokens since the last log), as Megatron's reader drops a time of 0 (audit)
        tokens_per_s_per_gpu=(number(tps.group(1), field="tps", line=number_) or None) if tps else None,
        tflops_per_gpu=number(tflops.group(1), field="tflops", line=number_) if tflops else None,
        mfu=round(float(mfu.group(1)) / 100, 6) if mfu else None,
        time_s=timestamp_s(line),
    )
    return step, Memory(float(mem.group(1)) * GiB, "max_reserved", rank) if mem else None


def _measured(memory: list[Memory]) -> tuple[list[Memory], list[str]]:
    """The peaks that measure something. torchtitan prints "memory:  0.00GiB(0.00%)" where the device's memory stats
    hold no peak (components/metrics.py DeviceMemoryMonitor.get_peak_stats @4e73af3e2: memory_stats(device)
    .get("reserved_bytes.all.peak", -1), 0 or -1 bytes): no peak was recorded, which is not a peak of nothing."""
    kept = [m for m in memory if m.peak_bytes > 0]
    if len(kept) == len(memory):
        return memory, []
    left = "" if kept else "; peak_memory_bytes null"
    return kept, [
        f"memory: {len(memory) - len(kept)} metrics lines print a peak of 0.00GiB, which the device's memory stats "
        f"record where they hold no peak: not a measurement, left out{left}"
    ]


def _mesh(line: str) -> dict[str, int]:
    if m := MESH_NEW.search(line):
        return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(1))}
    if m := MESH_OLD.search(line):
        names = re.findall(r"'?(\w+)'?", m.group(1))
        sizes = [int(s) for s in re.findall(r"\d+", m.group(2))]
        return dict(zip(names, sizes))
    return {}


def _llama_model(label: str, args: dict[str, str]) -> dict[str, Any] | None:
    """A Llama-style model from its ModelArgs; the FFN width as torchtitan's FeedForward computes it
    (torchtitan/models/llama3/model/model.py: 2/3 of 4·dim, times ffn_dim_multiplier, up to multiple_of)."""
    try:
        dim, layers, heads = int(args["dim"]), int(args["n_layers"]), int(args["n_heads"])
        vocab, multiple = int(args["vocab_size"]), int(args.get("multiple_of", "256"))
    except (KeyError, ValueError):
        return None
    hidden = int(2 * 4 * dim / 3)
    if args.get("ffn_dim_multiplier", "None") not in ("None", ""):
        hidden = int(float(args["ffn_dim_multiplier"]) * hidden)
    kv = args.get("n_kv_heads", "None")
    return {
        "name": label.replace(" ", "-").lower(),
        "num_layers": layers,
        "hidden_size": dim,
        "num_attention_heads": heads,
        "num_kv_heads": int(kv) if kv.isdigit() else heads,
        "ffn_hidden_size": multiple * math.ceil(hidden / multiple),
        "mlp": "swiglu",
        "vocab_size": vocab,
        "tied_embeddings": False,
        "position_embedding": "rope",
        "norm": "rmsnorm",
        "model_max_seq_len": int(args["max_seq_len"]) if args.get("max_seq_len", "").isdigit() else None,
    }


def _start(text: str) -> tuple[str, str, str, str] | None:
    """(local batch, global batch, accumulation steps, sequence length) a start line states, as text ("": not
    stated): token counts in sequences of the context length, where they are whole ones."""
    if m := START.search(text):
        return m.groups("")  # type: ignore[return-value]
    if not (t := START_TOKENS.search(text)):
        return None
    per_rank, step, steps, context = (int(g) for g in t.groups())
    whole = per_rank % context == 0 and step % context == 0
    local, batch = (str(per_rank // context), str(step // context)) if whole else ("", "")
    return local, batch, str(steps), str(context)


def _micro_batch(start: tuple[str, ...] | None, pp: int | None) -> int | None:
    """Sequences per forward-backward: the local batch itself. torchtitan accumulates global / (local x dp) steps,
    each one local batch (train.py @8570415c3: gradient_accumulation_steps = global_batch_size // (local_batch_size
    * dp_degree), l.205; train_step runs forward_backward_step on one next(data_iterator) a step, l.421-424).
    Unknown with pipelining (torchtitan splits the local batch into pipeline_parallel_microbatch_size pieces)."""
    if not start or not start[0] or (pp is not None and pp > 1):
        return None
    return int(start[0])


def _pipeline(text: str, start: tuple[str, ...] | None, pp: int | None) -> dict[str, Any]:
    """What the pipeline-schedule line states at pp > 1: the schedule (where it is one the planner models), the
    virtual stages per rank and the micro-batch (the local batch over the micro-batches)."""
    m = PP_LINE.search(text)
    if m is None or not pp or pp == 1:
        return {}
    n, stages = int(m[2]), int(m[3])
    out: dict[str, Any] = {"schedule": PP_SCHEDULES.get(m[1])}
    if stages % pp == 0:
        out["vpp"] = stages // pp
        if out["vpp"] == 1 and out["schedule"] == "interleaved":  # one stage a rank: the looped schedule is 1F1B's
            out["schedule"] = "1f1b"
    if start and start[0] and int(start[0]) % n == 0:
        out["micro_batch"] = int(start[0]) // n
    return out


def _plan(mesh: dict[str, int], start: tuple[str, ...] | None, text: str) -> dict[str, Any]:
    dp = mesh.get("dp", 1) * mesh.get("dp_replicate", 1) * mesh.get("dp_shard", 1) if mesh else None
    fsdp = "Applied FSDP" in text or "Applied HSDP" in text or mesh.get("dp_shard", 1) > 1
    ac = AC.search(text)
    recompute = None if not ac else ("full" if "full" in ac.group(1).lower() else "selective")
    if recompute is None and "Applied FSDP" in text:
        recompute = "none"  # parallelize printed what it applied, and no activation checkpointing
    pp = mesh.get("pp", 1) if mesh else None
    tp = mesh.get("tp", 1) if mesh else None
    set_up = bool(mesh or start)
    return {
        "dp": dp,
        "tp": tp,
        "pp": pp,
        "cp": mesh.get("cp", 1) if mesh else None,
        "ep": mesh.get("ep", 1) if mesh else None,
        "vpp": 1 if mesh else None,
        "sp": tp > 1 if tp else None,  # torchtitan's TP always shards the norms on the sequence (parallelize.py)
        # FSDP2 reshards after forward (ZeRO-3) unless pipelining, where torchtitan keeps parameters (ZeRO-2)
        "zero": (3 if (pp or 1) == 1 else 2) if fsdp else (0 if mesh else None),
        "recompute": recompute,
        "micro_batch": _micro_batch(start, pp),
        "global_batch": int(start[1]) if start and start[1] else None,
        "seq_len": int(start[3]) if start else None,
        "precision": found[0] if (found := low_precision(text)) else ("bf16" if set_up else None),
        "schedule": "1f1b" if pp == 1 else None,
    } | _pipeline(text, start, pp)


def _assumed(plan: dict[str, Any], mesh: dict[str, int]) -> dict[str, tuple[tuple[Any, ...] | None, str]]:
    """Each plan field filled by torchtitan's default rather than read: the values --plan may give instead (None:
    any; given.fill_plan) and its note, which build.py drops where --plan gives one. FSDP's resharding (ZeRO 2 or 3:
    no line prints fsdp_reshard_after_forward), the precision (no converter line: a 16- or 32-bit run, not fp8),
    the micro-batch without a mesh line."""
    out: dict[str, tuple[tuple[Any, ...] | None, str]] = {}
    if plan["precision"] == "bf16":
        note = "precision: bf16, torchtitan's default mixed precision (no float8, MX or NVFP4 converter line)"
        out["precision"] = (("bf16", "fp16", "fp32"), note)
    if plan["micro_batch"] is not None and not mesh:
        out["micro_batch"] = (None, "micro_batch: torchtitan's local batch size (no device-mesh line says if "
                                    "pipelining splits it)")  # fmt: skip
    if plan["zero"] in (2, 3):
        out["zero"] = ((2, 3), f"zero: {plan['zero']}, FSDP with torchtitan's default fsdp_reshard_after_forward "
                               "(reshards unless pipelining); the log does not print the setting")  # fmt: skip
    return out


def _max_seq_len(model: dict[str, Any] | None, plan: dict[str, Any], notes: list[str]) -> None:
    """The model's max_seq_len, in place: the run's sequence length, else ModelArgs' (said in `notes`)."""
    if model is None:
        return
    model["max_seq_len"] = plan["seq_len"] or model.pop("model_max_seq_len", None)
    if not plan["seq_len"] and model["max_seq_len"]:
        notes.append(f"model.max_seq_len: {model['max_seq_len']}, ModelArgs' (no line states the sequence length)")
    model.pop("model_max_seq_len", None)


def _restarted_otherwise(runs: list[tuple[str, ...]]) -> list[str]:
    """What a later start line (a job restarted into the same log) states otherwise than the first: its local and
    global batch, accumulation steps and sequence length (a restart with the same ones is pooled, each run with its
    own warm-up: log_text.steady_steps)."""
    names = ("local batch", "global batch", "gradient accumulation steps", "sequence length")
    return [
        f"{name} {first}, then {later}"
        for run in runs[1:]
        for name, first, later in zip(names, runs[0], run)
        if first != later
    ]


def read_torchtitan(text: str) -> LogFacts:
    rows = list(clean_lines(text))
    facts = LogFacts(engine="torchtitan", time_basis="tps")
    mesh: dict[str, int] = {}
    model, label, unread = None, None, None
    runs: list[tuple[str, ...]] = []  # each run's start line's batch and sequence length, in order
    device = None
    for number_, rank, line in rows:
        device = device or (device_in(line) if " capacity: " in line else None)  # DEVICE_LINE's words
        if (started := _start(line)) or STARTS_AT.search(line):  # bound either way: the first operand always runs
            facts.starts.append((number_, "start line"))
        if m := METRICS.search(line):
            step, memory = _step(number_, rank, line, m)
            facts.steps.append(replace(step, run=max(len(runs) - 1, 0)))
            facts.memory.extend([memory] if memory else [])
        elif started and (not runs or (facts.steps and facts.steps[-1].run == len(runs) - 1)):
            runs.append(started)  # a start after steps: a job restarted into the same log
        elif found := _mesh(line):
            mesh = found
        elif s := SIZE.search(line):
            label = s.group(1)
        elif a := MODEL_ARGS.search(line):
            if a.group(2) in LLAMA_ARGS and a.group(1).lower().startswith("llama"):
                model = _llama_model(a.group(1), dict(ARG.findall(a.group(3))))
            else:
                unread = f"model: {a.group(1)}'s {a.group(2)} is not read (only Llama's are); give --model"
    facts.memory, facts.notes = _measured(facts.memory)
    clean = "\n".join(line for _, _, line in rows)
    start = _start(clean)
    plan = _plan(mesh, start, clean)
    notes, defaults = [unread] if unread else [], _assumed(plan, mesh)
    facts.steps, said = peak_fallback(clean, facts.steps)  # an MFU against another GPU's peak
    notes += recipe_notes(clean, plan, mesh) + said
    _max_seq_len(model, plan, notes)
    facts.events = events_in(rows)
    facts.config = {
        "conflicts": _restarted_otherwise(runs),
        "plan": plan,
        "gpus": None,
        "model": model if model and model["max_seq_len"] else None,
        "model_missing": [],
        "model_label": label,
        "software": {"compile": True if "with torch.compile" in clean else None},
        "read_from": "set-up lines" if mesh or start else None,
        "device": device,
        "assumed": notes,
        "assumed_notes": {k: note for k, (_, note) in defaults.items()},
        "assumed_fields": {k: values for k, (values, _) in defaults.items()},
    }
    return facts
