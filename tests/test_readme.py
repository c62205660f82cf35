"""Every `planner` command the README shows runs from a fresh checkout as the README says it does.

Commands come from the README's ```bash blocks (one per line, `\\` continuations joined, `#` comments dropped)
and from the `$ planner ...` lines of its ```text blocks, run in order in one scratch folder (later commands
use the files earlier ones saved). A text block's printed lines that carry results (the header, `best:`,
`throughput:`, `fits:`, `does not fit:`, `to train`, the
total, the first-ranked plan) must appear in the real output, so the README cannot drift
from what the commands print. Runs on a GPU cluster are checked with --dry-run (exit 1 on this machine: the
checks fail without the GPUs, which is what --dry-run reports), and the CPU launch is left to tests/launch.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
RESULT_LINE = re.compile(
    r"^(best:|throughput:|fits:|does not fit:|to train|gpt3-|llama3-|\s*(total|step)\s+│|#  plan|1  )"
)

REJECTION_LINE = re.compile(r"^\s+\d+  [a-z]")


def _blocks(text: str) -> list[tuple[str, list[str]]]:
    out, lang, lines = [], None, []
    for line in text.splitlines():
        if line.startswith("```"):
            if lang is None:
                lang, lines = line[3:].strip(), []
            else:
                out.append((lang, lines))
                lang = None
        elif lang is not None:
            lines.append(line)
    return out


def _join(lines: list[str]) -> list[str]:
    joined, cur = [], ""
    for line in lines:
        cur += line.rstrip("\\").rstrip() + " " if line.rstrip().endswith("\\") else line
        if not line.rstrip().endswith("\\"):
            joined.append(cur)
            cur = ""
    return joined


def commands() -> list[tuple[list[str], list[str]]]:
    """(argv after `planner`, result lines the README prints for it) in README order."""
    out: list[tuple[list[str], list[str]]] = []
    for lang, lines in _blocks(README.read_text()):
        if lang == "bash":
            for line in _join(lines):
                line = line.split(" # ")[0].strip()
                if line.startswith("planner "):
                    out.append((shlex.split(line)[1:], []))
        elif lang == "text" and lines and lines[0].startswith("$ planner "):
            joined = _join(lines)
            shown = [ln.strip() for ln in joined[1:] if RESULT_LINE.match(ln)]
            # the search's rejection counts: "count  reason" (the example after it is shortened in the README)
            shown += [ln.split("  (e.g.")[0].strip() for ln in joined[1:] if REJECTION_LINE.match(ln)]
            out.append((shlex.split(joined[0][2:])[1:], shown))
    return out


def _argv(args: list[str]) -> tuple[list[str], tuple[int, ...]]:
    """Local paths made absolute; launches that need a cluster become dry runs."""
    args = [str(REPO / a) if a.startswith("tests/data/") else a for a in args]
    if args[0] == "launch" and "--emit" not in args:
        if "--dry-run" in args or "--nproc" in args:
            return [*dict.fromkeys([*args, "--dry-run"])], (0, 1)
        return [], ()
    return args, (0,)


def _words(s: str) -> str:
    return " ".join(s.split())


def test_readme_has_the_commands_it_promises():
    verbs = {argv[0] for argv, _ in commands()}
    assert {"search", "memory", "estimate", "launch", "validate", "calibrate", "models", "engines"} <= verbs


@pytest.mark.timeout(600)
def test_every_readme_command_runs(tmp_path):
    env = {**os.environ, "COLUMNS": "100", "PYTHONIOENCODING": "utf-8"}
    ran = 0
    for args, shown in commands():
        argv, codes = _argv(args)
        if not argv:
            continue
        proc = subprocess.run(
            [sys.executable, "-m", "planner", *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )
        what = f"planner {' '.join(argv)}"
        assert proc.returncode in codes, f"{what}: exit {proc.returncode}\n{proc.stderr[-2000:]}"
        assert "Traceback" not in proc.stderr, f"{what}\n{proc.stderr[-2000:]}"
        printed = _words(proc.stdout)
        for line in shown:  # README lines wrap where the terminal did; compare word streams
            assert _words(line) in printed, f"{what}: the README shows {line!r}, the command no longer prints it"
        ran += 1
    assert ran >= 15


def test_the_python_example_runs(tmp_path):
    """The README's ```python blocks, as a user would paste them into a fresh interpreter."""
    blocks = [lines for lang, lines in _blocks(README.read_text()) if lang == "python"]
    assert blocks, "the README has no Python example"
    for lines in blocks:
        proc = subprocess.run(
            [sys.executable, "-c", "\n".join(lines)], cwd=tmp_path, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "tokens/s" in proc.stdout and "Traceback" not in proc.stderr
