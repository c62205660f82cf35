"""Helpers of the fuzz suite (tests/test_fuzz.py): run the CLI in-process, check the error contract, build
valid base files, and the hypothesis strategies that mutate command lines and files.

The contract (issue 13): bad input exits 2 with one `error:` line on stderr that names the offending value or
option; a valid edge case exits 0 and prints only finite numbers (strict JSON with --json); `launch --dry-run`
may exit 1 when a pre-flight check fails; nothing escapes as a traceback, nothing hangs, and a failed write
leaves no temporary file behind.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import io
import json
import math
import os
import re
import signal
import threading
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import yaml
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from planner.cli import main
from planner.io.catalog import catalog_root, load_yaml

REPO = Path(__file__).resolve().parents[1]
INVOCATION_LIMIT_S = 15.0  # one invocation; a hang is reported as a failure of that invocation
SLOW_S = 30.0  # a hang-like finding only: an invocation takes well under 1 s alone, but CI shares 2 cores among workers
LONG_NAME = "n" * 300  # a file name over NAME_MAX (255)
LONG_VALUE = "x" * 5000
DEEP = 5000  # nesting depth of the "deep" YAML/JSON inputs


class Hung(BaseException):
    """Raised by the per-invocation alarm; a BaseException so `except Exception` in the product cannot eat it."""


class RealLaunch(BaseException):
    """Raised if a fuzzed `launch` ever got as far as starting torchrun (the suite never runs a real launch)."""


# ---- running the CLI ------------------------------------------------------------------------------------------
@dataclass
class Outcome:
    argv: list[str]
    code: int | str  # the exit code, or "exception" / "hung"
    out: str
    err: str
    seconds: float
    exc: str = ""  # the traceback of an exception that escaped main()
    wrote_root: list[str] = field(default_factory=list)  # files the call left in / (removed again)

    def head(self, n: int = 3) -> str:
        """The first lines of what went wrong: the exception's last lines, else stderr, else stdout."""
        if self.exc:
            lines = [line.strip()[:300] for line in self.exc.strip().splitlines() if line.strip()]
            return " | ".join(lines[-n:])
        text = self.err.strip() or self.out.strip()
        return " | ".join(line[:300] for line in text.splitlines()[:n])[:600]


def _refuse_launch(*args: Any, **kwargs: Any) -> int:
    raise RealLaunch("a fuzz case reached run_torchrun")


@contextlib.contextmanager
def _alarm(seconds: float):
    """SIGALRM after `seconds` raises Hung; an outer timer (pytest-timeout's) is put back afterwards."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def _fire(signum: int, frame: Any) -> None:
        raise Hung(f"no exit after {seconds:g} s")

    old_handler = signal.signal(signal.SIGALRM, _fire)
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    start = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        if old_delay > 0:
            signal.setitimer(signal.ITIMER_REAL, max(old_delay - (time.monotonic() - start), 0.001), old_interval)


def _root_entries() -> set[str]:
    try:
        return set(os.listdir("/"))
    except OSError:
        return set()


def invoke(argv: Sequence[str], cwd: Path | None = None, limit_s: float = INVOCATION_LIMIT_S) -> Outcome:
    """Run `planner ARGV` in this process (in `cwd`), capturing stdout and stderr; never raises."""
    argv = [str(a) for a in argv]
    out, err = io.StringIO(), io.StringIO()
    code: int | str = 0
    exc = ""
    old_cwd = os.getcwd()
    old_showwarning = warnings.showwarning
    root_before = _root_entries()
    launch_mod = None
    if "launch" in argv:
        import planner.cli.launch_here as launch_mod  # torch loads only for launch cases; it starts the workers

        saved_run = launch_mod.run_torchrun
        launch_mod.run_torchrun = _refuse_launch
    start = time.monotonic()
    wall = time.time()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _alarm(limit_s):
            try:
                main(list(argv))
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except Hung:
        code, exc = "hung", f"Hung: no exit after {limit_s:g} s"
    except BaseException as e:  # anything but SystemExit escaping main() is the finding
        if isinstance(e, KeyboardInterrupt):
            raise
        code, exc = "exception", traceback.format_exc()
    finally:
        os.chdir(old_cwd)
        warnings.showwarning = old_showwarning
        if launch_mod is not None:
            launch_mod.run_torchrun = saved_run
    seconds = time.monotonic() - start
    wrote_root = []
    for name in sorted(_root_entries() - root_before):  # e.g. `--out /` as root: clean up what the call wrote
        p = Path("/") / name
        with contextlib.suppress(OSError):
            if p.is_file() and not p.is_symlink() and p.stat().st_mtime >= wall - 1:
                p.unlink()
                wrote_root.append(str(p))
    return Outcome(argv, code, out.getvalue(), err.getvalue(), seconds, exc, wrote_root)


def warm_imports() -> None:
    """Import what some commands load on first use (torch for launch, scipy for calibrate, matplotlib for
    --plot), so that no single case is charged with it."""
    import contextlib as _c

    for module in ("planner.cli.launch", "planner.launch.preflight", "scipy.optimize", "matplotlib.pyplot"):
        with _c.suppress(ImportError):
            __import__(module)


# ---- the contract ---------------------------------------------------------------------------------------------
_NONFINITE = re.compile(r"(?<![A-Za-z0-9_])[-+]?(nan|inf|infinity)(?![A-Za-z0-9_])", re.IGNORECASE)


def _strict_json(text: str) -> Any:
    def bad(name: str) -> Any:
        raise ValueError(f"non-finite JSON constant {name}")

    return json.loads(text, parse_constant=bad)


def nonfinite_in(doc: Any, where: str = "$") -> str | None:
    """The path of the first float in a parsed JSON document that is not finite (1e400 parses to inf)."""
    if isinstance(doc, float) and not math.isfinite(doc):
        return where
    if isinstance(doc, dict):
        for k, v in doc.items():
            found = nonfinite_in(v, f"{where}.{k}")
            if found:
                return found
    if isinstance(doc, list):
        for i, v in enumerate(doc):
            found = nonfinite_in(v, f"{where}[{i}]")
            if found:
                return found
    return None


def _scrub(text: str, echoed: Iterable[str]) -> str:
    """Text with the user's own strings (argv values, paths) taken out, so an echoed 'nan' is not a finding."""
    for s in sorted({e for e in echoed if e and len(e) >= 2}, key=len, reverse=True):
        text = text.replace(s, " ")
    return text


