"""Advice when the job and the cluster do not match: how many GPUs this global batch uses well, and what global batch
would use all the GPUs that well (issue 23 item 1).

"Well" is a share of the best per-GPU throughput: WELL = 90% of the most tokens/s per GPU that the best plan reaches
at any GPU count scanned with this batch. The scan halves the GPU count from the one asked, while per-GPU throughput
still rises (a fixed batch on fewer GPUs gives each data-parallel rank more micro-batches, so less pipeline bubble and
less exposed communication per token), down to at most SCAN_DEPTH halvings or until nothing fits. Then:

- `gpus`: the largest count scanned at which the best plan reaches WELL of that best: the GPUs this batch feeds;
- `global_batch`: doubling the batch from the one asked, the smallest at which the best plan on all the GPUs reaches
  WELL of it, within `max_tokens_per_step` (Llama 3 405B ended pre-training at 16M tokens per step, Dubey et al.
  2024 §3.4.1: the default bound).

Each probe is one search (the caller's `best_at(gpus, global_batch)`: the best plan's tokens/s per GPU, None when
nothing fits; where failures are priced, the tokens/s its goodput keeps), memoised. The same rule chooses the count
of a `--gpus LO..HI` range and the batch of `--global-batch auto`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from planner.cluster.fabric import cluster_size
from planner.errors import PlannerError
from planner.explore.fanout import workers
from planner.explore.probe import Probe
from planner.explore.probe_rate import caveat_of
from planner.explore.space import listed
from planner.hardware import HardwareProfile
from planner.plan import MAX_DEGREE

MAX_COUNTS = 32  # the counts `planner scale` takes: one search each

WELL = 0.9  # a share of the best per-GPU throughput that counts as using the GPUs well
SCAN_DEPTH = 8  # at most 256x fewer GPUs are scanned for the best per-GPU throughput
SCAN_PATIENCE = 2  # halvings in a row that beat no count before them end the scan
DEFAULT_MAX_TOKENS_PER_STEP = 1 << 24  # 16.8M tokens: Llama 3 405B's final batch (Dubey et al. 2024 §3.4.1)
IDLE_SHARE = 0.25  # a best plan idle (bubble + exposed communication) this much of its step is worth advising on


@dataclass(frozen=True)
class Advice:
    """One piece of advice, with the numbers it rests on (the search JSON's `advice` entries)."""

    kind: str  # "gpus" | "global_batch" | "checkpoint" | "chosen_gpus" | "chosen_global_batch"
    message: str
    gpus: int | None
    global_batch: int | None
    # chosen_gpus of a range: each count's best per-GPU rate (None: nothing fits), in `unit`, which the message says
    counts: tuple[tuple[int, float | None], ...] = ()
    unit: str = ""

    def as_json(self) -> dict[str, object]:
        doc = {"kind": self.kind, "message": self.message, "gpus": self.gpus, "global_batch": self.global_batch}
        counts = [{"gpus": g, "best_per_gpu": rate} for g, rate in self.counts]
        return doc | ({"unit": f"{self.unit} per GPU", "counts": counts} if counts else {})


def best_count(probe: Probe, counts: Iterable[int], global_batch: int) -> tuple[int | None, float]:
    """(the largest count whose best plan reaches WELL of the best per-GPU throughput among `counts`, that best)."""
    rates = {g: probe(g, global_batch) for g in sorted(set(counts))}
    fitting = {g: r for g, r in rates.items() if r}
    if not fitting:
        return None, 0.0
    best = max(fitting.values())
    return max(g for g, r in fitting.items() if r >= WELL * best), best


def scan_counts(probe: Probe, *, gpus: int, global_batch: int, node: int) -> tuple[int | None, float]:
    """Halve the count from `gpus` while per-GPU throughput may still rise (whole nodes, at most SCAN_DEPTH
    times), stopping after SCAN_PATIENCE halvings in a row that beat no count before them, or at a count where
    nothing fits: (the largest count used WELL, the best per-GPU throughput seen). The rate can stall and then
    rise (a plan shape that halving one more time makes possible, a group that comes back inside a tier)."""
    counts, best = [gpus], probe(gpus, global_batch)
    halvings = node_halvings(gpus, node)
    stalled = 0
    for i, g in enumerate(halvings):
        probe.prefetch_ahead([(h, global_batch) for h in halvings[i:]])
        rate = probe(g, global_batch)
        counts.append(g)
        if rate is None:
            break
        stalled = 0 if best is None or rate > best else stalled + 1
        best = rate if best is None else max(best, rate)
        if stalled >= SCAN_PATIENCE:
            break
    return best_count(probe, counts, global_batch)


def batches(global_batch: int, *, seq_len: int, max_tokens_per_step: int, gpus: int | None = None) -> list[int]:
    """global_batch doubled while a step stays within max_tokens_per_step (the first one always); for a GPU count
    with an odd factor (72-GPU NVL72 racks: 1,152 = 128 x 9), each also raised to that factor times a power of two
    (512 to 576), so that data parallelism can take the factor rather than leave it to the pipeline; and the largest
    batches within the bound that such a data-parallel degree divides (odd x 2^j for j >= 3: 2,016 and 1,728 of 9's
    72 ... 576 under 2,048), whose extra micro-batches shrink a deep pipeline's bubble where a doubling would pass
    the bound (Kimi-K2 on 36,864 GB200s: 1,152 sequences with pp 32 left 8 micro-batches, 426 tokens/s per GPU
    against 666 at 2,016)."""
    out, b = [global_batch], global_batch * 2
    while b * seq_len <= max_tokens_per_step:
        out.append(b)
        b *= 2
    odd = gpus // (gpus & -gpus) if gpus else 1
    rounded = {_times_two_to_at_least(odd, b) for b in out} if odd > 1 else set()
    most = max_tokens_per_step // seq_len
    units = [odd << j for j in range(3, most.bit_length()) if odd > 1 and odd << j <= most]
    filled = {most // u * u for u in units if most // u * u >= global_batch}
    return sorted(set(out) | {b for b in rounded if b * seq_len <= max_tokens_per_step} | filled)


def _times_two_to_at_least(odd: int, b: int) -> int:
    """The smallest odd x 2^j at least b (512 with 9: 576, the 9 of 1,152 GPUs and the 64 of 512)."""
    m = odd
    while m < b:
        m *= 2
    return m


def node_halvings(gpus: int, node: int) -> list[int]:
    """`gpus` halved at most SCAN_DEPTH times, while the count is whole nodes."""
    halvings = [gpus >> k for k in range(1, SCAN_DEPTH + 1)]
    return halvings[: next((i for i, g in enumerate(halvings) if g < node or g % node), len(halvings))]


def first_reaching(probe: Probe, pairs: list[tuple[int, int]], target: float) -> tuple[int, int] | None:
    """The first (gpus, batch) of `pairs` whose best plan reaches `target` tokens/s per GPU (the rest read ahead)."""
    for i, (g, b) in enumerate(pairs):
        probe.prefetch_ahead(pairs[i:])
        rate = probe(g, b)
        if rate is not None and rate >= target:
            return g, b
    return None


def smallest_batch(probe: Probe, *, gpus: int, candidates: list[int], target: float) -> int | None:
    """The smallest batch whose best plan on `gpus` reaches `target` tokens/s per GPU."""
    hit = first_reaching(probe, [(gpus, c) for c in candidates], target)
    return hit[1] if hit else None


def most_fed(probe: Probe, *, gpus: int, batch: int, node: int, target: float) -> int | None:
    """The most GPUs (halvings of `gpus`, whole nodes) whose best plan with `batch` reaches `target` per GPU."""
    hit = first_reaching(probe, [(h, batch) for h in node_halvings(gpus, node)], target)
    return hit[0] if hit else None


def advise(
    probe: Probe, *, gpus: int, global_batch: int, seq_len: int, node: int, max_tokens_per_step: int,
    rate: str = "tokens/s",
) -> list[Advice]:  # fmt: skip
    """What to tell a user whose best plan on `gpus` GPUs with `global_batch` sequences wastes them; `rate` names
    what the probe measures (the goodput's tokens/s where failures are priced)."""
    here = probe(gpus, global_batch)
    if here is None:
        return []
    more = batches(global_batch, seq_len=seq_len, max_tokens_per_step=max_tokens_per_step, gpus=gpus)[1:]
    # the scan's first probes, then the batch advice's first, side by side (as many as there are CPUs): a probe is
    # spent needlessly only where the scan stops early or finds nothing to advise, and then on a CPU that would
    # have waited
    scan = [(g, global_batch) for g in node_halvings(gpus, node)]
    first = scan + [(gpus, b) for b in more[:1]]
    probe.prefetch(first[: workers(len(first))])
    probe.speculate((gpus, b) for b in more)  # the batch advice reads these if the scan finds the GPUs underfed
    fed, best = scan_counts(probe, gpus=gpus, global_batch=global_batch, node=node)
    if fed is None or here >= WELL * best:
        return []
    tokens = global_batch * seq_len
    fewer = (
        f"global batch {global_batch} ({_tokens(tokens)} tokens) feeds {fed} GPUs at >= {WELL:.0%} of the best "
        f"per-GPU throughput on fewer GPUs ({best:,.0f} {rate} per GPU{caveat_of(best)}); on {gpus} GPUs each reaches "
        f"{here:,.0f} {rate}, {here / best:.0%} of it"
    )
    out = [Advice("gpus", fewer, fed, global_batch)]
    b = smallest_batch(probe, gpus=gpus, candidates=more, target=WELL * best)
    if b is not None:
        message = (
            f"global batch {b} ({_tokens(b * seq_len)} tokens) uses all {gpus} GPUs at >= {WELL:.0%} of "
            f"{best:,.0f} {rate} per GPU"
        )
    else:
        big = more[-1] if more else global_batch
        most = most_fed(probe, gpus=gpus, batch=big, node=node, target=WELL * best) if big != global_batch else None
        at_most = f"{most} GPUs, with global batch {big}" if most and most > fed else f"{fed} GPUs"
        message = (  # the user's own batch past the bound: no larger one was tried, and it is not "up to" (audit)
            f"global batch {global_batch} is already above --max-tokens-per-step {_tokens(max_tokens_per_step)}: no "
            f"larger one was tried; use at most {at_most}, or raise --max-tokens-per-step"
            if tokens > max_tokens_per_step
            else f"no global batch up to {_tokens(max_tokens_per_step)} tokens per step (--max-tokens-per-step) uses "
            f"{gpus} GPUs at >= {WELL:.0%} of {best:,.0f} {rate} per GPU; use at most {at_most}"
        )
    out.append(Advice("global_batch", message, gpus, b))
    return out


def gpu_counts(
    value: str | Sequence[int], *, node: int, domain: int | None = None, cap: int | None = None
) -> list[int]:
    """`planner scale --gpus`: a comma list (1024,4096) or a range (1024..131072, the powers of two of whole nodes in
    it, up to `cap`)."""
    if not isinstance(value, str):
        counts = list(value)
    elif ".." in value:
        counts = gpu_range(value, node=node, domain=domain, cap=cap)
    else:
        try:
            counts = [int(x) for x in listed(value, "gpus")]
        except ValueError:
            raise PlannerError(f"--gpus {value!r}: give counts separated by commas or a range LO..HI") from None
    if not counts or any(isinstance(g, bool) or not isinstance(g, int) or not 1 <= g <= MAX_DEGREE for g in counts):
        raise PlannerError(f"--gpus {value!r}: give whole counts from 1 to {MAX_DEGREE}")
    if len(counts) > MAX_COUNTS:
        raise PlannerError(f"--gpus {value!r}: {len(counts)} counts, at most {MAX_COUNTS} (one search each)")
    return sorted(set(counts))


def gpu_range(text: str, *, node: int, domain: int | None = None, cap: int | None = None) -> list[int]:
    """`LO..HI`: the counts a reservation is made of, from LO to HI, with LO and HI themselves: powers of two, or
    on NVLink domains that are not (72 on NVL72 racks) whole domains doubled (72, 144, 288, ...); only counts of
    whole nodes. `cap` (a cluster's GPUs): no count above it, and the cap itself where the range reaches it."""
    lo_s, _, hi_s = text.partition("..")
    try:
        lo, hi = int(lo_s), int(hi_s)
    except ValueError:
        raise PlannerError(f"--gpus {text!r}: give a count (1024) or a range LO..HI (1024..131072)") from None
    if not 1 <= lo < hi:
        raise PlannerError(f"--gpus {text!r}: a range needs 1 <= LO < HI")
    if hi > MAX_DEGREE:
        raise PlannerError(f"--gpus {text!r}: give counts from 1 to {MAX_DEGREE}")
    unit = count_unit(domain)
    counts = {unit << k for k in range(hi.bit_length()) if lo <= unit << k <= hi} | {lo, hi}
    if cap is not None and cap < lo:
        raise PlannerError(f"--gpus {text!r}: the range starts above the cluster's {cap:,} GPUs")
    if cap is not None and cap < hi:
        counts = {g for g in counts if g <= cap} | {cap}
    out = sorted(g for g in counts if g % node == 0)
    if not out:
        raise PlannerError(f"--gpus {text!r}: no count in the range holds whole nodes of {node} GPUs")
    if len(out) == 1:  # nothing to choose among: said, not searched as a plain count
        raise PlannerError(
            f"--gpus {text!r}: only {out[0]} in the range holds whole nodes of {node} GPUs; give --gpus {out[0]}, "
            "or a range with more counts"
        )
    return out


def count_unit(domain: int | None) -> int:
    """What a reservation's counts double: 1 (powers of two) where the NVLink domain is a power of two, else the
    domain (72, 144, 288, ... on NVL72 racks)."""
    return domain if domain and domain & (domain - 1) else 1


def count_hint(gpus: int, domain: int | None) -> str:
    """A count with more to try than `gpus`: the largest of the doubled kind (`count_unit`) at most it, 9,216 for
    10,008 GPUs of NVL72 racks."""
    unit = count_unit(domain)
    near = unit << max(0, (gpus // unit).bit_length() - 1) if gpus >= unit else gpus
    more_twos = near & -near > gpus & -gpus  # 9,216 = 2^10 x 9 for 10,008 = 2^3 x 1,251; not 576 for 1,024
    return f"a GPU count with more factors of two, e.g. {near:,}" if more_twos else "a GPU count of other factors"


def range_counts(text: str, hw: HardwareProfile) -> list[int]:
    """`gpu_range` for `hw`: its nodes and NVLink domain, and on a cluster no count above the cluster's size."""
    return gpu_range(text, node=hw.gpus_per_node, domain=hw.nvlink_domain, cap=cluster_size(hw))


def _tokens(n: float) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.0f}k"
