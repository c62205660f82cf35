"""Layer-wise activation CPU offload (Megatron's --cpu-offloading-num-layers, Transformer Engine's cpu_offload): what
the first N layers keep moves to host memory, the plans Megatron refuses it with, and its trip through the flags,
plan files, runs files, the Megatron emitter and ingest."""

from __future__ import annotations

import pytest
import yaml
from helpers import run_planner

from planner.cost.coster import Coster
from planner.cost.memory import memory_report
from planner.engine import plan_problems
from planner.errors import PlannerError
from planner.io.catalog import load_engine, load_hardware, load_model
from planner.io.logs import read_log
from planner.io.planfile import read_plan_file
from planner.plan import Plan

MEGATRON = load_engine("megatron")
LLAMA70 = load_model("llama3-70b")
GB200 = load_hardware("gb200-nvl72")
# Megatron-Bridge perf_recipes/llama/gb200/llama3.py llama3_70b_pretrain_64gpu_gb200_bf16_config (@067f987d): 64
# GB200, tp 1, pp 1, Megatron-FSDP (optim_grads_params), mb 1, gbs 256, seq 8192, no recompute, cpu_offloading with
# cpu_offloading_num_layers 20.
RECIPE = Plan(dp=64, zero=3, micro_batch=1, global_batch=256, seq_len=8192, recompute="none")


def _breakdown(layers: int):
    return memory_report(LLAMA70, GB200, RECIPE, MEGATRON.configured(offload_layers=layers)).peak


def test_the_bridge_recipe_that_offloads_20_layers_fits_and_without_them_does_not():
    """The recipe's activations of all 80 layers at 8192 tokens do not fit a GB200; offloading the first 20 moves
    exactly what 20 layers keep (the two in transit are in the buffers, under the loss's logits here)."""
    bare, offloaded = _breakdown(0), _breakdown(20)
    assert not memory_report(LLAMA70, GB200, RECIPE, MEGATRON).fits
    assert memory_report(LLAMA70, GB200, RECIPE, MEGATRON.configured(offload_layers=20)).fits
    logits = bare.breakdown.activations_bytes - 80 * _per_layer()
    assert logits > 0
    moved = bare.breakdown.activations_bytes - offloaded.breakdown.activations_bytes
    assert moved == pytest.approx(20 * _per_layer(), rel=1e-9)


def _per_layer() -> float:
    """What one Llama 3 70B layer keeps per micro-batch in the recipe's plan (memory_report's pieces)."""
    from planner.cost.memory import activation_pieces

    (pieces,) = activation_pieces(LLAMA70, RECIPE, MEGATRON).values()
    return pieces[0]


@pytest.mark.parametrize("host_bytes_per_s", [None, 1e9])
def test_more_layers_offloaded_never_use_more_memory_nor_run_faster(host_bytes_per_s):
    hw = GB200
    if host_bytes_per_s:  # a slow host link: the trips show in the step
        hw = GB200.model_copy(update={"gpu": GB200.gpu.model_copy(update={"host_bandwidth_bytes_per_s": 1e9})})
    plan = RECIPE.model_copy(update={"global_batch": 64})
    totals, steps = [], []
    for n in (0, 1, 10, 40, 79):
        engine = MEGATRON.configured(offload_layers=n)
        totals.append(memory_report(LLAMA70, hw, plan, engine).total_bytes)
        steps.append(Coster(LLAMA70, hw, engine).step(plan).step_s)
    assert totals == sorted(totals, reverse=True) and totals[0] > totals[-1]
    assert steps == sorted(steps)
    if host_bytes_per_s:
        assert steps[-1] > steps[0]