def json_command(argv: Sequence[str]) -> bool:
    return "--json" in argv


def check(
    o: Outcome,
    codes: Iterable[int] = (0, 2),
    names: Sequence[str] = (),
    out_dirs: Sequence[Path] = (),
    echoed: Iterable[str] = (),
) -> list[str]:
    """What breaks the contract in one outcome: [] when it holds. `names`: the error line must contain one of
    them (case-insensitive); `out_dirs`: folders that must hold no temporary file afterwards."""
    codes = set(codes)
    problems: list[str] = []
    if o.code == "hung":
        return [f"hung (no exit within {INVOCATION_LIMIT_S:g} s)"]
    if o.code == "exception":
        last = [line for line in o.exc.strip().splitlines() if line.strip()][-1]
        return [f"exception escaped: {last[:200]}"]
    if "Traceback" in o.out or "Traceback" in o.err:
        problems.append("a traceback was printed")
    if o.seconds > SLOW_S:
        problems.append(f"slow: {o.seconds:.1f} s")
    if o.wrote_root:
        problems.append(f"wrote into /: {', '.join(o.wrote_root)}")
    if o.code not in codes:
        problems.append(f"exit {o.code}, expected {'/'.join(str(c) for c in sorted(codes))}")
    if o.code == 2:
        lines = o.err.strip("\n").split("\n") if o.err.strip() else []
        if len(lines) != 1:
            problems.append(f"exit 2 with {len(lines)} lines on stderr (expected one error: line)")
        if not lines or not lines[-1].startswith("error:"):
            problems.append("exit 2 without a line starting with 'error:'")
        if names and lines and not names_any(" ".join(lines), names):
            problems.append("the error does not name the offending value or option")
    elif o.code in (0, 1):
        echoed = [*echoed, *o.argv]
        if json_command(o.argv) and o.out.strip():
            try:
                doc = _strict_json(o.out)
            except ValueError as e:
                problems.append(f"--json output is not strict JSON ({str(e)[:80]})")
            else:
                where = nonfinite_in(doc)
                if where:
                    problems.append(f"non-finite number in JSON at {where}")
                dry = "launch" in o.argv and "--dry-run" in o.argv and isinstance(doc, dict) and "ok" in doc
                if dry and bool(doc["ok"]) != (o.code == 0):
                    problems.append(f'dry-run JSON says "ok": {doc["ok"]} with exit {o.code}')
        else:
            m = _NONFINITE.search(_scrub(o.out, echoed))
            if m:
                problems.append(f"'{m.group(0)}' in the output")
        m = _NONFINITE.search(_scrub(o.err, echoed))
        if m:
            problems.append(f"'{m.group(0)}' on stderr")
    for d in out_dirs:
        if d.is_dir():
            tmp = [p.name for p in d.rglob("*") if ".tmp" in p.name or p.name.startswith(".planner-write-test")]
            if tmp:
                problems.append(f"temporary files left: {tmp[:3]}")
    return problems


def _alnum(text: str) -> str:
    return re.sub(r"[^0-9a-z]+", "", text.lower())


def names_any(line: str, names: Iterable[str]) -> bool:
    """Whether an error line names one of `names`: as written, or with quoting and escaping set aside."""
    low, squeezed = line.lower(), _alnum(line)
    for n in names:
        if n and n.lower() in low:
            return True
        a = _alnum(n)
        if len(a) >= 2 and a in squeezed:
            return True
    return False


def argv_names(argv: Sequence[str], skip: int = 1) -> list[str]:
    """What an error may call the user's input: the option names (--micro-batch, micro-batch, micro_batch, -o),
    the values (two characters or more), a path's file name."""
    found: list[str] = ["missing argument", "missing option"]  # click names what is missing
    for a in argv[skip:]:
        found.append(f"({a})")
        if a.startswith("-") and len(a) > 1:
            opt = a.split("=", 1)[0]
            found += [opt, opt.lstrip("-"), opt.lstrip("-").replace("-", "_"), a[:2]]
        if len(a.strip()) >= 2:
            found += names_of([a])
    return found


def names_of(values: Iterable[Any]) -> list[str]:
    """Strings an error line may use to name a value: itself, repr'd, a prefix of a long one, a path's name."""
    found: list[str] = []
    for v in values:
        if v is None:
            found.append("null")
            found.append("none")
            continue
        s = str(v)
        if not s.strip():
            found += [f"({s})", repr(s)]  # click: Got unexpected extra argument(s) ( ); cli: blank argument(s) ''"
            continue
        found += [s[:40], repr(v)[:40].strip("'\"")]
        if isinstance(v, str):
            found.append(Path(s).name[:40] if "/" in s else s[:40])
            found.append(s.encode("unicode_escape").decode()[:40])
        if isinstance(v, float):
            found += [f"{v:g}", repr(v)]
    return [f for f in found if f and f.strip()]


