"""Does the worker's fitted behaviour carry to a GPU it was not fitted on? Leave-one-GPU-out on the planner's own
launches: fit the `planner` engine's behaviour (`planner calibrate --behaviour`) on one folder of launch profiles,
then predict every launch of another folder, measured on a different GPU, with that behaviour and the other GPU's
hardware profile (its physics: datasheet peaks and measured kernel ceilings, nothing fitted to its steps).

    python benchmarks/launch_transfer.py FIT_DIR:HARDWARE PREDICT_DIR:HARDWARE

    python benchmarks/launch_transfer.py benchmarks/results/h100-2026-11-25/launch:h100-sxm \\
        benchmarks/results/h200-2026-11-26/launch:h200

Prints each held-out launch's measured and predicted step with the worker's profile stripped of its behaviour (the
GPU's physics alone) and with the behaviour fitted on the other GPU, and the median |error| of both. Launch profiles
hold their model, plan and median step (planner launch --profile-out).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def fit(folder: Path, hardware: str, out: Path) -> Path:
    """The engine profiles `planner calibrate --behaviour` writes for the launches in `folder`."""
    files = sorted(str(p) for p in folder.glob("*.json") if p.name != "summary.json")
    cmd = [sys.executable, "-m", "planner", "calibrate", *files, "--hardware", hardware, "--behaviour",
           "--engine-out", str(out), "--json"]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out / "planner.yaml"


def step_s(profile: dict, hardware: str, engine) -> float:  # type: ignore[no-untyped-def]
    from planner.io.catalog import load_hardware
    from planner.launch.runner import predicted
    from planner.plan import Plan
    from planner.specs import ModelSpec

    model, plan = ModelSpec(**profile["model"]), Plan(**profile["plan"])
    return float(predicted(model, load_hardware(hardware), plan, engine)["step_time_s"])


def _err(measured: float, pred: float) -> float:
    return (measured - pred) / pred * 100  # as `planner launch` prints it: + when the run was slower


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("fit", help="FOLDER:HARDWARE of the launches to fit on")
    ap.add_argument("predict", help="FOLDER:HARDWARE of the launches to predict")
    args = ap.parse_args()
    fit_dir, fit_hw = args.fit.rsplit(":", 1)
    pred_dir, pred_hw = args.predict.rsplit(":", 1)
    from planner.io.catalog import load_engine

    bare = load_engine("planner").model_copy(update={"behaviour": None, "fitted": {}})
    with tempfile.TemporaryDirectory() as tmp:
        fitted = load_engine(fit(Path(fit_dir), fit_hw, Path(tmp)))
        rows = []
        for path in sorted(Path(pred_dir).glob("*.json")):
            if path.name == "summary.json":
                continue
            prof = json.loads(path.read_text())
            m = prof["median_step_s"]
            rows.append((path.stem, m, step_s(prof, pred_hw, bare), step_s(prof, pred_hw, fitted)))
    print(f"fitted on {fit_dir} ({fit_hw}); predicting {pred_dir} ({pred_hw})")
    print(f"{'launch':16} {'measured ms':>11} {'physics':>9} {'err':>7} {'fitted':>9} {'err':>7}")
    for name, m, bare_s, fit_s in rows:
        print(f"{name:16} {m * 1e3:11.1f} {bare_s * 1e3:9.1f} {_err(m, bare_s):+6.1f}% {fit_s * 1e3:9.1f} "
              f"{_err(m, fit_s):+6.1f}%")  # fmt: skip
    for label, col in (("physics alone (no behaviour)", 2), ("behaviour fitted on the other GPU", 3)):
        errs = [abs(_err(r[1], r[col])) for r in rows]
        print(f"{label}: median |error| {statistics.median(errs):.1f}%, max {max(errs):.1f}% over {len(rows)} launches")


if __name__ == "__main__":
    main()
