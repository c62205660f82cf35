"""Memory that does not reject runs that ran (issue 21 item 5): the published runs of both runs files are predicted
to fit their GPU, and the mechanisms that got them there hold on their own — Megatron's in-place vocab-parallel
softmax, NeMo 24.07's optimizer state as its runs file states it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.cost.activations import activation_bytes_per_token
from planner.cost.memory import logits_bytes, memory_report
from planner.cost.params import kind_params_per_rank, padded_vocab
from planner.cost.saved_tensors import default_kind
from planner.cost.states import state_bytes_per_param
from planner.fit.memory_kind import comparable_peak_bytes
from planner.fit.runs import Run, load_runs, parse_runs
from planner.io.catalog import load_engine, load_hardware, load_model
from planner.plan import Plan

DATA = Path(__file__).parent / "data"
RUNS_FILES = ("calibration_runs.yaml", "runs_2024_2026.yaml")
# The last run predicted over its GPU, torchtitan's eager Llama 2 13B without recompute on 64 A100s (15.6% over with
# nn.RMSNorm's fp32 copies, 7.4% with the casting RMSNorm of later torchtitan), ran with the preset of the commit that
# published it (395a52627, 2024-04-18: train_configs/llama_13b.toml norm_type = "fused_rmsnorm", the Triton kernel
# that keeps the 16-bit input and an fp32 rstd per row): 90.7% of the GPU with the norm it ran. Nemotron-4 340B
# (NeMo 24.07) fits since its runs file states the bf16 optimizer state NeMo's nemotron_340b.yaml asks for
# (optim.dtype: bf16).


def _ran() -> list[Run]:
    runs: list[Run] = []
    for name in RUNS_FILES:
        runs += [r for r in parse_runs(load_runs(DATA / name)) if isinstance(r, Run) and r.measured]
    return runs


def test_runs_that_ran_are_predicted_to_fit() -> None:
    """Before issue 21 item 5, six runs that ran were predicted not to fit, the worst 29% over its GPU (NeMo 24.07
    Nemotron-4 340B at 102.1 GiB of 79.2): none miss now."""
    runs = _ran()
    assert len(runs) >= 90
    over = {}
    for run in runs:
        report = memory_report(run.model, run.hardware, run.plan, run.engine)
        if not report.fits:
            over[run.id] = report.total_bytes / report.capacity_bytes - 1
    assert not over, over


def test_torchtitans_2024_13b_fits_with_the_norm_its_preset_named() -> None:
    """The Llama 2 13B run without recompute fits with torchtitan's Triton fused RMSNorm (its preset's norm_type in
    April 2024) and would not with the casting RMSNorm the presets moved to in July: the norm is what decides."""
    (run,) = [r for r in _ran() if r.id == "torchtitan-2024-a100-64gpu-llama2-13b-no-ac"]
    assert run.engine.kernels.rmsnorm == "fused"
    assert memory_report(run.model, run.hardware, run.plan, run.engine).fits
    cast = run.engine.model_copy(update={"kernels": run.engine.kernels.model_copy(update={"rmsnorm": "cast"})})
    assert not memory_report(run.model, run.hardware, run.plan, cast).fits


def test_megatron_loss_keeps_one_fp32_copy_of_the_logits() -> None:
    """Megatron's vocab-parallel cross entropy turns its one fp32 upcast into the softmax in place: 2 + 4 bytes per
    logit in bf16 (4 in fp32), where PyTorch's cross entropy on upcast logits holds 2 + 4 + 4."""
    model = load_model("llama3-8b")
    megatron, titan = load_engine("megatron"), load_engine("torchtitan")
    plan = Plan(tp=2, dp=1, micro_batch=2, global_batch=2, seq_len=4096)
    elements = 2 * 4096 * padded_vocab(model.vocab_size, 2, megatron.rules.vocab_padding) / 2
    assert logits_bytes(model, plan, megatron) == pytest.approx(elements * 6)
    fp32 = plan.model_copy(update={"precision": "fp32"})
    assert logits_bytes(model, fp32, megatron) == pytest.approx(elements * 4)
    whole = plan.model_copy(update={"tp": 1})
    elements_titan = 2 * 4096 * padded_vocab(model.vocab_size, 1, titan.rules.vocab_padding)
    assert logits_bytes(model, whole, titan) == pytest.approx(elements_titan * 10)