# ---- failure bookkeeping ----------------------------------------------------------------------------------------
@dataclass
class Ledger:
    """Distinct invocations of one test and the contract failures among them, grouped by symptom."""

    name: str
    seen: set[str] = field(default_factory=set)
    groups: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    codes: Counter[str] = field(default_factory=Counter)  # exit codes seen (a fuzz that only ever exits 2 is weak)

    def record(self, o: Outcome, problems: list[str], fingerprint: str, detail: str = "") -> None:
        self.seen.add(fingerprint)
        self.codes[str(o.code)] += 1
        if not problems:
            return
        cmd = next((a for a in o.argv if not a.startswith("-")), "?")
        symptom = problems[0]
        if symptom.startswith("exception escaped"):
            symptom = symptom.split(":", 1)[1].strip()
            symptom = "exception: " + re.sub(r"'[^']*'|\d+", "…", symptom)[:120]
        elif "name the offending" in symptom:
            symptom = f"{symptom}: {re.sub(r'[0-9]+', '…', o.err.strip()[:70])}"
        key = f"{cmd}: exit {o.code}: {symptom}"
        shown = " ".join(a if len(a) < 80 else a[:40] + f"…({len(a)} chars)" for a in o.argv)
        self.groups.setdefault(key, []).append((f"{shown}{' ' + detail if detail else ''}", o.head()))

    def report(self) -> str:
        failing = sum(len(v) for v in self.groups.values())
        lines = [f"{self.name}: {failing} failing of {len(self.seen)} invocations (exit codes: {dict(self.codes)})"]
        for key, examples in sorted(self.groups.items(), key=lambda kv: -len(kv[1])):
            argv, head = examples[0]
            lines.append(f"  [{len(examples)}x] {key}\n      e.g. planner {argv}\n      -> {head[:400]}")
        return "\n".join(lines)


def fingerprint(argv: Sequence[str], files: dict[str, bytes] | None = None, root: Path | None = None) -> str:
    h = hashlib.sha1()
    for a in argv:
        h.update((a.replace(str(root), "@W") if root else a).encode("utf-8", "surrogatepass") + b"\0")
    for name, data in sorted((files or {}).items()):
        h.update(name.encode() + b"\0" + data + b"\0")
    return h.hexdigest()


def fuzz_settings(n: int) -> settings:
    return settings(
        max_examples=n,
        deadline=None,
        derandomize=True,  # the same cases every run: the product fixes can be checked against them
        database=None,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )


# ---- valid base inputs ------------------------------------------------------------------------------------------
def catalog_doc(kind: str, name: str) -> Any:
    return copy.deepcopy(_catalog_doc(kind, name))


@functools.cache
def _catalog_doc(kind: str, name: str) -> Any:
    return load_yaml(catalog_root() / kind / f"{name}.yaml")


def base_runs() -> list[dict[str, Any]]:
    """Five published H100 Megatron runs of tests/data/calibration_runs.yaml, without the prose fields."""
    return copy.deepcopy(_base_runs())


@functools.cache
def _base_runs() -> list[dict[str, Any]]:
    runs = load_yaml(REPO / "tests" / "data" / "calibration_runs.yaml")
    picked = [r for r in runs if r["hardware"] == "h100-sxm" and (r.get("software") or {}).get("engine") == "megatron"]
    keep = ("id", "source", "model", "hardware", "gpus", "gpus_per_node", "plan", "software", "measured")
    return [{k: r[k] for k in keep if k in r} for r in picked[:5]]


PLAN_DOC = {
    "model": "tiny",
    "hardware": "h100-sxm",
    "engine": "megatron",
    "gpus": 2,
    "plan": {
        "dp": 2,
        "tp": 1,
        "pp": 1,
        "vpp": 1,
        "cp": 1,
        "ep": 1,
        "sp": False,
        "zero": 1,
        "recompute": "none",
        "micro_batch": 2,
        "global_batch": 8,
        "seq_len": 64,
        "precision": "bf16",
        "schedule": "1f1b",
    },
}

HF_CONFIG = {
    "_name_or_path": "fuzz/tiny-llama",
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 256,
    "max_position_embeddings": 128,
    "rms_norm_eps": 1e-5,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
}


def profile_docs() -> list[dict[str, Any]]:
    """Four `planner launch` profile JSONs of the tiny model on cpu: enough for `calibrate --params compute,...`."""
    spec = catalog_doc("model_specs", "tiny")
    plans = [
        {"micro_batch": 1, "global_batch": 4, "seq_len": 64},
        {"micro_batch": 2, "global_batch": 8, "seq_len": 64},
        {"dp": 2, "micro_batch": 1, "global_batch": 4, "seq_len": 64},
        {"micro_batch": 4, "global_batch": 8, "seq_len": 64, "recompute": "full"},
    ]
    docs = []
    for i, (plan, step) in enumerate(zip(plans, (0.01, 0.02, 0.015, 0.05))):
        docs.append(
            {
                "plan": plan,
                "model": spec if i % 2 else "tiny",
                "hardware": "cpu",
                "median_step_s": step,
                "p25_step_s": step * 0.9,
                "min_step_s": step * 0.8,
                "tokens_per_s": plan["global_batch"] * 64 / step,
                "step_times_s": [{"step": j + 1, "time_s": step * (1 + 0.01 * j), "warmup": j < 2} for j in range(6)],
            }
        )
    return docs


def dump(name: str, doc: Any) -> bytes:
    """A document as the bytes of a file: raw str/bytes as they are, .json as JSON (NaN allowed), else YAML."""
    if isinstance(doc, bytes):
        return doc
    if isinstance(doc, Raw):
        return doc.text.encode("utf-8", "surrogatepass") if isinstance(doc.text, str) else doc.text
    if name.endswith(".json"):
        return json.dumps(doc, indent=1).encode()
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=10**6).encode()


@dataclass(frozen=True)
class Raw:
    """File text written as it is (not a document to serialize)."""

    text: str | bytes
    label: str = ""


def nested(depth: int, leaf: Any = 1) -> Any:
    doc: Any = leaf
    for _ in range(depth):
        doc = [doc]
    return doc


def deep_yaml(depth: int = DEEP) -> Raw:
    return Raw("[" * depth + "]" * depth + "\n", f"{depth}-deep YAML")


