"""Accuracy on published runs, in-sample and held out: the figures the README quotes.

    python benchmarks/accuracy.py [RUNS_FILE ...]

In-sample: the shipped profiles (their engine behaviour fitted to every run of the files) against each run, by
engine and GPU. Held out (planner/fit/crossval.py): each split leaves one group out — one GPU, one engine, one
publication family, one year, one run — fits the engines' behaviour on the rest (the GPUs' physics untouched) and
predicts what was left out; the 80% interval (planner/fit/intervals.py) is checked on every held-out run. Prints
markdown tables. Takes about ten seconds on two cores (the tests run a reduced split set).
"""

from __future__ import annotations

import argparse
import math
import statistics
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
DEFAULT_RUNS = [DATA / "calibration_runs.yaml", DATA / "runs_2024_2026.yaml"]


def _in_sample(paths: list[Path]) -> None:
    from planner.fit.validate import validate_runs
    from planner.io.catalog import load_yaml
    from planner.render.accuracy import inside_interval

    runs = [r for p in paths for r in load_yaml(p)]
    report = validate_runs(runs)
    print(f"in-sample, shipped profiles ({', '.join(p.name for p in paths)})\n")
    print("| | runs | median \\|error\\| | max \\|error\\| |\n| --- | --- | --- | --- |")
    for metric, s in report.summary().items():
        print(f"| {metric} | {s['n']} | {s['median_abs_pct']:.1f}% | {s['max_abs_pct']:.1f}% |")
    print("\n| engine / GPU | runs | median signed | median \\|error\\| |\n| --- | --- | --- | --- |")
    for group, g in report.groups().items():
        print(f"| {group} | {g['n']} | {g['median_signed_pct']:+.1f}% | {g['median_abs_pct']:.1f}% |")
    inside = [r for r in report.runs if r.uncertainty and "tokens_per_s_per_gpu" in r.measured]
    hits = sum(inside_interval(r) for r in inside)
    print(f"\nin-sample runs inside their 80% interval: {hits} of {len(inside)} ({hits / len(inside):.0%})")
    _memory_coverage([r for r in report.runs if r.uncertainty and "peak_memory_bytes" in r.measured])


def _memory_coverage(runs: list) -> None:
    """The memory interval's coverage: in-sample, and with each run judged by a memory base fitted without it (the
    rest of its half-width, the widening for its distance from the runs, kept)."""
    from planner.fit.intervals import Z, memory_base
    from planner.render.accuracy import inside_memory_interval, run_memory_log_error

    errors = [run_memory_log_error(r) for r in runs]
    base, held = memory_base(errors, Z), 0
    for i, r in enumerate(runs):
        half = math.log1p(r.uncertainty.peak_memory_rel) / Z
        without = memory_base(errors[:i] + errors[i + 1 :], Z)
        held += abs(errors[i]) <= Z * math.sqrt(max(0.0, half**2 - base**2) + without**2)
    hits, n = sum(inside_memory_interval(r) for r in runs), len(runs)
    print(
        f"peak memory inside its 80% interval: {hits} of {n} in-sample ({hits / n:.0%}), {held} of {n} "
        f"({held / n:.0%}) with each run left out of the memory base"
    )


def _held_out(paths: list[Path]) -> None:
    from planner.fit.intervals import nested_coverage
    from planner.fit.observations import load_observations
    from planner.fit.pooled import calibrate_behaviour

    cal = calibrate_behaviour(load_observations([str(p) for p in paths], None))
    share = {(c.split, c.fold): c for c in cal.coverage}
    for split, folds in cal.folds.items():
        print(f"\nleave one {split} out: tokens/s per GPU of the runs left out\n")
        if split != "run":
            print("| left out | runs | median \\|error\\| | median signed | in the 80% interval |")
            print("| --- | --- | --- | --- | --- |")
            for f in folds:
                c = share[(split, f.fold)]
                print(
                    f"| {f.fold} | {f.runs} | {f.median_abs_pct:.1f}% | {f.median_signed_pct:+.1f}% | "
                    f"{c.inside}/{c.runs} |"
                )
        whole = share[(split, "")]
        held = [abs(h.error_pct) for f in folds for h in f.held]
        print(
            f"\n{split}: median over folds {statistics.median(f.median_abs_pct for f in folds):.1f}%, worst fold "
            f"{max((f.median_signed_pct for f in folds), key=abs):+.1f}% (signed), median over runs "
            f"{statistics.median(held):.1f}%; 80% interval holds {whole.inside} of {whole.runs} ({whole.share:.0%})"
        )
    iv = cal.interval
    print(f"\ninterval: z {iv.z}, base {iv.base}, widen {iv.widen}; memory base {iv.memory_base}")
    nested = nested_coverage([h for fs in cal.folds.values() for f in fs for h in f.held])
    print(
        "nested (each split judged by an interval fitted to the other splits only): "
        + ", ".join(f"{s} {v:.0%}" for s, v in nested.items())
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*", type=Path, help="runs files (default: the two in tests/data)")
    paths = ap.parse_args().runs or DEFAULT_RUNS
    _in_sample(paths)
    _held_out(paths)


if __name__ == "__main__":
    main()