def test_torchtitans_loss_parallel_backward_holds_four_fp32_copies() -> None:
    """With the vocabulary split over tp ranks torchtitan runs the loss vocab-parallel (DTensor's loss_parallel,
    later its own _LossParallelCrossEntropy): backward holds the saved fp32 log-softmax, a zeros_like of it, its
    exp and their sum, 16 bytes per local logit, with the 16-bit logits deleted before backward; compiled, none."""
    model, titan = load_model("llama3-8b"), load_engine("torchtitan")
    plan = Plan(tp=2, dp=1, micro_batch=2, global_batch=2, seq_len=4096)
    elements = 2 * 4096 * padded_vocab(model.vocab_size, 2, titan.rules.vocab_padding) / 2
    assert logits_bytes(model, plan, titan) == pytest.approx(elements * 16)
    compiled = titan.configured(compiled_loss=True)
    assert logits_bytes(model, plan, compiled) == pytest.approx(elements * 2)


def _comparable(run: Run, engine=None) -> float:
    """The predicted peak counted as the run's measured peak counts memory (fit.memory_kind: torchtitan logs the
    allocator's reserved peak, without the CUDA context and NCCL's buffers)."""
    report = memory_report(run.model, run.hardware, run.plan, engine or run.engine)
    return comparable_peak_bytes(report, run.hardware, run.memory_kind)


def test_torchtitans_tp8_70b_holds_the_loss_parallel_backward_at_its_peak() -> None:
    """Llama 3 70B at FSDP 32 x TP 8 (full AC, local batch 16 x 8192, loss parallel, eager loss; the plan of
    torchtitan's Dec 2024 256-H100 runs), run by torchtitan 0.2.2 on an H200 in bf16 (torch 2.11, a fake group of 256
    ranks, all 80 layers): its peak is the loss-parallel backward's fp32 copies beside what the forward keeps, and the
    planner's tensors are its max_memory_allocated within 2%. Its reserved peak is 5.6% under, since the loss's 8 GB
    fp32 blocks leave this run 1.17x as much reserved as allocated, above the engine's measured median of 1.116.
    Counting the eager loss's two fp32 copies instead of the four is 14% under.

    The Dec 2024 runs themselves (fp8, a torch nightly of the time) logged 71.9 GiB and, with async TP, 67.6 GiB
    reserved: the planner is 10.9% and 5.3% under them (the README's memory table); what the older stack held beyond
    torch 2.11's is not established, so they are pinned only to fit."""
    rows = [json.loads(line) for line in (TITAN_PP_H200 / "tp.jsonl").read_text().splitlines()]
    steps = next(r for r in rows if r["case"] == "llama3-70b:256:16:8192:full:tp=8")["steps"][-1]
    plan = Plan(
        dp=32, tp=8, sp=True, zero=3, recompute="full", micro_batch=16, global_batch=512, seq_len=8192,
        precision="bf16",
    )  # fmt: skip
    model, titan, h200 = load_model("llama3-70b"), load_engine("torchtitan"), load_hardware("h200")
    report = memory_report(model, h200, plan, titan)
    tensors = report.total_bytes - report.peak.breakdown.reserved_bytes
    assert tensors == pytest.approx(steps["max_allocated_bytes"], rel=0.02)
    reserved = comparable_peak_bytes(report, h200, "max_reserved") / steps["max_reserved_bytes"]
    assert 0.94 < reserved < 1.0  # this run's reserve, 1.17x its allocated, is above the engine's median 1.116
    no_split = titan.model_copy(update={"memory": titan.memory.model_copy(update={"loss_parallel_fp32_copies": None})})
    eager_two = memory_report(model, h200, plan, no_split)
    assert eager_two.total_bytes - eager_two.peak.breakdown.reserved_bytes < 0.86 * tensors
    runs = [r for r in _ran() if r.id.startswith("torchtitan-h100-t4-llama31-70b-256gpu-fsdp32-tp8")]
    assert len(runs) == 2 and all(memory_report(r.model, r.hardware, r.plan, r.engine).fits for r in runs)


