"""Accuracy on published runs, in-sample and held out: the figures the README quotes.

    python benchmarks/accuracy.py [RUNS_FILE]

In-sample: the shipped profiles (fitted to every run of the file) against each run, by engine and GPU.
Held out: leave-one-family-out cross-validation (planner/fit/crossval.py): for each family (one
publication's runs of one engine on one GPU), fit on every other family from the shipped physical profiles
and predict the left-out one. Median |error| of tokens/s per GPU; takes about a minute on two cores.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

# the repository's copy of shared/reference/calibration_runs.yaml
DEFAULT_RUNS = Path(__file__).resolve().parents[1] / "tests" / "data" / "calibration_runs.yaml"


def main() -> None:
    from planner.fit.calibrate import load_observations
    from planner.fit.crossval import leave_one_family_out
    from planner.fit.validate import validate_runs
    from planner.io.catalog import load_hardware, load_yaml

    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_RUNS
    report = validate_runs(load_yaml(path))
    print(f"in-sample, shipped profiles ({path.name})")
    for metric, s in report.summary().items():
        print(f"  {metric:22} median |error| {s['median_abs_pct']:5.1f}%  max {s['max_abs_pct']:5.1f}%  runs {s['n']}")
    for group, g in report.groups().items():
        print(
            f"  {group:22} tokens/s signed {g['median_signed_pct']:+5.1f}%"
            f"  |error| {g['median_abs_pct']:4.1f}%  runs {g['n']}"
        )
    obs = load_observations([str(path)], None)
    bases = {h: load_hardware(h) for h in sorted({o.hardware.name for o in obs})}
    results = leave_one_family_out(obs, bases)
    print("\nleave one family out: tokens/s per GPU, median |error| (signed median)")
    print(f"{'family':44} {'runs':>4} {'in-sample':>10} {'held out':>10} {'signed':>8}")
    for f in results:
        print(
            f"{f.family:44} {f.runs:4d} {f.in_sample_median_abs_pct:9.1f}% {f.held_out_median_abs_pct:9.1f}%"
            f" {f.held_out_median_signed_pct:+7.1f}%"
        )
    held = [f.held_out_median_abs_pct for f in results]
    print(f"median over families {statistics.median(held):.1f}%, worst {max(held):.1f}%")


if __name__ == "__main__":
    main()