CASES = {  # plan changes -> the planner's reason and megatron-core's own check (transformer_config.py)
    "pp": ({"pp": 2, "dp": 32}, {}, "layer offload with pipeline parallelism", "Pipeline parallelism"),
    "recompute": ({"recompute": "selective"}, {}, "layer offload with recompute", "recomputation"),
    "all layers": ({}, {"offload_layers": 80}, "offload layers beyond the model", "layers less than"),
    "graphs": ({}, {"cuda_graphs": True}, "layer offload with cuda graphs", "CUDA graphs"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_planner_refuses_what_megatron_core_refuses(case):
    """Each refusal is megatron-core 0.16.1's own TransformerConfig check on the same settings."""
    plan_changes, settings, reason, message = CASES[case]
    plan = RECIPE.model_copy(update=plan_changes)
    engine = MEGATRON.configured(**{"offload_layers": 20, **settings})
    assert reason in [p.reason for p in plan_problems(LLAMA70, plan, engine, 64, GB200)]
    assert plan_problems(LLAMA70, RECIPE, MEGATRON.configured(offload_layers=20), 64, GB200) == []
    tc = pytest.importorskip("megatron.core.transformer.transformer_config", reason="pip install -e '.[engines]'")
    import torch

    kw: dict[str, object] = {"num_layers": 80, "hidden_size": 64, "num_attention_heads": 4, "cpu_offloading": True,
                             "cpu_offloading_num_layers": engine.memory.offload_layers}  # fmt: skip
    if plan.pp > 1:
        kw |= {"pipeline_model_parallel_size": plan.pp, "pipeline_dtype": torch.bfloat16}
    if plan.recompute != "none":
        kw["recompute_granularity"] = plan.recompute
    if settings.get("cuda_graphs"):
        kw["cuda_graph_impl"] = "transformer_engine"
    with pytest.raises(ValueError, match=message):
        tc.TransformerConfig(**kw)
    tc.TransformerConfig(**(kw | {"cpu_offloading_num_layers": 20, "pipeline_model_parallel_size": 1,
                                  "recompute_granularity": None, "cuda_graph_impl": "none"}))  # fmt: skip


def test_fine_grained_and_layer_offload_together_are_refused():
    engine = MEGATRON.configured(offload_layers=20, activation_offload=0.5)
    reasons = [p.reason for p in plan_problems(LLAMA70, RECIPE, engine, 64, GB200)]
    assert "layer and fine-grained offload together" in reasons


def test_the_flag_the_plan_file_and_the_megatron_file(tmp_path):
    args = ["-m", "llama3-70b", "--hardware", "gb200-nvl72", "--dp", "64", "--zero", "3", "--micro-batch", "1",
            "--global-batch", "256", "--seq-len", "8192", "--recompute", "none"]  # fmt: skip
    rc, out, err = run_planner("memory", *args, "--offload-layers", "20")
    assert rc == 0, err
    assert "(offload_layers=20)" in out and "fits:" in out
    plan = tmp_path / "plan.yaml"
    searched = [a for a in args if a not in ("--dp", "64")]
    rc, _, err = run_planner("search", *searched, "--gpus", "64", "--tp", "1", "--pp", "1", "--offload-layers", "20",
                             "--save", str(plan))  # fmt: skip
    assert rc == 0, err
    assert read_plan_file(str(plan)).training == {"offload_layers": 20}
    rc, _, err = run_planner("launch", "--plan", str(plan), "--emit", "megatron", "--out", str(tmp_path / "out"))
    assert rc == 0, err
    assert "--cpu-offloading-num-layers 20" in (tmp_path / "out" / "megatron_args.sh").read_text()
    rc, _, err = run_planner("memory", *args, "--offload-layers", "20", "--pp", "2", "--dp", "32")
    assert rc == 2 and "pp=2" in err and "--pp 1" in err, err
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"plan": {"dp": 8}, "model": "llama3-8b", "training": {"offload_layers": 2.5}}))
    with pytest.raises(PlannerError, match=r"training.offload_layers=2.5 is not valid; give a whole number"):
        read_plan_file(str(bad))


def _offload_log(layers: str, activations: str = "True") -> str:
    """A Megatron-LM log (synthetic): an argument dump offloading `layers` layers (their activations, or with
    `activations` False their weights alone), then seven iteration lines."""
    dump = {"tensor_model_parallel_size": "1", "pipeline_model_parallel_size": "1", "data_parallel_size": "8",
            "world_size": "8", "micro_batch_size": "1", "global_batch_size": "8", "seq_length": "8192",
            "bf16": "True", "cpu_offloading": "True" if layers != "0" else "False",
            "cpu_offloading_num_layers": layers, "cpu_offloading_activations": activations}  # fmt: skip
    lines = ["------------------------ arguments ------------------------"]
    lines += [f"  {k} {'.' * (48 - len(k))} {v}" for k, v in sorted(dump.items())]
    lines.append("-------------------- end of arguments ---------------------")
    lines += [f" iteration {i:8d}/     100 | consumed samples: {8 * i:12d} | elapsed time per iteration (ms): 9000.0 | "
              "global batch size:     8 | lm loss: 1.0E+00 |" for i in range(1, 8)]  # fmt: skip
    return "\n".join(lines) + "\n"


def test_ingest_reads_the_layers_a_megatron_dump_offloads():
    assert read_log(_offload_log("20"), source="offload").software.get("offload_layers") == 20
    assert "offload_layers" not in read_log(_offload_log("0"), source="none").software
    weights = read_log(_offload_log("20", activations="False"), source="weights").software  # no activation moves
    assert "offload_layers" not in weights


def test_search_holds_the_offload_rules_that_depend_on_the_plan():
    """The search checks the rules once per structure and once per recompute level: the offload's pipeline and
    recompute rules were checked with a default plan (pp 1, no recompute), so it ranked and saved pp 4 plans with
    full recompute that estimate then refused (audit); the experts' groups inside a recomputed MoE layer likewise."""
    from planner.api import search

    found = search("llama3-70b", gpus=64, hardware="gb200-nvl72", engine="megatron", global_batch=256, seq_len=8192,
                   offload_layers=20)  # fmt: skip
    assert found.plans and all(p.plan["pp"] == 1 and p.plan["recompute"] == "none" for p in found.plans)
    assert {"layer offload with pipeline parallelism", "layer offload with recompute"} <= set(found.rejected)
    with pytest.raises(PlannerError, match="no plan is valid, most often: expert offload inside moe recompute"):
        search("qwen3-30b-a3b", gpus=16, engine="megatron", global_batch=64, seq_len=4096, recompute="selective",
               activation_offload=0.5, offload_modules="expert_fc1", recompute_modules="moe")  # fmt: skip