TITAN_H200 = Path(__file__).parents[1] / "benchmarks" / "results" / "h200-2026-11-27-titan"
TITAN_PP_H200 = Path(__file__).parents[1] / "benchmarks" / "results" / "h200-2026-11-28-titan-pp"


def _titan_case(file: str, case: str) -> dict:
    rows = [json.loads(line) for line in (TITAN_H200 / file).read_text().splitlines()]
    return next(r for r in rows if r["case"] == case)["steps"][-1]


def _slope_case(file: str, few: str, many: str, at: str | None = "forward") -> tuple[str, str, str, str | None]:
    return (file, few, many, at)


# (file, the case with fewer layers, the case with more, the phase whose end is read: None for the step's peak)
LAYER_SLOPES = [
    _slope_case("titan.jsonl", "llama2-13b:64:2:4096:none:20", "llama2-13b:64:2:4096:none", None),
    _slope_case("titan-phases.jsonl", "llama3-8b:8:1:8192:none:4", "llama3-8b:8:1:8192:none:8"),
    _slope_case("titan-phases.jsonl", "llama3-8b:64:2:8192:op:8", "llama3-8b:64:2:8192:op:16"),
    _slope_case("titan-compile.jsonl", "llama3-8b:8:1:8192:none+compile:4", "llama3-8b:8:1:8192:none+compile:8"),
    _slope_case("titan-compile.jsonl", "llama3-8b:64:2:8192:op+compile:8", "llama3-8b:64:2:8192:op+compile:16"),
]


@pytest.mark.parametrize(("file", "few", "many", "at"), LAYER_SLOPES)
def test_torchtitans_layers_keep_what_the_planner_counts(file: str, few: str, many: str, at: str | None) -> None:
    """torchtitan 0.2.2's Llama on an H200 (torch 2.11, FSDP over a fake process group of WORLD ranks; eager or
    compiled, without recompute or with per-op selective recompute): what one more layer adds to the step's peak, or
    to what the forward leaves allocated, less its parameters and Adam moments (12 bytes per parameter over the
    ranks; zero_grad freed the gradients), is what the planner counts for the layer within 1%. Eager without
    recompute, its nn.RMSNorm runs torch's fused kernel: with the composite norm's fp32 copies the count would be
    over by more than 5%."""
    name, world, micro_batch, seq, ac = few.split(":")[:5]
    model = load_model(name)
    n_few, n_many = (int(c.split(":")[5]) if c.count(":") == 5 else model.num_layers for c in (few, many))
    key = "allocated_bytes" if at else "max_allocated_bytes"

    def measured(case: str) -> float:
        step = _titan_case(file, case)
        return next(p for p in step["phases"] if p["phase"] == at)[key] if at else step[key]

    layer_params = kind_params_per_rank(model, default_kind(model, False), 1, 1, 1)[0]
    per_layer = (measured(many) - measured(few)) / (n_many - n_few) - layer_params * 12 / int(world)
    recompute = {"none": "none", "op": "selective"}[ac.split("+")[0]]
    titan = load_engine("torchtitan").configured(compile=ac.endswith("+compile"))
    kw = {"seq_len": int(seq), "tp": 1, "sp": False, "cp": 1, "recompute": recompute, "act_bytes": 2}
    tokens = int(micro_batch) * int(seq)
    assert titan.kernels.rmsnorm == "fused"
    assert activation_bytes_per_token(model, kernels=titan.kernels, **kw) * tokens == pytest.approx(per_layer, rel=0.01)
    if not titan.kernels.compile and recompute == "none":  # per-op recompute re-runs the norms
        composite = titan.configured(rmsnorm="composite").kernels
        assert activation_bytes_per_token(model, kernels=composite, **kw) * tokens > 1.05 * per_layer


