"""An emitted file carries the per-run engine settings the plan was priced with, or the emit is refused naming them
(never a file that silently runs something else); cluster files ask for the accelerators the hardware profile has."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from planner.engine.settings import changed_settings, given_settings
from planner.errors import PlannerError
from planner.io.catalog import load_engine, load_hardware, load_model
from planner.launch.command import RunConfig
from planner.launch.emit import CLUSTER_TARGETS, ENGINE_TARGETS, emit
from planner.launch.emit.targets import target
from planner.plan import Plan

MODEL = load_model("llama3-8b")
PLAN = Plan(dp=4, tp=2, sp=True, zero=1, global_batch=64, seq_len=8192)
FSDP = Plan(dp=8, zero=3, global_batch=64, seq_len=8192, recompute="selective")


def _emit(kind: str, plan: Plan, engine_name: str, tmp_path: Path, hardware: str = "h100-sxm", **settings) -> Path:
    engine = load_engine(engine_name).configured(**settings)
    cfg = RunConfig(model="llama3-8b", plan=plan, hardware=hardware, engine=engine_name)
    hw = load_hardware(hardware)
    return emit(kind, cfg, MODEL, tmp_path, engine=engine, hardware=hw, hardware_ref=hardware, image="img", force=True)


def test_megatron_writes_tp_overlap_and_bf16_gradient_reduction(tmp_path):
    text = _emit("megatron", PLAN, "megatron", tmp_path, tp_overlap=True, grad_dtype="param").read_text()
    assert "--tp-comm-overlap" in text and "--grad-reduce-in-bf16" in text
    plain = _emit("megatron", PLAN, "megatron", tmp_path / "plain").read_text()
    assert "--tp-comm-overlap" not in plain and "--grad-reduce-in-bf16" not in plain


def test_megatron_writes_the_gradient_dtype_the_plan_was_priced_with_for_each_weight_dtype(tmp_path):
    """Megatron accumulates bf16 weights' gradients in fp32 unless --grad-reduce-in-bf16, and fp16 weights' in fp16
    unless --accumulate-allreduce-grads-in-fp32 (arguments.py l.1195-1217); the profile prices fp32 gradients."""
    fp16 = PLAN.model_copy(update={"precision": "fp16"})
    text = _flat(_emit("megatron", fp16, "megatron", tmp_path / "fp16"))
    assert "--fp16" in text and "--accumulate-allreduce-grads-in-fp32" in text and "--grad-reduce-in-bf16" not in text
    same = _flat(_emit("megatron", fp16, "megatron", tmp_path / "fp16p", grad_dtype="param"))
    assert "--accumulate-allreduce-grads-in-fp32" not in same and "--grad-reduce-in-bf16" not in same
    bf16 = _flat(_emit("megatron", PLAN, "megatron", tmp_path / "bf16"))
    assert "--accumulate-allreduce-grads-in-fp32" not in bf16 and "--grad-reduce-in-bf16" not in bf16


def test_megatron_writes_the_all_to_all_overlap_and_refuses_it_where_megatron_would(tmp_path):
    """--overlap-moe-expert-parallel-comm is written when the plan was priced with it; a plan Megatron refuses
    it for (full recompute: transformer_config.py l.3021-3023) is refused before anything is written."""
    mixtral, hw = load_model("mixtral-8x7b"), load_hardware("h100-sxm")
    overlap = load_engine("megatron").configured(ep_overlap=True)
    plan = Plan(dp=8, ep=8, zero=1, global_batch=64, seq_len=4096, recompute="selective")

    def emit_moe(p: Plan, out: Path) -> Path:
        cfg = RunConfig(model="mixtral-8x7b", plan=p, hardware="h100-sxm", engine="megatron")
        return emit("megatron", cfg, mixtral, out, engine=overlap, hardware=hw, hardware_ref="h100-sxm", force=True)

    text = emit_moe(plan, tmp_path / "ok").read_text()
    assert "--overlap-moe-expert-parallel-comm" in text and "--moe-token-dispatcher-type alltoall" in text
    with pytest.raises(PlannerError, match=r"megatron would refuse this plan: recompute=full with ep_overlap"):
        emit_moe(plan.model_copy(update={"recompute": "full"}), tmp_path / "full")
    assert not (tmp_path / "full").exists() or not any((tmp_path / "full").iterdir())


@pytest.mark.parametrize("kind", ["torchtitan", "torchtitan-v0.2"])
def test_torchtitan_writes_what_it_compiles(tmp_path, kind):
    """compile compiles the loss with the model, as torchtitan's components default, unless compiled_loss says no:
    the file compiles what the plan was priced with."""
    text = _emit(kind, FSDP, "torchtitan", tmp_path, compile=True).read_text()
    both = "components=['model', 'loss']" if kind == "torchtitan" else 'components = ["model", "loss"]'
    assert both in text
    text = _emit(kind, FSDP, "torchtitan", tmp_path / "model", compile=True, compiled_loss=False).read_text()
    assert ("components=['model']" in text) if kind == "torchtitan" else ('components = ["model"]' in text)
    eager = _emit(kind, FSDP, "torchtitan", tmp_path / "eager").read_text()
    assert "enable=False" in eager if kind == "torchtitan" else "[compile]" not in eager


@pytest.mark.parametrize(
    ("kind", "engine", "setting"),
    [("megatron", "megatron", {"master_copy": False}), ("torchtitan", "torchtitan", {"grad_dtype": "param"}),
     ("deepspeed", "deepspeed", {"compile": True})],
)  # fmt: skip
def test_a_setting_the_file_cannot_carry_is_refused_and_nothing_is_written(tmp_path, kind, engine, setting):
    plan = FSDP if kind != "megatron" else PLAN
    with pytest.raises(PlannerError, match=f"priced with {next(iter(setting))}="):
        _emit(kind, plan, engine, tmp_path / "out", **setting)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_only_settings_that_differ_from_the_targets_profile_count():
    megatron = load_engine("megatron")
    assert changed_settings(megatron, megatron) == {}
    assert changed_settings(megatron.configured(tp_overlap=True), megatron) == {"tp_overlap": True}
    assert changed_settings(load_engine("torchtitan").configured(compile=True), megatron) == {}  # another engine's
    assert ENGINE_TARGETS == ("megatron", "megatron-bridge", "torchtitan", "torchtitan-v0.2", "deepspeed")
    assert CLUSTER_TARGETS == ("torchrun", "slurm", "k8s")
    found = [target(k) for k in ENGINE_TARGETS + CLUSTER_TARGETS]
    assert all(t is not None and t.is_engine == (t.name in ENGINE_TARGETS) for t in found)
    assert target("megatron").writes >= {"tp_overlap", "moe_dispatcher"} and not target("deepspeed").writes


def test_a_setting_given_at_the_value_its_null_stands_for_is_no_setting(tmp_path):
    """`--master-copy` on a bf16 plan and `--recompute-modules core_attn` are what Megatron does anyway: not listed
    as the run's settings, and the megatron file is written (it was refused for master_copy, which it does not
    write); on an fp32 plan the copy is a choice of the run's."""
    megatron = load_engine("megatron")
    copy = megatron.configured(master_copy=True)
    assert changed_settings(copy, megatron, "bf16") == {} and given_settings(copy, "bf16") == {}
    assert changed_settings(copy, megatron, "fp32") == {"master_copy": True} == given_settings(copy, "fp32")
    assert given_settings(copy) == {"master_copy": True}  # no precision known (a search over several)
    core = megatron.configured(recompute_modules="core_attn")
    assert given_settings(core) == {} and given_settings(megatron.configured(recompute_modules="core_attn,mlp"))
    written = _emit("megatron", PLAN, "megatron", tmp_path / "out", master_copy=True, recompute_modules="core_attn")
    assert written.exists()
    with pytest.raises(PlannerError, match="master_copy=True"):
        _emit("megatron", PLAN.model_copy(update={"precision": "fp32"}), "megatron", tmp_path / "o2", master_copy=True)


