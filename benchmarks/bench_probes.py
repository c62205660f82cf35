"""Benchmark the searches `--global-batch auto` and a GPU-count range probe with (api/advising.py `_probe`): the
Python API's top-1 search, which reads the result's rejection counts, and `planner scale`, which reads its plans.
Wall seconds of a whole process, median of N, this checkout and optionally another (a `git archive` of main)
alternately, so both see the same load.

    python benchmarks/bench_probes.py [--runs N] [--ab OTHER_CHECKOUT]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
API = (
    "from planner.api.advising import search_advised\n"
    "search_advised('kimi-k2', gpus=36864, hardware='gb200-nvl72', engine=None, global_batch='auto', top=1)"
)
CASES = {
    "api top-1 search, kimi-k2 x 36864 gb200-nvl72, batch auto": [sys.executable, "-c", API],
    "scale kimi-k2 4608..36864 gb200-nvl72, batch auto": [
        sys.executable, "-m", "planner", "scale", "-m", "kimi-k2", "--hardware", "gb200-nvl72", "--gpus",
        "4608..36864", "--tokens", "15e12", "--global-batch", "auto",
    ],
}  # fmt: skip


def _seconds(argv: list[str], checkout: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(checkout), "COLUMNS": "100"}
    start = time.perf_counter()
    subprocess.run(argv, cwd=checkout, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--ab", type=Path, help="another checkout, run alternately with this one")
    args = ap.parse_args()
    checkouts = [REPO] + ([args.ab.resolve()] if args.ab else [])
    print(f"{'case':60} " + "  ".join(f"{c.name[:12]:>12}" for c in checkouts))
    for name, argv in CASES.items():
        times: dict[Path, list[float]] = {c: [] for c in checkouts}
        for _ in range(args.runs):
            for c in checkouts:
                times[c].append(_seconds(argv, c))
        print(f"{name:60} " + "  ".join(f"{statistics.median(times[c]):11.2f}s" for c in checkouts))


if __name__ == "__main__":
    main()