def test_torchtitan_gathers_its_output_layer_apart_from_the_embedding() -> None:
    """torchtitan since 83e6941 (2025-07-28) shards the embedding and [norm, output] as FSDP units of their own, the
    output not resharded after the forward. On the H200 (Llama 3 8B, 8 ranks, 4 layers, 1 x 8192) what the forward
    leaves allocated beyond the parameters and Adam moments, the layers' kept activations and the bf16 logits is
    the bf16 output weight alone, not the embedding with it; the planner's torchtitan gathers units apart (`own`),
    which at the output's size charges half the root unit's buffers."""
    model, world, tokens = load_model("llama3-8b").model_copy(update={"num_layers": 4}), 8, 8192
    titan = load_engine("torchtitan")
    kw = {"seq_len": tokens, "tp": 1, "sp": False, "cp": 1, "recompute": "none", "act_bytes": 2}
    layers = 4 * activation_bytes_per_token(model, kernels=titan.kernels, **kw) * tokens
    vocab = padded_vocab(model.vocab_size, 1, titan.rules.vocab_padding)
    params = 4 * kind_params_per_rank(model, default_kind(model, False), 1, 1, 1)[0] + 2 * vocab * model.hidden_size
    states = params * 12 / world
    forward_end = next(p for p in _titan_case("titan-phases.jsonl", "llama3-8b:8:1:8192:none:4")["phases"]
                       if p["phase"] == "forward")["allocated_bytes"]  # fmt: skip
    gathered = forward_end - states - layers - tokens * vocab * 2
    output_bf16 = vocab * model.hidden_size * 2
    assert gathered == pytest.approx(output_bf16, rel=0.25)
    assert titan.memory.fsdp_edge_groups == "own"
    plan = Plan(dp=world, zero=3, micro_batch=1, global_batch=world, seq_len=tokens)
    hw = load_hardware("h200")
    own = memory_report(model, hw, plan, titan).stages[0].breakdown.buffers_bytes
    root = memory_report(model, hw, plan, titan.configured(fsdp_edge_groups="root")).stages[0].breakdown.buffers_bytes
    assert root - own == pytest.approx(vocab * model.hidden_size * 8)  # the embedding's gather and gradient


@pytest.mark.parametrize("act_bytes", [2, 4])
def test_eager_rmsnorm_keeps_its_fp32_input_and_normalised_value(act_bytes: int) -> None:
    """Eager nn.RMSNorm keeps its fp32 input and fp32 normalised value where a fused norm keeps the a-byte input:
    8 - a bytes per element more per norm, two norms a layer (measured in bf16 and fp32 on CPU by
    tests/launch/test_activation_count.py)."""
    model = load_model("llama3-8b")
    titan = load_engine("torchtitan").configured(rmsnorm="composite")
    kw = {"seq_len": 4096, "tp": 1, "sp": False, "cp": 1, "recompute": "none", "act_bytes": act_bytes}
    eager = activation_bytes_per_token(model, kernels=titan.kernels, **kw)
    fused = activation_bytes_per_token(model, kernels=titan.kernels.model_copy(update={"elementwise": "fused"}), **kw)
    silu = model.ffn_hidden_size * act_bytes  # eager SwiGLU's SiLU output, the other eager-only tensor
    assert eager - fused - silu == pytest.approx(2 * (8 - act_bytes) * model.hidden_size)


def test_nemo_2407_runs_hold_remainders_and_bf16_gradients() -> None:
    """NeMo 24.07's Apex DistributedFusedAdam keeps the fp32 master as 16-bit remainders beside fp32 moments (10
    bytes of optimizer state per parameter, against Megatron's 12) and its performance configs reduce gradients in
    bf16 (2 bytes, against 4): what the runs file's software block says for those runs."""
    runs = [r for r in parse_runs(load_runs(DATA / "calibration_runs.yaml")) if r.id.startswith("nemo2407-")]
    assert len(runs) == 11
    for run in runs:
        assert isinstance(run, Run)
        per = state_bytes_per_param(run.plan.precision, run.engine, run.engine.zero_stage(run.plan))
        bf16_state = run.model.name == "nemotron4-340b"  # test_nemotron_340b_keeps_bf16_optimizer_state
        assert (per.weights, per.gradients, per.optimizer) == (2, 2, 4 if bf16_state else 10)


