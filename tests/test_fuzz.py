"""Issue 13: a fuzz suite over every command, every file the CLI reads and every path it writes.

Each invocation runs `planner.cli.main` in this process and must keep the contract (tests/fuzz_cases.py,
`check`): bad input exits 2 with one `error:` line on stderr naming the offending value or option; a valid
edge case exits 0 with finite numbers only (strict JSON for --json); `launch --dry-run` may exit 1 when a
pre-flight check fails; no traceback, no hang, no temporary file left after a failed write.

Two parts:
- REGRESSIONS: one hand-picked case per defect of the issue (and a few found by this suite), each its own
  test id;
- hypothesis tests that mutate valid command lines (drop, duplicate or replace option values with 0, -1, 2**63,
  1e308, inf, nan, "", abc, 1.5, long and unicode strings, ...) and valid files (delete keys, wrong types,
  null, nested garbage, huge/negative/non-finite numbers, deep nesting, non-mapping top level, raw garbage).
  Each runs its examples to the end and reports every failing symptom once (with an example), instead of
  stopping at the first; examples are derandomized, so each run checks the same invocations.

Invocations: len(REGRESSIONS) table cases, plus at least MIN_DISTINCT_SHARE of each hypothesis test's
max_examples distinct invocations (each test asserts its own count); `test_invocation_count` adds them up
and asserts >= 1000 (541 + 1,450 = 1,991 in all, 1,775 guaranteed).
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fuzz_cases import (
    CATALOG_SPECS,
    FIT_SPECS,
    HF_CONFIG,
    LAUNCH_SPECS,
    LONG_NAME,
    LONG_VALUE,
    PLAN_COMMAND_SPECS,
    PLAN_DOC,
    RAW_JSON,
    RAW_YAML,
    SEARCH_SPECS,
    Ledger,
    Outcome,
    Raw,
    Spec,
    Workspace,
    alias_bomb,
    argv_names,
    base_runs,
    catalog_doc,
    check,
    deep_yaml_map,
    dump,
    fingerprint,
    fuzz_settings,
    invoke,
    mutated,
    mutated_argv,
    names_of,
    profile_docs,
    safe_launch,
    warm_imports,
)
from hypothesis import assume, given
from hypothesis import strategies as st

MIN_DISTINCT_SHARE = 0.85  # each hypothesis test asserts at least this share of max_examples distinct invocations


# ==== the regression table ==================================================================================
@dataclass(frozen=True)
class Case:
    """One invocation: argv (@W = the workspace of read-only inputs; relative paths land in a fresh cwd),
    files written into the workspace first, the exit codes allowed, words the error line must use (one of),
    folders (cwd-relative) that must be absent or empty afterwards, and an extra check of the outcome."""

    id: str
    argv: tuple[str, ...]
    files: tuple[tuple[str, Any], ...] = ()
    codes: tuple[int, ...] = (2,)
    names: tuple[str, ...] = ()
    empty: tuple[str, ...] = ()
    extra: Callable[[Outcome], list[str]] | None = field(default=None, compare=False)


CASES: list[Case] = []


def keywords(case_name: str) -> list[str]:
    """The words of a case name an error line may use to name the offending key ("peak-flops-0": peak, flops)."""
    return [w for w in case_name.split("-") if len(w) >= 3 or w in ("id", "tp", "pp", "dp")]


def case(id: str, *argv: str, **kw: Any) -> None:
    CASES.append(Case(id, tuple(argv), **kw))


@functools.cache
def _runs() -> list[dict[str, Any]]:
    return base_runs()


def runs_with(change: Callable[[dict[str, Any]], Any]) -> list[dict[str, Any]]:
    """The base runs with the first run changed in place by `change`."""
    runs = copy.deepcopy(_runs())
    change(runs[0])
    return runs


def setter(*path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        node = doc
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value

    return change


def deleter(*path: str) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        node = doc
        for k in path[:-1]:
            node = node[k]
        del node[path[-1]]

    return change


def changed(doc: Any, change: Callable[[Any], Any]) -> Any:
    doc = copy.deepcopy(doc)
    change(doc)
    return doc


# ---- output paths under a regular file, in /proc, at / -----------------------------------------------------
# Not "/": run as root, writing into / succeeds (and is right to); /proc refuses even root.
BAD_OUT = {"under-file": "@W/file/x", "proc": "/proc/x"}
EMIT_ARGS = {
    "torchrun": ("--model", "tiny"),
    "slurm": ("--model", "tiny"),
    "k8s": ("--model", "tiny", "--image", "img:1"),
    "megatron": ("--model", "tiny"),
    "torchtitan": ("--model", "llama3-8b"),
    "deepspeed": ("--model", "tiny"),
}
for where, p in BAD_OUT.items():
    file_p = p if where == "root" else p + ".yaml"
    case(
        f"write-search-save-{where}", "search", "-m", "tiny", "--gpus", "2", "--save", file_p, names=(file_p, "--save")
    )
    case(
        f"write-calibrate-o-{where}",
        "calibrate",
        "@W/runs.yaml",
        "--hardware",
        "h100-sxm",
        "-o",
        file_p,
        "--params",
        "compute,overhead_s",
        names=(file_p, "-o", "--output"),
    )
    svg = p if where == "root" else p + ".svg"
    case(f"write-search-plot-{where}", "search", "-m", "tiny", "--gpus", "2", "--plot", svg, names=(svg, "--plot"))
    case(
        f"write-estimate-timeline-{where}",
        "estimate",
        "-m",
        "tiny",
        "--gpus",
        "2",
        "--pp",
        "2",
        "--timeline",
        svg,
        names=(svg, "--timeline"),
    )
    for target, extra in EMIT_ARGS.items():
        case(f"write-emit-{target}-{where}", "launch", *extra, "--emit", target, "--out", p, names=(p, "--out"))
for where, p in (("under-file", "@W/file"), ("proc", "/proc/eng")):
    case(
        f"write-calibrate-engine-out-{where}",
        "calibrate",
        "@W/runs.yaml",
        "--hardware",
        "h100-sxm",
        "-o",
        "fit.yaml",
        "--engine-out",
        p,
        "--params",
        "compute,overhead_s",
        names=(p, "--engine-out"),
    )
case(
    "write-launch-profile-out-under-file",
    "launch",
    "--model",
    "tiny",
    "--dry-run",
    "--profile-out",
    "@W/file/x.json",
    codes=(0, 1, 2),
    names=("@W/file", "--profile-out"),
)
case(
    "write-search-save-long-name",
    "search",
    "-m",
    "tiny",
    "--gpus",
    "2",
    "--save",
    f"{LONG_NAME}.yaml",
    names=(LONG_NAME[:40], "--save"),
)
case(
    "write-calibrate-o-long-name",
    "calibrate",
    "@W/runs.yaml",
    "--hardware",
    "h100-sxm",
    "-o",
    f"{LONG_NAME}.yaml",
    "--params",
    "compute,overhead_s",
    names=(LONG_NAME[:40], "-o"),
)
case(
    "write-emit-long-name",
    "launch",
    "--model",
    "tiny",
    "--emit",
    "torchrun",
    "--out",
    LONG_NAME,
    names=(LONG_NAME[:40], "--out"),
)
case(
    "write-search-plot-long-name",
    "search",
    "-m",
    "tiny",
    "--gpus",
    "2",
    "--plot",
    f"{LONG_NAME}.svg",
    names=(LONG_NAME[:40], "--plot"),
)
case("write-search-save-into-dir", "search", "-m", "tiny", "--gpus", "2", "--save", "@W/dir", names=("dir", "--save"))
# a runs file's misspelt field, and an id given twice (counted twice in every median)
case("runs-memory-kind-unknown", "validate", "@W/runs.yaml",
     files=(("runs.yaml", runs_with(setter("measured", "peak_memory_kind", value="nvidia-smi"))),),
     names=("peak_memory_kind",))  # fmt: skip
case("runs-peak-memory-in-gib", "validate", "@W/runs.yaml",  # GiB typed into a bytes field: a 26-byte peak (review)
     files=(("runs.yaml", runs_with(setter("measured", "peak_memory_bytes", value=26.25))),),
     names=("peak_memory_bytes", "26.25", "bytes"))  # fmt: skip
case("runs-unknown-field", "validate", "@W/runs.yaml", files=(("runs.yaml", runs_with(setter("mesured", value={}))),),
     names=("mesured",))  # fmt: skip
case("runs-unknown-measured-field", "validate", "@W/runs.yaml",
     files=(("runs.yaml", runs_with(setter("measured", "tokens_per_sec_per_gpu", value=1000.0))),),
     names=("tokens_per_sec_per_gpu", "tokens_per_s_per_gpu"))  # fmt: skip
case(
    "runs-id-twice", "validate", "@W/runs.yaml", files=(("runs.yaml", _runs() + _runs()[:1]),), names=("given 2 times",)
)
# a key given twice: PyYAML kept the last without a word
case("yaml-duplicate-key", "estimate", "--plan", "@W/dup.yaml", files=(("dup.yaml", b"plan:\n  tp: 2\n  tp: 4\n"),),
     names=("'tp' given twice",))  # fmt: skip
# the audit's messages: each names the value and what is valid
case("plan-file-is-a-folder", "estimate", "--plan", "@W/dir", names=("is a folder",))
case("runs-file-is-a-folder", "validate", "@W/dir", names=("is a folder",))
case("runs-file-a-list-of-names", "validate", "@W/runs.yaml", files=(("runs.yaml", b"- a\n- b\n"),),
     names=("got text as run #0",))  # fmt: skip
# a stray dash: an empty item (it was a TypeError traceback: review)
case("runs-file-an-empty-item", "validate", "@W/runs.yaml", files=(("runs.yaml", b"- id: a\n  model: x\n-\n"),),
     names=("got an empty item as run #1",))  # fmt: skip
case("calibrate-input-is-a-folder", "calibrate", "@W/dir", names=("a folder",))
case("model-folder-without-config", "models", "show", "@W/dir", names=("without a config.json",))
case("list-empty-item-zero", "search", "-m", "tiny", "--gpus", "2", "--zero", "1,,3", names=("--zero", "empty item"))
case("list-empty-item-gpus", "scale", "-m", "tiny", "--gpus", "2,,4", "--tokens", "1e9", names=("--gpus", "empty"))
case("gpus-range-empty", "search", "-m", "tiny", "--gpus", "", names=("GPU count",))
case(
    "explain-zero-above-3",
    "search",
    "-m",
    "tiny",
    "--gpus",
    "2",
    "--explain",
    "zero=9",
    names=("less than or equal to 3",),
)
case(
    "calibrate-o-json",
    "calibrate",
    "@W/runs.yaml",
    "--hardware",
    "h100-sxm",
    "-o",
    "out.json",
    names=("out.json", ".yaml"),
)
case("offload-module-unknown", "memory", "-m", "tiny", "--gpus", "2", "--offload-modules", "foo",
     "--activation-offload", "0.5", names=("'foo'",),
     extra=lambda o: ["a pydantic fragment"] * ("Tuple" in o.err))  # fmt: skip
# both outputs or neither: a plot that cannot be written leaves no plan file (the audit's case)
case("write-search-save-then-bad-plot", "search", "-m", "tiny", "--gpus", "2", "--save", "out/best.yaml", "--plot",
     "@W/file/x.svg", names=("x.svg", "--plot"), empty=("out",))  # fmt: skip
for option in ("--save", "--plot"):
    case(f"write-search-empty-{option[2:]}", "search", "-m", "tiny", "--gpus", "2", option, "", names=(option,))
case("write-calibrate-empty-o", "calibrate", "@W/runs.yaml", "--hardware", "h100-sxm", "-o", "", names=("-o",))
case("write-calibrate-empty-engine-out", "calibrate", "@W/runs.yaml", "--engine-out", "", names=("--engine-out",))
case("write-estimate-empty-timeline", "estimate", "-m", "tiny", "--gpus", "2", "--timeline", "", names=("--timeline",))

# ---- runs files (validate and calibrate) -------------------------------------------------------------------
RID = "megatron-readme-h100-1.7b"
RUNS_VARIANTS: dict[str, Any] = {
    "model-is-a-name": runs_with(setter("model", value="llama3-8b")),
    "model-is-a-number": runs_with(setter("model", value=5)),
    "model-is-null": runs_with(setter("model", value=None)),
    "plan-is-a-string": runs_with(setter("plan", value="abc")),
    "plan-is-a-list": runs_with(setter("plan", value=[1, 2])),
    "plan-is-null": runs_with(setter("plan", value=None)),
    "measured-is-a-string": runs_with(setter("measured", value="fast")),
    "measured-is-a-list": runs_with(setter("measured", value=[1])),
    "measured-non-numeric": runs_with(setter("measured", "tokens_per_s_per_gpu", value="abc")),
    "measured-step-is-a-list": runs_with(setter("measured", "step_s", value=[0.5])),
    "plan-tp-non-numeric": runs_with(setter("plan", "tp", value="abc")),
    "plan-tp-null": runs_with(setter("plan", "tp", value=None)),
    "missing-id": runs_with(deleter("id")),
    "missing-model": runs_with(deleter("model")),
    "missing-hardware": runs_with(deleter("hardware")),
    "missing-plan": runs_with(deleter("plan")),
    "missing-measured": runs_with(deleter("measured")),
    "inline-model-negative-hidden": runs_with(setter("model", "hidden_size", value=-4)),
    "inline-model-missing-layers": runs_with(deleter("model", "num_layers")),
    "inline-model-unknown-field": runs_with(setter("model", "bogus", value=1)),
    "inline-model-hidden-4e200": runs_with(setter("model", "hidden_size", value=4e200)),
    "step-nan": runs_with(setter("measured", "step_s", value=math.nan)),
    "step-zero": runs_with(setter("measured", "step_s", value=0)),
    "step-negative": runs_with(setter("measured", "step_s", value=-1.0)),
    "step-inf": runs_with(setter("measured", "step_s", value=math.inf)),
    "tokens-nan": runs_with(setter("measured", "tokens_per_s_per_gpu", value=math.nan)),
    "tokens-zero": runs_with(setter("measured", "tokens_per_s_per_gpu", value=0)),
    "tokens-negative": runs_with(setter("measured", "tokens_per_s_per_gpu", value=-5.0)),
    "tokens-inf": runs_with(setter("measured", "tokens_per_s_per_gpu", value=math.inf)),
    "tokens-minus-inf": runs_with(setter("measured", "tokens_per_s_per_gpu", value=-math.inf)),
    "peak-memory-nan": runs_with(setter("measured", "peak_memory_bytes", value=math.nan)),
    "peak-memory-inf": runs_with(setter("measured", "peak_memory_bytes", value=math.inf)),
    "mfu-nan": runs_with(setter("measured", "mfu", value=math.nan)),
    "gpus-per-node-string": runs_with(setter("gpus_per_node", value="x")),
    "gpus-per-node-zero": runs_with(setter("gpus_per_node", value=0)),
    "gpus-string": runs_with(setter("gpus", value="x")),
    "hardware-number": runs_with(setter("hardware", value=5)),
    "hardware-unknown": runs_with(setter("hardware", value="zzz")),
    "id-is-a-list": runs_with(setter("id", value=[1])),
    "software-engine-unknown": runs_with(setter("software", "engine", value="zzz")),
    "software-is-a-string": runs_with(setter("software", value="x")),
    "top-level-mapping": {"runs": _runs()},
    "top-level-number": Raw("5\n"),
    "empty-list": [],
    "list-of-strings": ["a", "b"],
}
for name, doc in RUNS_VARIANTS.items():
    # Either verdict is allowed (the run skipped with exit 0, or the file refused with exit 2); the numbers must be
    # finite and the message one line that names the run, the file or the key.
    words = ("runs.yaml", RID, *keywords(name))
    case(
        f"runs-validate-{name}",
        "validate",
        "@W/runs.yaml",
        "--json",
        files=(("runs.yaml", doc),),
        codes=(0, 2),
        names=words,
    )
    case(
        f"runs-validate-text-{name}", "validate", "@W/runs.yaml", files=(("runs.yaml", doc),), codes=(0, 2), names=words
    )
    case(
        f"runs-calibrate-{name}",
        "calibrate",
        "@W/runs.yaml",
        "--hardware",
        "h100-sxm",
        "-o",
        "fit.yaml",
        "--params",
        "compute,overhead_s",
        "--json",
        files=(("runs.yaml", doc),),
        codes=(0, 2),
        names=words,
    )

# ---- launch profile JSONs (calibrate) ----------------------------------------------------------------------
PROFILE_VARIANTS = {
    "median-nan": setter("median_step_s", value=math.nan),
    "median-zero": setter("median_step_s", value=0),
    "median-negative": setter("median_step_s", value=-1),
    "median-string": setter("median_step_s", value="abc"),
    "missing-median": deleter("median_step_s"),
    "plan-is-a-string": setter("plan", value="abc"),
    "model-unknown-name": setter("model", value="zzz"),
    "model-is-a-number": setter("model", value=5),
    "step-rows-not-mappings": setter("step_times_s", value=[1, 2]),
}
for name, change in PROFILE_VARIANTS.items():
    case(
        f"profile-calibrate-{name}",
        "calibrate",
        "@W/p0.json",
        "@W/p1.json",
        "@W/p2.json",
        "@W/p3.json",
        "--hardware",
        "cpu",
        "-o",
        "cpu.yaml",
        "--params",
        "compute,overhead_s",
        "--json",
        files=(("p0.json", changed(profile_docs()[0], change)),),
        codes=(0, 2),
        names=("p0.json", *keywords(name)),
    )

# ---- symlink loops, names over 255 characters, 5,000-deep nesting as inputs --------------------------------
READERS: dict[str, tuple[str, ...]] = {
    "model": ("memory", "-m", "{F}", "--gpus", "1"),
    "hardware": ("memory", "-m", "tiny", "--gpus", "1", "--hardware", "{F}"),
    "engine": ("memory", "-m", "tiny", "--gpus", "1", "--engine", "{F}"),
    "plan": ("estimate", "-m", "tiny", "--plan", "{F}"),
    "launch-plan": ("launch", "--plan", "{F}", "--dry-run"),
    "launch-model": ("launch", "--model", "{F}", "--dry-run"),
    "launch-hardware": ("launch", "--model", "tiny", "--hardware", "{F}", "--dry-run"),
    "validate-runs": ("validate", "{F}"),
    "validate-hardware": ("validate", "@W/runs.yaml", "--hardware", "{F}"),
    "calibrate-runs": ("calibrate", "{F}", "--hardware", "cpu", "-o", "x.yaml"),
    "calibrate-hardware": ("calibrate", "@W/runs.yaml", "--hardware", "{F}", "-o", "x.yaml"),
    "models-show": ("models", "show", "{F}"),
    "hardware-show": ("hardware", "show", "{F}"),
    "engines-show": ("engines", "show", "{F}"),
}


def reader(kind: str, path: str) -> tuple[str, ...]:
    return tuple(a.replace("{F}", path) for a in READERS[kind])


for kind in READERS:
    case(f"input-symlink-loop-{kind}", *reader(kind, "@W/loop1"), names=("loop1",))
    case(f"input-long-name-{kind}", *reader(kind, f"@W/{LONG_NAME}.yaml"), names=(LONG_NAME[:40],))
    case(f"input-directory-{kind}", *reader(kind, "@W/dir"), names=("dir",))
for kind in ("model", "hardware", "engine", "plan", "launch-plan", "validate-runs", "calibrate-runs", "models-show"):
    case(f"input-deep-yaml-{kind}", *reader(kind, "@W/deep.yaml"), names=("deep.yaml",))
    case(
        f"input-deep-mapping-{kind}",
        *reader(kind, "@W/deepmap.yaml"),
        files=(("deepmap.yaml", deep_yaml_map()),),
        names=("deepmap.yaml",),
    )
case(
    "input-symlink-loop-calibrate-json",
    "calibrate",
    "@W/loop.json",
    "--hardware",
    "cpu",
    "-o",
    "x.yaml",
    files=(("loop.json", "symlink-loop"),),
    names=("loop.json",),
)
case(
    "input-symlink-loop-hf-config",
    "memory",
    "-m",
    "@W/loop.json",
    "--gpus",
    "1",
    files=(("loop.json", "symlink-loop"),),
    names=("loop.json",),
)
case(
    "input-long-name-calibrate-json",
    "calibrate",
    f"@W/{LONG_NAME}.json",
    "--hardware",
    "cpu",
    "-o",
    "x.yaml",
    names=(LONG_NAME[:40],),
)
case("input-long-name-hf-config", "memory", "-m", f"@W/{LONG_NAME}.json", "--gpus", "1", names=(LONG_NAME[:40],))
case("input-deep-json-hf-config", "memory", "-m", "@W/deep.json", "--gpus", "1", names=("deep.json",))
case(
    "input-deep-json-calibrate", "calibrate", "@W/deep.json", "--hardware", "cpu", "-o", "x.yaml", names=("deep.json",)
)
case(
    "input-alias-bomb-model",
    "memory",
    "-m",
    "@W/bomb.yaml",
    "--gpus",
    "1",
    files=(("bomb.yaml", alias_bomb()),),
    names=("bomb.yaml",),
)
case("input-alias-bomb-runs", "validate", "@W/bomb.yaml", files=(("bomb.yaml", alias_bomb()),), names=("bomb.yaml",))
case(
    "input-recursive-alias-model",
    "memory",
    "-m",
    "@W/rec.yaml",
    "--gpus",
    "1",
    files=(("rec.yaml", Raw("name: &x [*x]\nnum_layers: 2\n")),),
    names=("rec.yaml", "name"),
)

# ---- plan files --------------------------------------------------------------------------------------------
PLAN_VARIANTS: dict[str, Any] = {
    "plan-null": Raw("plan: null\n"),
    "plan-5": Raw("plan: 5\n"),
    "vpp-abc": Raw("vpp: abc\n"),
    "nested-vpp-abc": changed(PLAN_DOC, setter("plan", "vpp", value="abc")),
    "plan-list": changed(PLAN_DOC, setter("plan", value=[1, 2])),
    "gpus-string": changed(PLAN_DOC, setter("gpus", value="x")),
    "gpus-negative": changed(PLAN_DOC, setter("gpus", value=-1)),
    "tp-2-63": changed(PLAN_DOC, setter("plan", "tp", value=2**63)),
    "seq-len-inf": changed(PLAN_DOC, setter("plan", "seq_len", value=math.inf)),
    "training-string": changed(PLAN_DOC, setter("training", value="x")),
    "model-number": changed(PLAN_DOC, setter("model", value=5)),
    "top-level-list": [PLAN_DOC],
}
PLAN_READERS = {
    "memory": ("memory", "-m", "tiny", "--plan", "@W/p.yaml"),
    "estimate": ("estimate", "-m", "tiny", "--plan", "@W/p.yaml", "--json"),
    "launch-dry-run": ("launch", "--model", "tiny", "--plan", "@W/p.yaml", "--dry-run"),
    "launch-emit": ("launch", "--model", "tiny", "--plan", "@W/p.yaml", "--emit", "torchrun", "--out", "outdir"),
}
for name, doc in PLAN_VARIANTS.items():
    words = ("p.yaml", *keywords(name))
    for reader_name, argv in PLAN_READERS.items():
        empty = ("outdir",) if reader_name == "launch-emit" else ()
        case(f"planfile-{name}-{reader_name}", *argv, files=(("p.yaml", doc),), names=words, empty=empty)

# ---- option values -----------------------------------------------------------------------------------------
case("opt-estimate-tokens-inf", "estimate", "-m", "tiny", "--gpus", "1", "--tokens", "inf", names=("--tokens",))
case("opt-estimate-tokens-nan", "estimate", "-m", "tiny", "--gpus", "1", "--tokens", "nan", names=("--tokens",))
case(
    "opt-estimate-checkpoint-bandwidth-inf",
    "estimate",
    "-m",
    "tiny",
    "--gpus",
    "1",
    "--checkpoint-bandwidth",
    "inf",
    names=("--checkpoint-bandwidth",),
)
case(
    "opt-estimate-mtbf-1e308", "estimate", "-m", "tiny", "--gpus", "1", "--mtbf-hours", "1e308", names=("--mtbf-hours",)
)
case("opt-estimate-mtbf-0", "estimate", "-m", "tiny", "--gpus", "1", "--mtbf-hours", "0", names=("--mtbf-hours",))
for v in ("0", "-1", "nan", "inf", "1e308"):
    case(f"opt-search-mtbf-{v}", "search", "-m", "tiny", "--gpus", "2", "--mtbf-hours", v, names=("--mtbf-hours",))
case(
    "opt-search-checkpoint-bandwidth-inf",
    "search",
    "-m",
    "tiny",
    "--gpus",
    "2",
    "--mtbf-hours",
    "100",
    "--checkpoint-bandwidth",
    "inf",
    names=("--checkpoint-bandwidth",),
)
# issue 22: below any physical MTBF (1 hour) or checkpoint bandwidth (1 MB/s), these ran to a goodput of 0%
for cmd, extra in (("estimate", ("--gpus", "1")), ("search", ("--gpus", "2"))):
    for v in ("1e-300", "0.5"):
        case(f"opt-{cmd}-mtbf-{v}", cmd, "-m", "tiny", *extra, "--mtbf-hours", v, names=("--mtbf-hours",))
    for v in ("1e-300", "1"):
        case(
            f"opt-{cmd}-checkpoint-bandwidth-{v}",
            cmd,
            "-m",
            "tiny",
            *extra,
            "--mtbf-hours",
            "100",
            "--checkpoint-bandwidth",
            v,
            names=("--checkpoint-bandwidth",),
        )
for name, v in (("comma", ","), ("hbm-empty-x", "hbm,,x"), ("blank", " , "), ("empty", "")):
    # issue 22: "," fitted the default set (exit 0) although it names no parameter
    case(
        f"opt-calibrate-params-{name}",
        "calibrate",
        "@W/runs.yaml",
        "--hardware",
        "h100-sxm",
        "-o",
        "x.yaml",
        "--params",
        v,
        names=("--params",),
    )
for v in ("tp=abc", "tp=", "tp", "bogus=1", "tp=1.5"):
    case(f"opt-search-explain-{v}", "search", "-m", "tiny", "--gpus", "2", "--explain", v, names=(v, "--explain"))
for cmd in ("memory", "estimate", "search"):
    case(f"opt-{cmd}-hardware-empty", cmd, "-m", "tiny", "--gpus", "2", "--hardware", "", names=("--hardware",))
    case(f"opt-{cmd}-plan-empty", cmd, "-m", "tiny", "--gpus", "2", "--plan", "", names=("--plan",))
    case(f"opt-{cmd}-engine-empty", cmd, "-m", "tiny", "--gpus", "2", "--engine", "", names=("--engine",))
    case(f"opt-{cmd}-model-empty", cmd, "-m", "", "--gpus", "2", names=("--model", "-m"))
case("opt-launch-hardware-empty", "launch", "--model", "tiny", "--dry-run", "--hardware", "", names=("--hardware",))
case("opt-launch-plan-empty", "launch", "--model", "tiny", "--dry-run", "--plan", "", names=("--plan",))
case("opt-validate-hardware-empty", "validate", "@W/runs.yaml", "--hardware", "", names=("--hardware",))
case(
    "opt-calibrate-hardware-empty",
    "calibrate",
    "@W/runs.yaml",
    "--hardware",
    "",
    "-o",
    "x.yaml",
    names=("--hardware", 'hardware ""'),
)

# ---- hardware and model files with impossible numbers ------------------------------------------------------
H100 = catalog_doc("hardware_profiles", "h100-sxm")
TINY = catalog_doc("model_specs", "tiny")
HW_VARIANTS = {
    "peak-flops-0": (setter("gpu", "peak_flops", "bf16", value=0), (2,)),
    "peak-flops-inf": (setter("gpu", "peak_flops", "bf16", value=math.inf), (2,)),
    "peak-flops-nan": (setter("gpu", "peak_flops", "bf16", value=math.nan), (2,)),
    "hbm-bytes-0": (setter("gpu", "hbm_bytes", value=0), (2,)),
    "hbm-bytes-inf": (setter("gpu", "hbm_bytes", value=math.inf), (2,)),
    "hbm-bandwidth-0": (setter("gpu", "hbm_bandwidth_bytes_per_s", value=0), (2,)),
    "context-bytes-0": (setter("reserved", "cuda_context_bytes", value=0), (0, 2)),  # no context: valid
    "context-bytes-inf": (setter("reserved", "cuda_context_bytes", value=math.inf), (2,)),
    "context-bytes-1e308": (setter("reserved", "cuda_context_bytes", value=1e308), (0, 2)),
    "gpus-per-node-0": (setter("gpus_per_node", value=0), (2,)),
    "intra-node-bandwidth-inf": (setter("intra_node", "bandwidth_bytes_per_s", value=math.inf), (2,)),
    # issue 22: fp8 peaks the fuzzer found accepted (exit 0, then a run of 1e-10 tokens/s or an MFU of 1e-293)
    "peak-flops-fp8-1": (setter("gpu", "peak_flops", "fp8", value=1.0), (2,)),
    "peak-flops-fp8-true": (setter("gpu", "peak_flops", "fp8", value=True), (2,)),
    "peak-flops-fp8-1e18": (setter("gpu", "peak_flops", "fp8", value=1e18), (2,)),
    "peak-flops-fp8-1e308": (setter("gpu", "peak_flops", "fp8", value=1e308), (2,)),
    "peak-flops-fp8-5e-324": (setter("gpu", "peak_flops", "fp8", value=5e-324), (2,)),
    "peak-flops-fp8-below-bf16": (setter("gpu", "peak_flops", "fp8", value=500e12), (2,)),
    "peak-flops-fp8-above-4x-bf16": (setter("gpu", "peak_flops", "fp8", value=4000e12), (2,)),
    "peak-flops-fp8-string-number": (setter("gpu", "peak_flops", "fp8", value="1979e12"), (0,)),  # as catalogs write
}
for name, (change, codes) in HW_VARIANTS.items():
    doc = changed(H100, change)
    words = ("hw.yaml", *keywords(name))
    for cmd in ("memory", "estimate", "search"):
        case(
            f"hardware-{name}-{cmd}",
            cmd,
            "-m",
            "tiny",
            "--gpus",
            "2",
            "--hardware",
            "@W/hw.yaml",
            "--json",
            files=(("hw.yaml", doc),),
            codes=codes,
            names=words,
        )
MODEL_VARIANTS = {
    "hidden-4e200": setter("hidden_size", value=4e200),
    "layers-1e12": setter("num_layers", value=1e12),
    "layers-10-12": setter("num_layers", value=10**12),
    "vocab-2-63": setter("vocab_size", value=2**63),
    "heads-0": setter("num_attention_heads", value=0),
    "max-seq-len-inf": setter("max_seq_len", value=math.inf),
}
for name, change in MODEL_VARIANTS.items():
    doc = changed(TINY, change)
    doc.pop("params", None)
    words = ("model.yaml", *keywords(name))
    for cmd in ("memory", "estimate", "search"):
        case(
            f"model-{name}-{cmd}",
            cmd,
            "-m",
            "@W/m.yaml",
            "--gpus",
            "2",
            "--json",
            files=(("m.yaml", doc),),
            names=("m.yaml", *keywords(name)),
        )
    case(
        f"model-{name}-launch",
        "launch",
        "--model",
        "@W/m.yaml",
        "--dry-run",
        files=(("m.yaml", doc),),
        names=("m.yaml", *keywords(name)),
    )

# ---- 2**63 and friends (must not hang) ---------------------------------------------------------------------
BIG = str(2**63)
case("big-search-gpus", "search", "-m", "tiny", "--gpus", BIG, names=("--gpus",))
case("big-search-max-vpp", "search", "-m", "tiny", "--gpus", "2", "--max-vpp", BIG, names=("--max-vpp",))
case(
    "big-search-micro-batches",
    "search",
    "-m",
    "tiny",
    "--gpus",
    "2",
    "--micro-batches",
    BIG,
    names=("--micro-batches", BIG),
)
case("big-search-top", "search", "-m", "tiny", "--gpus", "2", "--top", BIG, names=("--top",))
case("big-launch-tp", "launch", "--model", "tiny", "--dry-run", "--tp", BIG, names=("--tp",))
case("big-launch-nproc", "launch", "--model", "tiny", "--dry-run", "--nproc", BIG, names=("--nproc",))
case("big-memory-gpus", "memory", "-m", "tiny", "--gpus", BIG, names=("--gpus",))
case(
    "big-estimate-global-batch",
    "estimate",
    "-m",
    "tiny",
    "--gpus",
    "1",
    "--global-batch",
    BIG,
    names=("--global-batch",),
)
case("big-estimate-seq-len", "estimate", "-m", "tiny", "--gpus", "1", "--seq-len", BIG, names=("--seq-len",))


# ---- launch ------------------------------------------------------------------------------------------------
def dry_run_json_not_ok(o: Outcome) -> list[str]:
    if o.code != 1:
        return []
    try:
        doc = json.loads(o.out)
    except ValueError:
        return ["--json dry run printed no JSON document"]
    return [] if isinstance(doc, dict) and doc.get("ok") is False else ['the dry-run JSON lacks "ok": false']


case("launch-dry-run-failing-check", "launch", "--model", "tiny", "--dry-run", "--tp", "3", codes=(1,))
case(
    "launch-dry-run-failing-check-json",
    "launch",
    "--model",
    "tiny",
    "--dry-run",
    "--tp",
    "3",
    "--json",
    codes=(1,),
    extra=dry_run_json_not_ok,
)
case(
    "launch-dry-run-pp-beyond-layers-json",
    "launch",
    "--model",
    "tiny",
    "--dry-run",
    "--pp",
    "5",
    "--json",
    codes=(1, 2),
    extra=dry_run_json_not_ok,
)
# pp 7 for the 4-layer tiny model: no engine can split 4 layers (+ embedding and loss) over 7 stages (pp 5 can:
# Megatron's --account-for-loss-in-pipeline-split gives a last stage with only the loss).
IMPOSSIBLE = {"tp-3": ("--tp", "3"), "pp-7": ("--pp", "7"), "global-batch-3": ("--dp", "2", "--global-batch", "3")}
for name, flags in IMPOSSIBLE.items():
    for target, extra in EMIT_ARGS.items():
        case(
            f"launch-emit-impossible-{name}-{target}",
            "launch",
            *extra,
            *flags,
            "--emit",
            target,
            "--out",
            "outdir",
            names=(name.split("-")[0], "global_batch", "global-batch"),
            empty=("outdir",),
        )
# issue 22: 256 processes on this machine ran (and orphaned its workers); its dry run said [ok] to every check
BIG_PLAN = ("--model", "llama3-70b", "--dp", "128", "--tp", "2", "--sp", "--zero", "3", "--global-batch", "512")
case("launch-dry-run-256-processes", "launch", *BIG_PLAN, "--seq-len", "8192", "--dry-run", codes=(1,))
case(
    "launch-dry-run-256-processes-json",
    "launch",
    *BIG_PLAN,
    "--seq-len",
    "8192",
    "--dry-run",
    "--json",
    codes=(1,),
    extra=dry_run_json_not_ok,
)


def no_gpus_option(o: Outcome) -> list[str]:
    return ["names --gpus, which launch does not have"] if "--gpus" in o.out + o.err else []


BIG_FILE = changed(PLAN_DOC, lambda d: d.update(gpus=256, plan={**d["plan"], "dp": 128, "tp": 2}))
case(
    "launch-plan-file-with-other-degrees",
    "launch",
    "--plan",
    "@W/big.yaml",
    "--model",
    "tiny",
    "--dp",
    "2",
    "--dry-run",
    files=(("big.yaml", BIG_FILE),),
    codes=(0, 1),
    extra=no_gpus_option,
)
case("launch-rehearse-experts", "launch", "--model", "mixtral-8x7b", "--rehearse", "--dry-run", names=("mixtral",))
case(
    "launch-rehearse-with-emit",
    "launch",
    "--model",
    "tiny",
    "--rehearse",
    "--emit",
    "torchrun",
    "--out",
    "outdir",
    names=("--rehearse",),
    empty=("outdir",),
)
case("valid-launch-rehearse-dry-run", "launch", "--plan", "@W/big.yaml", "--rehearse", "--dry-run", "--json",
     files=(("big.yaml", BIG_FILE),), codes=(0,))  # fmt: skip

LAUNCH_BAD = {
    "nproc-0": ("--nproc", "0"),
    "nproc-minus-1": ("--nproc", "-1"),
    "steps-0": ("--steps", "0"),
    "warmup-minus-1": ("--warmup", "-1"),
    "warmup-not-below-steps": ("--steps", "2", "--warmup", "2"),
    "timeout-s-0": ("--timeout-s", "0"),
    "timeout-s-inf": ("--timeout-s", "inf"),
    "timeout-s-nan": ("--timeout-s", "nan"),
    "layers-0": ("--layers", "0"),
    "hidden-0": ("--hidden", "0"),
}
for name, flags in LAUNCH_BAD.items():
    opt = flags[-2]
    case(f"launch-dry-run-{name}", "launch", "--model", "tiny", "--dry-run", *flags, names=(opt,))
    case(
        f"launch-emit-{name}",
        "launch",
        "--model",
        "tiny",
        "--emit",
        "torchrun",
        "--out",
        "outdir",
        *flags,
        names=(opt,),
        empty=("outdir",),
    )
LAUNCH_HW = {
    "unknown": ("zzz", ("zzz",), ()),
    "plain-file": ("@W/file", ("file",), ()),
    "a-model-yaml": ("@W/model.yaml", ("model.yaml",), ()),
    "deep": ("@W/deep.yaml", ("deep.yaml",), ()),
    "peak-0": ("@W/hw0.yaml", ("hw0.yaml",), (("hw0.yaml", changed(H100, setter("gpu", "peak_flops", value={}))),)),
}
for name, (hw, words, files) in LAUNCH_HW.items():
    case(
        f"launch-dry-run-hardware-{name}",
        "launch",
        "--model",
        "tiny",
        "--dry-run",
        "--hardware",
        hw,
        names=words,
        files=files,
    )
    case(
        f"launch-emit-hardware-{name}",
        "launch",
        "--model",
        "tiny",
        "--emit",
        "torchrun",
        "--out",
        "outdir",
        "--hardware",
        hw,
        names=words,
        files=files,
        empty=("outdir",),
    )


# ---- fp8 where the hardware has none -----------------------------------------------------------------------
def no_fp8_plan(o: Outcome) -> list[str]:
    if o.code != 0:
        return []
    doc = json.loads(o.out)
    bad = [p for p in doc.get("plans", []) if (p.get("plan") or {}).get("precision") == "fp8"]
    problems = [f"{len(bad)} ranked plan(s) use fp8 on {doc.get('hardware')}"] if bad else []
    if not doc.get("plans") and not any("fp8" in k for k in doc.get("rejected", {})):
        problems.append("no plan, and fp8 is not among the rejection reasons")
    return problems


for hw in ("a100-80gb", "v100-32gb", "cpu"):
    for cmd in ("memory", "estimate"):
        case(
            f"fp8-{cmd}-{hw}", cmd, "-m", "tiny", "--gpus", "1", "--precision", "fp8", "--hardware", hw, names=("fp8",)
        )
    case(
        f"fp8-search-{hw}",
        "search",
        "-m",
        "tiny",
        "--gpus",
        "2",
        "--precision",
        "fp8",
        "--hardware",
        hw,
        "--json",
        codes=(0, 2),
        names=("fp8",),
        extra=no_fp8_plan,
    )
    case(
        f"fp8-search-llama-{hw}",
        "search",
        "-m",
        "llama3-8b",
        "--gpus",
        "8",
        "--precision",
        "fp8",
        "--hardware",
        hw,
        "--json",
        codes=(0, 2),
        names=("fp8",),
        extra=no_fp8_plan,
    )
    case(
        f"fp8-launch-dry-run-{hw}",
        "launch",
        "--model",
        "tiny",
        "--precision",
        "fp8",
        "--hardware",
        hw,
        "--dry-run",
        codes=(1, 2),
        names=("fp8",),
    )

# ---- found by this suite: rich markup and newlines in echoed values ----------------------------------------
case("echo-markup-model", "memory", "-m", "[/]", "--gpus", "1", names=("[/]",))
case("echo-markup-model-bold", "memory", "-m", "[bold]x", "--gpus", "1", names=("[bold]x",))
case("echo-markup-recompute", "memory", "-m", "tiny", "--gpus", "1", "--recompute", "[/x]", names=("[/x]",))
case("echo-markup-search-zero", "search", "-m", "tiny", "--gpus", "2", "--zero", "[/]", names=("[/]", "--zero"))
case("echo-markup-explain", "search", "-m", "tiny", "--gpus", "2", "--explain", "tp=[/]", names=("[/]", "--explain"))
case("echo-newline-model", "memory", "-m", "a\nb", "--gpus", "1", names=("a\\nb", "--model"))
case("echo-long-model", "memory", "-m", LONG_VALUE, "--gpus", "1", names=("xxxxxxxx", "--model"))

case(
    "multiline-launch-hidden-max", "launch", "--model", "tiny", "--dry-run", "--hidden", "10000000", names=("--hidden",)
)
case(
    "multiline-launch-emit-hidden-max",
    "launch",
    "--model",
    "tiny",
    "--emit",
    "torchrun",
    "--out",
    "outdir",
    "--hidden",
    "10000000",
    names=("--hidden",),
    empty=("outdir",),
)
case(
    "multiline-calibrate-profile-bad-recompute",
    "calibrate",
    "@W/p0.json",
    "@W/p1.json",
    "@W/p2.json",
    "@W/p3.json",
    "--hardware",
    "cpu",
    "-o",
    "cpu.yaml",
    "--params",
    "compute,overhead_s",
    files=(("p0.json", changed(profile_docs()[0], setter("plan", "recompute", value="sometimes"))),),
    names=("p0.json", "recompute"),
)

# ---- valid edge cases: exit 0, finite numbers --------------------------------------------------------------
case("valid-version", "--version", codes=(0,))
case("valid-models-json", "models", "--json", codes=(0,))
case("valid-hardware-show-json", "hardware", "show", "cpu", "--json", codes=(0,))
case("valid-engines-show", "engines", "show", "megatron", codes=(0,))
case("valid-memory-1m-gpus", "memory", "-m", "llama3-8b", "--gpus", "1048576", "--json", codes=(0,))
case(
    "valid-estimate-max-batch",
    "estimate",
    "-m",
    "llama3-8b",
    "--gpus",
    "8",
    "--global-batch",
    "2147483648",
    "--tokens",
    "1e18",
    "--mtbf-hours",
    "1e10",
    "--json",
    codes=(0,),
)
case(
    "valid-estimate-tiny-checkpoint-bandwidth",
    "estimate",
    "-m",
    "tiny",
    "--gpus",
    "1",
    "--mtbf-hours",
    "1",
    "--checkpoint-bandwidth",
    "1e6",
    "--json",
    codes=(0,),
)
case("valid-search-1m-gpus", "search", "-m", "tiny", "--gpus", "1048576", "--json", codes=(0,))
case(
    "valid-search-goodput",
    "search",
    "-m",
    "tiny",
    "--gpus",
    "4",
    "--objective",
    "goodput",
    "--mtbf-hours",
    "1",
    "--wide",
    codes=(0,),
)
case("valid-hf-config-dir", "estimate", "-m", "@W/hf", "--gpus", "2", "--json", codes=(0,))
case("valid-validate-json", "validate", "@W/runs.yaml", "--json", codes=(0,))
case(
    "valid-calibrate-profiles",
    "calibrate",
    "@W/p0.json",
    "@W/p1.json",
    "@W/p2.json",
    "@W/p3.json",
    "--hardware",
    "cpu",
    "-o",
    "cpu.yaml",
    "--params",
    "compute,overhead_s",
    "--engine-out",
    "engines",
    "--json",
    codes=(0,),
)
case("valid-launch-dry-run-json", "launch", "--model", "tiny", "--dry-run", "--json", codes=(0,))
case("valid-search-save-then-plan", "search", "-m", "tiny", "--gpus", "2", "--save", "sub/dir/best.yaml", codes=(0,))

REGRESSIONS = {c.id: c for c in CASES}
assert len(REGRESSIONS) == len(CASES), "duplicate case ids"


def _write_case_files(ws: Workspace, files: tuple[tuple[str, Any], ...]) -> None:
    for name, doc in files:
        if doc == "symlink-loop":
            (ws.root / name).symlink_to(ws.root / name)
        else:
            ws.write(name, doc)


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    warm_imports()


@pytest.mark.timeout(20)
@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_regression(c: Case, tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws").build()
    _write_case_files(ws, c.files)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    argv = safe_launch(ws.expand(c.argv)) if c.argv[:1] == ("launch",) and "--emit" not in c.argv else ws.expand(c.argv)
    o = invoke(argv, cwd)
    names = [ws.expand([n])[0] for n in c.names] + [n for n in c.names if "@W" not in n]
    problems = check(o, c.codes, names, out_dirs=[cwd, ws.root])
    for d in c.empty:
        folder = cwd / d
        if folder.exists() and any(folder.iterdir()):
            problems.append(f"wrote {sorted(p.name for p in folder.iterdir())} although the command failed")
    if c.extra is not None and o.code not in ("exception", "hung"):
        problems += c.extra(o)
    assert not problems, (
        f"planner {' '.join(a if len(a) < 80 else a[:40] + '…' for a in o.argv)}\n"
        f"exit {o.code}: {'; '.join(problems)}\n{o.head(4)}"
    )


# ==== hypothesis: mutated command lines =====================================================================
def _run_spec(spec: Spec, data: Any, ws: Workspace, ledger: Ledger, cwd: Path) -> None:
    argv, notes, touched = data.draw(mutated_argv(spec), label=spec.label())
    assume(argv)  # `planner` alone prints its usage (exit 2 by click's convention): not a case of this suite
    argv = safe_launch(ws.expand(argv))
    fp = fingerprint(argv, root=ws.root)
    assume(fp not in ledger.seen)  # a repeat is not a new invocation: hypothesis draws another
    cwd.mkdir(parents=True, exist_ok=True)
    o = invoke(argv, cwd)
    codes = (0, 1, 2) if argv[:1] == ["launch"] else (0, 2)
    names = names_of(ws.expand(touched)) + argv_names(ws.expand(touched), skip=0) + argv_names(argv)
    problems = check(o, codes, names, out_dirs=[cwd, ws.root], echoed=ws.expand(touched))
    ledger.record(o, problems, fp, detail=f"[{'; '.join(notes)}]")
    shutil.rmtree(cwd, ignore_errors=True)


def _cli_fuzz(specs: list[Spec], n: int, tmp_path: Path, name: str) -> None:
    ws = Workspace(tmp_path / "ws").build()
    ledger = Ledger(name)
    counter = itertools.count()

    @fuzz_settings(n)
    @given(data=st.data())
    def run(data: Any) -> None:
        spec = data.draw(st.sampled_from(specs), label="command")
        _run_spec(spec, data, ws, ledger, tmp_path / "cases" / str(next(counter)))

    run()
    _conclude(ledger, n)


def _conclude(ledger: Ledger, n: int) -> None:
    COUNTS[ledger.name] = len(ledger.seen)
    print(ledger.report())
    if len(ledger.seen) < MIN_DISTINCT_SHARE * n:
        pytest.fail(f"{ledger.name}: only {len(ledger.seen)} distinct invocations of {n}", pytrace=False)
    if ledger.groups:
        pytest.fail(ledger.report(), pytrace=False)


COUNTS: dict[str, int] = {}
EXAMPLES = {
    "cli-memory-estimate": 250,
    "cli-search": 150,
    "cli-launch": 150,
    "cli-validate-calibrate": 100,
    "cli-catalogs": 80,
    "file-model-yaml": 140,
    "file-hf-config": 80,
    "file-hardware-yaml": 120,
    "file-engine-yaml": 80,
    "file-plan": 120,
    "file-runs": 120,
    "file-launch-profile": 60,
}


@pytest.mark.timeout(300)
def test_fuzz_cli_memory_estimate(tmp_path: Path) -> None:
    _cli_fuzz(PLAN_COMMAND_SPECS, EXAMPLES["cli-memory-estimate"], tmp_path, "cli-memory-estimate")


@pytest.mark.timeout(300)
def test_fuzz_cli_search(tmp_path: Path) -> None:
    _cli_fuzz(SEARCH_SPECS, EXAMPLES["cli-search"], tmp_path, "cli-search")


@pytest.mark.timeout(300)
def test_fuzz_cli_launch(tmp_path: Path) -> None:
    _cli_fuzz(LAUNCH_SPECS, EXAMPLES["cli-launch"], tmp_path, "cli-launch")


@pytest.mark.timeout(300)
def test_fuzz_cli_validate_calibrate(tmp_path: Path) -> None:
    _cli_fuzz(FIT_SPECS, EXAMPLES["cli-validate-calibrate"], tmp_path, "cli-validate-calibrate")


@pytest.mark.timeout(300)
def test_fuzz_cli_catalogs(tmp_path: Path) -> None:
    _cli_fuzz(CATALOG_SPECS, EXAMPLES["cli-catalogs"], tmp_path, "cli-catalogs")


# ==== hypothesis: mutated files =============================================================================
@dataclass(frozen=True)
class FileTarget:
    """A kind of input file: its valid base documents, its name, the raw garbage to try, and the commands that
    read it (argv with {F} for the file; relative outputs land in the case's cwd)."""

    bases: tuple[Any, ...]
    name: str
    raw: tuple[Raw, ...]
    readers: tuple[tuple[str, ...], ...]
    ids: tuple[str, ...] = ()  # values an error may name besides keys (the run ids of a runs file)


MODEL_BASES = tuple(catalog_doc("model_specs", m) for m in ("tiny", "gpt3-125m", "mixtral-8x7b"))
FILE_TARGETS = {
    "file-model-yaml": FileTarget(
        MODEL_BASES,
        "model.yaml",
        tuple(RAW_YAML),
        (
            ("memory", "-m", "{F}", "--gpus", "2", "--json"),
            ("estimate", "-m", "{F}", "--gpus", "2", "--json"),
            ("estimate", "-m", "{F}", "--gpus", "4", "--pp", "2"),
            ("search", "-m", "{F}", "--gpus", "2", "--top", "3", "--json"),
            ("launch", "--model", "{F}", "--dry-run", "--json"),
            ("launch", "--model", "{F}", "--emit", "torchrun", "--out", "outdir"),
            ("models", "show", "{F}", "--json"),
        ),
    ),
    "file-hf-config": FileTarget(
        (
            HF_CONFIG,
            {**HF_CONFIG, "model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 64},
            {**HF_CONFIG, "model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2},
        ),
        "config.json",
        tuple(RAW_JSON),
        (
            ("memory", "-m", "{F}", "--gpus", "2", "--json"),
            ("estimate", "-m", "{F}", "--gpus", "2", "--json"),
            ("search", "-m", "{F}", "--gpus", "2", "--top", "3", "--json"),
            ("models", "show", "{F}"),
            ("estimate", "-m", "{DIR}", "--gpus", "1"),
        ),
    ),
    "file-hardware-yaml": FileTarget(
        (H100, catalog_doc("hardware_profiles", "cpu"), catalog_doc("hardware_profiles", "a100-80gb")),
        "hw.yaml",
        tuple(RAW_YAML),
        (
            ("memory", "-m", "tiny", "--gpus", "2", "--hardware", "{F}", "--json"),
            ("estimate", "-m", "llama3-8b", "--gpus", "8", "--hardware", "{F}", "--json"),
            ("search", "-m", "tiny", "--gpus", "2", "--hardware", "{F}", "--top", "3", "--json"),
            ("launch", "--model", "tiny", "--hardware", "{F}", "--dry-run", "--json"),
            ("launch", "--model", "tiny", "--hardware", "{F}", "--emit", "slurm", "--out", "outdir"),
            ("hardware", "show", "{F}", "--json"),
            ("validate", "@W/runs.yaml", "--hardware", "{F}", "--json"),
            (
                "calibrate",
                "@W/p0.json",
                "@W/p1.json",
                "@W/p2.json",
                "@W/p3.json",
                "--hardware",
                "{F}",
                "-o",
                "fit.yaml",
                "--params",
                "compute,overhead_s",
                "--json",
            ),
        ),
    ),
    "file-engine-yaml": FileTarget(
        tuple(catalog_doc("engine_profiles", e) for e in ("megatron", "deepspeed", "torchtitan")),
        "eng.yaml",
        tuple(RAW_YAML),
        (
            ("memory", "-m", "tiny", "--gpus", "2", "--engine", "{F}", "--json"),
            ("estimate", "-m", "tiny", "--gpus", "4", "--zero", "3", "--engine", "{F}", "--json"),
            ("search", "-m", "tiny", "--gpus", "2", "--engine", "{F}", "--top", "3", "--json"),
            ("launch", "--model", "tiny", "--engine", "{F}", "--dry-run", "--json"),
            ("engines", "show", "{F}"),
            ("validate", "@W/runs.yaml", "--engine", "{F}", "--json"),
        ),
    ),
    "file-plan": FileTarget(
        (PLAN_DOC, PLAN_DOC["plan"], {**PLAN_DOC, "training": {"optimizer": "adam", "compile": True}}),
        "plan.yaml",
        tuple(RAW_YAML),
        (
            ("memory", "--plan", "{F}", "--json"),
            ("estimate", "--plan", "{F}", "-m", "tiny", "--json"),
            ("estimate", "--plan", "{F}", "-m", "tiny", "--gpus", "4"),
            ("launch", "--plan", "{F}", "--model", "tiny", "--dry-run", "--json"),
            ("launch", "--plan", "{F}", "--model", "tiny", "--emit", "torchrun", "--out", "outdir"),
        ),
    ),
    "file-runs": FileTarget(
        (base_runs(),),
        "runs.yaml",
        tuple(RAW_YAML),
        (
            ("validate", "{F}", "--json"),
            ("validate", "{F}"),
            ("calibrate", "{F}", "-o", "fit.yaml", "--params", "compute,overhead_s", "--json"),
            ("calibrate", "{F}", "--hardware", "h100-sxm", "-o", "outdir", "--params", "compute,overhead_s"),
        ),
        ids=tuple(r["id"] for r in base_runs()),
    ),
    "file-launch-profile": FileTarget(
        tuple(profile_docs()),
        "p.json",
        tuple(RAW_JSON),
        (
            (
                "calibrate",
                "{F}",
                "@W/p1.json",
                "@W/p2.json",
                "@W/p3.json",
                "--hardware",
                "cpu",
                "-o",
                "fit.yaml",
                "--params",
                "compute,overhead_s",
                "--json",
            ),
            (
                "calibrate",
                "{F}",
                "@W/p1.json",
                "@W/p2.json",
                "@W/runs.yaml",
                "--hardware",
                "cpu",
                "-o",
                "fit.yaml",
                "--params",
                "compute,overhead_s",
            ),
        ),
    ),
}


def _file_fuzz(name: str, tmp_path: Path) -> None:
    target = FILE_TARGETS[name]
    n = EXAMPLES[name]
    ws = Workspace(tmp_path / "ws").build()
    ledger = Ledger(name)
    counter = itertools.count()

    @fuzz_settings(n)
    @given(data=st.data())
    def run(data: Any) -> None:
        base = data.draw(st.sampled_from(target.bases), label="base")
        doc, notes, touched = data.draw(mutated(base, target.raw), label="file")
        argv_t = data.draw(st.sampled_from(target.readers), label="command")
        data_bytes = dump(target.name, doc)
        fp = fingerprint(argv_t, {target.name: data_bytes})
        assume(fp not in ledger.seen)  # a repeat is not a new invocation: hypothesis draws another
        cwd = tmp_path / "cases" / str(next(counter))
        folder = cwd / "in" / "hf" if target.name == "config.json" else cwd / "in"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / target.name
        path.write_bytes(data_bytes)
        argv = ws.expand(a.replace("{F}", str(path)).replace("{DIR}", str(folder)) for a in argv_t)
        argv = safe_launch(argv)
        o = invoke(argv, cwd)
        codes = (0, 1, 2) if argv[:1] == ["launch"] else (0, 2)
        names = [str(path), target.name, *target.ids, *names_of(touched), *argv_names(argv)]
        problems = check(o, codes, names, out_dirs=[cwd], echoed=[str(path), *map(str, touched)])
        if "outdir" in argv and o.code != 0 and (cwd / "outdir").exists() and any((cwd / "outdir").iterdir()):
            problems.append("--emit failed but wrote files")
        ledger.record(o, problems, fp, detail=f"[{'; '.join(notes)}]")
        shutil.rmtree(cwd, ignore_errors=True)

    run()
    _conclude(ledger, n)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", sorted(FILE_TARGETS))
def test_fuzz_file(name: str, tmp_path: Path) -> None:
    _file_fuzz(name, tmp_path)


# ==== the count =============================================================================================
def test_invocation_count() -> None:
    """At least 1,000 distinct invocations: the table, plus what each hypothesis test asserts it ran (its
    MIN_DISTINCT_SHARE of max_examples). Run alone in one process, the counts the tests recorded are checked too."""
    guaranteed = len(REGRESSIONS) + sum(math.ceil(MIN_DISTINCT_SHARE * n) for n in EXAMPLES.values())
    assert set(EXAMPLES) == {
        "cli-" + s for s in ("memory-estimate", "search", "launch", "validate-calibrate", "catalogs")
    } | set(FILE_TARGETS)
    assert guaranteed >= 1000, guaranteed
    if len(COUNTS) == len(EXAMPLES):  # every hypothesis test ran in this process (no xdist split)
        assert len(REGRESSIONS) + sum(COUNTS.values()) >= 1000
