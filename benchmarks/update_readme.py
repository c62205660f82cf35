"""Rerun every `$ planner ...` example of the README and write what it prints now under it.

    python benchmarks/update_readme.py [--check]

Runs the README's commands in order in one scratch folder, as tests/test_readme.py does (the ```bash blocks'
`planner` lines too, since later examples read the files earlier ones save), at 100 columns, and replaces the
output lines of each ```text block that starts with `$ planner` by the command's stdout. Launches that need a
cluster are left as they are (test_readme checks them with --dry-run). `--check` writes nothing and exits 1
when an example's output changed. A reviewer reads the diff: a changed number is a changed prediction.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
ENV = {**os.environ, "COLUMNS": "100", "PYTHONIOENCODING": "utf-8"}


def _argv(command: str) -> list[str] | None:
    """The command's arguments after `planner`, local paths made absolute; None for a launch on a cluster."""
    args = [str(REPO / a) if a.startswith("tests/data/") else a for a in shlex.split(command)[1:]]
    if args and args[0] == "launch" and "--emit" not in args and "--dry-run" not in args:
        return None
    return args


def _run(command: str, cwd: Path) -> str | None:
    argv = _argv(command)
    if argv is None:
        return None
    proc = subprocess.run(
        [sys.executable, "-m", "planner", *argv], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=600
    )
    if "Traceback" in proc.stderr:
        raise SystemExit(f"planner {' '.join(argv)} crashed:\n{proc.stderr[-3000:]}")
    return proc.stdout


def _command_lines(lines: list[str], start: int) -> tuple[str, int]:
    """The command that starts at lines[start] (`\\` continuations joined) and the index after it."""
    parts, i = [], start
    while True:
        line = lines[i].rstrip()
        parts.append(line.rstrip("\\").strip())
        i += 1
        if not line.endswith("\\"):
            return " ".join(parts), i


def updated(text: str, cwd: Path) -> str:
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        if line.startswith("```bash"):
            while not lines[i].startswith("```"):
                command, nxt = _command_lines(lines, i)
                out += lines[i:nxt]
                command = command.split(" # ")[0].strip()
                if command.startswith("planner "):
                    _run(command, cwd)
                i = nxt
        elif line.startswith("```text") and lines[i].startswith("$ planner "):
            command, nxt = _command_lines(lines, i)
            out += lines[i:nxt]
            end = next(j for j in range(nxt, len(lines)) if lines[j].startswith("```"))
            printed = _run(command[2:], cwd)
            out += lines[nxt:end] if printed is None else [ln.rstrip() for ln in printed.rstrip("\n").split("\n")]
            i = end
    return "\n".join(out)


def _timeless(text: str) -> str:
    """The README without the seconds each search reports taking, which vary from run to run."""
    text = re.sub(r"candidate plans in [0-9.]+ s", "candidate plans in <t> s", text)
    return re.sub(r"GPU counts and batches in [0-9.]+ s", "GPU counts and batches in <t> s", text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 when an example's output changed")
    args = ap.parse_args()
    text = README.read_text()
    with tempfile.TemporaryDirectory() as tmp:
        new = updated(text, Path(tmp))
    if _timeless(new) == _timeless(text):
        print("README examples unchanged (but for how long the searches took)")
        return 0
    if args.check:
        print("README examples changed: run python benchmarks/update_readme.py")
        return 1
    README.write_text(new)
    print(f"rewrote the examples of {README}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