def test_nemotron_340b_keeps_bf16_optimizer_state() -> None:
    """NeMo 24.07's nemotron_340b.yaml sets optim.dtype bf16, which NeMo's setup_optimization hands Apex
    DistributedFusedAdam as the state dtype and, equal to the bf16 model dtype, runs without a master copy
    (store_params False): 2 + 2 bytes of moments per parameter, sharded over dp. Before the runs file said so, the
    run was predicted 7.6% over its GPU (85.2 GiB of 79.2); now it fits with the optimizer term 16 GiB smaller."""
    run = next(r for r in _ran() if r.id == "nemo2407-nemotron-340b-fp8-h100")
    report = memory_report(run.model, run.hardware, run.plan, run.engine)
    stage0 = report.stages[0].breakdown
    assert stage0.optimizer_bytes == pytest.approx(4 * stage0.weights_bytes / 2 / run.plan.dp)
    assert report.fits
    default = run.engine.configured(master_copy=True, optimizer_moment_dtype="fp32")
    assert not memory_report(run.model, run.hardware, run.plan, default).fits


def test_torchtitans_compiled_loss_brings_the_h200_runs_within_5_percent() -> None:
    """torchtitan's June 2025 H200 runs (e7c0cae, compile on) compile the cross entropy with the model
    (components/loss.py build_cross_entropy_loss, since bbb1b61): no fp32 copy of the 128k-entry logits. Counted
    with the eager loss's two copies they were predicted 36-37% over what they measured; the runs file says
    compiled_loss and they are within 5% (issue 21 item 5's tolerance where a run states its memory)."""
    runs = [r for r in _ran() if r.id.startswith("torchtitan-h200-llama31-8b") and "peak_memory_bytes" in r.measured]
    assert len(runs) == 2
    for run in runs:
        assert run.engine.memory.compiled_loss and run.memory_kind == "max_reserved"
        predicted = _comparable(run)
        assert predicted == pytest.approx(run.measured["peak_memory_bytes"], rel=0.05), run.id
        eager = run.engine.model_copy(update={"memory": run.engine.memory.model_copy(update={"compiled_loss": False})})
        assert _comparable(run, eager) > 1.3 * predicted


def test_torch_pipelining_keeps_a_receive_buffer_per_micro_batch_for_each_stage():
    """torch.distributed.pipelining makes, at its first step, an activation receive buffer per micro-batch for every
    stage but the first and a gradient receive buffer per micro-batch for every stage but the last, and keeps them
    (torch 2.13 stage.py _setup_forward_recv_info / _setup_backward_recv_info; 2.6 _prepare_forward_infra /
    _prepare_backward_infra); every stage but the last also keeps each in-flight micro-batch's output for its
    backward (fwd_cache). With 16 micro-batches on pp 4 (1F1B: pp - r in flight on rank r): the first rank 16
    gradient buffers and 4 outputs, a middle rank 16 + 16 buffers (its 3 in-flight inputs are its layers' inputs,
    its 3 outputs not), the last 15 activation buffers; through the optimizer step the receive buffers stay and the
    outputs go. Megatron receives into the in-flight micro-batches' own tensors: none."""
    from planner.cost.activations import pp_boundary_bytes
    from planner.cost.memory import in_flight_microbatches, pipeline_buffers

    model, titan = load_model("llama3-70b"), load_engine("torchtitan")
    plan = Plan(pp=4, tp=8, sp=True, dp=2, zero=3, micro_batch=1, global_batch=32, seq_len=8192)
    assert plan.num_microbatches == 16 and titan.memory.pipeline_recv_buffers
    b = pp_boundary_bytes(model, 1, 8192, cp=1, tp=8, sp=True, act_bytes=2)
    assert b == 8192 / 8 * 8192 * 2
    want = {0: (16 + 4, -4), 1: (16 + 16, 0), 3: (16 - 1, 1)}  # (extra, step_shift) in boundary tensors
    for rank, (extra, shift) in want.items():
        got = pipeline_buffers(
            model, plan, titan, chunks=1, first=rank == 0, last=rank == 3, in_flight=in_flight_microbatches(plan, rank)
        )
        assert (got.extra, got.step_shift) == (pytest.approx(extra * b), pytest.approx(shift * b)), rank
    # two chunks on a rank that holds the first and the last (DualPipeV's rank 0): one receives, one sends
    both = pipeline_buffers(model, plan, titan, chunks=2, first=True, last=True, in_flight=4)
    assert (both.extra, both.step_shift) == (pytest.approx(32 * b), 0)
    megatron = load_engine("megatron")
    assert pipeline_buffers(model, plan, megatron, chunks=1, first=True, last=False, in_flight=4) == (0.0, 0.0)
    # in the report (the search's screen agrees to 1e-12: tests/test_search.py test_memory_screen_equals_...)
    off = titan.model_copy(update={"memory": titan.memory.model_copy(update={"pipeline_recv_buffers": False})})
    hw = load_hardware("h100-sxm")
    with_buffers, without = memory_report(model, hw, plan, titan), memory_report(model, hw, plan, off)
    assert with_buffers.stages[0].breakdown.buffers_bytes - without.stages[0].breakdown.buffers_bytes == pytest.approx(
        20 * b
    )


