"""Time to read a long training log (`planner ingest`'s read_log), as a run of months logs it.

    python benchmarks/bench_ingest.py [--steps N ...]

Builds a Megatron-LM log of N iteration lines in the format of tests/data/logs/megatron_lm_issue756_mixtral.log
(one per step, a checkpoint save every 1,000) and prints the seconds and microseconds per line read_log takes, the
best of three. On a 2-core box (2026-11-28) 50,000 steps took 7.88 s (157 us a line) before each pattern was searched
only where its fixed text is, and the one-rank merge and event marking made linear; 3.22 s (64 us) after; 2.52 s
(50 us) once detection stopped searching every line for torchtitan's step pattern.
"""

from __future__ import annotations

import argparse
import time

from planner.io.logs import read_log

LINE = (
    " [2024-04-06 {h:02d}:{m:02d}:{s:02d}] iteration {i:>8}/  500000 | consumed samples: {c:>12} | elapsed time per "
    "iteration (ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): 239.8 | learning rate: 8.600000E-06 | global batch "
    "size:   128 | lm loss: 1.825991E+00 | loss scale: 1.0 | grad norm: 1.426 | num zeros: 0.0 | number of skipped "
    "iterations:   0 | number of nan iterations:   0 |"
)


def log_text(steps: int) -> str:
    lines = []
    for i in range(1, steps + 1):
        t = i * 5
        lines.append(LINE.format(h=(t // 3600) % 24, m=(t // 60) % 60, s=t % 60, i=i, c=128 * i, ms=5400 + i % 97))
        if i % 1000 == 0:
            lines.append(f"saving checkpoint at iteration {i:>7} to /ckpt in torch_dist format")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[10_000, 50_000])
    for steps in parser.parse_args().steps:
        text = log_text(steps)
        best = min(_timed(text) for _ in range(3))
        lines = text.count("\n")
        print(f"{steps:>9,} steps ({len(text) / 1e6:.1f} MB): {best:.2f} s, {best / lines * 1e6:.0f} us a line")


def _timed(text: str) -> float:
    start = time.perf_counter()
    read_log(text, source="bench", gpus=8)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
