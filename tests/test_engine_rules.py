"""One small, hand-checked test per engine rule (planner/engine/rules.py, planner/engine/split.py).

Each docstring cites the engine source the rule comes from, at these commits: Megatron-LM @d98e8a64, torchtitan
v0.2.2 @73a0e69 and torch pipelining, DeepSpeed v0.16.4 @38327e0, Composer @6405188 and llm-foundry @8c8dd48. Every
rejection is also checked for naming the offending value in its detail, so a user sees what to change.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from planner.cost.estimate import estimate
from planner.cost.params import padded_vocab
from planner.engine import Engine
from planner.engine.recipes import precision_problems
from planner.engine.rules import batch_problems, engine_problems, plan_problems, structure_problems
from planner.engine.split import (
    TorchtitanSplit,
    balanced_sizes,
    chunk_sizes,
    even_chunk_sizes,
    megatron_chunk_sizes,
    torchtitan_chunk_sizes,
    torchtitan_split,
)
from planner.engine.zero_rules import zero_problems
from planner.errors import PlannerError
from planner.io.catalog import catalog_root, list_engines, load_engine, load_hardware, load_model
from planner.plan import Plan, Rejected
from planner.specs import ModelSpec

PROFILES = catalog_root() / "engine_profiles"


@cache
def engine(name: str) -> Engine:
    return load_engine(name)


@cache
def model(name: str) -> ModelSpec:
    return load_model(name)


def only(problems: list[Rejected], reason: str) -> Rejected:
    """The one rejection whose reason contains `reason` (and there is exactly one)."""
    hits = [r for r in problems if reason in r.reason]
    assert len(hits) == 1, f"expected one rejection matching {reason!r}, got {problems}"
    return hits[0]


def reasons(problems: list[Rejected]) -> list[str]:
    return [r.reason for r in problems]


# ---- every engine ----------------------------------------------------------------------------------------


def test_every_catalog_engine_loads():
    """Every engine_profiles/*.yaml validates into an Engine whose name is its file name."""
    names = list_engines()
    assert {"megatron", "torchtitan", "deepspeed", "megatron-deepspeed", "llm-foundry", "planner"} <= set(names)
    assert sorted(names) == sorted(p.stem for p in PROFILES.glob("*.yaml"))
    for name in names:
        e = load_engine(name)
        assert isinstance(e, Engine)
        assert e.name == name
        assert e.rules.zero, f"{name} runs no ZeRO stage"


# Numeric rule lines that carry no `#` source comment today (file, stripped line). Reported, not failed on;
# any other uncommented numeric line under `rules:` fails the test below.
KNOWN_UNCOMMENTED_NUMBERS = {
    ("deepspeed.yaml", "bucket_bytes: 1.0e9"),  # zero 2, zero 3, zero_pp 1 (zero 1's carries the source)
    ("megatron-deepspeed.yaml", "bucket_bytes: 1.0e9"),  # zero 2, zero 3
}
_NUMBER_LINE = re.compile(r"^\s+[\w-]+:\s*-?\d[\d.eE+-]*\s*(#.*)?$")


def _rule_lines(path: Path):
    """(line number, line) of the non-comment lines inside the top-level `rules:` block."""
    inside = False
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if line and not line[0].isspace():
            inside = line.startswith("rules:")
            continue
        if inside and line.strip() and not line.lstrip().startswith("#"):
            yield i, line


def test_numeric_rule_fields_cite_a_source():
    """Every numeric field line under `rules:` in engine_profiles/*.yaml carries a `#` comment naming the
    engine source it comes from (profile.py: "every field is commented in the YAML with the engine source
    file it comes from"). Boolean lines are not checked: many (fp32_params, accumulate_unsharded,
    context_parallel, fp8, ...) carry no comment of their own."""
    missing = []
    for path in sorted(PROFILES.glob("*.yaml")):
        for i, line in _rule_lines(path):
            if _NUMBER_LINE.match(line) and "#" not in line:
                missing.append((path.name, i, line.strip()))
    unknown = [m for m in missing if (m[0], m[2]) not in KNOWN_UNCOMMENTED_NUMBERS]
    assert not unknown, f"numeric rule lines without a source comment: {unknown}"


# ---- Megatron-LM -----------------------------------------------------------------------------------------


def test_megatron_has_no_zero2():
    """Megatron-LM's modelled data-parallel paths are DDP (zero 0), --use-distributed-optimizer (zero 1,
    distrib_optimizer.py) and --use-torch-fsdp2 (zero 3, arguments.py l.1031-1049); the profile has no
    zero 2. (Megatron does have ZeRO-2-like modes the profile leaves out: --torch-fsdp2-no-reshard-after-
    forward, arguments.py l.3218-3220, and Megatron-FSDP optim_grads, l.3190-3192.)"""
    plan = Plan(dp=8, zero=2, global_batch=8)
    r = only(zero_problems(engine("megatron"), plan, model=model("llama3-8b")), "megatron has no zero 2")
    assert "zero=2" in r.detail


def test_megatron_fsdp2_refused_with_pp():
    """--use-torch-fsdp2: `pp == 1`, "not supported with pipeline parallelism"
    (megatron/training/arguments.py l.1031-1049)."""
    plan = Plan(dp=4, pp=2, zero=3, global_batch=8)
    r = only(engine_problems(engine("megatron"), model("llama3-8b"), plan), "zero 3 with pp")
    assert "zero=3" in r.detail and "pp=2" in r.detail
    assert not zero_problems(engine("megatron"), plan, zero=1, model=model("llama3-8b"))


def test_megatron_runs_zero3_with_ep_as_megatron_fsdp():
    """--use-torch-fsdp2 needs expert_model_parallel_size == 1 (megatron/training/arguments.py l.1031-1049), so with
    ep > 1 Megatron runs ZeRO-3 as Megatron-FSDP (--use-megatron-fsdp, optim_grads_params), which shards the experts
    over their own mesh and needs no untied embeddings (Megatron-Bridge's DeepSeek-V3 on 64 GB300: ep 64, tp 1,
    pp 1). It reduce-scatters every backward (megatron_fsdp.py l.757-774), as FSDP2 does; no functional test runs
    it with pp, which stays refused."""
    e, mixtral = engine("megatron"), model("mixtral-8x7b")
    plan = Plan(dp=8, ep=2, zero=3, global_batch=8)
    assert not engine_problems(e, mixtral, plan)
    fsdp = e.zero_stage(plan)
    assert fsdp.mechanism.startswith("Megatron-FSDP") and not fsdp.untied_embeddings
    assert (fsdp.grad_reduce, fsdp.weight_gather, fsdp.grad_collective) == (
        "microbatch",
        "microbatch",
        "reduce_scatter",
    )
    assert e.zero_stage(plan.model_copy(update={"ep": 1})).mechanism.startswith("torch FSDP2")
    with_pp = plan.model_copy(update={"pp": 2, "dp": 4})
    assert "zero=3" in only(engine_problems(e, mixtral, with_pp), "zero 3 with pp").detail


def test_a_run_may_ask_megatron_for_megatron_fsdp_on_a_dense_model():
    """comm.megatron_fsdp (--megatron-fsdp): the dense plan's ZeRO-3 runs as the Megatron-FSDP stage, with its own
    rules: a model that ties its embeddings runs (torch FSDP2 needs them untied, arguments.py), and the
    precision-aware optimizer runs on it (its distributed optimizer) with fp32 main weights of its own, 8 bytes of
    optimizer state a parameter (param_remainders false) rather than the 6 of the distributed optimizer's
    remainders. Engines without the stage refuse the switch by name, and zero 1 says it changes nothing."""
    from planner.api.idle import changing_nothing
    from planner.cost.states import state_bytes_per_param

    e, tied = engine("megatron"), model("gpt3-1.3b")
    plan = Plan(dp=8, zero=3, global_batch=8)
    fsdp = e.configured(megatron_fsdp=True)
    assert fsdp.zero_stage(plan).mechanism.startswith("Megatron-FSDP") and e.zero_stage(plan).mechanism.startswith(
        "torch FSDP2"
    )  # fmt: skip
    (refused,) = [r for r in engine_problems(e, tied, plan) if r.reason == "megatron: zero 3 with tied embeddings"]
    assert refused.detail.endswith("or --megatron-fsdp (Megatron-FSDP, which runs them tied)")
    assert not engine_problems(fsdp, tied, plan)
    pao = fsdp.configured(precision_aware_optimizer=True, optimizer_moment_dtype="bf16")
    assert not plan_problems(tied, plan, pao, 8)
    assert state_bytes_per_param("bf16", pao, pao.zero_stage(plan)).optimizer == 4 + 2 + 2
    assert "torchtitan has no megatron_fsdp" in reasons(
        plan_problems(model("llama3-8b"), plan, engine("torchtitan").configured(megatron_fsdp=True), 8)
    )
    zero1 = plan.model_copy(update={"zero": 1})
    assert changing_nothing(model("llama3-8b"), zero1, fsdp) == [
        "--megatron-fsdp with zero 1: Megatron-FSDP is priced as zero 3; it changes nothing here"
    ]
    moe = Plan(dp=8, ep=8, zero=3, global_batch=8)
    assert changing_nothing(model("mixtral-8x7b"), moe, fsdp) == [
        "--megatron-fsdp with ep=8: zero 3 with experts runs as Megatron-FSDP; it changes nothing"
    ]
    assert not changing_nothing(model("llama3-8b"), plan, fsdp)


def test_megatron_fsdp2_reduces_every_micro_batch_into_sharded_gradients():
    """Megatron's TorchFullyShardedDataParallel keeps _BaseDataParallel's no_sync, which does nothing
    (megatron/core/distributed/torch_fully_sharded_data_parallel.py, data_parallel_base.py @d98e8a64), and
    training.py sets config.no_sync_func only for DDP and Megatron-FSDP: torch FSDP2's gradient sync stays on, so
    every micro-batch's gradients are reduce-scattered into the sharded ones. It was priced as FSDP2 with sync off
    (full fp32 gradients across the micro-batches: 135.5 GiB a rank for Llama 3 70B at dp 32 tp 2 on B200, audit)."""
    m, hw, eng = model("llama3-70b"), load_hardware("b200"), engine("megatron")
    one, many = (
        estimate(m, hw, Plan(dp=32, tp=2, sp=True, zero=3, recompute="full", micro_batch=2, global_batch=gb), eng)
        for gb in (64, 1024)
    )
    assert many.plan.num_microbatches == 16 and one.plan.num_microbatches == 1
    assert many.memory.peak.breakdown.gradients_bytes == pytest.approx(one.memory.peak.breakdown.gradients_bytes)
    assert many.memory.peak.breakdown.gradients_bytes < 70.6e9 * 4 / 2 / 32 * 1.01  # fp32 shards of the tp half
    assert many.time.comm_total_s["dp"] == pytest.approx(16 * one.time.comm_total_s["dp"])


def test_megatron_fsdp2_refused_with_tied_embeddings():
    """--use-torch-fsdp2 requires --untie-embeddings-and-output-weights (megatron/training/arguments.py
    l.1031-1049); gpt3-175b ties its embedding and output layer."""
    plan = Plan(dp=8, zero=3, global_batch=8)
    assert model("gpt3-175b").tied_embeddings
    r = only(engine_problems(engine("megatron"), model("gpt3-175b"), plan), "tied embeddings")
    assert "zero=3" in r.detail and "gpt3-175b" in r.detail
    assert not model("llama3-8b").tied_embeddings
    assert not engine_problems(engine("megatron"), model("llama3-8b"), plan)


@pytest.mark.parametrize(("m", "ok"), [(2, False), (3, False), (4, True), (6, True), (9, True), (12, True)])
def test_megatron_interleaved_runs_any_microbatch_count_from_pp(m, ok):
    """Megatron-Core's interleaved schedule takes the micro-batches in groups of N per virtual stage, pp <= N <= m
    with a last group of 0 or >= pp (megatron/core/pipeline_parallel/schedules.py l.1160-1180;
    --microbatch-group-size-per-virtual-pipeline-stage since Core 0.10, default pp): N = m always qualifies, so
    any m >= pp runs; fewer than pp do not. llama3-70b: 80 layers, pp 4 x vpp 2."""
    plan = Plan(pp=4, vpp=2, dp=1, micro_batch=1, global_batch=m)
    assert plan.schedule == "interleaved" and plan.num_microbatches == m
    problems = batch_problems(engine("megatron"), plan)
    assert not structure_problems(engine("megatron"), model("llama3-70b"), plan)  # a rule on m, not the structure
    if ok:
        assert not problems
    else:
        r = only(problems, "interleaved needs at least pp micro-batches")
        assert f"not {m}" in r.detail and "pp=4" in r.detail
    megatron = engine("megatron")  # before Core 0.10: m a multiple of pp
    older = megatron.model_copy(
        update={"rules": megatron.rules.model_copy(update={"interleaved_microbatches": "multiple_of_pp"})}
    )
    assert bool(batch_problems(older, plan)) == (m < 4 or m % 4 != 0)


def test_megatron_has_no_gpipe():
    """Megatron-Core's pipeline schedules are forward_backward_pipelining_without_interleaving (1F1B) and
    forward_backward_pipelining_with_interleaving (megatron/core/pipeline_parallel/schedules.py); no GPipe."""
    plan = Plan(pp=2, dp=1, global_batch=4, schedule="gpipe")
    r = only(structure_problems(engine("megatron"), model("llama3-8b"), plan), "no gpipe schedule")
    assert "schedule=gpipe" in r.detail
    assert not structure_problems(engine("megatron"), model("llama3-8b"), plan.model_copy(update={"schedule": "1f1b"}))


@pytest.mark.parametrize("name", ["megatron", "torchtitan", "megatron-deepspeed"])
def test_sequence_parallelism_needs_tp_to_divide_the_local_sequence(name):
    """Megatron-Core _split_along_first_dim (tensor_parallel/mappings.py @d98e8a64) and torchtitan's
    seq_len_divisor (parallel_dims.py, v0.2.2) assert it; a search ranked tp 4 with sp at seq_len 8191 first, and
    launch wrote `--sequence-parallel --seq-length 8191` (audit)."""
    e, llama = engine(name), model("llama3-8b")
    plan = Plan(tp=8, cp=2, sp=True, dp=1, seq_len=8200, global_batch=1)
    r = only(plan_problems(llama, plan, e, 16), "tp does not divide the sequence (sp)")
    assert r.detail == "sp: tp=8 must divide seq_len/cp = 4100"
    assert "tp does not divide the sequence (sp)" not in {
        x.reason for x in plan_problems(llama, plan.model_copy(update={"seq_len": 8192}), e, 16)
    }


def test_megatron_torch_fsdp2_refuses_fp16_at_any_data_parallel_size_and_ep_goes_to_megatron_fsdp():
    """arguments.py l.1031-1049 @d98e8a64 asserts ep == 1 and not fp16 whenever --use-torch-fsdp2 is given: the
    emitted files crashed in validate_args (audit: fp16 at dp 8; ep 4 at dp 1, where the stage shards nothing).
    With ep the planner runs ZeRO-3 as Megatron-FSDP instead."""
    e = engine("megatron")
    fp16 = Plan(dp=8, zero=3, precision="fp16", global_batch=16)
    assert only(zero_problems(e, fp16), "zero 3 with fp16").detail.startswith("zero=3 (torch FSDP2")
    assert not zero_problems(e, fp16.model_copy(update={"precision": "bf16"}))
    at_one = Plan(tp=4, dp=1, ep=4, sp=True, zero=3, global_batch=16)  # with ep: Megatron-FSDP, no such assert
    assert not zero_problems(e, at_one) and e.zero_stage(at_one).mechanism.startswith("Megatron-FSDP")


def test_megatron_cp_needs_seq_len_divisible_by_2cp():
    """assert args.seq_length % (args.context_parallel_size * 2) == 0 when cp > 1
    (megatron/training/arguments.py l.1335-1338). 4100 = 4 x 1025 divides by cp but not by 2 cp = 8."""
    e, llama = engine("megatron"), model("llama3-8b")
    plan = Plan(cp=4, dp=1, seq_len=4100, global_batch=1)
    r = only(structure_problems(e, llama, plan), "cp needs seq len divisible by 2 cp")
    assert "seq_len=4100" in r.detail and "2 x cp = 8" in r.detail
    assert not structure_problems(e, llama, plan.model_copy(update={"seq_len": 4096}))
    # cp = 1: no divisor at all.
    assert not structure_problems(e, llama, Plan(cp=1, seq_len=2047))


def test_megatron_vocab_padded_to_multiple_of_128_tp():
    """--make-vocab-size-divisible-by 128 (arguments.py l.2441): padded V = ceil(V / (128 tp)) x 128 tp
    (megatron/core/tokenizers/utils/build_tokenizer.py vocab_size_with_padding l.133-140). GPT-3's 50257:
    tp 8 -> 51200 (= 50 x 1024), tp 1 -> 50304 (= 393 x 128). Padding means tp need not divide V."""
    e = engine("megatron")
    assert e.rules.vocab_padding == 128
    assert padded_vocab(50257, 8, e.rules.vocab_padding) == 51200
    assert padded_vocab(50257, 1, e.rules.vocab_padding) == 50304
    assert padded_vocab(128256, 8, e.rules.vocab_padding) == 129024  # the notes' Llama 3 example
    plan = Plan(tp=8, sp=True, dp=1, global_batch=1)
    assert "tp does not divide vocab" not in reasons(engine_problems(e, model("gpt3-175b"), plan))


def test_megatron_replicates_kv_heads():
    """num_query_groups "must be a multiple or divisor of tensor_model_parallel_size"
    (megatron/core/transformer/transformer_config.py l.1446-1468): llama3-70b's 8 kv heads at tp 16 are
    replicated, 2 ranks per head."""
    llama = model("llama3-70b")
    assert llama.kv_heads == 8
    plan = Plan(tp=16, sp=True, dp=1, global_batch=1)
    assert not plan_problems(llama, plan, engine("megatron"), gpus=16)


def test_megatron_split_even():
    """No VPP, no uneven options: num_layers % pp == 0 and each stage gets L / pp
    (megatron/training/arguments.py l.985-998). GPT-3 175B: 96 layers, pp 8 -> 12 each."""
    assert megatron_chunk_sizes(96, 8, 1) == [12] * 8
    assert chunk_sizes(96, 8, 1, engine("megatron").rules.pipeline_split) == [12] * 8


def test_megatron_split_account_for_embedding_and_loss_vpp():
    """--account-for-embedding/loss-in-pipeline-split: L + 2 divisible by pp x vpp, the first and the last
    chunk build one transformer layer fewer, possibly none (transformer_block.py l.190-201 `assert
    num_layers_to_build >= 0`; transformer_config.py l.2370-2415). Llama 3 405B: 126 + 2 = 128 = 16 x 8
    chunks of one layer, the first and last holding 0."""
    sizes = megatron_chunk_sizes(126, 16, 8)
    assert sizes is not None and len(sizes) == 128
    assert sizes[0] == 0 and sizes[-1] == 0
    assert sizes[1:-1] == [1] * 126
    assert sum(sizes) == 126


def test_megatron_split_account_for_embedding_and_loss_pp():
    """The same flags without VPP (transformer_block.py l.190-201): 126 + 2 = 128 = 16 x 8, first and last
    stage 7 layers (the Llama 3 405B layout, Dubey et al. 2024 section 3.3.2)."""
    assert megatron_chunk_sizes(126, 16, 1) == [7] + [8] * 14 + [7]


def test_megatron_split_uneven_first_last():
    """--decoder-first/last-pipeline-num-layers (transformer_config.py __post_init__ l.2294-2370): each > 0,
    the middle stages even. 61 layers (DeepSeek-V3) on pp 8: neither 61, 62 nor 63 divides by 8, so middle
    ranks take 8 and the first/last the remaining 13 as 6 + 7."""
    sizes = megatron_chunk_sizes(61, 8, 1)
    assert sizes == [6, 8, 8, 8, 8, 8, 8, 7]
    assert all(s > 0 for s in sizes) and sum(sizes) == 61


def test_megatron_405b_pp16_vpp8_evaluates():
    """The 128-chunk Llama 3 405B layout (transformer_block.py l.190-201 allows 0-layer end chunks) with
    16 micro-batches (m = pp, schedules.py l.1160-1180) is priced end to end."""
    plan = Plan(tp=8, pp=16, vpp=8, dp=1, sp=True, micro_batch=1, global_batch=16, seq_len=8192)
    result = estimate(model("llama3-405b"), load_hardware("h100-sxm"), plan, engine("megatron"))
    assert result.time.step_s > 0
    assert len(result.memory.stages) == 16
    assert all(s.total_bytes > 0 for s in result.memory.stages)


def test_megatron_405b_pp16_vpp8_passes_plan_checks():
    """The same plan passes plan_problems (the model checks and Megatron's rules) on 128 GPUs: 128 chunks
    for 126 layers is legal in Megatron, the first and last chunk holding only the embedding and the loss
    (transformer_block.py l.190-201). planner/plan.py check_plan refused pp·vpp > num_layers until 41d988b."""
    plan = Plan(tp=8, pp=16, vpp=8, dp=1, sp=True, micro_batch=1, global_batch=16, seq_len=8192)
    assert not engine_problems(engine("megatron"), model("llama3-405b"), plan)
    assert not plan_problems(model("llama3-405b"), plan, engine("megatron"), gpus=128)


# ---- torchtitan ------------------------------------------------------------------------------------------


def test_torchtitan_has_no_zero1():
    """torchtitan shards with FSDP2 (fully_shard) or replicates with DDP (models/llama3/infra/parallelize.py
    apply_fsdp / apply_ddp); FSDP2 has no optimizer-only sharding, so no zero 1."""
    plan = Plan(dp=8, zero=1, global_batch=8)
    r = only(zero_problems(engine("torchtitan"), plan, model=model("llama3-8b")), "torchtitan has no zero 1")
    assert "zero=1" in r.detail


@pytest.mark.parametrize(
    ("degrees", "named"),
    [({"tp": 2, "sp": True}, "tp=2"), ({"cp": 2}, "cp=2"), ({"ep": 2}, "ep=2")],
)
def test_torchtitan_ddp_is_1d_only(degrees, named):
    """DDP runs only when it is the sole parallelism: `if parallel_dims.world_size != dp_replicate_mesh.size():
    raise RuntimeError("DDP has not supported > 1D parallelism")` (models/llama3/infra/parallelize.py
    l.148-151); expert parallelism folds into dp_shard·cp, 1 under DDP (an emitted ep 8 with replicate 16 had
    failed at torchtitan's mesh build: 'The product of mesh_sizes=(1, 16, 0, 8) is 0')."""
    moe = degrees.get("ep", 1) > 1
    plan = Plan(dp=2, zero=0, global_batch=2, **degrees)
    name = "mixtral-8x7b" if moe else "llama3-8b"
    r = only(zero_problems(engine("torchtitan"), plan, model=model(name)), "zero 0 with")
    assert "zero=0" in r.detail and named in r.detail
    # Without data parallelism there is no DDP to refuse.
    solo = plan.model_copy(update={"dp": 1, "cp": 1, "global_batch": 1})
    assert not zero_problems(engine("torchtitan"), solo, model=model("llama3-8b"))


def test_torchtitan_ddp_refused_with_pp():
    """DDP with pp > 1 is > 1D parallelism (parallelize.py l.148-151): with pipelining only FSDP runs."""
    plan = Plan(dp=2, pp=2, zero=0, global_batch=4)
    r = only(zero_problems(engine("torchtitan"), plan, model=model("llama3-8b")), "zero 0 with")
    assert "zero=0" in r.detail and "pp=2" in r.detail
    # one rule, one reason whichever dimensions a plan uses (a search counted it under six rows)
    plans = [plan, Plan(dp=2, tp=2, zero=0, global_batch=2), Plan(dp=2, cp=2, tp=2, zero=0, global_batch=2)]
    said = {p.reason for x in plans for p in zero_problems(engine("torchtitan"), x, model=model("llama3-8b"))}
    assert said == {"torchtitan: zero 0 with tp, cp, pp, vpp or ep"}


@pytest.mark.parametrize(("zero", "ok"), [(0, False), (1, False), (2, True), (3, True)])
def test_torchtitan_pipelining_needs_fsdp(zero, ok):
    """With pp > 1 torchtitan runs FSDP2 under the pipeline stage (torch pipelining/stage.py
    backward_maybe_with_nosync defers the reduce-scatter; parallelize.py: reshard_after_forward = not
    pp_enabled by default, 'always' when asked): zero 2 and 3 only."""
    plan = Plan(dp=2, pp=2, zero=zero, global_batch=4)
    problems = zero_problems(engine("torchtitan"), plan, model=model("llama3-8b"))
    assert (not problems) == ok
    if not ok:
        assert f"zero={zero}" in problems[0].detail


def test_torchtitan_tp_requires_sp():
    """torchtitan's TP plan always shards the norms on the sequence ("attention_norm": SequenceParallel(),
    "ffn_norm": SequenceParallel() in models/llama3/infra/parallelize.py apply_tp): tp > 1 without sp is not
    a thing it runs."""
    plan = Plan(tp=2, sp=False, dp=1, global_batch=1, precision="fp32")  # bf16 at dp 1 with tp: fp32 (see below)
    r = only(structure_problems(engine("torchtitan"), model("llama3-8b"), plan), "tp without sp")
    assert "tp=2" in r.detail
    assert not structure_problems(engine("torchtitan"), model("llama3-8b"), plan.model_copy(update={"sp": True}))


@pytest.mark.parametrize(
    ("tp", "cp", "seq_len", "ok"),
    [(1, 1, 2047, False), (1, 1, 2048, True), (2, 1, 2050, False), (2, 2, 4100, False), (2, 2, 4096, True)],
)
def test_torchtitan_seq_len_divisible_by_2_tp_cp(tp, cp, seq_len, ok):
    """seq_len_divisor = tp * (cp * 2) (torchtitan/distributed/parallel_dims.py l.365-372), asserted in
    parallelize (models/llama3/infra/parallelize.py l.69-74), also when cp = 1."""
    plan = Plan(tp=tp, sp=tp > 1, cp=cp, dp=1, seq_len=seq_len, global_batch=1)
    problems = structure_problems(engine("torchtitan"), model("llama3-8b"), plan)
    if ok:
        assert not problems
    else:
        r = only(problems, "seq len not divisible by 2 tp cp")
        assert f"seq_len={seq_len}" in r.detail and f"= {2 * tp * cp}" in r.detail


def test_torchtitan_tp_must_divide_vocab():
    """tok_embeddings RowwiseParallel and output ColwiseParallel split the vocabulary with no padding
    (models/llama3/infra/parallelize.py apply_tp): 50257 (GPT-3) is odd, so tp 2 cannot split it."""
    plan = Plan(tp=2, sp=True, dp=1, global_batch=1)
    r = only(structure_problems(engine("torchtitan"), model("gpt3-175b"), plan), "tp does not divide vocab")
    assert "tp=2" in r.detail and "vocab_size=50257" in r.detail
    assert "tp does not divide vocab" not in reasons(structure_problems(engine("torchtitan"), model("llama3-8b"), plan))


def test_torchtitan_tp_must_divide_kv_heads():
    """apply_tp shards attention.wk / attention.wv column-wise ("attention.wk": colwise_parallel(), models/
    llama3/infra/parallelize.py), so each rank holds n_kv_heads / tp whole heads: no replication, and
    llama3-70b's 8 kv heads refuse tp 16 (Megatron would replicate them)."""
    plan = Plan(tp=16, sp=True, dp=1, global_batch=1, precision="fp32")  # bf16 at dp 1 with tp runs fp32 in torchtitan
    r = only(structure_problems(engine("torchtitan"), model("llama3-70b"), plan), "tp does not divide kv heads")
    assert "tp=16" in r.detail and "num_kv_heads=8" in r.detail
    assert not structure_problems(engine("torchtitan"), model("llama3-70b"), plan.model_copy(update={"tp": 8}))


@pytest.mark.parametrize(("m", "ok"), [(3, True), (6, True), (8, True), (9, False), (10, True), (11, False)])
def test_torchtitan_interleaved_rounds(m, ok):
    """ScheduleInterleaved1F1B: number_of_rounds = max(1, m // pp), and m % number_of_rounds != 0 raises
    (torch/distributed/pipelining/schedules.py; torchtitan.md section 4: pp 4, m 10 and 3 and 6 run, 9 does
    not). llama3-8b, pp 4 x vpp 2 stages."""
    plan = Plan(pp=4, vpp=2, dp=1, zero=3, micro_batch=1, global_batch=m)
    problems = batch_problems(engine("torchtitan"), plan)
    if ok:
        assert not problems
    else:
        r = only(problems, "interleaved needs whole micro-batch rounds")
        assert f"{m} micro-batches" in r.detail and f"rounds of {m // 4}" in r.detail


def test_torchtitan_split_llama3_8b_pp4():
    """generate_llm_fqn_per_model_part (torchtitan/distributed/pipeline_parallel.py l.236-344): the
    embedding and norm+output weigh one layer each, 34 effective layers over 4 stages -> shares 9,9,8,8 ->
    transformer layers 8,9,8,7 (torchtitan.md section 4)."""
    assert torchtitan_chunk_sizes(32, 4, 1) == [8, 9, 8, 7]
    assert chunk_sizes(32, 4, 1, engine("torchtitan").rules.pipeline_split) == [8, 9, 8, 7]


def test_torchtitan_cuts_stages_its_default_weights_cannot_with_both_weights_zero():
    """Llama 3 70B on pp 4 x vpp 4: the default weights give 82 effective layers, which one
    pipeline_parallel_layers_per_stage cuts into 14 (per 6) or 17 (per 5) stages, never 16
    (pipeline_parallel.py pipeline_llm: ceil(effective / per)); with first/last_stage_less_layers 0
    (job_config.py l.377-387) 80 layers make 16 stages of 5, and the engine's rules take the plan."""
    split = torchtitan_split(80, 4, 4)
    assert split == TorchtitanSplit((5,) * 16, layers_per_stage=5, first_less=0, last_less=0)
    assert torchtitan_split(80, 4, 2) == TorchtitanSplit(tuple(balanced_sizes(80, 8)), None)  # the default count
    plan = Plan(pp=4, vpp=4, dp=2, zero=3, global_batch=16, schedule="interleaved")
    assert not structure_problems(engine("torchtitan"), model("llama3-70b"), plan)


def test_torchtitan_more_stages_than_layers_plus_2_rejected():
    """ "Number of stages (..) cannot be greater than effective layers (..)", effective = L + 2
    (pipeline_parallel.py generate_llm_fqn_per_model_part l.236-344). llama3-8b: 35 stages > 34."""
    assert torchtitan_chunk_sizes(32, 5, 7) is None
    assert torchtitan_chunk_sizes(32, 17, 2) is not None  # 34 stages: one layer each, 0 at both ends
    plan = Plan(pp=5, vpp=7, dp=1, zero=3, global_batch=5)
    r = only(structure_problems(engine("torchtitan"), model("llama3-8b"), plan), "cannot split the layers")
    assert "num_layers=32" in r.detail and "pp=5" in r.detail and "vpp=7" in r.detail


def test_torchtitan_layers_plus_2_stages_pass_plan_checks():
    """34 stages for llama3-8b's 32 layers (pp 17 x vpp 2) pass plan_problems: torchtitan runs up to L + 2
    stages, the first holding only tok_embeddings and the last only norm + output (pipeline_parallel.py
    generate_llm_fqn_per_model_part l.236-344). planner/plan.py check_plan refused pp·vpp > L until 41d988b."""
    plan = Plan(pp=17, vpp=2, dp=1, zero=3, global_batch=17, precision="fp32")  # bf16 at dp 1 with pp runs fp32
    assert not structure_problems(engine("torchtitan"), model("llama3-8b"), plan)
    assert not plan_problems(model("llama3-8b"), plan, engine("torchtitan"), gpus=17)


# ---- DeepSpeed -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("zero", [2, 3])
def test_deepspeed_zero2_3_refused_with_pp(zero):
    """PipelineEngine.__init__: `assert self.zero_optimization_stage() < ZeroStageEnum.gradients, "ZeRO-2 and
    ZeRO-3 are incompatible with pipeline parallelism"` (deepspeed/runtime/pipe/engine.py)."""
    plan = Plan(dp=2, pp=2, zero=zero, global_batch=4)
    r = only(zero_problems(engine("deepspeed"), plan, model=model("llama3-8b")), f"zero {zero} with pp")
    assert f"zero={zero}" in r.detail and "pp=2" in r.detail
    for ok in (0, 1):
        assert not zero_problems(engine("deepspeed"), plan, zero=ok, model=model("llama3-8b"))


def test_deepspeed_has_no_sequence_parallelism():
    """DeepSpeed has no Megatron-style SP (Ulysses is an all-to-all design with no ordinary config key,
    deepspeed/utils/groups.py _get_sequence_parallel_world_size)."""
    plan = Plan(tp=2, sp=True, dp=1, global_batch=1)
    r = only(structure_problems(engine("deepspeed"), model("llama3-8b"), plan), "deepspeed has no sp")
    assert "--no-sp" in r.detail


@pytest.mark.parametrize(
    ("name", "fields", "reason", "named"),
    [
        ("llama3-8b", {"cp": 2, "dp": 1}, "deepspeed has no cp", "cp=2"),
        ("mixtral-8x7b", {"ep": 2, "dp": 2}, "deepspeed has no ep", "ep=2"),
        ("llama3-8b", {"precision": "fp8"}, "deepspeed has no fp8", "precision=fp8"),
        ("llama3-8b", {"recompute": "selective"}, "deepspeed has no recompute selective", "recompute=selective"),
    ],
)
def test_deepspeed_does_not_offer(name, fields, reason, named):
    """The deepspeed profile has no context parallelism, no DeepSpeed-MoE expert parallelism, no fp8 path,
    and only whole-layer activation checkpointing (deepspeed/runtime/activation_checkpointing/checkpointing.py;
    PipelineModule activation_checkpoint_interval, pipe/module.py)."""
    plan = Plan(global_batch=2, **fields)
    ds = engine("deepspeed")
    r = only(engine_problems(ds, model(name), plan) + precision_problems(ds, None, plan), reason)
    assert named in r.detail


@pytest.mark.parametrize(("schedule", "vpp"), [("gpipe", 1), ("interleaved", 2)])
def test_deepspeed_only_1f1b(schedule, vpp):
    """The pipeline runs schedule.TrainSchedule, synchronous 1F1B, total_steps = 2 (m + stages - 1)
    (deepspeed/runtime/pipe/schedule.py); no GPipe, no interleaving."""
    plan = Plan(pp=2, vpp=vpp, dp=1, global_batch=4, schedule=schedule)
    r = only(structure_problems(engine("deepspeed"), model("llama3-8b"), plan), f"no {schedule} schedule")
    assert f"schedule={schedule}" in r.detail
    assert not structure_problems(engine("deepspeed"), model("llama3-8b"), Plan(pp=2, dp=1, global_batch=4))


def test_deepspeed_zero3_refused_with_tp():
    """AutoTP: _configure_tensor_parallel_states asserts zero_optimization_stage() <= 2, "the compatibility
    between 'autotp' and 'zero_stage = 3' has not been validated" (deepspeed/runtime/engine.py)."""
    plan = Plan(tp=2, dp=2, zero=3, global_batch=2)
    r = only(zero_problems(engine("deepspeed"), plan, model=model("llama3-8b")), "zero 3 with tp")
    assert "zero=3" in r.detail and "tp=2" in r.detail
    assert not zero_problems(engine("deepspeed"), plan, zero=2, model=model("llama3-8b"))


def test_deepspeed_zero3_refused_with_tp_at_dp1():
    """The AutoTP assert (deepspeed/runtime/engine.py) holds at any dp, dp = 1 included."""
    plan = Plan(tp=2, dp=1, zero=3, global_batch=1)
    assert "deepspeed: zero 3 with tp" in reasons(zero_problems(engine("deepspeed"), plan, model=model("llama3-8b")))


# ---- llm-foundry -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("dim", "fields"), [("tp", {"tp": 2, "dp": 4}), ("pp", {"pp": 2, "dp": 4})])
def test_llm_foundry_has_no_tp_or_pp(dim, fields):
    """The llm-foundry benchmark setup is pure FSDP data parallelism (composer/utils/parallelism.py
    FSDPConfig; llm-foundry scripts/train/benchmarking/README.md, yamls/pretrain/mpt-*.yaml)."""
    plan = Plan(zero=3, global_batch=8, **fields)
    problems = engine_problems(engine("llm-foundry"), model("llama3-8b"), plan)
    r = only(problems, f"llm-foundry has no {dim}")
    assert f"{dim}={fields[dim]}" in r.detail


@pytest.mark.parametrize(("zero", "ok"), [(0, False), (1, False), (2, True), (3, True)])
def test_llm_foundry_zero_2_and_3_only(zero, ok):
    """FSDP1 sharding_strategy SHARD_GRAD_OP (zero 2) and FULL_SHARD (zero 3, the default) as the MPT
    benchmarks run them (composer/distributed/mosaic_parallelism.py SHARDING_MAP; FSDPConfig
    sharding_strategy='FULL_SHARD'). NO_SHARD exists in Composer but is not modelled."""
    plan = Plan(dp=8, zero=zero, global_batch=8)
    problems = zero_problems(engine("llm-foundry"), plan, model=model("llama3-8b"))
    assert (not problems) == ok
    if not ok:
        r = only(problems, f"llm-foundry has no zero {zero}")
        assert f"zero={zero}" in r.detail


def test_even_split_puts_fewer_layers_at_the_ends():
    """The even policy (DeepSpeed PipelineModule 'uniform', Megatron-DeepSpeed 'type:transformer'): when the
    layers do not divide, the first and last chunk get fewer (split.even_chunk_sizes)."""
    assert even_chunk_sizes(96, 8) == [12] * 8
    assert even_chunk_sizes(126, 16) == [7] + [8] * 14 + [7]
    assert sum(even_chunk_sizes(70, 12)) == 70
    # Every chunk needs a transformer layer: tiny's 4 layers do not go over 8 DeepSpeed stages.
    r = only(plan_problems(model("tiny"), Plan(pp=8, global_batch=8), engine("deepspeed")), "cannot split the layers")
    assert "num_layers=4" in r.detail and "pp=8" in r.detail


def test_megatron_lays_out_what_its_even_and_uneven_splits_cannot():
    """DeepSeek-V3's 61 layers on pp 8 x vpp 4 (Megatron-Bridge's recipe): no even, account-for or first/last split
    holds, and --pipeline-model-parallel-layout does: the embedding and the loss weigh a layer each, 63 over 32
    stages, 'Et|(tt|)*30mL' with its MTP layer. More stages than layers + 2 stay refused."""
    from planner.engine.split import megatron_split
    from planner.launch.emit.megatron import layout_text

    split = megatron_split(61, 8, 4)
    assert split is not None and split.method == "layout"
    assert split.sizes == (1, *[2] * 30, 0)
    assert layout_text(split, mtp_layers=1) == "Et|" + "tt|" * 30 + "mL"
    assert megatron_split(96, 16, 8) is None
    assert megatron_split(96, 16, 4).method == "layout"  # 98 over 64 stages
    assert megatron_split(126, 8, 2).method == "account_embedding_loss"  # the older options first


@pytest.mark.parametrize(
    ("name", "setting", "has"),
    [("megatron-deepspeed", "tp_overlap", False), ("megatron", "compile", False), ("megatron", "tp_overlap", True),
     ("torchtitan", "compiled_loss", True), ("deepspeed", "compile", True), ("llm-foundry", "compiled_loss", False)],
)  # fmt: skip
def test_an_on_off_setting_the_engine_lacks_is_refused(name, setting, has):
    """Megatron-DeepSpeed has no TP communication overlap and Megatron no torch.compile (rules.switches): turned
    on, they used to be priced (Megatron-DeepSpeed 12% faster with an overlap it cannot run)."""
    plan = Plan(tp=2, sp=True, dp=4, zero=1, global_batch=8, seq_len=4096)
    configured = engine(name).configured(**{setting: True})
    reason = f"{name} has no {setting}"
    assert (reason in reasons(plan_problems(model("llama3-8b"), plan, configured, 8))) is not has


@pytest.mark.parametrize(
    ("name", "setting", "value", "runs"),
    [("torchtitan", "optimizer", "sgd", False), ("torchtitan", "optimizer", "adam", True),
     ("megatron", "optimizer", "sgd", True), ("torchtitan", "selective_recompute", "attention", False),
     ("megatron", "selective_recompute", "op", False), ("torchtitan", "attention", "softmax", False),
     ("megatron", "attention", "softmax", True), ("torchtitan", "grad_dtype", "param", False),
     ("megatron", "zero3_gather", "per_parameter_sync", False),
     ("deepspeed", "zero3_gather", "per_parameter_sync", True), ("planner", "rmsnorm", "cast", False),
     ("deepspeed", "optimizer", "sgd", True)],
)  # fmt: skip
def test_a_setting_word_the_engine_does_not_run_is_refused(name, setting, value, runs):
    """rules.setting_words: torchtitan builds only Adam and AdamW, runs its per-op selective policy, fused attention
    and fp32 reductions; the planner worker builds AdamW whatever a run says. Before, each was priced as asked."""
    plan = Plan(dp=8, zero=3, global_batch=8, seq_len=4096, recompute="selective")
    configured = engine(name).configured(**{setting: value})
    refused = f"{name} has no {setting} {value}" in reasons(plan_problems(model("llama3-8b"), plan, configured, 8))
    assert refused is not runs


def test_every_profile_runs_its_own_setting_words():
    """A profile's own value of each listed setting is among the words it lists (else it refuses itself)."""
    from planner.engine.settings import SETTINGS

    for name in list_engines():
        e = engine(name)
        for setting, words in e.rules.setting_words.items():
            block, field = SETTINGS[setting]
            assert getattr(getattr(e, block), field) in words, (name, setting)


def test_torchtitan_without_fsdp_trains_tp_and_pp_in_fp32_and_is_refused_in_16_bits():
    """torchtitan applies FSDP only where dp_shard or cp > 1 (parallel_dims.fsdp_enabled), and without it turns
    mixed precision off when tp or pp > 1 (v0.2.2 distributed/utils.py maybe_enable_amp): a bf16 tp 8 plan on 8
    GPUs trains in fp32. It was priced in bf16; it is refused by name, in fp32 it runs."""
    titan, model = engine("torchtitan"), load_model("llama3-8b")
    for change in ({"tp": 8, "sp": True}, {"pp": 2, "global_batch": 8}):
        plan = Plan(**{"zero": 3, "seq_len": 4096, "global_batch": 4, **change})
        (problem,) = [r for r in structure_problems(titan, model, plan) if "mixed precision" in r.reason]
        assert "runs without mixed precision in torchtitan" in problem.detail
        assert "use dp·cp >= 2 or precision fp32" in problem.detail
        assert not structure_problems(titan, model, plan.model_copy(update={"precision": "fp32"}))
    assert not structure_problems(titan, model, Plan(dp=2, tp=4, zero=3, sp=True, seq_len=4096, global_batch=4))
    assert not structure_problems(engine("megatron"), model, Plan(tp=8, sp=True, seq_len=4096, global_batch=4))


@pytest.mark.parametrize(("name", "plan"), [("torchtitan", Plan(zero=3, seq_len=2048, global_batch=4)),
                                            ("planner", Plan(tp=2, zero=3, seq_len=2048, global_batch=4))])  # fmt: skip
def test_an_engine_that_applies_no_fsdp_over_one_rank_prices_every_stage_as_zero_0(name, plan):
    """At dp·cp = 1 torchtitan and the planner worker apply no FSDP (parallelize.py fsdp_enabled; launch/parallelize
    data_parallel_kind "none"): ZeRO 2 and 3 held up to 37% more (FSDP's unsharded accumulation and gathered copy)
    than the zero 0 the run is. At dp 2 the stages differ again."""
    eng, model, hw = engine(name), load_model("llama3-8b"), load_hardware("h100-sxm")
    peak = {z: estimate(model, hw, plan.model_copy(update={"zero": z}), eng).memory.total_bytes for z in (0, 2, 3)}
    assert peak[2] == peak[3] == peak[0]
    assert eng.zero_stage(plan) == eng.rules.stages(1)[0]
    wide = plan.model_copy(update={"dp": 2, "global_batch": 8, "tp": 1})
    assert (
        estimate(model, hw, wide, eng).memory.total_bytes
        < estimate(model, hw, wide.model_copy(update={"zero": 0}), eng).memory.total_bytes
    )


def test_a_profile_that_runs_one_rank_as_zero_0_must_have_a_zero_0():
    """shards_one_rank: false prices dp·cp = 1 as the profile's zero 0; a profile without one crashed with a bare
    KeyError while pricing. It is refused when the profile is read."""
    from pydantic import ValidationError

    rules = engine("llm-foundry").rules
    assert 0 not in rules.zero
    with pytest.raises(ValidationError, match="shards_one_rank: false runs dp·cp = 1 as zero 0"):
        type(rules).model_validate({**rules.model_dump(), "shards_one_rank": False})


@pytest.mark.parametrize(("field", "said"), [("zero", "rules.zero"), ("schedules", "rules.schedules")])
def test_a_profile_that_runs_no_zero_stage_or_no_schedule_is_refused_when_read(tmp_path, field, said):
    """`rules.zero: {}` or `schedules: []` loaded, and every refusal then ended 'use zero in ' (audit)."""
    import yaml

    doc = yaml.safe_load((PROFILES / "megatron.yaml").read_text())
    doc["rules"][field] = {} if field == "zero" else []
    (tmp_path / "e.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(PlannerError, match=f"{said}: .* at least 1 item"):
        load_engine(str(tmp_path / "e.yaml"))


def test_a_schedule_the_engine_does_not_run_is_refused_at_pp_1_too():
    """`search --schedule gpipe` on Megatron listed pp 1 plans as "gpipe on megatron" beside 540 pp > 1 plans
    rejected as "megatron has no gpipe schedule", and `--save` kept schedule: gpipe for --emit megatron."""
    from helpers import run_planner

    model, megatron, titan = load_model("llama3-8b"), engine("megatron"), engine("torchtitan")
    plan = Plan(dp=8, schedule="gpipe", global_batch=8)
    assert [r.reason for r in structure_problems(megatron, model, plan)] == ["megatron has no gpipe schedule"]
    assert structure_problems(titan, model, plan) == []
    assert structure_problems(megatron, model, plan.model_copy(update={"schedule": "1f1b"})) == []
    code, _, err = run_planner("search", "-m", "llama3-8b", "--gpus", "8", "--schedule", "gpipe", "--no-advice")
    assert code == 2 and "megatron has no gpipe schedule" in err, err


def test_torchtitans_async_tp_needs_the_model_compiled():
    """torchtitan distributed/tensor_parallel.py maybe_enable_async_tp (v0.2.2 l.20-23) raises without the model
    compiled: the v0.2 file crashed, and the 0.3.0 file dropped async TP the plan was priced with (audit)."""
    from planner.engine.setting_rules import switch_problems

    titan = engine("torchtitan")
    (r,) = switch_problems(titan.configured(tp_overlap=True))
    assert r.detail == "tp_overlap: torchtitan runs it only with compile on; give --compile too"
    assert not switch_problems(titan.configured(tp_overlap=True, compile=True))
    assert not switch_problems(engine("megatron").configured(tp_overlap=True))  # TE userbuffers: no compile