def test_megatron_writes_sgd_and_refuses_adam_without_decoupled_decay(tmp_path):
    """Megatron-LM's --optimizer takes sgd; its adam is AdamW (OptimizerConfig.decoupled_weight_decay has no flag), so
    a plan priced with plain adam is refused by name and nothing is written."""
    written = _emit("megatron", PLAN, "megatron", tmp_path / "sgd", optimizer="sgd").read_text()
    assert "--optimizer sgd" in written
    assert "--optimizer" not in _emit("megatron", PLAN, "megatron", tmp_path / "adamw").read_text()
    said = r"optimizer=adam, which the megatron file cannot say \(it says optimizer: adamw, sgd\)"
    with pytest.raises(PlannerError, match=said):
        _emit("megatron", PLAN, "megatron", tmp_path / "adam", optimizer="adam")
    assert not (tmp_path / "adam").exists() or not any((tmp_path / "adam").iterdir())


def test_cluster_files_ask_for_the_profiles_accelerators(tmp_path):
    plan = Plan(dp=8, zero=1, global_batch=64, seq_len=8192)
    amd = yaml.safe_load(_emit("k8s", plan, "planner", tmp_path / "amd", hardware="mi325x").read_text())
    limits = amd["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"amd.com/gpu": 8}
    nvidia = _emit("slurm", plan, "planner", tmp_path / "nv").read_text()
    assert "#SBATCH --gpus-per-node=8" in nvidia


def test_launch_tells_the_worker_the_engine_it_checked_the_plan_with(tmp_path):
    """A plan file priced on Megatron is checked with Megatron's rules, and the worker is told to run as Megatron
    (its ZeRO stages as Megatron's); before, the checks read the file's engine and the worker was told its own."""
    import json

    from tests.helpers import run_planner

    saved = tmp_path / "plan.yaml"
    code, _out, err = run_planner(
        "search", "--model", "llama3-8b", "--gpus", "8", "--engine", "megatron", "--save", str(saved)
    )
    assert code == 0, err
    code, out, err = run_planner("launch", "--plan", str(saved), "--dry-run", "--json")
    doc = json.loads(out)
    command = doc["command"] if isinstance(doc["command"], str) else " ".join(doc["command"])
    assert "--engine megatron" in command


def test_every_torchtitan_plan_the_search_ranks_emits(tmp_path):
    """torchtitan builds its default stage count (one per rank, two interleaved) or the count one
    pipeline_parallel_layers_per_stage gives, the embedding and output weighing 0 or 1 layer: Llama 3 8B's 32 to 34
    effective layers cannot make 20 stages (vpp 5 over pp 4), so the search never ranks that plan for --emit
    torchtitan to refuse it; 16 stages (vpp 4) it cuts with both weights 0."""
    from planner.api import run_search
    from planner.engine.split import torchtitan_chunk_sizes

    assert torchtitan_chunk_sizes(32, 4, 5) is None and torchtitan_chunk_sizes(32, 4, 4) == [2] * 16
    result = run_search("llama3-8b", gpus=32, engine="torchtitan", pp=4, schedule="interleaved", top=10)
    assert result.top
    for i, ranked in enumerate(result.top):
        _emit("torchtitan", ranked.plan, "torchtitan", tmp_path / str(i))


def test_an_emitted_job_without_a_batch_gets_the_default_4m_tokens(tmp_path):
    """A rehearsal runs one pipeline's worth of micro-batches; an emitted job trains for real: the same ~4M-token
    default batch as every other command, said on the terminal (it was dp x micro-batch: 8 sequences)."""
    from tests.helpers import run_planner

    code, out, err = run_planner(
        "launch", "-m", "llama3-8b", "--dp", "8", "--zero", "1", "--emit", "megatron", "--out", str(tmp_path)
    )
    assert code == 0, err
    assert "--global-batch-size 512" in (tmp_path / "megatron_args.sh").read_text()
    assert "the default, about 4M tokens" in out


@pytest.mark.parametrize(
    ("dispatcher", "flags"),
    [("allgather", "--moe-token-dispatcher-type allgather"),
     ("deepep", "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep")],
)  # fmt: skip
def test_megatron_writes_the_dispatcher_the_plan_was_priced_with(tmp_path, dispatcher, flags):
    """TransformerConfig moe_token_dispatcher_type and, for DeepEP, the flex dispatcher's backend; the alltoall
    default is written once, never beside another."""
    mixtral, hw = load_model("mixtral-8x7b"), load_hardware("h100-sxm")
    engine = load_engine("megatron").configured(moe_dispatcher=dispatcher)
    cfg = RunConfig(model="mixtral-8x7b", plan=Plan(dp=8, ep=8, zero=1, global_batch=64, seq_len=4096),
                    hardware="h100-sxm", engine="megatron")  # fmt: skip
    text = emit("megatron", cfg, mixtral, tmp_path, engine=engine, hardware=hw, hardware_ref="h100-sxm", force=True)
    written = " ".join(text.read_text().split())
    assert flags in written and written.count("--moe-token-dispatcher-type") == 1


@pytest.mark.parametrize(
    ("precision", "hardware", "flags"),
    [
        ("fp8-delayed", "h100-sxm", "--fp8-format hybrid --fp8-recipe delayed"),
        ("fp8-current", "h100-sxm", "--fp8-format hybrid --fp8-recipe tensorwise"),
        ("fp8-blockwise", "h100-sxm", "--fp8-format e4m3 --fp8-recipe blockwise"),
        ("mxfp8", "b200", "--fp8-format hybrid --fp8-recipe mxfp8"),
        ("nvfp4", "b200", "--fp4-format e2m1 --fp4-recipe nvfp4"),
    ],
)
def test_megatron_writes_each_named_precision_recipe(tmp_path, precision, hardware, flags):
    from tests.helpers import run_planner

    """Megatron-Core's fp8_recipe / fp4 arguments (transformer_config.py @d98e8a64); other targets refuse them."""
    code, _out, err = run_planner("launch", "-m", "llama3-8b", "--dp", "8", "--hardware", hardware, "--precision",
                                 precision, "--emit", "megatron", "--out", str(tmp_path / "m"))  # fmt: skip
    assert code == 0, err
    assert flags in " ".join((tmp_path / "m" / "megatron_args.sh").read_text().replace("\\\n", " ").split())
    code, _out, err = run_planner("launch", "-m", "llama3-8b", "--dp", "8", "--hardware", hardware, "--precision",
                                 precision, "--emit", "deepspeed", "--out", str(tmp_path / "d"))  # fmt: skip
    assert code == 2 and f"deepspeed has no {precision} training recipe" in err and not (tmp_path / "d").exists()


def test_megatron_refuses_a_recipe_the_gpu_does_not_run(tmp_path):
    from tests.helpers import run_planner

    code, _out, err = run_planner("launch", "-m", "llama3-8b", "--dp", "8", "--hardware", "h100-sxm", "--precision",
                                 "mxfp8", "--emit", "megatron", "--out", str(tmp_path / "m"))  # fmt: skip
    assert code == 2 and "mxfp8 on blackwell GPUs only" in err and not (tmp_path / "m").exists()


def _flat(path: Path) -> str:
    return " ".join(path.read_text().split())


def test_megatron_writes_the_recipe_options_it_was_priced_with(tmp_path):
    """Megatron-LM's flags for the recipe options (arguments.py and TransformerConfig @d98e8a64): recompute modules,
    the precision-aware optimizer with bf16 moments, optimizer CPU offload and CUDA graphs; a plan without them
    writes none of these flags."""
    options = {"recompute_modules": ["core_attn", "layernorm"], "precision_aware_optimizer": True,
               "optimizer_moment_dtype": "bf16", "optimizer_offload": 0.5, "cuda_graphs": True}  # fmt: skip
    plan = PLAN.model_copy(update={"recompute": "selective"})
    text = _flat(_emit("megatron", plan, "megatron", tmp_path, **options))
    for flags in (
        "--recompute-granularity selective --recompute-modules core_attn layernorm",
        "--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16",
        "--optimizer-cpu-offload --optimizer-offload-fraction 0.5",
        "--cuda-graph-impl transformer_engine",
    ):
        assert flags in text, flags  # fmt: skip
    assert "--cuda-graph-scope" not in text  # a dense layer is captured whole
    plain = _flat(_emit("megatron", plan, "megatron", tmp_path / "plain"))
    for flag in (
        "--recompute-modules",
        "--use-precision-aware-optimizer",
        "--exp-avg-dtype",
        "--optimizer-cpu-offload",
        "--cuda-graph-impl",
        "--fp8-param-gather",
    ):
        assert flag not in plain, flag  # fmt: skip


@pytest.mark.parametrize(
    ("precision", "hardware", "flags"),
    [
        ("fp8-current", "h100-sxm", "--fp8-param-gather"),
        ("mxfp8", "b200", "--fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag"),
        ("nvfp4", "b200", "--fp4-param-gather"),
    ],
)
def test_megatron_gathers_parameters_in_the_recipe_format(tmp_path, precision, hardware, flags):
    plan = PLAN.model_copy(update={"precision": precision})
    text = _flat(_emit("megatron", plan, "megatron", tmp_path, hardware=hardware, fp8_param_gather=True))
    assert flags in text and text.count("--fp8-param-gather") + text.count("--fp4-param-gather") == 1


def test_megatron_graphs_the_attention_of_dropless_moe_layers(tmp_path):
    """A dropless MoE layer cannot be captured whole: the scope is attn, plus the dense layers' MLPs where the
    model has dense layers (transformer_config.py l.2831-2842)."""
    mixtral, hw = load_model("mixtral-8x7b"), load_hardware("h100-sxm")
    engine = load_engine("megatron").configured(cuda_graphs=True)
    cfg = RunConfig(model="mixtral-8x7b", plan=Plan(dp=8, ep=8, zero=1, global_batch=64, seq_len=4096),
                    hardware="h100-sxm", engine="megatron")  # fmt: skip
    path = emit("megatron", cfg, mixtral, tmp_path, engine=engine, hardware=hw, hardware_ref="h100-sxm", force=True)
    text = _flat(path)
    assert "--cuda-graph-impl transformer_engine --cuda-graph-scope attn" in text and "attn mlp" not in text
    from planner.launch.emit.megatron_settings import recipe_option_args

    dsv3 = load_model("deepseek-v3")  # three dense layers first
    args = recipe_option_args(dsv3, Plan(dp=8, ep=8, zero=1, global_batch=64), {"cuda_graphs": True})
    assert args == ["--cuda-graph-impl", "transformer_engine", "--cuda-graph-scope", "attn", "mlp"]


def test_megatron_writes_fine_grained_activation_offloading(tmp_path):
    """Activation offload is written as priced: the modules named, else the default ones whose groups hold something
    in the model (a dense Llama has no attn_norm, mlp_norm or expert groups), the share of their groups where it is
    not all, and the environment Transformer Engine 2.10+ needs; the bridge's file refuses it by name."""
    text = _flat(_emit("megatron", PLAN, "megatron", tmp_path / "all", activation_offload=0.5))
    assert "--fine-grained-activation-offloading --offload-modules qkv_linear core_attn attn_proj " in text
    assert "--activation-offload-fraction 0.5" in text and "export NVTE_CPU_OFFLOAD_V1=1" in text
    named = _flat(_emit("megatron", PLAN, "megatron", tmp_path / "named", offload_modules=["core_attn", "attn_proj"]))
    assert "--offload-modules core_attn attn_proj )" in named and "--activation-offload-fraction" not in named
    plain = _flat(_emit("megatron", PLAN, "megatron", tmp_path / "plain"))
    assert "offload" not in plain and "NVTE_CPU_OFFLOAD_V1" not in plain
    with pytest.raises(PlannerError, match=r"does not write activation_offload"):
        _emit("megatron-bridge", PLAN, "megatron", tmp_path / "bridge", activation_offload=0.5)
    assert not (tmp_path / "bridge").exists() or not any((tmp_path / "bridge").iterdir())


def test_megatron_writes_each_moe_offload_group_and_leaves_the_norms_out_under_cuda_graphs():
    from planner.launch.emit.megatron_settings import activation_offload_args

    mixtral = load_model("mixtral-8x7b")
    plan = Plan(dp=8, ep=8, zero=1, global_batch=64, recompute="selective")
    args = activation_offload_args(mixtral, plan, {"activation_offload": 1.0})
    assert args == ["--fine-grained-activation-offloading", "--offload-modules", "qkv_linear", "core_attn",
                    "attn_proj", "mlp_norm", "expert_fc1", "moe_act"]  # fmt: skip
    dsv3 = load_model("deepseek-v3")
    graphed = activation_offload_args(dsv3, plan, {"activation_offload": 1.0, "cuda_graphs": True})
    assert "attn_norm" not in graphed and "mlp_norm" not in graphed and "expert_fc1" in graphed
    # a recomputed MoE layer: Megatron refuses its experts' groups (transformer_config.py l.2165-2175)
    moe = activation_offload_args(dsv3, plan, {"activation_offload": 1.0, "recompute_modules": ["moe"]})
    assert "expert_fc1" not in moe and "moe_act" not in moe and "attn_norm" in moe


def test_launch_takes_the_engine_settings_for_an_emit_and_refuses_them_for_a_run_here(tmp_path):
    from tests.helpers import run_planner

    common = ("launch", "-m", "llama3-8b", "--dp", "8", "--zero", "1", "--hardware", "h100-sxm", "--engine",
              "megatron", "--precision-aware-optimizer", "--optimizer-moment-dtype", "bf16")  # fmt: skip
    code, _out, err = run_planner(*common, "--emit", "megatron", "--out", str(tmp_path / "m"))
    assert code == 0, err
    assert "--use-precision-aware-optimizer --exp-avg-dtype bf16" in _flat(tmp_path / "m" / "megatron_args.sh")
    code, _out, err = run_planner(*common, "--dry-run")
    assert code == 2 and "priced with precision_aware_optimizer=True" in err and "the worker does not run" in err


def test_emit_refuses_settings_priced_on_another_engine_or_for_the_worker(tmp_path):
    """A plan priced with per-run settings on one engine is not written as another engine's file, nor as a cluster
    file whose worker runs its profile's own settings: exit 2 naming them, nothing written."""
    from tests.helpers import run_planner

    common = ("launch", "-m", "llama3-8b", "--dp", "8", "--zero", "1", "--hardware", "h100-sxm")
    cases = [
        (("--engine", "torchtitan", "--grad-dtype", "param", "--emit", "megatron"), "priced on torchtitan"),
        (("--engine", "megatron", "--grad-dtype", "param", "--emit", "torchrun"), "the worker it launches"),
        (("--engine", "megatron", "--optimizer", "sgd", "--emit", "slurm"), "optimizer=sgd"),
    ]
    for i, (args, words) in enumerate(cases):
        out = tmp_path / str(i)
        code, _out, err = run_planner(*common, *args, "--out", str(out))
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1, (args, err)
        assert not out.exists() or not any(out.iterdir())


def test_megatron_graphs_attention_alone_with_the_all_to_all_overlap():
    """transformer_config.py asserts no mlp or moe graph scope with overlap_moe_expert_parallel_comm."""
    from planner.launch.emit.megatron_settings import recipe_option_args

    dsv3, plan = load_model("deepseek-v3"), Plan(dp=8, ep=8, zero=1, global_batch=64)
    args = recipe_option_args(dsv3, plan, {"cuda_graphs": True, "ep_overlap": True})
    assert args == ["--cuda-graph-impl", "transformer_engine", "--cuda-graph-scope", "attn"]


def test_megatron_graphs_the_router_of_moe_layers_whose_activations_it_offloads():
    """Megatron's offloading guide asks graphed MoE layers to capture attn and moe_router (fine_grained_activation_
    offloading.md, CUDA Graph Integration); without offload, and in a dense model (captured whole), it is not
    written."""
    from planner.launch.emit.megatron_settings import recipe_option_args

    dsv3, plan = load_model("deepseek-v3"), Plan(dp=8, ep=8, zero=1, global_batch=64)
    args = recipe_option_args(dsv3, plan, {"cuda_graphs": True, "activation_offload": 1.0})
    assert args[args.index("--cuda-graph-scope") :] == ["--cuda-graph-scope", "attn", "moe_router", "mlp"]
    assert "moe_router" not in recipe_option_args(dsv3, plan, {"cuda_graphs": True})
    dense = recipe_option_args(load_model("llama3-8b"), plan, {"cuda_graphs": True, "activation_offload": 1.0})
    assert "--cuda-graph-scope" not in dense


def test_selective_recompute_of_no_module_is_written_as_no_recompute():
    from planner.launch.emit.megatron import recompute_args

    plan = Plan(dp=8, recompute="selective")
    assert recompute_args(plan, {"recompute_modules": []}) == []
    assert recompute_args(plan, {}) == ["--recompute-granularity", "selective"]


def test_an_engine_file_of_a_plan_that_does_not_fit_is_written_with_a_warning(tmp_path):
    """The cluster targets refuse a plan over the GPU's memory (their worker would run it); an engine target writes
    its file (the engine's own run may know better than the model) but says so, unless --force (audit: it said
    nothing)."""
    from tests.helpers import run_planner

    args = ("launch", "--model", "llama3-70b", "--hardware", "h100-sxm", "--dp", "16", "--zero", "0",
            "--global-batch", "256", "--emit", "megatron")  # fmt: skip
    code, _out, err = run_planner(*args, "--out", str(tmp_path / "a"))
    said = " ".join(err.split())
    assert code == 0 and (tmp_path / "a" / "megatron_args.sh").is_file(), err
    assert "the plan does not fit as megatron runs it: memory: predicted peak" in said
    assert "exceeds the 79.2 GiB" in said
    code, _out, err = run_planner(*args, "--out", str(tmp_path / "b"), "--force")
    assert code == 0 and "does not fit" not in err, err


def test_megatron_writes_pipeline_sends_without_overlap(tmp_path):
    """--no-p2p-overlap is priced (the interleaved sends wait) and written as Megatron's --no-overlap-p2p-communication
    (arguments.py l.3118, store_false): it was refused as a setting the file does not write (audit)."""
    from tests.helpers import run_planner

    args = ("launch", "-m", "llama3-8b", "--hardware", "h100-sxm", "--engine", "megatron", "--dp", "4", "--pp", "4",
            "--vpp", "2", "--schedule", "interleaved", "--zero", "1", "--emit", "megatron")  # fmt: skip
    code, _out, err = run_planner(*args, "--no-p2p-overlap", "--out", str(tmp_path / "off"))
    assert code == 0, err
    assert "--no-overlap-p2p-communication" in (tmp_path / "off" / "megatron_args.sh").read_text()
    code, _out, err = run_planner(*args, "--out", str(tmp_path / "on"))
    assert code == 0 and "overlap-p2p" not in (tmp_path / "on" / "megatron_args.sh").read_text(), err