def test_torchtitans_405b_interleaved_run_holds_one_chunks_gradients_at_its_peak() -> None:
    """torchtitan's Dec 2024 Llama 3.1 405B runs on 512 H100s (FSDP 8 x TP 8 x PP 8, 8 micro-batches: Table 5 of
    benchmarks/llama3_h100_202412_torchtitan.md) measured 82.5 GiB with 1F1B and 72.7 with interleaved 1F1B (two
    chunks a rank). torch's pipelining reduces a stage's gradients after its own last backward, and with one group of
    micro-batches a rank's second chunk ends its backwards before its first begins, so the ranks never hold both
    chunks' unsharded fp32 gradients (cost.moments). Summed as if they did, the interleaved run was predicted 4 GiB
    above the 1F1B one; now below it, by 84% of the measured gap."""
    runs = {r.plan.schedule: r for r in _ran() if r.id.startswith("torchtitan-h100-t5-llama31-405b-512gpu")}
    one, two = runs["1f1b"], runs["interleaved"]
    assert (two.plan.vpp, two.plan.num_microbatches, two.plan.pp) == (2, 8, 8)

    def predicted(run: Run, **memory: bool) -> float:
        engine = run.engine.model_copy(update={"memory": run.engine.memory.model_copy(update=memory)})
        return memory_report(run.model, run.hardware, run.plan, engine).total_bytes

    measured_gap = one.measured["peak_memory_bytes"] - two.measured["peak_memory_bytes"]
    assert measured_gap / 2**30 == pytest.approx(9.8)
    gap = predicted(one) - predicted(two)
    assert 0.7 * measured_gap < gap < 1.1 * measured_gap
    assert predicted(two, pipeline_stage_reduce=False) > predicted(one, pipeline_stage_reduce=False)


@pytest.mark.parametrize(("global_batch", "alive"), [(8, (1,)), (16, (0, 1))])
def test_one_group_of_interleaved_micro_batches_holds_one_chunks_gradients(global_batch: int, alive: tuple) -> None:
    """Llama 3 70B on pp 4 x vpp 2 with torchtitan's FSDP and full recompute: with 4 micro-batches (one group of pp)
    every rank peaks at its first backward, of its last chunk, holding that chunk's accumulated fp32 gradients only,
    its share of the rank's parameters (the last rank's, a layer short, holds the output layer: more than half);
    with 8 (two groups) both chunks' gradients are alive while the most micro-batches are in flight. The search's
    screen gives the report's total."""
    from planner.cost.coster import Coster
    from planner.cost.params import chunk_shares, padded_vocab, plan_params
    from planner.cost.stages import plan_layout
    from planner.cost.states import sharded_states

    model, hw, titan = load_model("llama3-70b"), load_hardware("h100-sxm"), load_engine("torchtitan")
    plan = Plan(
        pp=4, vpp=2, tp=8, sp=True, dp=2, zero=2, micro_batch=1, global_batch=global_batch, seq_len=4096,
        recompute="full",
    )  # fmt: skip
    summed = titan.model_copy(update={"memory": titan.memory.model_copy(update={"pipeline_stage_reduce": False})})
    report = memory_report(model, hw, plan, titan)
    stage = titan.zero_stage(plan)
    assert stage.accumulate_unsharded and stage.gathered_weights == "all"
    per = state_bytes_per_param(plan.precision, titan, stage)
    vocab, layout = padded_vocab(model.vocab_size, 8, titan.rules.vocab_padding), plan_layout(model, plan, titan)
    for got, full in zip(report.stages, memory_report(model, hw, plan, summed).stages):
        rank = got.stage
        accumulated = sharded_states(plan_params(model, plan, titan, rank), per, plan, stage).accumulated_grads_bytes
        shares = chunk_shares(model, layout, tp=8, ep=1, rank=rank, vocab=vocab)
        assert got.gradients_alive == alive, rank
        freed = (1 - sum(shares[c] for c in alive)) * accumulated
        assert got.breakdown.gradients_bytes == pytest.approx(full.breakdown.gradients_bytes - freed), rank
        assert got.breakdown.weights_bytes == pytest.approx(full.breakdown.weights_bytes), rank
        assert got.in_flight_microbatches == full.in_flight_microbatches, rank
    # torchtitan's split gives the embedding's and the loss's chunks a layer fewer; their parameters outweigh it
    assert layout.chunk_sizes(3) == (10, 9) and chunk_shares(model, layout, tp=8, ep=1, rank=3, vocab=vocab)[1] > 0.5
    assert Coster(model, hw, titan).peak(plan)[0] == pytest.approx(report.total_bytes, rel=1e-12)


