"""The engine settings a runs file's `software:` block could say and the command line could not: --p2p-overlap,
--zero3-gather, --rmsnorm and --master-copy, on memory, estimate and search alike, each moving the term it names,
remembered by a saved plan file, and refused by name when the value is not one of the setting's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_planner as run

LLAMA70 = ("--model", "llama3-70b", "--gpus", "64", "--tp", "4", "--pp", "4", "--vpp", "2", "--schedule", "interleaved")
ZERO3 = ("--model", "llama3-8b", "--gpus", "64", "--zero", "3", "--engine", "megatron-deepspeed")
TITAN = ("--model", "llama3-8b", "--gpus", "8", "--engine", "torchtitan", "--recompute", "none")


def _json(*args: str) -> dict:
    code, out, err = run(*args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_p2p_overlap_hides_the_interleaved_pipeline_sends() -> None:
    waiting = _json("estimate", *LLAMA70, "--no-p2p-overlap")["time"]["exposed_comm_s"]["pp"]
    posted = _json("estimate", *LLAMA70, "--p2p-overlap")["time"]["exposed_comm_s"]["pp"]
    assert posted < 0.2 * waiting


def test_megatrons_interleaved_schedule_without_p2p_overlap_needs_three_stages() -> None:
    """Megatron's validate_args asserts pp > 2 for the interleaved schedule with --no-overlap-p2p-communication
    (arguments.py l.1000-1009 @d98e8a64): such a plan is refused, and the search counts it among its rejections."""
    two = ("--model", "llama3-8b", "--gpus", "16", "--pp", "2", "--vpp", "2", "--engine", "megatron")
    code, out, err = run("estimate", *two, "--no-p2p-overlap")
    assert code == 2 and not out and "needs pp >= 3" in err and "--p2p-overlap" in err
    assert _json("estimate", *two, "--p2p-overlap")["plan"]["pp"] == 2
    assert _json("estimate", *LLAMA70, "--no-p2p-overlap")["plan"]["pp"] == 4
    searched = _json("search", "--model", "llama3-8b", "--gpus", "16", "--engine", "megatron", "--no-p2p-overlap")
    assert any("interleaved without p2p overlap" in reason for reason in searched["rejected"])


def test_per_parameter_zero3_gathers_expose_their_latency() -> None:
    synced = _json("estimate", *ZERO3, "--zero3-gather", "per_parameter_sync")["time"]
    bucketed = _json("estimate", *ZERO3, "--zero3-gather", "bucketed")["time"]
    assert synced["exposed_comm_s"]["dp"] > 10 * bucketed["exposed_comm_s"]["dp"] > 0
    assert synced["step_s"] > bucketed["step_s"]


def test_rmsnorm_and_master_copy_move_the_memory_terms_they_name() -> None:
    composite = _json("memory", *TITAN, "--rmsnorm", "composite")["per_gpu_bytes"]
    cast_norm = _json("memory", *TITAN, "--rmsnorm", "cast")["per_gpu_bytes"]
    fused = _json("memory", *TITAN, "--rmsnorm", "fused")["per_gpu_bytes"]
    assert composite["activations"] > cast_norm["activations"] > fused["activations"]
    assert composite["weights"] == cast_norm["weights"] == fused["weights"]
    kept = _json("memory", "--model", "llama3-8b", "--gpus", "8", "--zero", "1")["per_gpu_bytes"]
    none = _json("memory", "--model", "llama3-8b", "--gpus", "8", "--zero", "1", "--no-master-copy")["per_gpu_bytes"]
    assert none["optimizer"] < kept["optimizer"]
    assert none["activations"] == kept["activations"]


def test_a_saved_plan_remembers_the_settings(tmp_path: Path) -> None:
    saved = tmp_path / "plan.yaml"
    flags = ("--no-p2p-overlap", "--zero3-gather", "bucketed", "--rmsnorm", "cast", "--no-master-copy")
    code, _out, err = run(
        "search", "--model", "llama3-8b", "--gpus", "16", "--zero", "1", *flags, "--top", "1", "--save", str(saved)
    )  # zero 1: a plan whose optimizer holds the master copy the flag drops (FSDP2 plans keep fp32 weights)
    assert code == 0, err
    text = saved.read_text()
    for line in ("p2p_overlap: false", "zero3_gather: bucketed", "rmsnorm: cast", "master_copy: false"):
        assert line in text
    from_file = _json("estimate", "--plan", str(saved))["per_gpu_bytes"]
    overridden = _json("estimate", "--plan", str(saved), "--master-copy")["per_gpu_bytes"]  # the flag over the file
    assert from_file["optimizer"] < overridden["optimizer"]


@pytest.mark.parametrize(
    ("flag", "value", "valid"),
    [("--zero3-gather", "fast", "bucketed, per_parameter_sync"), ("--rmsnorm", "torch", "fused, composite, cast")],
)
def test_a_value_outside_the_setting_is_one_line_and_exit_2(flag: str, value: str, valid: str) -> None:
    code, out, err = run("estimate", "--model", "llama3-8b", "--gpus", "8", flag, value)
    assert code == 2 and out == ""
    assert err.strip() == f"error: {flag} {value!r} is not valid; choose one of {valid}"


def test_a_compiled_loss_keeps_no_fp32_copy_of_the_logits() -> None:
    """torchtitan compiles its cross entropy with the model since 2025-04 (components/loss.py): the two fp32 copies
    an eager `.float()` cross entropy keeps, 4 bytes each per token and vocabulary entry, are gone. Its compile
    components default to model and loss (job_config.py), so --compile compiles the loss unless --no-compiled-loss
    says otherwise; the emitted config compiles what was priced (test_emit_engines)."""
    eager = _json("memory", *TITAN, "--compile", "--no-compiled-loss")["per_gpu_bytes"]
    compiled = _json("memory", *TITAN, "--compile", "--compiled-loss")["per_gpu_bytes"]
    assert _json("memory", *TITAN, "--compile")["per_gpu_bytes"] == compiled
    tokens, vocab = 8192, 128256  # llama3-8b's default sequence, one sequence per micro-batch, its vocabulary
    assert eager["activations"] - compiled["activations"] == pytest.approx(2 * 4 * tokens * vocab, rel=0.01)
    assert eager["weights"] == compiled["weights"]
    from planner.api.resolve import resolve_engine

    assert resolve_engine("torchtitan", {"compile": True}).memory.compiled_loss
    assert not resolve_engine("torchtitan", {"compile": True, "compiled_loss": False}).memory.compiled_loss
    assert not resolve_engine("deepspeed", {"compile": True}).memory.compiled_loss  # its compile leaves the loss


def test_an_engine_file_is_the_baseline_of_the_settings_a_run_gives(tmp_path: Path) -> None:
    """Engine.configured records the profile's own values, so an engine given by path says and carries the settings
    its run adds: a renamed copy shows them and is refused by another engine's file rather than written without
    them; a copy under the engine's name shows none of its file's own values as per-run, and writes them."""
    text = (Path(__file__).parents[1] / "engine_profiles" / "megatron.yaml").read_text()
    assert "\nname: megatron\n" in text and "\n  cuda_graphs: false " in text
    renamed = tmp_path / "mytron.yaml"
    renamed.write_text(text.replace("\nname: megatron\n", "\nname: mytron\n"))
    common = ("-m", "llama3-8b", "--dp", "8", "--zero", "1", "--hardware", "h100-sxm")
    assert _json("memory", *common, "--engine", str(renamed), "--cuda-graphs")["settings"] == {"cuda_graphs": True}
    out = tmp_path / "renamed"
    code, _out, err = run("launch", *common, "--engine", str(renamed), "--cuda-graphs", "--emit", "megatron",
                          "--out", str(out))  # fmt: skip
    assert code == 2 and "priced on mytron with cuda_graphs=True" in err and not out.exists()
    out = tmp_path / "renamed-plain"  # a renamed copy with the engine's own settings: its file writes them all
    code, _out, err = run("launch", *common, "--engine", str(renamed), "--emit", "megatron", "--out", str(out))
    assert code == 0, err
    own = tmp_path / "mytron-bf16grad.yaml"  # a renamed copy whose file sets one: priced so, refused, not dropped
    own.write_text(renamed.read_text().replace("\n  grad_dtype: fp32 ", "\n  grad_dtype: param"))
    out = tmp_path / "renamed-own"
    code, _out, err = run("launch", *common, "--engine", str(own), "--emit", "megatron", "--out", str(out))
    assert code == 2 and "priced on mytron with grad_dtype=param" in err and not out.exists(), err
    same = tmp_path / "megatron.yaml"
    same.write_text(text.replace("\n  cuda_graphs: false ", "\n  cuda_graphs: true  "))
    assert _json("memory", *common, "--engine", str(same))["settings"] == {}
    out = tmp_path / "same"
    code, _out, err = run("launch", *common, "--engine", str(same), "--emit", "megatron", "--out", str(out))
    assert code == 0, err
    assert "--cuda-graph-impl transformer_engine" in (out / "megatron_args.sh").read_text()


def test_the_search_header_names_the_settings_it_priced() -> None:
    """As memory and estimate do: 'with megatron (grad_dtype=param)'; a profile's own settings are not listed."""
    args = ("search", "-m", "llama3-8b", "--gpus", "8", "--no-advice", "--top", "1")
    code, out, err = run(*args, "--grad-dtype", "param")
    assert code == 0 and "with megatron (grad_dtype=param)," in " ".join(out.split()), err
    code, out, err = run(*args)
    assert code == 0 and "with megatron," in " ".join(out.split()), err
