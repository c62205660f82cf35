"""launch's options that would do nothing with the others given: refused, one line, rather than ignored."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from planner.errors import PlannerError
from planner.launch.command import RunConfig
from planner.launch.emit import ENGINE_TARGETS


def refuse_idle_options(
    emit: str | None,
    *,
    out: Path | None,
    image: str | None,
    checkpoint_dir: Path | None,
    checkpoint_every: int,
    resume: bool,
    keep: int | None,
    placed: tuple[int | None, int | None] = (None, None),
) -> None:
    """Options that would do nothing with the others given: refused, one line, rather than ignored (`placed`: the
    --nnodes and --nproc given)."""
    refuse_unplaced(emit, *placed)
    if emit is None and (out is not None or image is not None):
        given = "--out" if out is not None else "--image"
        raise PlannerError(f"{given} is for --emit's files: give --emit TARGET, or drop {given}")
    if image is not None and emit != "k8s":  # the only file that names a container image
        raise PlannerError(f"--image is the Kubernetes job's container image: --emit {emit} writes none; drop it")
    if checkpoint_dir is None and (checkpoint_every or resume):
        given = f"--checkpoint-every {checkpoint_every}" if checkpoint_every else "--resume"
        raise PlannerError(f"{given} needs --checkpoint-dir DIR: where the checkpoints are saved and read")
    if checkpoint_dir is not None and not (checkpoint_every or resume):  # a restart reloads what a save wrote
        raise PlannerError(
            f"--checkpoint-dir {str(checkpoint_dir)!r} saves nothing and reads nothing alone: give --checkpoint-every"
            " K or --resume (--max-restarts N reloads what --checkpoint-every saves), or drop it"
        )
    if keep is not None and not checkpoint_every:
        raise PlannerError(
            f"--keep-checkpoints {keep} prunes what --checkpoint-every saves, and nothing is saved: give"
            " --checkpoint-every K, or drop it"
        )
    if checkpoint_dir is not None and checkpoint_dir.exists() and not checkpoint_dir.is_dir():
        raise PlannerError(f"--checkpoint-dir {str(checkpoint_dir)!r} is a file: give a folder")


# The run options a run carries, with the value that means "not given": RunConfig's own defaults, and the two
# options of launch alone (no restarts, no wall-clock limit).
_UNSET = {**{f.name: f.default for f in fields(RunConfig)}, "max_restarts": 0, "wall_s": None}
RUN_OPTIONS = ("steps", "warmup", "seed", "checkpoint_dir", "max_restarts", "timeout_s", "wall_s", "profile_out")


def refuse_unplaced(emit: str | None, nnodes: int | None, nproc: int | None) -> None:
    """--nnodes and --nproc for a target whose file does not say how to start the job (DeepSpeed's config):
    refused, one line, rather than written into nothing (audit: the file came out the same either way)."""
    from planner.launch.emit.targets import target

    chosen = target(emit) if emit is not None else None
    given = [f"--{n} {v}" for n, v in (("nnodes", nnodes), ("nproc", nproc)) if v is not None]
    if chosen is not None and not chosen.run_line and given:
        raise PlannerError(
            f"--emit {emit} writes {chosen.file_name}, which does not place the job: {' and '.join(given)} would "
            f"do nothing; give {'them' if len(given) > 1 else 'it'} to the engine's own launcher, or drop "
            f"{'them' if len(given) > 1 else 'it'}"
        )


def refuse_unwritten(emit: str | None, given: dict[str, object]) -> None:
    """Run options an --emit target's file does not carry (`given`: RUN_OPTIONS' values), refused rather than
    dropped: an engine's own file (its trainer's steps, seed, checkpoints and restarts are its own configuration's)
    carries none; a cluster script runs the planner worker with all of them, and --wall-s is the Slurm job's
    --time (a limit of the job there, of this process's run here; a Kubernetes Job has none)."""
    if emit is None:
        return
    set_ = [n for n in RUN_OPTIONS if (str(given[n]) if n == "profile_out" else given[n]) != _UNSET[n]]
    idle = [f"--{n.replace('_', '-')}" for n in set_ if (n == "wall_s" and emit != "slurm") or emit in ENGINE_TARGETS]
    if idle:
        kind = "an engine's own configuration, which" if emit in ENGINE_TARGETS else "a cluster script, which"
        raise PlannerError(f"--emit {emit} writes {kind} does not carry {', '.join(idle)}: set it there, or drop it")