def test_the_workers_zero3_pipeline_stage_keeps_its_layers_gathered_after_backward() -> None:
    """The planner's worker runs zero 3 as fully_shard(reshard_after_forward=True); under pipelining torch's stage
    turns resharding after backward off until the stage's last backward (2.13 stage.py backward_maybe_with_nosync),
    so at the end of its first backward every layer of the stage is gathered: its zero_pp 3 holds all of them, as
    torchtitan's does, where without pipelining one unit and the prefetched next are gathered."""
    from planner.cost.params import plan_params

    model, hw, worker = load_model("llama3-8b"), load_hardware("h100-sxm"), load_engine("planner")
    plan = Plan(pp=2, dp=4, zero=3, micro_batch=1, global_batch=8, seq_len=4096)
    assert (
        worker.zero_stage(plan).gathered_weights == "all" == load_engine("torchtitan").zero_stage(plan).gathered_weights
    )
    assert worker.zero_stage(plan.model_copy(update={"pp": 1, "dp": 8})).gathered_weights == "unit"
    params = plan_params(model, plan, worker, 0).total
    weights = memory_report(model, hw, plan, worker).stages[0].breakdown.weights_bytes
    assert weights == pytest.approx(params * 4 / 4 + params * 2)  # fp32 shards over dp 4, a bf16 copy of every layer


@pytest.mark.parametrize(("schedule", "vpp"), [("1F1B", 1), ("Interleaved1F1B", 2)])
def test_torchtitans_405b_pipeline_stages_on_an_h200(schedule: str, vpp: int) -> None:
    """torchtitan 0.2.2's 405B pipeline stages on an H200 (FSDP 8 x TP 8 x PP 8 over a fake group, 8 micro-batches of
    4 x 8192, full AC, bf16 eager: the plan of its Dec 2024 405B runs). The first stage's allocated peak is the
    planner's tensors within 5%. The last stage peaks at the loss, whose fp32 copies the loss's backward frees before
    the layers' backward starts: its tensors, the working set counted apart from the logits (cost/memory.py
    layers_work_bytes), are within 2%; with the working set added to the logits they were 11-12% over (issue 21
    item 5; the README of the results)."""
    from planner.cost.memory import layers_work_bytes

    rows = [json.loads(line) for line in (TITAN_PP_H200 / "pp.jsonl").read_text().splitlines()]
    kind = "1f1b" if vpp == 1 else "interleaved"
    plan = Plan(
        pp=8, vpp=vpp, tp=8, sp=True, dp=8, zero=3, recompute="full", micro_batch=4, global_batch=256, seq_len=8192,
        precision="bf16", schedule=kind,
    )  # fmt: skip
    model, titan = load_model("llama3-405b"), load_engine("torchtitan")
    report = memory_report(model, load_hardware("h200"), plan, titan)
    for rank, first in ((0, True), (448, False)):
        row = next(r for r in rows if f"rank={rank}" in r["case"] and ("sched=" in r["case"]) == (vpp > 1))
        assert (row["first"], row["last"], row["chunks"]) == (first, not first, vpp)
        measured = row["steps"][-1]["max_allocated_bytes"]
        stage = report.stages[0 if first else 7]
        tensors = stage.breakdown.total_bytes - stage.breakdown.reserved_bytes
        assert tensors == pytest.approx(measured, rel=0.05 if first else 0.02), schedule
    logits = logits_bytes(model, plan, titan)
    assert layers_work_bytes(logits + 1.0, logits, loss_apart=True) == 1.0
    assert layers_work_bytes(1.0, logits, loss_apart=False) == 1.0


