"""The advice's searches: `best_at(gpus, global_batch)` memoised, each pair searched once, side by side where searches
are slow enough to be worth a worker (explore/fanout.py); what they cost is counted for the advice to say."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from planner.errors import PlannerError
from planner.explore.fanout import fan_out, workers

BestAt = Callable[[int, int], float | None]  # (gpus, global batch) -> best tokens/s per GPU, None: nothing fits


# A search worth a worker of its own when the scan reads ahead (Probe.prefetch_ahead): forking one costs 10-30 ms,
# and a forked search starts without the caches this process's searches have built since the fork (cost/coster.py
# shared_coster), so searches of a few tens of milliseconds (a dense model's) run faster in turn.
SIDE_BY_SIDE_S = 0.1


class Probe:
    """best_at, memoised: each (gpus, batch) is searched once."""

    def __init__(self, best_at: BestAt) -> None:
        self._best_at, self._seen = best_at, dict[tuple[int, int], float | None]()
        self._refused = dict[tuple[int, int], PlannerError]()  # a prefetched pair's refusal, raised when read
        self._last_s: float | None = None  # how long the last search in this process took
        self._later: list[tuple[int, int]] = []  # pairs a later step will likely read (speculate)
        self.searched = 0  # the searches it ran (in this process or forked), for the time the advice says it took

    def speculate(self, pairs: Iterable[tuple[int, int]]) -> None:
        """Pairs a later step will likely read, in its order: the read-ahead fills spare CPUs with them first."""
        self._later = list(pairs)

    def know(self, gpus: int, global_batch: int, rate: float | None, seconds: float | None = None) -> None:
        """What a search already found at (gpus, global_batch), in `seconds`: not searched again."""
        self._seen.setdefault((gpus, global_batch), rate)
        if seconds is not None:
            self._last_s = seconds

    def prefetch(self, pairs: Iterable[tuple[int, int]]) -> None:
        """Search the (gpus, batch) pairs not known yet side by side (explore/fanout.py), each answer what a call
        would give; a pair whose search refuses keeps its refusal for the call to raise (not searched again)."""
        todo = [pair for pair in dict.fromkeys(pairs) if pair not in self._seen and pair not in self._refused]
        self.searched += len(todo)
        rates = fan_out(lambda pair: self._best_at(*pair), todo, workers(len(todo)))
        for pair, r in zip(todo, rates, strict=True):
            if isinstance(r, PlannerError):
                self._refused[pair] = r
            else:
                self._seen[pair] = r

    def prefetch_ahead(self, pairs: list[tuple[int, int]]) -> None:
        """Where the first pair is not known yet and searches take SIDE_BY_SIDE_S or more: it, the pairs after it,
        then the pairs a later step will likely read (speculate), as many as there are CPUs, side by side (a scan
        reads them in turn and may stop early; the CPUs would have waited). The scan's own pairs come first: the
        side-by-side searches finish together, and a later step's (a larger batch: more plans) would hold up the
        scan's next pair where there are few CPUs (on 2 CPUs, Kimi-K2 on 4,608 GB200s: 19 s, against 14 s in turn)."""
        worth = self._last_s is not None and self._last_s >= SIDE_BY_SIDE_S
        if pairs and pairs[0] not in self._seen and pairs[0] not in self._refused and worth:
            ahead = list(dict.fromkeys([*pairs, *(p for p in self._later if p not in self._seen)]))
            self.prefetch(ahead[: workers(len(ahead))])

    def __call__(self, gpus: int, global_batch: int) -> float | None:
        key = (gpus, global_batch)
        if key in self._refused:
            raise self._refused[key]
        if key not in self._seen:
            start = time.perf_counter()
            self.searched += 1
            try:
                self._seen[key] = self._best_at(gpus, global_batch)
            except PlannerError as e:  # kept, as a prefetched pair's is: a second read does not search it again
                self._refused[key] = e
                raise
            finally:
                self._last_s = time.perf_counter() - start
        return self._seen[key]
