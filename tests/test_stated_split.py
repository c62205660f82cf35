"""A pipeline split the user states (plan.first_stage_layers / last_stage_layers, --first-stage-layers /
--last-stage-layers): priced per stage as Megatron builds it, refused where an engine cannot run it, kept by plan
files, written by the Megatron emitters, and nothing changes without it.

The recipe: Megatron-Bridge's DeepSeek-V3 on pp 16 (recipes/deepseek/h100/deepseek_v3.py
_get_deepseek_v3_pipeline_layout, (16, 1)): the embedding and 4 layers on the first rank, 4 on each middle rank, 1
layer with the MTP module and the loss on the last; the planner's own split is 2 / 4 x 14 / 3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from helpers import run_planner as run

from planner.cost.coster import Coster
from planner.cost.stages import plan_layout
from planner.engine import engine_problems
from planner.engine.split import FirstLast, first_last_problem, first_last_sizes
from planner.io.catalog import load_engine, load_hardware, load_model
from planner.launch.emit.megatron import megatron_args
from planner.launch.emit.megatron_bridge import bridge_overrides
from planner.plan import Plan

DSV3 = load_model("deepseek-v3")
H100 = load_hardware("h100-sxm")
MEGATRON = load_engine("megatron")
BASE = {"dp": 64, "tp": 2, "pp": 16, "ep": 64, "sp": True, "zero": 1, "global_batch": 1024, "seq_len": 4096}
RECIPE = Plan(**BASE, first_stage_layers=4, last_stage_layers=1)
OWN = Plan(**BASE)
DEGREES = ["--gpus", "2048", "--tp", "2", "--pp", "16", "--ep", "64"]
STATED = ["--first-stage-layers", "4", "--last-stage-layers", "1"]


def test_the_recipe_split_is_priced_per_stage():
    layout = plan_layout(DSV3, RECIPE, MEGATRON)
    assert [layout.num_rank_layers(r) for r in range(16)] == [4] * 15 + [1]
    assert [plan_layout(DSV3, OWN, MEGATRON).num_rank_layers(r) for r in range(16)] == [2] + [4] * 14 + [3]
    coster = Coster(DSV3, H100, MEGATRON)
    assert not coster.problems(RECIPE, 2048)
    stated, own = coster.memory(RECIPE).stages, coster.memory(OWN).stages
    assert [s.layers for s in stated] == [4] * 15 + [1]
    # the first rank holds the embedding and two more layers, the last one layer (and the MTP module) fewer
    assert stated[0].total_bytes > own[0].total_bytes and stated[-1].total_bytes < own[-1].total_bytes
    # rank 1 holds layers 4-7, all MoE, where the planner's split gave it a dense one (layers 0-2 are dense); from
    # rank 2 on both hold four MoE layers
    assert stated[1].total_bytes > own[1].total_bytes
    assert [s.total_bytes for s in stated[2:15]] == [s.total_bytes for s in own[2:15]]
    assert coster.step(RECIPE).step_s != coster.step(OWN).step_s


def test_megatron_rules_on_a_stated_split():
    """transformer_config.py __post_init__ (uneven PP): counts divisible by vpp, the rest over the middle ranks."""
    s = FirstLast(4, 1)
    assert first_last_problem(61, 16, 1, s) is None
    assert first_last_problem(61, 8, 1, s) == (
        "stated split does not fit pp",
        "the 56 layers left do not divide over the 6 middle ranks",
    )
    assert first_last_problem(61, 16, 2, s)[0] == "stated split not divisible by vpp"  # 1 layer, 2 chunks
    assert first_last_problem(61, 1, 1, s)[0] == "stated split needs pp > 1"
    assert first_last_problem(61, 2, 1, s)[0] == "stated split does not fit pp"  # 56 layers, no middle rank
    assert first_last_problem(5, 4, 1, FirstLast(4, 3))[0] == "stated split does not fit pp"  # more than the model
    assert first_last_sizes(61, 8, 1, FirstLast(None, 5)) == [8] * 7 + [5]  # the last rank alone
    assert first_last_sizes(32, 4, 2, FirstLast(8, 8)) == [4] * 8  # each rank's layers over its chunks
    assert first_last_sizes(64, 4, 2, FirstLast(8, 8)) == [4, 12, 12, 4] * 2  # chunk c on rank c mod pp


@pytest.mark.parametrize(
    ("engine", "said"),
    [("torchtitan", "module_fqns_per_model_part"), ("deepspeed", "partition_method"), ("planner", "launch/layout.py")],
)
def test_engines_without_the_option_refuse_it_by_name(engine, said):
    problems = engine_problems(load_engine(engine), load_model("llama3-8b"), Plan(pp=4, first_stage_layers=5))
    refused = [p for p in problems if p.reason.endswith("takes no stated pipeline split")]
    assert len(refused) == 1 and said in refused[0].detail and "first_stage_layers=5" in refused[0].detail


def test_bad_splits_are_one_line_exit_2():
    code, _, err = run("memory", "-m", "deepseek-v3", *DEGREES[:5], "8", *DEGREES[6:], *STATED)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "the 56 layers left do not divide over the 6 middle ranks" in err and "pp in [3, 4, 6, 9, 10, 16" in err
    code, _, err = run("estimate", "-m", "deepseek-v3", *DEGREES, "--first-stage-layers", "0")
    assert code == 2 and "--first-stage-layers" in err and "Traceback" not in err
    code, _, err = run("memory", "-m", "llama3-8b", "--gpus", "8", "--engine", "torchtitan", "--pp", "4", *STATED)
    assert code == 2 and "torchtitan takes no stated pipeline split" in err and err.count("\n") == 1


def test_search_ranks_only_plans_with_the_split_and_counts_the_pp_it_cannot_hold(tmp_path: Path):
    saved = tmp_path / "best.yaml"
    code, out, err = run("search", "-m", "deepseek-v3", "--gpus", "2048", *STATED, "--top", "5", "--json",
                         "--save", str(saved), "--no-advice")  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    ranked = [r["plan"] for r in doc["plans"]]
    assert ranked and all((p["first_stage_layers"], p["last_stage_layers"]) == (4, 1) for p in ranked)
    assert all(p["pp"] in (3, 4, 6, 9, 10, 16, 30, 58) for p in ranked)
    reasons = doc["rejected"]
    assert reasons["stated split does not fit pp"] > 0 and reasons["stated split needs pp > 1"] > 0
    # the saved plan carries the split, and --plan prices it again with it
    file = yaml.safe_load(saved.read_text())
    plan = file["plan"]
    assert (plan["first_stage_layers"], plan["last_stage_layers"]) == (4, 1)
    code, out, err = run("memory", "--plan", str(saved), "--json")
    assert code == 0, err
    assert json.loads(out)["plan"] == {**plan, "engine": file["engine"]}


def test_the_megatron_emitters_write_the_split():
    args, mapping = megatron_args(DSV3, RECIPE)
    assert " ".join(args).count("--decoder-first-pipeline-num-layers 4 --decoder-last-pipeline-num-layers 1") == 1
    assert mapping["first_stage_layers"] == "--decoder-first-pipeline-num-layers"
    last_only, _ = megatron_args(DSV3, OWN.model_copy(update={"pp": 8, "last_stage_layers": 5}))
    assert "--decoder-last-pipeline-num-layers" in last_only and "--decoder-first-pipeline-num-layers" not in last_only
    overrides = dict(o.split("=", 1) for o in bridge_overrides(DSV3, RECIPE)[0])
    assert overrides["model.num_layers_in_first_pipeline_stage"] == "4"
    assert overrides["model.num_layers_in_last_pipeline_stage"] == "1"
    assert overrides["model.pipeline_model_parallel_layout"] == "null"  # recipe_runner.py keeps it: no rebuild


def test_megatron_core_takes_the_emitted_split():
    tc = pytest.importorskip("megatron.core.transformer.transformer_config", reason="pip install -e '.[engines]'")
    import torch
    from megatron.core.transformer.transformer_block import get_num_layers_to_build

    cfg = tc.TransformerConfig(
        num_layers=61, hidden_size=64, num_attention_heads=4, pipeline_model_parallel_size=16,
        pipeline_dtype=torch.bfloat16, num_layers_in_first_pipeline_stage=4, num_layers_in_last_pipeline_stage=1,
    )  # fmt: skip
    built = [get_num_layers_to_build(cfg, pp_rank=r) for r in range(16)]
    assert built == [plan_layout(DSV3, RECIPE, MEGATRON).num_rank_layers(r) for r in range(16)]


def test_without_the_options_nothing_changes():
    assert "first_stage_layers" not in OWN.model_dump() and "last_stage_layers" not in OWN.model_dump_json()
    assert OWN.summary() == Plan(**BASE).summary() and "first" not in OWN.summary()
    assert "first4 last1" in RECIPE.summary()
