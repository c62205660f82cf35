"""Wall time of whole `planner memory` processes (Python start-up included), as a user feels it.

    python benchmarks/bench_memory.py [--runs N]

Prints the median and best of N runs for a few plans, and Python's own start-up for comparison.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CASES = {
    "python -c pass (floor)": [sys.executable, "-c", "pass"],
    "memory gpt3-175b 1024 GPUs": [
        sys.executable,
        "-m",
        "planner",
        "memory",
        "--model",
        "gpt3-175b",
        "--gpus",
        "1024",
        "--tp",
        "8",
        "--pp",
        "16",
        "--recompute",
        "full",
        "--global-batch",
        "1536",
    ],
    "memory llama3-405b --per-stage --json": [
        sys.executable,
        "-m",
        "planner",
        "memory",
        "--model",
        "llama3-405b",
        "--gpus",
        "16384",
        "--tp",
        "8",
        "--pp",
        "16",
        "--global-batch",
        "2048",
        "--per-stage",
        "--json",
    ],
    "memory --help": [sys.executable, "-m", "planner", "memory", "--help"],
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    print(f"{'case':42s} {'median s':>9s} {'best s':>8s}  ({args.runs} runs each)")
    for name, cmd in CASES.items():
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times.append(time.perf_counter() - start)
        print(f"{name:42s} {statistics.median(times):9.3f} {min(times):8.3f}")


if __name__ == "__main__":
    main()
