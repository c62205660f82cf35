"""Independent searches on the CPUs this process may use: `--engine all` (an engine list, `--recipe-options`)
searches each engine apart and `planner scale` each GPU count, so they can run side by side.

The workers are forked: they start with the parent's modules, catalogs and caches already loaded (nothing is
imported or validated again), get only an index, and send back the result. The results come back in the order
asked whatever finishes first, so the merged output is the one a search in turn gives (tests/test_fanout.py).
A PlannerError comes back as a value for the caller to handle as it handles the sequential one; any other error
is raised here. Fork is used on Linux only (macOS and Windows start workers by spawning a fresh interpreter,
which costs more than these searches); elsewhere, with one CPU, or with PLANNER_JOBS=1, the work runs in turn in
this process.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from planner.errors import PlannerError

T = TypeVar("T")
R = TypeVar("R")

JOBS_ENV = "PLANNER_JOBS"

# What the forked workers run: set just before the pool forks them, read by index in the workers.
_WORK: tuple[Callable[[Any], Any], Sequence[Any]] | None = None
_IN_WORKER = False  # a worker runs what it is given in turn: the CPUs are the parent's workers'


def workers(tasks: int, jobs: int | None = None) -> int:
    """Processes to run `tasks` with: `jobs` when given, else PLANNER_JOBS when set, else the CPUs this process
    may run on; never more than the tasks, and 1 (in this process) where workers are not forked or in a worker
    (`planner scale --engine all`: the counts side by side, each count's engines in turn)."""
    if _IN_WORKER:
        return 1
    if jobs is None:
        jobs = _jobs_env()
    if jobs is None:
        jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    return max(1, min(tasks, jobs)) if sys.platform.startswith("linux") else 1


def _jobs_env() -> int | None:
    given = os.environ.get(JOBS_ENV)
    if given is None:
        return None
    if not given.strip().isdigit() or int(given) < 1:
        raise PlannerError(f"{JOBS_ENV}={given!r} is not valid; give a whole number of workers, 1 or more")
    return int(given)


def fan_out(
    fn: Callable[[T], R],
    items: Sequence[T],
    processes: int,
    progress: Callable[[int, int], None] | None = None,
) -> list[R | PlannerError]:
    """`fn` of each item on `processes` forked workers (1: in turn, in this process), in the items' order; a
    PlannerError an item raised is returned in its place. `progress(done, total)` is told as items finish."""
    if processes <= 1:
        return [_guarded(fn, item) for item in items]
    import multiprocessing  # only when there is more than one worker to start
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    global _WORK
    _WORK = (fn, items)
    try:
        with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("fork")) as pool:
            futures = [pool.submit(_run_index, i) for i in range(len(items))]
            for done, _future in enumerate(as_completed(futures), 1):
                if progress is not None:
                    progress(done, len(items))
            return [f.result() for f in futures]
    except BrokenProcessPool:  # a worker was killed (out of memory, a signal): the work again, in this process
        return [_guarded(fn, item) for item in items]
    finally:
        _WORK = None


def _run_index(i: int) -> Any:
    """In a worker: the i-th item of the work the parent set before forking."""
    global _IN_WORKER
    assert _WORK is not None, "fan_out's work is set before its workers fork"
    _IN_WORKER = True
    fn, items = _WORK
    return _guarded(fn, items[i])


def _guarded(fn: Callable[[T], R], item: T) -> R | PlannerError:
    try:
        return fn(item)
    except PlannerError as e:
        return e
