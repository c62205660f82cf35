"""What cost/moments.py assumes of torch.distributed.pipelining, run on two gloo ranks (stage_reduce_probe.py): its
ScheduleInterleaved1F1B runs a rank's chunk passes in the order rank_ops gives, and an FSDP2 stage holds unsharded
gradients from its first backward until its own last backward of the step, not to the end of the step."""

from __future__ import annotations

import json

import pytest

from planner.cost.moments import interleaved_moments, rank_ops
from tests.launch.conftest import run_probe
from tests.launch.stage_reduce_probe import CHUNKS, MICROBATCHES

PP = 2


@pytest.fixture(scope="module")
def probed(tmp_path_factory) -> dict[int, dict[int, dict[str, list]]]:
    out = tmp_path_factory.mktemp("stage_reduce")
    run_probe("stage_reduce_probe.py", out, nproc=PP)
    return {r: {int(m): run for m, run in json.loads((out / f"rank{r}.json").read_text()).items()} for r in range(PP)}


def _alive_before_each_backward(ops: tuple[tuple[bool, int], ...]) -> list[list[int]]:
    """The chunks with gradients when each backward starts, if a chunk's live from the end of its first backward to
    the end of its last (independent of cost.moments' own bookkeeping)."""
    backwards = [i for i, (forward, _c) in enumerate(ops) if not forward]
    first = {c: min(i for i in backwards if ops[i][1] == c) for c in range(CHUNKS)}
    last = {c: max(i for i in backwards if ops[i][1] == c) for c in range(CHUNKS)}
    return [[c for c in range(CHUNKS) if first[c] < i <= last[c]] for i in backwards]


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_torch_frees_an_interleaved_stages_gradients_after_its_own_last_backward(probed):
    """Measured on torch 2.13 CPU, pp 2 with 2 chunks a rank: the op order is rank_ops' for one group of micro-batches
    (m = pp) and for two, and each backward finds exactly the chunks whose gradients that lifetime keeps. With one
    group no rank ever holds both chunks' gradients, so no moment of its peak holds both (interleaved_moments); with
    two it does."""
    for rank, runs in probed.items():
        assert sorted(runs) == sorted(MICROBATCHES)
        for m, run in runs.items():
            ops = rank_ops(PP, CHUNKS, m, rank)
            assert [tuple(op) for op in run["ops"]] == list(ops), (rank, m)
            assert run["alive"] == _alive_before_each_backward(ops), (rank, m)
    assert all(len(held) < CHUNKS for runs in probed.values() for held in runs[PP]["alive"])
    assert any(len(held) == CHUNKS for held in probed[0][2 * PP]["alive"])
    assert all(len(mo.grads) == 1 for r in range(PP) for mo in interleaved_moments(PP, CHUNKS, PP, r))
    assert [mo.grads for mo in interleaved_moments(PP, CHUNKS, 2 * PP, 0)] == [(0, 1)]
