"""Never an orphan: the launcher's workers die with it, however it dies (no torch).

torchrun starts every worker in a session of its own (torch/distributed/elastic/multiprocessing/
subprocess_handler/subprocess_handler.py: ``start_new_session=True``), so a signal to torchrun's process group
never reaches them, and a torchrun killed outright (SIGKILL, the OOM killer) leaves them running. Three
layers keep that from happening:

1. the launcher starts torchrun in its own session with a parent-death signal (Linux ``prctl(PR_SET_PDEATHSIG,
   SIGKILL)`` in the child before exec): the launcher's death, SIGKILL included, kills torchrun;
2. every worker sets the same signal on itself first thing (``arm_worker``): torchrun's death kills it;
3. on every exit path it still runs (return, exception, SIGINT, SIGTERM, SIGHUP) the launcher stops the whole
   tree (``stop_tree``): SIGTERM to torchrun, which stops its workers, then SIGKILL to whatever is left.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

PR_SET_PDEATHSIG = 1  # linux/prctl.h
STOP_GRACE_S = 5.0  # torchrun's SIGTERM handling stops its workers well within this; SIGKILL after it


def die_with_parent(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send `sig` to this process when its parent dies (prctl(2)); False where it cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def child_dies_with(parent_pid: int) -> Callable[[], None]:
    """A Popen preexec_fn: the child dies with `parent_pid`, and exits at once if that already happened
    between fork and the prctl call (its parent is then someone else)."""

    def preexec() -> None:
        die_with_parent()
        if os.getppid() != parent_pid:
            os._exit(1)

    return preexec


def arm_worker(parent_at_start: int) -> None:
    """In a worker: die with torchrun. `parent_at_start` is the parent seen when the worker's first module
    was imported (planner.launch.PARENT_PID_AT_START, before torch's import of a second or more): a torchrun
    that died meanwhile left this process to another parent, so it leaves too."""
    die_with_parent()
    if os.getppid() != parent_at_start:
        os._exit(1)


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22): with the pid, it names one
    process, so a pid reused by an unrelated process is never signalled."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def descendants(pid: int) -> dict[int, int]:
    """Every process below `pid` (children, their children, ...), pid -> start time, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc") if os.path.isdir("/proc") else ():
        if entry.name.isdigit():
            try:
                ppid = int(Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found: dict[int, int] = {}
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            t = start_time(child)
            if t is not None and child not in found:
                found[child] = t
                todo.append(child)
    return found


def alive(pid: int, started: int) -> bool:
    """The same process still exists and is not a zombie (a zombie holds no memory, only its pid)."""
    if start_time(pid) != started:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def stop_tree(proc: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """Stop torchrun and every worker: SIGTERM to torchrun's session (its agent stops the workers), then after
    `grace_s` SIGKILL to torchrun and to each worker still alive. No-op once torchrun has exited."""
    if proc.poll() is not None:
        return
    tree = descendants(proc.pid)  # before torchrun dies: afterwards its workers belong to someone else
    _signal_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()
    for pid, started in tree.items():
        if alive(pid, started):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _signal_group(pgid: int, sig: int) -> None:
    with suppress(ProcessLookupError):
        os.killpg(pgid, sig)


class Stopped(BaseException):
    """The launcher got SIGTERM or SIGHUP: unwinds like KeyboardInterrupt, so every `finally` runs."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """The first SIGTERM or SIGHUP raises Stopped in the main thread while the block runs (Python's default
    is to die without unwinding, which would skip the cleanup); later ones are ignored, so they cannot cut the
    cleanup short. Elsewhere than the main thread: no change."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    raised: list[int] = []

    def handler(signum: int, _frame: object) -> None:
        if not raised:
            raised.append(signum)
            raise Stopped(signum)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def relay(pipe: IO[str], sink: IO[str], muted: threading.Event) -> threading.Thread:
    """Copy `pipe` to `sink` line by line in a thread, until `muted` is set; then drain it unshown (what torchrun
    prints while it is being stopped: its SignalException traceback, which says nothing the launcher does not)."""

    def pump() -> None:
        for line in iter(pipe.readline, ""):
            if not muted.is_set():
                sink.write(line)
                sink.flush()
        pipe.close()

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread
