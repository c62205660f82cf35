"""One launch per output (pure file work): a run claims its profile and checkpoint folder for as long as it runs.

Two `planner launch` runs into one --profile-out or one --checkpoint-dir would interleave their files: both pass
the outputs check before either has written anything, then each replaces the other's profile and steps log, or
saves its steps into the other's checkpoints. The claim is an exclusive `flock` on a file holding the launcher's
pid: beside a file (``NAME.planner-lock``), inside a folder (``.planner-lock``, where a checkpoint folder may be
writable and its parent not; run_files.py counts only steps, the marker and the manifest as its checkpoints). The
launcher looks for another's claim before its outputs check (check_unclaimed) and takes its own after it; the
kernel drops a claim when its process dies, even by SIGKILL, so a stale file never blocks a later run. Where the
file system takes no locks (NFS without lockd, Lustre without `-o flock`) the run goes on unclaimed, with a warning.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

from planner.errors import PlannerError

LOCK_SUFFIX = ".planner-lock"
BUSY_RETRIES = 3  # a dry run's check holds a shared lock for microseconds: a claim retries before it refuses
BUSY_WAIT_S = 0.05
NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)  # flock(2): the file system takes none


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
    """What claimed() would refuse, writing nothing (before the outputs check, and the dry run's): an output another
    launch holds. A shared lock, so two checks never refuse each other."""
    import fcntl  # POSIX, as torchrun's process groups are

    for flag, output in outputs.items():
        try:
            fd = os.open(lock_path(output), os.O_RDONLY)
        except OSError:  # no claim file, or none this user can read: nothing to say before the claim itself
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _refusal(fd, flag, output) from None
        except OSError:
            pass  # no locks on this file system: the claim says so
        finally:
            os.close(fd)  # closing drops the lock taken


def _refusal(fd: int, flag: str, output: Path) -> PlannerError:
    holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
    return PlannerError(
        f"{flag}: {str(output)!r} is being written by another planner launch (pid {holder}): wait for it to end, "
        f"or give another {flag}"
    )


@contextlib.contextmanager
def _claim(flag: str, output: Path) -> Iterator[None]:
    path = lock_path(output)
    fd = _locked(flag, output, path)
    if fd is None:  # the file system takes no locks
        yield
        return
    try:
        with contextlib.suppress(OSError):  # another user's claim file, readable only: held, without our pid
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        with contextlib.suppress(OSError):
            path.unlink()  # while still held: one that opened this inode before finds it gone and retries
        os.close(fd)


def _locked(flag: str, output: Path, path: Path) -> int | None:
    """A descriptor of `path` holding its exclusive lock, or None where locks are not to be had; refuses an output
    another launch holds. Any failure closes what it opened."""
    import fcntl

    for attempt in range(BUSY_RETRIES + 1):
        fd, created = _open_claim_file(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if attempt == BUSY_RETRIES:
                error = _refusal(fd, flag, output)
                os.close(fd)
                raise error from None
            os.close(fd)
            time.sleep(BUSY_WAIT_S)
            continue
        except OSError as e:
            os.close(fd)
            if created:  # no claim to hold: the file goes
                with contextlib.suppress(OSError):
                    path.unlink()
            if e.errno not in NO_LOCKS:
                raise PlannerError(f"{flag}: cannot lock {str(path)!r} ({e.strerror or e})") from None
            warnings.warn(
                f"{flag}: {str(output)!r} is on a file system without file locks: a second launch into it would "
                "not be stopped",
                stacklevel=2,
            )
            return None
        if _same_file(fd, path):  # not a file the last holder unlinked after we opened it
            return fd
        os.close(fd)
    raise PlannerError(f"{flag}: cannot claim {str(output)!r}: its lock file keeps being replaced")


def _open_claim_file(path: Path) -> tuple[int, bool]:
    """(descriptor, whether this call made the file): read-write, or read-only where it is another user's (flock
    needs no write access)."""
    for _ in range(BUSY_RETRIES + 1):  # a holder may remove the file between our two opens: make it again
        try:
            try:
                return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644), True
            except FileExistsError:
                pass
            try:
                return os.open(path, os.O_RDWR), False
            except PermissionError:
                return os.open(path, os.O_RDONLY), False
        except FileNotFoundError:
            continue
        except OSError as e:
            raise PlannerError(f"cannot claim {str(path)!r} ({e.strerror or e})") from None
    raise PlannerError(f"cannot claim {str(path)!r}: it keeps being removed")


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False