def test_the_first_layers_are_taken_in_model_order():
    """Llama 4 Maverick alternates dense and MoE layers: the first six layers moved are three of each, not the six
    of whichever kind appears first (the kinds were laid out in the order they first appear, audit)."""
    from planner.cost.memory import activation_pieces
    from planner.layers import layer_kinds

    maverick = load_model("llama4-maverick")
    plan = Plan(dp=64, ep=8, zero=1, global_batch=64, seq_len=8192, recompute="none")
    pieces = activation_pieces(maverick, plan, MEGATRON)
    kinds = layer_kinds(maverick)[:6]
    assert len(set(kinds)) > 1 and pieces[kinds[0]][0] != pieces[kinds[1]][0]
    bare = memory_report(maverick, GB200, plan, MEGATRON).peak.breakdown.activations_bytes
    offloaded = memory_report(maverick, GB200, plan, MEGATRON.configured(offload_layers=6))
    moved = bare - offloaded.peak.breakdown.activations_bytes
    assert moved == pytest.approx(sum(pieces[k][0] for k in kinds), rel=1e-9)


def _surely_fits(k: int) -> bool:
    """RECIPE with k layers offloaded fits, and so does the high end of the 80% interval of its memory."""
    engine = MEGATRON.configured(offload_layers=k)
    report = memory_report(LLAMA70, GB200, RECIPE, engine)
    return report.fits and Coster(LLAMA70, GB200, engine).memory_high_bytes(RECIPE, report.total_bytes) <= (
        report.capacity_bytes
    )


def test_a_search_that_fits_nothing_names_the_fewest_layers_to_offload():
    """The closest misses try the engine's CPU offload where the plan can run it (pp 1, no recompute): the fewest
    layers that make it fit with its 80% interval of memory (an offload that fits by a hair was suggested, which
    the interval said may not), by bisection, the one fewer not."""
    from planner.api import search

    found = search("llama3-70b", gpus=64, hardware="gb200-nvl72", engine="megatron", tp=1, pp=1, cp=1, zero=3,
                   micro_batch=1, global_batch=256, seq_len=8192, recompute="none")  # fmt: skip
    assert not found.plans
    (miss,) = found.closest_misses
    (offload,) = [v for v in miss.variants if v.change.startswith("--offload-layers ")]
    n = int(offload.change.split()[-1])
    assert offload.fits and not offload.may_not_fit and 1 < n < 80
    assert [_surely_fits(k) for k in (n - 1, n)] == [False, True]
    over = n - 1  # the most layers with which it does not fit at all, one below the fewest that fit by a hair
    while memory_report(LLAMA70, GB200, RECIPE, MEGATRON.configured(offload_layers=over)).fits:
        over -= 1
    assert over < n - 1  # here n - 1 fits, by a hair: the suggestion is not at the edge of the GPU
    fewer = search("llama3-70b", gpus=64, hardware="gb200-nvl72", engine="megatron", tp=1, pp=1, cp=1, zero=3,
                   micro_batch=1, global_batch=256, seq_len=8192, recompute="none", offload_layers=over)  # fmt: skip
    (again,) = [v for m in fewer.closest_misses for v in m.variants if v.change.startswith("--offload-layers")]
    assert again.change == offload.change and again.settings == {"offload_layers": n}  # more than it had
    torchtitan = search("llama3-70b", gpus=64, hardware="gb200-nvl72", engine="torchtitan", tp=1, pp=1, cp=1, zero=3,
                        micro_batch=1, global_batch=256, seq_len=8192, recompute="none")  # fmt: skip
    assert not any(v.change.startswith("--offload-layers") for m in torchtitan.closest_misses for v in m.variants)


def test_ingest_reads_the_layers_a_bridge_config_offloads():
    """Megatron-Bridge prints its ConfigContainer as YAML (model.cpu_offloading, model.cpu_offloading_num_layers):
    the same setting, read from the model section; its dump of a run without offload states none."""
    from pathlib import Path

    log = (Path(__file__).parent / "data" / "logs" / "megatron_bridge_llama32_1b.log").read_text()
    assert "offload_layers" not in read_log(log, source="bridge").software
    offloading = log.replace("  cpu_offloading: false", "  cpu_offloading: true").replace(
        "  cpu_offloading_num_layers: 0", "  cpu_offloading_num_layers: 4"
    )  # fmt: skip
    assert read_log(offloading, source="bridge").software["offload_layers"] == 4