def deep_yaml_map(depth: int = DEEP) -> Raw:
    return Raw("a: " + "{a: " * depth + "1" + "}" * depth + "\n", f"{depth}-deep YAML mapping")


def deep_json(depth: int = DEEP) -> Raw:
    return Raw("[" * depth + "]" * depth, f"{depth}-deep JSON")


def alias_bomb(levels: int = 6) -> Raw:
    text = "a: &a [x, x, x, x, x, x, x, x, x]\n"
    prev = "a"
    for i in range(1, levels + 1):
        name = chr(ord("a") + i)
        text += f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]\n"
        prev = name
    return Raw(text, f"alias bomb 9^{levels + 1}")


RAW_YAML = [
    Raw("", "empty"),
    Raw("null\n", "null"),
    Raw("~\n", "~"),
    Raw("[]\n", "empty list"),
    Raw("{}\n", "empty mapping"),
    Raw("5\n", "a number"),
    Raw(".nan\n", ".nan"),
    Raw("abc\n", "a string"),
    Raw("{\n", "unclosed {"),
    Raw("a: [1, 2\n", "unclosed ["),
    Raw(":\n:\n", "colons"),
    Raw("- - -\n", "nested dashes"),
    Raw("\t a: 1\n", "tab indent"),
    Raw("a: 1\n---\nb: 2\n", "two documents"),
    Raw("!!python/object/apply:os.system ['true']\n", "python tag"),
    Raw("a: !!binary AAAA\n", "binary tag"),
    Raw("a: &x [*x]\n", "recursive alias"),
    Raw(b"\xff\xfe\x00\x01garbage", "not UTF-8"),
    Raw("\x00\x01\x02", "control characters"),
    Raw("%YAML 9.9\n---\na: 1\n", "YAML directive"),
    Raw("a: " + "x" * 200_000 + "\n", "a 200 kB line"),
    deep_yaml(200),
    alias_bomb(5),
]

RAW_JSON = [
    Raw("", "empty"),
    Raw("null", "null"),
    Raw("[]", "empty list"),
    Raw("5", "a number"),
    Raw("NaN", "NaN"),
    Raw('"abc"', "a string"),
    Raw("{", "unclosed {"),
    Raw('{"a": }', "missing value"),
    Raw('{"a": 1} {"b": 2}', "two documents"),
    Raw(b"\xff\xfe\x00\x01garbage", "not UTF-8"),
    Raw("\ufeff{}", "BOM"),
    deep_json(200),
]


# ---- values -----------------------------------------------------------------------------------------------------
# What replaces a value in a file: wrong types, null, nested garbage, huge, negative, non-finite numbers.
FILE_VALUES: list[Any] = [
    None,
    "",
    "abc",
    "1.5",
    "1e9",
    "8B",
    " ",
    True,
    False,
    0,
    -1,
    1,
    2,
    3,
    7,
    0.5,
    -0.5,
    1.5,
    1e-320,
    1e308,
    -1e308,
    4e200,
    2**31,
    2**63,
    2**64,
    10**30,
    10**400,
    float("nan"),
    float("inf"),
    float("-inf"),
    [],
    {},
    [1, 2],
    {"a": {"b": [None, {"c": float("nan")}]}},
    nested(60),
    LONG_VALUE,
    "α∞😀",
    "[/]",
    "a\nb",
]

# What replaces an option's value on the command line.
BAD_ARGS = [
    "0",
    "-1",
    str(2**63),
    str(2**64),
    "1e308",
    "-1e308",
    "inf",
    "-inf",
    "nan",
    "NaN",
    "Infinity",
    "",
    " ",
    "abc",
    "1.5",
    "0x10",
    "1_0",
    "٣",
    LONG_VALUE,
    "α∞😀",
    "[/]",
    "[bold]x",
    "a\nb",
    "-",
    "--",
    "none",
    "null",
]
INTS = ["1", "2", "3", "4", "8", "16", "1048576", "1048577", "2147483648", "2147483649"]
FLOATS = ["1", "0.001", "1e6", "1e12", "1e15", "1e18", "1e19", "1e-308", "5e-324", "1e10", "1e11"]
MODELS = ["tiny", "llama3-8b", "gpt3-125m", "mixtral-8x7b", "Tiny", "llama3", "tiny.yaml"]
HARDWARE = ["h100-sxm", "a100-80gb", "v100-32gb", "cpu", "mi300x", "b200", "H100-SXM", "h100"]
ENGINES = ["megatron", "deepspeed", "torchtitan", "planner", "llm-foundry", "megatron-deepspeed", "Megatron", "mega"]
# Input paths: @NAME is a file of the workspace (see Workspace), @W the workspace itself.
IN_PATHS = [
    "@W/file",
    "@W/dir",
    "@W/loop1",
    "@W/missing.yaml",
    "@W/missing.json",
    f"@W/{LONG_NAME}.yaml",
    f"@W/{LONG_NAME}.json",
    "@W/file/x.yaml",
    "/dev/null",
    "/proc/self/status",
    "/",
    ".",
    "@W/deep.yaml",
    "@W/deep.json",
]
# Output paths, relative to the case's working directory unless absolute.
OUT_FILES = [
    "out.yaml",
    "sub/dir/out.yaml",
    "@W/file/x.yaml",
    "/proc/x.yaml",
    ".",
    "..",
    "dir/",
    f"{LONG_NAME}.yaml",
    f"{LONG_NAME}/x.yaml",
    "out",
    "α∞😀.yaml",
]
# Not "/": this suite runs as root in some places, where writing into / succeeds (and is right to).
OUT_DIRS = ["outdir", "sub/dir", "@W/file", "@W/file/x", "/proc/x", ".", LONG_NAME, f"{LONG_NAME}/x", "α∞😀"]


