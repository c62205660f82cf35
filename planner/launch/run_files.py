"""The files a run here owns, checked before any process starts (pure: no torch).

A checkpoint folder holds ``step_NNNNNN/`` (complete checkpoints), ``step_NNNNNN.tmp/`` (a save in progress, or
one a crash cut short), ``latest`` (the newest complete one's name; checkpoint.py) and ``planner-checkpoint.json``,
the manifest: the model the checkpoints were written for. A run refuses a folder that already holds checkpoints
unless told to continue them (--resume: same model, and steps left to run) or to replace them (--force).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from planner.errors import PlannerError
from planner.io.files import write_text_atomic
from planner.specs import ModelSpec

MANIFEST = "planner-checkpoint.json"
LATEST = "latest"
_STEP = re.compile(r"step_\d+(\.tmp)?")


def latest_step(root: str | Path) -> int | None:
    """The step of the newest complete checkpoint in `root` (its ``latest`` marker), or None when there is none."""
    marker = Path(root) / LATEST
    if not marker.is_file():
        return None
    return int(marker.read_text().strip().removeprefix("step_"))


def _held(root: Path) -> list[Path]:
    """What of `root` is a checkpoint's (complete or not), its marker or its manifest: what --force replaces."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if _STEP.fullmatch(p.name) or p.name in (LATEST, MANIFEST))


def complete_checkpoints(root: Path) -> list[Path]:
    """The complete checkpoints in `root`, oldest first (an unfinished save's step_N.tmp is none)."""
    return [p for p in _held(root) if p.is_dir() and not p.name.endswith(".tmp")]


def _holds_checkpoints(root: Path) -> bool:
    """A complete checkpoint (an unfinished save's step_N.tmp alone is no checkpoint: it is removed on start)."""
    return (root / LATEST).exists() or bool(complete_checkpoints(root))


def _manifest(model: ModelSpec) -> dict:
    return {"model": model.model_dump(mode="json")}


def _model_difference(saved: dict, model: dict) -> str:
    """The fields the saved model and this one differ in, at most three: `name`, or `num_layers=4 (saved 2)`."""
    keys = [k for k in sorted(saved.keys() | model.keys()) if saved.get(k) != model.get(k)]
    said = [f"{k}={model.get(k)!r} (saved {saved.get(k)!r})" for k in keys[:3]]
    return ", ".join(said) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")


def check_checkpoints(root: Path, model: ModelSpec, *, resume: bool, force: bool, steps: int, warmup: int) -> None:
    """Refuse, in one line, a checkpoint folder this run would wrongly replace or resume (nothing is written)."""
    where = f"--checkpoint-dir {str(root)!r}"
    if root.exists() and not root.is_dir():
        raise PlannerError(f"{where} is a file: give a folder")
    if not _holds_checkpoints(root):
        return
    if not resume:
        if force:
            return
        raise PlannerError(
            f"{where} already holds checkpoints: give --resume to continue them, --force to replace them, or "
            "another folder"
        )
    try:
        saved = json.loads((root / MANIFEST).read_text())["model"]
    except (OSError, ValueError, KeyError, TypeError):
        raise PlannerError(
            f"--resume: {where} has no readable {MANIFEST}, so its checkpoints' model is unknown: resume only "
            "checkpoints this planner wrote, or drop --resume and give --force to replace them"
        ) from None
    if saved != _manifest(model)["model"]:
        raise PlannerError(
            f"--resume: the checkpoints in {str(root)!r} are another model's ({saved.get('name')!r}; "
            f"{_model_difference(saved, _manifest(model)['model'])}): resume with the model that wrote them, or "
            "another --checkpoint-dir"
        )
    step = latest_step(root)
    if step is not None and step >= steps:
        raise PlannerError(f"--resume: checkpoint at step {step} >= --steps {steps} (use --steps N > {step})")
    if step is not None and steps - step <= warmup:
        raise PlannerError(
            f"--resume: checkpoint at step {step} leaves {steps - step} of --steps {steps}, none past --warmup "
            f"{warmup} to time (use --steps N > {step + warmup})"
        )


def prepare_checkpoints(root: Path, model: ModelSpec, *, resume: bool) -> None:
    """After check_checkpoints passed: without --resume, remove what a replaced run left (--force); with it, only
    saves a crash cut short (``step_N.tmp``). Then write the manifest."""
    for p in _held(root):
        if p.name != MANIFEST and (not resume or p.name.endswith(".tmp")):
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    write_text_atomic(
        root / MANIFEST, json.dumps(_manifest(model), indent=2) + "\n", what="checkpoint manifest", kept=True
    )
