"""Save and resume with torch.distributed.checkpoint, so that a crash mid-save never loses the last good one.

Layout of DIR: ``step_000004/`` (complete checkpoints), ``step_000008.tmp/`` (a save in progress),
``latest`` (the name of the newest complete one) and the manifest run_files.py writes. A save writes into
``.tmp``, every rank reaches a barrier, then rank 0 renames the directory and replaces ``latest``
atomically (``os.replace``). A crash before the rename leaves ``latest`` pointing at the previous
checkpoint; resume reads only ``latest``.
State dicts are keyed by FQN (merged over pipeline chunks, optimizer state flattened), so a checkpoint
loads into any other layout of the same model (DCP reshards).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.optim import Optimizer

from planner.launch.run_files import LATEST, complete_checkpoints, latest_step

_OPTS = StateDictOptions(flatten_optimizer_state_dict=True)


def _state(parts: list[nn.Module], optims: list[Optimizer]) -> dict:
    model, optim = {}, {}
    for part, opt in zip(parts, optims):
        model.update(get_model_state_dict(part))
        optim.update(get_optimizer_state_dict(part, opt, options=_OPTS))
    return {"model": model, "optim": optim}


def save(root: str | Path, step: int, parts: list[nn.Module], optims: list[Optimizer], *, keep: int = 2) -> Path:
    """Save `step` and keep the newest `keep` complete checkpoints (older ones are removed once it is complete)."""
    root = Path(root)
    final, tmp = root / f"step_{step:06d}", root / f"step_{step:06d}.tmp"
    if dist.get_rank() == 0:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
    dist.barrier()
    dcp.save(_state(parts, optims), checkpoint_id=str(tmp))
    dist.barrier()  # every rank has written its shard
    if dist.get_rank() == 0:
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        marker_tmp = root / f"{LATEST}.tmp"
        marker_tmp.write_text(final.name + "\n")
        os.replace(marker_tmp, root / LATEST)
        done = complete_checkpoints(root)
        for old in [p for p in done if p.name < final.name][: max(0, len(done) - keep)]:
            shutil.rmtree(old, ignore_errors=True)
    dist.barrier()
    return final


def load_latest(root: str | Path, parts: list[nn.Module], optims: list[Optimizer]) -> int | None:
    """Load the newest complete checkpoint into parts/optims; returns its step, or None when there is none."""
    step = latest_step(root)
    if step is None:
        return None
    state = _state(parts, optims)
    dcp.load(state, checkpoint_id=str(Path(root) / f"step_{step:06d}"))
    for part, opt in zip(parts, optims):
        set_model_state_dict(part, state["model"], options=StateDictOptions(strict=False))
        set_optimizer_state_dict(part, opt, state["optim"], options=_OPTS)
    return step