@dataclass
class Workspace:
    """The read-only inputs a test's cases share (files named by @NAME in argv), under `root`."""

    root: Path

    FILES: ClassVar[dict[str, Any]] = {
        "plan.yaml": PLAN_DOC,
        "hf/config.json": HF_CONFIG,
        "model.yaml": "catalog:model_specs/tiny",
        "hw.yaml": "catalog:hardware_profiles/h100-sxm",
        "eng.yaml": "catalog:engine_profiles/megatron",
    }

    def build(self) -> Workspace:
        for name, data in _workspace_files().items():
            path = self.root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        (self.root / "dir").mkdir(exist_ok=True)
        for a, b in (("loop1", "loop2"), ("loop2", "loop1")):
            if not (self.root / a).is_symlink():
                (self.root / a).symlink_to(self.root / b)
        return self

    def write(self, name: str, doc: Any) -> Path:
        """Write (or replace) one file of the workspace."""
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(dump(name, doc))
        return path

    def expand(self, argv: Iterable[str]) -> list[str]:
        return [a.replace("@W", str(self.root)) for a in argv]


@functools.cache
def _workspace_files() -> dict[str, bytes]:
    files: dict[str, Any] = {"file": Raw("hi\n"), "deep.yaml": deep_yaml(), "deep.json": deep_json()}
    for name, doc in Workspace.FILES.items():
        if isinstance(doc, str) and doc.startswith("catalog:"):
            kind, stem = doc.removeprefix("catalog:").split("/")
            doc = catalog_doc(kind, stem)
        files[name] = doc
    files["runs.yaml"] = base_runs()
    for i, doc in enumerate(profile_docs()):
        files[f"p{i}.json"] = doc
    return {name: dump(name, doc) for name, doc in files.items()}


# ---- mutating documents -----------------------------------------------------------------------------------------
def _children(node: Any) -> list[Any]:
    if isinstance(node, dict):
        return list(node)
    if isinstance(node, list):
        return list(range(len(node)))
    return []


@st.composite
def doc_path(draw: Callable[..., Any], doc: Any) -> tuple[Any, ...]:
    """A path into a document: top level rarely, mostly one to four levels down."""
    depth = draw(st.sampled_from([0, 1, 1, 2, 2, 2, 3, 3, 4]))
    path: list[Any] = []
    node = doc
    for _ in range(depth):
        kids = _children(node)
        if not kids:
            break
        key = kids[draw(st.integers(0, len(kids) - 1))]
        path.append(key)
        node = node[key]
    return tuple(path)


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    _get(doc, path[:-1])[path[-1]] = value
    return doc


OPS = ("replace", "replace", "replace", "delete", "add_key", "wrap", "scale", "stringify")


def _scaled(old: float, factor: float) -> float:
    """old × factor, an int already scaled past what a float holds taken as infinity (a value the files must refuse
    alike), not an OverflowError of the fuzzer's own."""
    try:
        return old * factor
    except OverflowError:
        if math.isnan(factor) or factor == 0:
            return factor * 0.0 if factor == 0 else math.nan
        return math.inf if (old > 0) == (factor > 0) else -math.inf


@st.composite
def mutated(draw: Callable[..., Any], base: Any, raw: Sequence[Raw] = RAW_YAML) -> tuple[Any, list[str], list[Any]]:
    """A mutation of `base`: (document or Raw, a description of each change, the keys and values it touched)."""
    if draw(st.integers(0, 19)) == 0:
        r = draw(st.sampled_from(list(raw)))
        return r, [f"raw file: {r.label}"], []
    doc = copy.deepcopy(base)
    notes: list[str] = []
    touched: list[Any] = []
    for _ in range(draw(st.integers(1, 3))):
        path = draw(doc_path(doc))
        op = draw(st.sampled_from(OPS))
        value = copy.deepcopy(draw(st.sampled_from(FILE_VALUES)))
        where = ".".join(str(p) for p in path) or "(top level)"
        touched += [p for p in path if isinstance(p, str)]
        if op == "delete" and path:
            parent = _get(doc, path[:-1])
            del parent[path[-1]]
            notes.append(f"del {where}")
        elif op == "add_key" and isinstance(_get(doc, path), dict):
            key = draw(st.sampled_from(["bogus", "", "NaN", "1", "name ", "x" * 300]))
            _get(doc, path)[key] = value
            touched.append(key)
            notes.append(f"{where}[{key!r}] = {value!r:.60}")
        elif op == "wrap":
            doc = _set(doc, path, [_get(doc, path)])
            notes.append(f"{where} wrapped in a list")
        elif op == "scale" and isinstance(_get(doc, path), (int, float)) and not isinstance(_get(doc, path), bool):
            factor = draw(st.sampled_from([-1, 0, 1e300, 1e-300, 10**12, float("nan")]))
            old = _get(doc, path)
            scaled = _scaled(old, factor)
            doc = _set(doc, path, scaled)
            touched.append(scaled)
            notes.append(f"{where} *= {factor!r}")
        elif op == "stringify" and path:
            doc = _set(doc, path, str(_get(doc, path)))
            notes.append(f"{where} as a string")
        else:
            doc = _set(doc, path, value)
            touched.append(value)
            notes.append(f"{where} = {value!r:.60}")
        if not isinstance(doc, (dict, list)):
            break
    return doc, notes, touched


