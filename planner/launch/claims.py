"""One launch per output (pure file work): a run claims its profile and checkpoint folder for as long as it runs.

Two `planner launch` runs into one --profile-out or one --checkpoint-dir would interleave their files: both pass
the outputs check before either has written anything, then each replaces the other's profile and steps log, or
saves its steps into the other's checkpoints. The claim is an exclusive `flock` on a file holding the launcher's
pid: beside a file (``NAME.planner-lock``), inside a folder (``.planner-lock``, where a checkpoint folder may be
writable and its parent not; run_files.py counts only steps, the marker and the manifest as its checkpoints). It is
taken before the outputs check and released when the launcher ends: the kernel drops it when the process dies, even
by SIGKILL, so a stale file never blocks a later run.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from planner.errors import PlannerError

LOCK_SUFFIX = ".planner-lock"


def lock_path(output: Path) -> Path:
    """The claim's file: inside the output where it is a folder, else beside it."""
    return output / LOCK_SUFFIX if output.is_dir() else output.with_name(output.name + LOCK_SUFFIX)


@contextlib.contextmanager
def claimed(outputs: dict[str, Path]) -> Iterator[None]:
    """Hold an exclusive claim on each output ({flag: path}) for the body; refuse, naming the flag, the path and
    the other launcher's pid, an output another planner launch holds."""
    with contextlib.ExitStack() as stack:
        for flag, output in outputs.items():
            stack.enter_context(_claim(flag, output))
        yield


def check_unclaimed(outputs: dict[str, Path]) -> None:
    """What claimed() would refuse, leaving no file behind (the dry run's check): an output another launch holds."""
    for flag, output in outputs.items():
        try:
            fd = os.open(lock_path(output), os.O_RDWR)
        except OSError:  # no claim file, or none that can be opened: nothing holds it
            continue
        try:
            _lock_or_refuse(fd, flag, output)
        finally:
            os.close(fd)  # closing drops the lock taken


def _lock_or_refuse(fd: int, flag: str, output: Path) -> None:
    import fcntl  # POSIX, as torchrun's process groups are

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
        raise PlannerError(
            f"{flag}: {str(output)!r} is being written by another planner launch (pid {holder}): wait for it to "
            f"end, or give another {flag}"
        ) from None


@contextlib.contextmanager
def _claim(flag: str, output: Path) -> Iterator[None]:
    path = lock_path(output)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            _lock_or_refuse(fd, flag, output)
        except PlannerError:
            os.close(fd)
            raise
        if _same_file(fd, path):  # not a file the last holder unlinked after we opened it
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # while still held: one that opened this inode before finds it gone and retries
        os.close(fd)


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False