def _whole_model_reserve_ratios() -> list[float]:
    """max_memory_reserved / max_memory_allocated of every torchtitan 0.2.2 case measured on the H200 with all of its
    model's layers (a case NAME:WORLD:LB:SEQ:AC[:LAYERS][:k=v...] without LAYERS; streams.jsonl repeats
    titan.jsonl's)."""
    ratios = []
    for path in (TITAN_H200 / "titan.jsonl", TITAN_PP_H200 / "pp.jsonl", TITAN_PP_H200 / "tp.jsonl"):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            fields = row["case"].split(":")
            if len(fields) > 5 and fields[5].isdigit():
                continue
            step = row["steps"][-1]
            ratios.append(step["max_reserved_bytes"] / step["max_allocated_bytes"])
    return ratios


def test_torchtitans_allocator_reserve_is_its_measured_median() -> None:
    """torchtitan's `memory.allocator_fraction` is the median reserve over the whole-model cases measured on an H200
    (12 cases, 1.06-1.31x), not the hardware profiles' assumed 5%: FSDP2's all-gather stream keeps a pool of its own
    beside the compute stream's fragmentation (benchmarks/results/h200-2026-11-28-titan-pp/README.md)."""
    ratios = sorted(_whole_model_reserve_ratios())
    assert len(ratios) == 12 and ratios[0] > 1.05 and ratios[-1] < 1.35
    median = (ratios[5] + ratios[6]) / 2
    assert load_engine("torchtitan").memory.allocator_fraction == pytest.approx(median - 1, abs=0.002)
    assert load_hardware("h200").reserved.allocator_fraction < median - 1


@pytest.mark.parametrize("engine", ["deepspeed", "megatron-deepspeed"])
def test_deepspeed_keeps_an_fp32_master_in_its_zero_optimizer_only(engine):
    """DeepSpeed's ZeRO optimizer clones an fp32 partition also of an fp32 model (stage_1_and_2.py
    single_partition_of_fp32_groups, stage3.py fp32_partitioned_groups_flat): 4 + 4 + 12 bytes a parameter. Without
    ZeRO an fp32 model runs the plain optimizer, which updates the parameters themselves (engine.py
    _configure_optimizer): 4 + 4 + 8, where the profile had charged the ZeRO optimizer's master copy; in fp16 the
    FP16_Optimizer keeps one (2 + 2 + 12)."""
    eng = load_engine(engine)

    def per(zero, precision):
        plan = Plan(dp=8, zero=zero, global_batch=8, seq_len=1024, precision=precision)
        s = state_bytes_per_param(precision, eng, eng.zero_stage(plan))
        return s.master_copy, s.optimizer

    assert [per(0, "fp32"), per(1, "fp32"), per(0, "fp16"), per(1, "fp16")] == [(False, 8)] + [(True, 12)] * 3


def test_a_master_copy_setting_is_said_against_what_the_stage_keeps():
    """DeepSpeed's ZeRO-1 keeps an fp32 master in fp32 too: --master-copy there is no setting of the run's, and
    --no-master-copy is one, which the memory document and an emitted file must carry (read-through: it was the
    other way round, the null read as 'no copy in fp32')."""
    from helpers import run_planner

    args = ("estimate", "-m", "gpt2-1.5b", "--engine", "deepspeed", "--precision", "fp32", "--zero", "1", "--gpus",
            "8", "--json")  # fmt: skip
    for flag, said in (("--master-copy", {}), ("--no-master-copy", {"master_copy": False})):
        code, out, err = run_planner(*args, flag)
        assert code == 0 and json.loads(out)["settings"] == said, (flag, err)
