"""Advice when the job and the cluster do not match (explore/advice.py, api/advising.py): the rule on a synthetic
throughput curve, the GPU-count range and `--global-batch auto`, and the two searches of issue 23."""

from __future__ import annotations

import json

import pytest
from helpers import run_planner as run

from planner.api.advising import search_advised
from planner.api.choosing import choices, choose
from planner.errors import PlannerError
from planner.explore.advice import WELL, advise, batches, gpu_range, scan_counts
from planner.explore.probe import Probe


def bubble_curve(gpus: int, batch: int) -> float | None:
    """tokens/s per GPU of a pipeline whose bubble grows as each rank gets fewer sequences: 1000 · m / (m + 3)
    with m = batch · 64 / gpus micro-batches per rank; nothing fits below 64 GPUs."""
    if gpus < 64:
        return None
    m = batch * 64 / gpus
    return 1000 * m / (m + 3)


def test_scan_finds_the_largest_count_used_well(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANNER_JOBS", "1")  # in this process, so that each search is seen here (side by side below)
    calls: list[tuple[int, int]] = []

    def counted(g: int, b: int) -> float | None:
        calls.append((g, b))
        return bubble_curve(g, b)

    probe = Probe(counted)
    fed, best = scan_counts(probe, gpus=8192, global_batch=256, node=8)
    # rates: 8192 -> m=2: 400; 4096: 571; 2048: 727; 1024: 842; 512: 914; 256: 955; 128: 977; 64: 988; 32: none
    assert best == pytest.approx(1000 * 256 / 259)
    assert fed == 512  # 914 >= 0.9 * 988 = 890; 1024's 842 is not
    assert len(calls) == len(set(calls)) == 9
    probe(8192, 256)
    assert len(calls) == 9  # memoised


def test_scan_goes_on_past_a_stall():
    # a rate that stalls from 16384 to 8192 GPUs and then rises (the spine-crossing groups of issue 23's second
    # search on a 2:1 fabric): the scan stops only after two halvings in a row that beat no count before them
    rates = {16384: 136.7, 8192: 136.4, 4096: 182.7, 2048: 184.8, 1024: 184.0, 512: 180.0, 256: 190.0}
    fed, best = scan_counts(Probe(lambda g, _b: rates.get(g)), gpus=16384, global_batch=2048, node=8)
    assert (fed, best) == (4096, 184.8)  # 256's 190 is past two halvings that beat nothing: not scanned


def test_advise_names_the_count_and_the_batch():
    probe = Probe(bubble_curve)
    gpus_advice, batch_advice = advise(
        probe, gpus=8192, global_batch=256, seq_len=4096, node=8, max_tokens_per_step=1 << 24
    )
    assert (gpus_advice.kind, gpus_advice.gpus, gpus_advice.global_batch) == ("gpus", 512, 256)
    assert "feeds 512 GPUs" in gpus_advice.message and "40%" in gpus_advice.message  # 400 / 988
    # 8192 GPUs need m / (m + 3) >= 0.9 * 988 / 1000: m >= 24.2 micro-batches, a batch of >= 3,100 sequences: 4096
    assert (batch_advice.kind, batch_advice.gpus, batch_advice.global_batch) == ("global_batch", 8192, 4096)
    assert bubble_curve(8192, 4096) >= WELL * bubble_curve(64, 256) > bubble_curve(8192, 2048)
    # within 8M tokens per step (2048 sequences of 4096) no batch does; the largest, 2048, feeds 4096 GPUs well
    # (m = 32: 914 >= 889), which the batch asked for (512 GPUs) does not say (audit)
    (_, bounded) = advise(probe, gpus=8192, global_batch=256, seq_len=4096, node=8, max_tokens_per_step=1 << 23)
    assert bounded.global_batch is None and "use at most 4096 GPUs, with global batch 2048" in bounded.message
    assert bubble_curve(4096, 2048) >= WELL * bubble_curve(64, 256) > bubble_curve(8192, 2048)


def test_a_batch_already_above_the_bound_is_said_so_not_scanned_up_to_it():
    """A user's batch of 33.6M tokens with the default 16.8M bound read 'no global batch up to 16.8M tokens per step
    uses 65536 GPUs' (audit): no larger batch was tried, and the advice says so."""
    probe = Probe(bubble_curve)
    (_, said) = advise(probe, gpus=8192, global_batch=2048, seq_len=4096, node=8, max_tokens_per_step=1 << 22)
    assert said.global_batch is None
    assert said.message.startswith("global batch 2048 is already above --max-tokens-per-step 4.2M: no larger")
    assert "use at most 4096 GPUs, or raise --max-tokens-per-step" in said.message


def test_no_advice_when_the_gpus_are_used_well():
    probe = Probe(bubble_curve)
    assert advise(probe, gpus=128, global_batch=256, seq_len=4096, node=8, max_tokens_per_step=1 << 24) == []


def test_range_and_batch_parsing():
    assert gpu_range("1024..131072", node=8) == [1 << k for k in range(10, 18)]
    assert gpu_range("100..300", node=4) == [100, 128, 256, 300]
    assert gpu_range("1024..131072", node=8, domain=8) == [1 << k for k in range(10, 18)]
    # NVL72 racks: whole racks doubled, and the ends
    assert gpu_range("1000..10000", node=4, domain=72) == [1000, 1152, 2304, 4608, 9216, 10000]
    assert batches(512, seq_len=8192, max_tokens_per_step=1 << 24) == [512, 1024, 2048]
    for bad in ("8..4", "a..b", "0..8", "2..2147483649"):  # the last: a count no plan can have (it crashed search)
        with pytest.raises(PlannerError, match="--gpus"):
            gpu_range(bad, node=8)
    with pytest.raises(PlannerError, match="whole nodes of 72"):
        gpu_range("8..64", node=72)
    with pytest.raises(PlannerError, match="only 1000 in the range holds whole nodes of 8 GPUs; give --gpus 1000"):
        gpu_range("1000..1020", node=8)


def test_llama405_on_131072_gpus_is_told_how_many_gpus_its_batch_feeds():
    """Issue 23's first search: 512 sequences of 8192 on 131,072 H100s. The advice names a count well below it,
    and no batch within 16M tokens uses all of them."""
    a = search_advised("llama3-405b", gpus=131072, hardware=None, engine=None, top=1)
    kinds = {x.kind: x for x in a.advice}
    assert set(kinds) == {"gpus", "global_batch"}
    assert 1024 <= kinds["gpus"].gpus <= 8192 and kinds["gpus"].global_batch == 512
    assert kinds["global_batch"].global_batch is None
    # the probes ran searches the search's own header time leaves out: counted and timed (audit: 5.5 s of advice
    # under a header of 1.2 s, Kimi-K2 on 4,608 GB200s)
    assert a.probe_searches >= 3 and a.probe_s > 0 and a.probes_json()["searches"] == a.probe_searches


def test_the_16384_gpu_search_on_a_2_to_1_fabric_is_told_its_count():
    """Issue 23's second search on the shipped 2:1 fat tree: per-GPU throughput stalls from 16,384 to 8,192 GPUs (the
    data-parallel groups still cross the spine) and rises below; the advice still names the count."""
    code, out, err = run("search", "-m", "llama3-405b", "--gpus", "16384", "--global-batch", "2048",
                         "--cluster", "rail-fat-tree-2to1", "--top", "1", "--json")  # fmt: skip
    assert code == 0, err
    (gpus,) = [a for a in json.loads(out)["advice"] if a["kind"] == "gpus"]
    assert 2048 <= gpus["gpus"] <= 8192 and gpus["global_batch"] == 2048
    assert json.loads(out)["advice_probes"]["searches"] >= 3


def test_range_chooses_the_count_and_the_cli_prints_and_emits_it():
    code, out, err = run("search", "-m", "llama3-70b", "--gpus", "256..2048", "--global-batch", "256", "--json")
    assert code == 0, err
    doc = json.loads(out)
    chosen = [a for a in doc["advice"] if a["kind"] == "chosen_gpus"]
    assert len(chosen) == 1 and chosen[0]["gpus"] in (256, 512, 1024, 2048)
    # each count's best, as data (it was only inside the message): the choice is the most GPUs within 90% of the best
    rates = {c["gpus"]: c["best_per_gpu"] for c in chosen[0]["counts"]}
    assert list(rates) == [256, 512, 1024, 2048] and chosen[0]["unit"] == "tokens/s per GPU"
    top = max(r for r in rates.values() if r)
    assert chosen[0]["gpus"] == max(g for g, r in rates.items() if r and r >= 0.9 * top)
    assert all(f"{g}: {r:,.0f}" in chosen[0]["message"] for g, r in rates.items() if r)
    assert (
        doc["plans"][0]["plan"]["dp"]
        * doc["plans"][0]["plan"]["tp"]
        * doc["plans"][0]["plan"]["pp"]
        * doc["plans"][0]["plan"]["cp"]
        == chosen[0]["gpus"]
    )
    code, out, err = run("search", "-m", "llama3-70b", "--gpus", "256..2048", "--global-batch", "256", "--top", "1")
    assert code == 0 and "chosen: " in out
    for bad in (("--gpus", "0"), ("--gpus", "8..x"), ("--global-batch", "most")):
        code, out, err = run("search", "-m", "llama3-8b", *(("--gpus", "64") if bad[0] != "--gpus" else ()), *bad)
        assert code == 2 and out == "" and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_global_batch_auto_takes_the_smallest_batch_used_well():
    a = search_advised("llama3-70b", gpus=1024, hardware=None, engine=None, global_batch="auto", top=1)
    (chosen,) = [x for x in a.advice if x.kind == "chosen_global_batch"]
    assert chosen.global_batch == a.result.space.global_batch in (512, 1024, 2048)
    assert not a.global_batch_default


def test_global_batch_auto_stays_within_max_tokens_per_step():
    """The doubling starts at the largest power of two within the bound; below one sequence, one line and exit 2."""
    a = search_advised(
        "llama3-8b", gpus=64, hardware=None, engine=None, global_batch="auto", max_tokens_per_step=1_000_000, top=1
    )
    assert a.result.space.global_batch * a.result.space.seq_len <= 1_000_000
    code, out, err = run("search", "-m", "llama3-8b", "--gpus", "64", "--global-batch", "auto",
                         "--max-tokens-per-step", "1000")  # fmt: skip
    assert code == 2 and out == "" and "below one sequence" in err and len(err.strip().splitlines()) == 1


def test_no_throughput_advice_for_a_ranking_by_memory():
    """llama3-8b on 64 GPUs at 4M tokens is advised when ranked by throughput only if its best plan idles; ranked by
    memory, whose first plan is the smallest and not the fastest, it never is."""
    a = search_advised("llama3-8b", gpus=64, hardware=None, engine=None, objective="memory", top=1)
    assert [x for x in a.advice if x.kind in ("gpus", "global_batch")] == []


def _rate_or_refuse(gpus: int, batch: int) -> float:
    if gpus == 3:
        raise PlannerError("three GPUs make up no degrees")
    return gpus * 10.0 + batch


@pytest.mark.timeout(60)
def test_the_scan_side_by_side_finds_what_it_finds_in_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a search takes SIDE_BY_SIDE_S or more, the scan and the batch search search the probes they may read
    next side by side (Probe.prefetch_ahead), as many as there are workers: the advice is the one the probes read
    in turn give. Faster searches run in turn (here: every search is counted in this process)."""
    found, here = {}, {}
    for jobs, seconds in (("1", 1.0), ("2", 1.0), ("2", 0.001)):
        monkeypatch.setenv("PLANNER_JOBS", jobs)
        calls: list[tuple[int, int]] = []

        def counted(g: int, b: int, calls: list[tuple[int, int]] = calls) -> float | None:
            calls.append((g, b))
            return bubble_curve(g, b)

        probe = Probe(counted)
        probe.know(8192, 256, bubble_curve(8192, 256), seconds)  # the search the advice is about, and its time
        found[jobs, seconds] = (
            scan_counts(probe, gpus=8192, global_batch=256, node=8),
            advise(probe, gpus=8192, global_batch=256, seq_len=4096, node=8, max_tokens_per_step=1 << 24),
        )
        here[jobs, seconds] = len(calls)
    assert found["1", 1.0] == found["2", 1.0] == found["2", 0.001]
    assert found["1", 1.0][0][0] == 512 and len(found["1", 1.0][1]) == 2
    assert here["2", 1.0] < here["1", 1.0] == here["2", 0.001]  # side by side: searched in workers, not here


def test_prefetch_asks_each_pair_once_and_keeps_a_refusal_for_the_call() -> None:
    """Probe.prefetch searches side by side what the calls would ask, each pair once; the calls then only read. A
    refused pair had kept nothing: the call searched it again, and the advice's count (and time) held it twice."""
    asked: list[tuple[int, int]] = []

    def best_at(g: int, b: int) -> float:
        asked.append((g, b))
        return _rate_or_refuse(g, b)

    probe = Probe(best_at)
    probe.know(8, 1, 5.0)
    probe.prefetch([(8, 1), (16, 2), (16, 2), (3, 1)])
    asked_before = len(asked)
    assert probe.searched == 2  # (16, 2) and (3, 1): a known or repeated pair is no search
    assert probe(16, 2) == 162.0 and probe(8, 1) == 5.0
    for _ in range(2):
        with pytest.raises(PlannerError, match="three GPUs"):
            probe(3, 1)
    probe.prefetch([(3, 1)])
    assert len(asked) == asked_before and probe.searched == 2  # the refusal is raised, not searched again
    for _ in range(2):  # a pair read in turn, not prefetched, that refuses: searched once too
        with pytest.raises(PlannerError, match="three GPUs"):
            probe(3, 2)
    assert probe.searched == 3 and asked.count((3, 2)) == 1


def test_a_range_searched_side_by_side_chooses_what_one_in_turn_chooses(monkeypatch: pytest.MonkeyPatch) -> None:
    args = {"gpus": "1024..16384", "hardware": None, "engine": None, "global_batch": "auto"}
    monkeypatch.setenv("PLANNER_JOBS", "2")
    apart = search_advised("llama3-70b", **args)
    monkeypatch.setenv("PLANNER_JOBS", "1")
    in_turn = search_advised("llama3-70b", **args)
    assert [a.as_json() for a in apart.advice] == [a.as_json() for a in in_turn.advice]
    assert apart.result.space.gpus == in_turn.result.space.gpus
    assert apart.result.space.global_batch == in_turn.result.space.global_batch
    assert apart.result.best is not None and in_turn.result.best is not None
    assert apart.result.best.plan == in_turn.result.best.plan


def test_the_read_ahead_takes_the_scans_own_pairs_before_a_later_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With two workers the scan reads ahead the count it needs and its next halving (side-by-side searches finish
    together: a larger batch's probe beside each halving held the scan up), a later step's pairs (speculate) filling
    the CPUs only past the scan's end; pairs already known are not searched again."""
    monkeypatch.setenv("PLANNER_JOBS", "2")
    probe = Probe(lambda g, b: float(g + b))
    probe.know(1024, 64, 1.0, 1.0)  # a slow search: worth reading ahead
    asked: list[list[tuple[int, int]]] = []
    monkeypatch.setattr(Probe, "prefetch", lambda self, pairs: asked.append(list(pairs)))
    probe.speculate([(1024, 128), (1024, 256)])
    probe.prefetch_ahead([(512, 64), (256, 64), (128, 64)])
    probe.know(256, 64, 2.0)
    probe.prefetch_ahead([(128, 64)])
    probe.know(1024, 128, 2.0)
    probe.prefetch_ahead([(64, 64)])
    assert asked == [[(512, 64), (256, 64)], [(128, 64), (1024, 128)], [(64, 64), (1024, 256)]]


def test_the_advice_of_several_precisions_probes_the_best_plans_and_says_so():
    """Each probe is a search: over several precisions (or --recipe-options variants, or engines) the advice
    probes only the best plan's engine and precision, and says so (the product made it 20-60 s, audit)."""
    code, out, err = run("search", "-m", "llama3-70b", "--gpus", "8192", "--precision", "bf16,fp8", "--json")
    assert code == 0, err
    doc = json.loads(out)
    best = doc["plans"][0]
    assert doc["advice"], "70B on 8192 GPUs with 4M tokens a step leaves them idle: advice expected"
    for a in doc["advice"]:
        assert a["message"].endswith(
            f"(the counts and batches probed with {best['engine']}, {best['plan']['precision']} only)"
        )
    code, out, err = run("search", "-m", "llama3-70b", "--gpus", "8192", "--json")
    assert code == 0 and all("probed with" not in a["message"] for a in json.loads(out)["advice"]), err


def test_a_range_where_nothing_fits_is_searched_at_its_largest_count_with_its_closest_misses():
    """As one count's search, a range where nothing fits is a result (exit 0): the largest count's closest misses
    and why, not an error (it exited 2 with nothing on stdout)."""
    args = ("search", "-m", "llama3-405b", "--gpus", "8..64", "--global-batch", "auto", "--json")
    code, out, err = run(*args)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["plans"] == [] and doc["closest_misses"] and doc["gpus"] == 64
    said = {a["kind"]: a["message"] for a in doc["advice"]}
    assert "nothing fits at any GPU count of the range 8..64" in said["chosen_gpus"]
    (chosen,) = [a for a in doc["advice"] if a["kind"] == "chosen_gpus"]
    assert chosen["counts"] == [{"gpus": g, "best_per_gpu": None} for g in (8, 16, 32, 64)]
    assert "no batch tried fits on 64 GPUs" in said["chosen_global_batch"]


def test_auto_batches_take_an_odd_factor_of_the_gpu_count():
    """On 1,152 GB200s (16 racks of 72 = 128 x 9) power-of-two batches leave the 9 to the pipeline (dp 16 pp 9
    at 451 tokens/s per GPU); auto also tries 576 and 1,152, which data parallelism can take (dp 18 pp 8)."""
    assert batches(512, seq_len=8192, max_tokens_per_step=16777216, gpus=1152) == [512, 576, 1024, 1152, 1728,
                                                                                   2016, 2048]  # fmt: skip
    assert batches(512, seq_len=8192, max_tokens_per_step=16777216, gpus=1024) == [512, 1024, 2048]
    a = search_advised("llama3-405b", gpus=1152, hardware="gb200-nvl72", engine=None, global_batch="auto", top=1)
    plan = a.result.top[0].plan
    assert plan.global_batch % 9 == 0 and plan.dp % 9 == 0


def test_auto_fills_the_token_bound_with_batches_a_data_parallel_degree_divides():
    """Kimi-K2 on 36,864 GB200s (2^12 x 9): the doublings of 9 pass the 16.8M-token bound after 1,152 sequences,
    which pp 32 runs as 8 micro-batches; the largest batches under the bound that dp 72 ... 576 divide (2,016 and
    1,728) run 14 and 12, and auto takes 2,016: 8.3 days to train 15.5T tokens, where 1,152 took 13.0."""
    assert 2016 in batches(512, seq_len=8192, max_tokens_per_step=16777216, gpus=36864)
    assert batches(512, seq_len=8192, max_tokens_per_step=16777216, gpus=4096) == [512, 1024, 2048]  # no odd factor
    a = search_advised("kimi-k2", gpus=36864, hardware="gb200-nvl72", engine=None, global_batch="auto", top=1)
    assert a.result.top[0].plan.global_batch == 2016


def test_a_count_no_plan_can_use_names_one_of_the_doubled_kind_nearby():
    """10,008 GPUs of NVL72 racks (72 x 139): the way out is 9,216 (72 x 128), not 'a power of two'."""
    code, out, err = run("search", "-m", "llama3-70b", "--hardware", "gb200-nvl72", "--gpus", "10008")
    assert code == 2 and out == "" and "a GPU count with more factors of two, e.g. 9,216" in err


# tokens/s per GPU of the audit's search (Llama 3.1 405B on the 2:1 fat tree, failures priced) at each count and
# batch `auto` tries
AUDIT_RATES = {
    1024: {512: 190.4, 1024: 195.4, 2048: 198.0},
    2048: {512: 179.9, 1024: 189.4, 2048: 194.6},
    4096: {512: 161.4, 1024: 178.3, 2048: 187.9},
    8192: {512: 129.7, 1024: 155.3, 2048: 173.6},
    16384: {512: 59.0, 1024: 123.2, 2048: 149.0},
}


def test_a_range_with_auto_chooses_the_count_and_the_batch_against_one_reference():
    """The count was measured at each count's own smallest good batch (1024: 190 at 512 sequences) and chosen at
    90% of that (8192: 174), while the advice measured against 198-200: 'chosen 8192', then 'use at most 4096'
    (audit). One reference now: the range's best at any batch, 198; 8192's 174 is below 90% of it."""
    probe = Probe(lambda g, b: AUDIT_RATES[g][b])
    c = choose(probe, sorted(AUDIT_RATES), "auto", seq_len=8192, bound=1 << 24)
    assert c.reference == 198.0 and c.gpus == 4096
    assert c.batch == 1024  # the smallest reaching 90% of 198 (178.2) on 4096 GPUs
    assert AUDIT_RATES[c.gpus][c.batch] >= WELL * c.reference > AUDIT_RATES[8192][2048]
    (gpus, batch) = choices(c, sorted(AUDIT_RATES), "auto", 8192, "tokens/s")
    assert (
        "4096 GPUs, the most whose best plan reaches >= 90% of the range's best tokens/s per GPU, 198" in gpus.message
    )
    assert "1024: 198, 2048: 195, 4096: 188, 8192: 174" in gpus.message
    assert "on 4096 GPUs reaches >= 90% of the range's best (198 tokens/s per GPU)" in batch.message
    # a single count with auto, and a range with one batch, keep their rule: each is a range of one
    one = choose(Probe(lambda g, b: AUDIT_RATES[g][b]), [8192], "auto", seq_len=8192, bound=1 << 24)
    assert (one.gpus, one.batch, one.reference) == (8192, 2048, 173.6)
    fixed = choose(Probe(lambda g, b: AUDIT_RATES[g][b]), sorted(AUDIT_RATES), 512, seq_len=8192, bound=1 << 24)
    assert (fixed.gpus, fixed.batch, fixed.reference) == (2048, 512, 190.4)


def test_the_range_search_does_not_contradict_its_choice():
    """The audit's command: its advice scanned below the chosen count at the chosen batch and measured against
    another best, contradicting the choice; after a range the choice is the count's advice."""
    code, out, err = run("search", "--model", "llama3.1-405b", "--gpus", "1024..131072", "--cluster",
                         "rail-fat-tree-2to1", "--global-batch", "auto", "--top", "1", "--json")  # fmt: skip
    assert code == 0, err
    said = {a["kind"]: a for a in json.loads(out)["advice"]}
    assert set(said) == {"chosen_gpus", "chosen_global_batch", "checkpoint"}
    assert said["chosen_gpus"]["gpus"] == said["chosen_global_batch"]["gpus"] == json.loads(out)["gpus"]


def test_the_search_at_the_chosen_pair_is_the_probes_own_where_it_would_be_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`planner scale` (top 1) with --global-batch auto searched each count's chosen (count, batch) twice: once as a
    probe, once as the count's search. Now each pair once where the caller reads the plans alone (counted=False,
    as scale does), and the result's plans are the ones a fresh search gives. The probes never count their
    rejections in full, so a caller that reads the counts (search's own top 1) has the chosen pair searched again,
    counting."""
    import planner.api as api

    monkeypatch.setenv("PLANNER_JOBS", "1")
    asked: list[tuple[int, int, bool]] = []
    real = api.run_search

    def logged(*args, **kwargs):
        asked.append((kwargs["gpus"], kwargs["global_batch"], kwargs.get("counts", True)))
        return real(*args, **kwargs)

    monkeypatch.setattr(api, "run_search", logged)
    kw = {"gpus": 1024, "hardware": None, "engine": None, "global_batch": "auto", "advice": False}
    a = search_advised("llama3-70b", top=1, counted=False, **kw)
    assert len(asked) == len(set(asked)) == 3 and not any(c for *_, c in asked)  # 512, 1024, 2048, each once
    fresh = real("llama3-70b", gpus=1024, global_batch=a.result.space.global_batch, top=1)
    assert a.result.top[0].plan == fresh.top[0].plan
    asked.clear()
    b = search_advised("llama3-70b", top=1, **kw)
    assert len(asked) == 4 and asked[-1][2]  # the chosen pair again, counting
    assert b.result.top[0].plan == fresh.top[0].plan and b.result.evaluated == fresh.evaluated
    asked.clear()
    search_advised("llama3-70b", top=2, counted=False, **kw)
    assert len(asked) == 4  # top 2 is not the probes' search: the chosen pair is searched again


def test_the_advice_says_when_its_reference_plan_is_flagged():
    """The reference rate the advice measures the GPUs against came from a count whose plan predicts an MFU above
    the best published (Llama 3 405B: 512 H100s at 54%), said as plain fact (audit). A flagged rate says where it was
    found and what flags it, through a forked probe's pickle as well."""
    import pickle

    from planner.explore.probe_rate import Rate, caveat_of

    rate = pickle.loads(pickle.dumps(Rate(200.0, 512, "may not fit")))
    assert rate == 200.0 and caveat_of(rate) == ", found on 512 GPUs, whose plan may not fit"
    assert caveat_of(200.0) == caveat_of(Rate(200.0, 512)) == ""
    probe = Probe(lambda g, b: None if (r := bubble_curve(g, b)) is None else Rate(r, g, "may not fit" * (g == 64)))
    gpus_advice, _ = advise(probe, gpus=8192, global_batch=256, seq_len=4096, node=8, max_tokens_per_step=1 << 24)
    assert "(988 tokens/s per GPU, found on 64 GPUs, whose plan may not fit)" in gpus_advice.message


def test_a_range_choice_says_when_its_reference_plan_is_flagged():
    from planner.api.choosing import Choice, choices
    from planner.explore.probe_rate import Rate

    ref = Rate(195.0, 1024, "predicts an MFU above the best published")
    (said,) = choices(Choice(512, 2048, ref, {1024: ref, 2048: 185.0}), [1024, 2048], None, 8192, "tokens/s")
    assert "best tokens/s per GPU, 195, found on 1024 GPUs, whose plan predicts an MFU above" in said.message


def test_a_range_whose_chosen_plan_idles_at_the_default_batch_points_to_auto():
    """A range search scans no batches (its choice is measured against the range's best), and said nothing where the
    plan chosen at 9,216 GB200s idles 62% of its step at the default 512 sequences, which --global-batch auto more
    than doubles (review): one line says so, with the idle share; with auto given, it is not said."""
    args = ("search", "-m", "llama3.1-405b", "--cluster", "gb200-nvl72-superpod", "--gpus", "9216..147456", "--top",
            "1", "--json")  # fmt: skip
    code, out, err = run(*args)
    assert code == 0, err
    doc = json.loads(out)
    said = [a for a in doc["advice"] if a["kind"] == "global_batch" and "idles" in a["message"]]
    t = doc["plans"][0]["time"]
    idle = (t["bubble_s"] + sum(t["exposed_comm_s"].values())) / t["step_s"]
    assert len(said) == 1 and idle >= 0.25 and f"idles {idle:.0%} of its step" in said[0]["message"]
    assert said[0]["global_batch"] is None  # it names no batch: the field is the batch advised, or null
    code, out, err = run(*args, "--global-batch", "auto")
    assert code == 0 and not any("idles" in a["message"] for a in json.loads(out)["advice"]), err