# ---- mutating command lines -------------------------------------------------------------------------------------
OUT_PLOTS = ["plot.svg", "plot.png", "plot.pdf", "plot", "sub/p.svg", "@W/file/p.svg", "/proc/p.svg", "/", "dir/"]
OUT_PLOTS += [f"{LONG_NAME}.svg"]
EXPLAIN = ["tp=2", "pp=2", "zero=3", "tp=abc", "tp=", "=2", "tp", "bogus=1", "tp=1e308", "tp=2=3", "precision=fp8"]
FLAGS = ["--sp", "--no-sp", "--no-flash", "--tp-overlap", "--no-tp-overlap", "--compile", "--no-compile", "--json"]
# The recipe options (issue 20 item 5): engine settings, which launch takes for --emit (a run here refuses them).
RECIPE_FLAGS = ["--precision-aware-optimizer", "--no-precision-aware-optimizer", "--fp8-param-gather", "--cuda-graphs"]
FRACTIONS = ["0", "0.5", "1", "1.5", "-0.1", "nan", "inf", "x"]
RECIPE_OPTIONS: dict[str, list[str]] = {
    "--recompute-modules": ["core_attn", "core_attn,moe_act", "layernorm,mla_up_proj,mlp", "moe", "bogus", ",", ""],
    "--activation-offload": FRACTIONS,
    "--optimizer-offload": FRACTIONS,
    "--optimizer-moment-dtype": ["fp32", "bf16", "fp8"],
    **{f: [] for f in RECIPE_FLAGS},
}
MODEL_ARGS = [*MODELS, *IN_PATHS, "@W/model.yaml", "@W/hf/config.json", "@W/hf", "@W/runs.yaml", "@W/hw.yaml"]
HARDWARE_ARGS = [*HARDWARE, *IN_PATHS, "@W/hw.yaml", "@W/model.yaml"]
ENGINE_ARGS = [*ENGINES, *IN_PATHS, "@W/eng.yaml", "@W/hw.yaml"]
PLAN_ARGS = [*IN_PATHS, "@W/plan.yaml", "@W/runs.yaml", "@W/model.yaml"]
RUNS_ARGS = [*IN_PATHS, "@W/runs.yaml", "@W/plan.yaml", "@W/p0.json", "@W/hf/config.json"]
DEGREES = {f"--{d}": INTS for d in ("tp", "pp", "dp", "cp", "ep", "vpp")}
PLAN_OPTIONS: dict[str, list[str]] = {
    **DEGREES,
    "--zero": ["0", "1", "2", "3", "4"],
    "--recompute": ["none", "selective", "full", "FULL"],
    "--micro-batch": INTS,
    "--global-batch": INTS,
    "--seq-len": [*INTS, "64", "8192", "67108864", "67108865"],
    "--precision": [
        "fp32",
        "bf16",
        "fp16",
        "fp8",
        "fp4",
        "BF16",
        "fp8-delayed",
        "fp8-current",
        "fp8-blockwise",
        "mxfp8",
        "nvfp4",
    ],
    "--schedule": ["gpipe", "1f1b", "interleaved", "zb"],
    "--optimizer": ["adamw", "adam", "sgd", "lion"],
    "--selective-policy": ["op", "attention", "x"],
    "--hardware": HARDWARE_ARGS,
    "--engine": ENGINE_ARGS,
    "--plan": PLAN_ARGS,
    **{f: [] for f in FLAGS},
    **RECIPE_OPTIONS,
}
RISK_OPTIONS = {
    "--mtbf-hours": [*FLOATS, "0.001", "1e10"],
    "--mtbf-per": ["gpu", "node", "rack"],
    "--checkpoint-bandwidth": FLOATS,
    "--restart-minutes": [*FLOATS, "0", "1440", "1441", "-1"],
}


@dataclass(frozen=True)
class Spec:
    """A valid command line (prefix + items, an item being an option with its value, a flag or a positional)
    and the options a mutation may add or change, each with values worth trying besides BAD_ARGS."""

    prefix: tuple[str, ...]
    items: tuple[tuple[str, ...], ...]
    options: dict[str, list[str]]
    positional: list[str] = field(default_factory=list)  # values for a positional item

    def label(self) -> str:
        return " ".join(self.prefix)


def plan_spec(cmd: str, *items: tuple[str, ...]) -> Spec:
    options = {"--model": MODEL_ARGS, "-m": MODEL_ARGS, "--gpus": INTS, **PLAN_OPTIONS}
    if cmd == "memory":
        options["--per-stage"] = []
    if cmd == "estimate":
        options |= {"--tokens": [*FLOATS, "1e18", "1e19"], "--timeline": OUT_PLOTS, **RISK_OPTIONS}
    return Spec((cmd,), items, options)


CLUSTER_ARGS = [
    "dgx-superpod-h100",
    "rail-fat-tree-2to1",
    "gb200-nvl72-superpod",
    "no-such-pod",
    "@W/model.yaml",
    *IN_PATHS,
]
GPU_RANGES = ["2..8", "8..2", "1..3", "a..b", "..", "8..", "2..2147483649"]
SEARCH_OPTIONS: dict[str, list[str]] = {
    **PLAN_OPTIONS,
    "--model": MODEL_ARGS,
    "-m": MODEL_ARGS,
    "--gpus": INTS,
    "--zero": ["0", "1", "0,1", "1,3", "0,1,2,3", "4", "1,,3", ",", "-1", "3,3"],
    "--recompute": ["none", "selective,full", "none,selective,full", "x", ","],
    "--micro-batches": ["1,2", "4", "0", "1,2147483649", str(2**63), "1.5", ","],
    "--schedule": ["1f1b", "interleaved", "gpipe", "1f1b,gpipe", "zb", ","],
    "--engine": [*ENGINE_ARGS, "all", "megatron,deepspeed", "megatron,,x", ","],
    **{f"--max-{d}": INTS for d in ("tp", "pp", "cp", "ep")},
    "--max-vpp": ["1", "4", "64", "65"],
    "--objective": ["throughput", "memory", "goodput", "speed"],
    "--top": ["1", "10", "10000", "10001"],
    **RISK_OPTIONS,
    "--save": OUT_FILES,
    "--plot": OUT_PLOTS,
    "--explain": EXPLAIN,
    "--why": EXPLAIN,
    "--exhaustive": [],
    "--wide": [],
    "--recipe-options": [],
    # issue 23: clusters, placement, the GPU-count range, --global-batch auto and advice
    "--cluster": CLUSTER_ARGS,
    "--allow-cross-node-tp": [],
    "--no-advice": [],
    "--max-tokens-per-step": INTS,
}
SEARCH_OPTIONS["--gpus"] = [*INTS, *GPU_RANGES]
SEARCH_OPTIONS["--global-batch"] = [*INTS, "auto", "AUTO", "most", " "]
SCALE_OPTIONS: dict[str, list[str]] = {
    "--model": MODEL_ARGS,
    "-m": MODEL_ARGS,
    "--gpus": ["2,4", "4", "2,,4", "0,2", "a", *GPU_RANGES],
    "--tokens": FLOATS,
    "--global-batch": ["8", "auto", "0", "x"],
    "--max-tokens-per-step": INTS,
    "--seq-len": ["64", "1", "67108865"],
    "--engine": [*ENGINE_ARGS, "all"],
    "--hardware": HARDWARE_ARGS,
    "--cluster": CLUSTER_ARGS,
    "--allow-cross-node-tp": [],
    "--plot": OUT_PLOTS,
    "--json": [],
    **RISK_OPTIONS,
    "--power-limit": ["700", "1", "100000", "nan"],
}
EMIT_TARGETS = ["torchrun", "slurm", "k8s", "megatron", "torchtitan", "deepspeed"]
LAUNCH_OPTIONS: dict[str, list[str]] = {
    **{k: v for k, v in PLAN_OPTIONS.items() if k not in ("--json",)},
    "--model": MODEL_ARGS,
    "--sp": [],
    "--no-sp": [],
    "--json": [],
    "--nproc": INTS,
    "--nnodes": INTS,
    "--steps": ["1", "2", "8", "1000000", "1000001"],
    "--warmup": ["0", "1", "7", "8"],
    "--layers": ["1", "2", "100000", "100001"],
    "--hidden": ["1", "64", "10000000", "10000001"],
    "--seed": ["0", "4294967295", "4294967296"],
    "--checkpoint-dir": OUT_DIRS,
    "--checkpoint-every": ["0", "1", "1000001"],
    "--max-restarts": ["0", "1000", "1001"],
    "--image": ["img:1", "registry.example/planner:1"],
    "--profile-out": ["prof.json", *OUT_FILES],
    "--timeout-s": [*FLOATS, "86400", "86401"],
    "--emit": [*EMIT_TARGETS, "bogus", "TORCHRUN"],
    "--out": OUT_DIRS,
    "--force": [],
    "--no-force": [],
    "--resume": [],
    "--no-resume": [],
    "--dry-run": [],
    "--rehearse": [],
}
PLAN_COMMAND_SPECS = [
    plan_spec("memory", ("-m", "tiny"), ("--gpus", "2"), ("--json",)),
    plan_spec("memory", ("-m", "llama3-8b"), ("--gpus", "8"), ("--tp", "2"), ("--pp", "2"), ("--per-stage",)),
    plan_spec("estimate", ("-m", "tiny"), ("--gpus", "2"), ("--json",)),
    plan_spec("estimate", ("-m", "llama3-8b"), ("--gpus", "8"), ("--zero", "1"), ("--tokens", "1e12"), ("--json",)),
    plan_spec(
        "estimate", ("--model", "tiny"), ("--gpus", "4"), ("--mtbf-hours", "1000"), ("--checkpoint-bandwidth", "1e9")
    ),
    plan_spec("memory", ("--plan", "@W/plan.yaml"), ("--json",)),
    plan_spec("estimate", ("--plan", "@W/plan.yaml"), ("--gpus", "2")),
]
SEARCH_SPECS = [
    Spec(("search",), (("-m", "tiny"), ("--gpus", "2"), ("--json",)), SEARCH_OPTIONS),
    Spec(("scale",), (("-m", "tiny"), ("--gpus", "2,4"), ("--tokens", "1e9"), ("--json",)), SCALE_OPTIONS),
    Spec(("search",), (("-m", "llama3-8b"), ("--gpus", "8"), ("--top", "3"), ("--json",)), SEARCH_OPTIONS),
    Spec(("search",), (("-m", "tiny"), ("--gpus", "4"), ("--save", "best.yaml"), ("--top", "2")), SEARCH_OPTIONS),
    Spec(
        ("search",),
        (("-m", "tiny"), ("--gpus", "2"), ("--mtbf-hours", "5000"), ("--objective", "goodput")),
        SEARCH_OPTIONS,
    ),
]
LAUNCH_SPECS = [
    Spec(("launch",), (("--model", "tiny"), ("--dry-run",)), LAUNCH_OPTIONS),
    Spec(("launch",), (("--model", "tiny"), ("--dp", "2"), ("--dry-run",), ("--json",)), LAUNCH_OPTIONS),
    Spec(("launch",), (("--plan", "@W/plan.yaml"), ("--dry-run",), ("--json",)), LAUNCH_OPTIONS),
    Spec(("launch",), (("--plan", "@W/plan.yaml"), ("--rehearse",), ("--dry-run",)), LAUNCH_OPTIONS),
    *(
        Spec(("launch",), (("--model", "tiny"), ("--emit", t), ("--out", "outdir")), LAUNCH_OPTIONS)
        for t in ("torchrun", "slurm", "megatron", "deepspeed")
    ),
    Spec(
        ("launch",), (("--model", "tiny"), ("--emit", "k8s"), ("--image", "img:1"), ("--out", "outdir")), LAUNCH_OPTIONS
    ),
    Spec(("launch",), (("--model", "llama3-8b"), ("--emit", "torchtitan"), ("--out", "outdir")), LAUNCH_OPTIONS),
]
FIT_OPTIONS: dict[str, list[str]] = {
    "--hardware": HARDWARE_ARGS,
    "--engine": ENGINE_ARGS,
    "--json": [],
    "-o": [*OUT_FILES, *OUT_DIRS],
    "--output": [*OUT_FILES, *OUT_DIRS],
    "--engine-out": OUT_DIRS,
    "--params": [
        "compute",
        "overhead_s",
        "compute,overhead_s",
        "matmul_scale",
        "speed",
        ",",
        "compute,compute",
        "hbm,,x",
    ],
}
FIT_SPECS = [
    Spec(
        ("validate",),
        (("@W/runs.yaml",), ("--json",)),
        {k: FIT_OPTIONS[k] for k in ("--hardware", "--engine", "--json")},
        RUNS_ARGS,
    ),
    Spec(
        ("validate",),
        (("@W/runs.yaml",), ("--hardware", "h100-sxm")),
        {k: FIT_OPTIONS[k] for k in ("--hardware", "--engine", "--json")},
        RUNS_ARGS,
    ),
    Spec(
        ("calibrate",),
        (("@W/runs.yaml",), ("-o", "fit.yaml"), ("--params", "compute,overhead_s"), ("--json",)),
        {k: v for k, v in FIT_OPTIONS.items() if k != "--engine"},
        RUNS_ARGS,
    ),
    Spec(
        ("calibrate",),
        (
            ("@W/p0.json",),
            ("@W/p1.json",),
            ("@W/p2.json",),
            ("@W/p3.json",),
            ("--hardware", "cpu"),
            ("-o", "cpu.yaml"),
            ("--params", "compute,overhead_s"),
            ("--engine-out", "engines"),
        ),
        {k: v for k, v in FIT_OPTIONS.items() if k != "--engine"},
        RUNS_ARGS,
    ),
]
CATALOG_SPECS = [
    Spec(("models",), (("--json",),), {"--json": []}),
    Spec(("models", "show"), (("tiny",), ("--json",)), {"--json": []}, MODEL_ARGS),
    Spec(("hardware",), (), {"--json": []}),
    Spec(("hardware", "show"), (("a100-80gb",),), {"--json": []}, HARDWARE_ARGS),
    Spec(("engines",), (("--json",),), {"--json": []}),
    Spec(("engines", "show"), (("megatron",), ("--json",)), {"--json": []}, ENGINE_ARGS),
    Spec((), (("--version",),), {"--version": [], "--help": []}),
]

ARG_OPS = ("replace", "replace", "replace", "add", "add", "drop", "duplicate", "drop_value", "equals", "garbage")


@st.composite
def option_value(draw: Callable[..., Any], values: list[str]) -> str:
    if values and draw(st.booleans()):
        return draw(st.sampled_from(values))
    return draw(st.sampled_from(BAD_ARGS))


@st.composite
def mutated_argv(draw: Callable[..., Any], spec: Spec) -> tuple[list[str], list[str], list[str]]:
    """A mutation of a valid command line: (argv with @W placeholders, notes, the options and values touched)."""
    items = [list(i) for i in spec.items]
    notes: list[str] = []
    touched: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(ARG_OPS))
        valued = [i for i, it in enumerate(items) if len(it) == 2 or (len(it) == 1 and not it[0].startswith("-"))]
        if op == "replace" and valued:
            i = draw(st.sampled_from(valued))
            if len(items[i]) == 2:
                opt = items[i][0]
                items[i][1] = draw(option_value(spec.options.get(opt, [])))
                touched += [opt, items[i][1]]
            else:
                items[i][0] = draw(option_value(spec.positional))
                touched.append(items[i][0])
            notes.append(f"replace -> {items[i]!r:.80}")
        elif op == "drop" and items:
            i = draw(st.integers(0, len(items) - 1))
            touched += items[i][:1]
            notes.append(f"drop {items.pop(i)!r:.80}")
        elif op == "duplicate" and items:
            it = list(items[draw(st.integers(0, len(items) - 1))])
            if len(it) == 2 and draw(st.booleans()):
                it[1] = draw(option_value(spec.options.get(it[0], [])))
            items.insert(draw(st.integers(0, len(items))), it)
            touched += it
            notes.append(f"duplicate {it!r:.80}")
        elif op == "drop_value" and any(len(it) == 2 for it in items):
            i = draw(st.sampled_from([i for i, it in enumerate(items) if len(it) == 2]))
            touched.append(items[i][0])
            items[i] = items[i][:1]
            notes.append(f"no value after {items[i][0]}")
        elif op == "equals" and spec.options:
            opt = draw(st.sampled_from(sorted(spec.options)))
            if opt.startswith("--"):
                value = draw(option_value(spec.options[opt]))
                items.append([f"{opt}={value}"])
                touched += [opt, value]
                notes.append(f"{opt}={value!r:.60}")
        elif op == "garbage":
            token = draw(st.sampled_from([*BAD_ARGS, "--bogus", "-z", "---tp", "--TP", "-mtiny", "extra"]))
            items.insert(draw(st.integers(0, len(items))), [token])
            touched.append(token)
            notes.append(f"token {token!r:.60}")
        elif spec.options:  # add
            opt = draw(st.sampled_from(sorted(spec.options)))
            values = spec.options[opt]
            flag = opt in FLAGS or opt in RECIPE_FLAGS
            it = [opt] if flag or (not values and opt.startswith("--")) else [opt, draw(option_value(values))]
            items.insert(draw(st.integers(0, len(items))), it)
            touched += it
            notes.append(f"add {it!r:.80}")
    return [*spec.prefix, *(t for it in items for t in it)], notes, touched


def safe_launch(argv: list[str]) -> list[str]:
    """A launch command line that cannot start a run: two trailing --dry-run (if the first is taken as the value
    of a dangling option, the second is the flag); `--emit` takes precedence over them."""
    return [*argv, "--dry-run", "--dry-run"] if argv[:1] == ["launch"] else argv
