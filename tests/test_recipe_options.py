"""Recipe memory and speed options (issue 20 item 5): what each recompute module drops and re-runs, offload,
the precision-aware optimizer's bytes, bf16 gradient reduction, fp8 parameter gather, CUDA graphs; each option's
direction (never more GPU memory, recompute never faster), the engines' own refusals, and the round trip of the
settings through plan files, runs files and `search --save`."""

from __future__ import annotations

import itertools
import json

import pytest
import yaml
from helpers import run_planner

from planner.api.resolve import resolve_engine
from planner.cost.activations import activation_bytes_per_token
from planner.cost.compute import layer_time
from planner.cost.coster import Coster
from planner.cost.memory import memory_report
from planner.cost.recipe_options import CUDA_GRAPH_POOL_FRACTION
from planner.cost.states import model_state_bytes
from planner.cost.traffic import dp_traffic
from planner.engine import plan_problems
from planner.engine.settings import RECOMPUTE_MODULES
from planner.errors import PlannerError
from planner.fit.runs import run_engine
from planner.io.catalog import load_engine, load_hardware, load_model
from planner.io.planfile import read_plan_file, write_plan_file
from planner.layers import LayerKind
from planner.plan import Plan

MEGATRON = load_engine("megatron")
H100 = load_hardware("h100-sxm")
DSV3 = load_model("deepseek-v3")
LLAMA = load_model("llama3-8b")
MLA_MOE = LayerKind("mla", "moe", "global")
MLA_DENSE = LayerKind("mla", "dense", "global")


def kept(model, kind, modules, **kw):
    kernels = MEGATRON.configured(recompute_modules=list(modules)).kernels
    args = {
        "seq_len": 4096,
        "tp": 1,
        "sp": False,
        "cp": 1,
        "recompute": "selective",
        "act_bytes": 2,
        "kernels": kernels,
        "kind": kind,
    }
    return activation_bytes_per_token(model, **{**args, **kw})


# ---- recompute modules: what each drops, by hand ----------------------------------------------------------
def test_mla_up_proj_drops_q_k_v():
    # Q, K, V after the up-projections and RoPE: heads x (2 (d_h + d_h^R) + d_v) x 2 bytes (multi_latent_attention.py
    # l.983-987): DeepSeek-V3 128 x (192 + 192 + 128) x 2 = 128 KiB per token and layer at tp 1
    base = kept(DSV3, MLA_MOE, ["core_attn"])
    assert base - kept(DSV3, MLA_MOE, ["core_attn", "mla_up_proj"]) == 128 * (192 + 192 + 128) * 2 == 131072


def test_moe_act_drops_the_expert_activation_output():
    # the SwiGLU output of the routed tokens, top_k x f x 2 bytes = 8 x 2048 x 2 = 32 KiB per token (experts.py
    # l.1019-1027)
    assert kept(DSV3, MLA_MOE, ["core_attn"]) - kept(DSV3, MLA_MOE, ["core_attn", "moe_act"]) == 8 * 2048 * 2


def test_layernorm_drops_the_unfused_norm_outputs():
    # MLA's input norm and the MoE layer's pre-MLP norm are separate TE norms (gpt_layer_specs.py l.244-313): 2 x h x 2
    h = DSV3.hidden_size
    assert kept(DSV3, MLA_MOE, ["core_attn"]) - kept(DSV3, MLA_MOE, ["core_attn", "layernorm"]) == 2 * h * 2
    assert kept(DSV3, MLA_DENSE, ["core_attn"]) - kept(DSV3, MLA_DENSE, ["core_attn", "layernorm"]) == h * 2
    dense = LayerKind("attention", "dense", "global")  # Llama: both norms fused into the linears, nothing to drop
    assert kept(LLAMA, dense, ["layernorm"]) == kept(LLAMA, dense, ["core_attn"])


def test_mlp_keeps_only_the_residual():
    # standard checkpoint of the dense MLP, whose fused fc1 takes the norm's input: norm2 output, fc1 output, up
    # projection and fc2 input go (2 x h + 3 x f) x 2 bytes
    dense = LayerKind("attention", "dense", "global")
    h, f = LLAMA.hidden_size, LLAMA.ffn_hidden_size
    assert kept(LLAMA, dense, ["core_attn"]) - kept(LLAMA, dense, ["core_attn", "mlp"]) == (h + 3 * f) * 2


@pytest.mark.parametrize(("model", "kind"), [(DSV3, MLA_MOE), (DSV3, MLA_DENSE), (LLAMA, None)])
def test_a_module_never_raises_memory_nor_lowers_time(model, kind):
    kind = kind or LayerKind("attention", "dense", "global")
    plan = Plan(dp=8, global_batch=8, seq_len=4096, recompute="selective", precision="bf16")
    for r in range(len(RECOMPUTE_MODULES)):
        for base in itertools.combinations(RECOMPUTE_MODULES, r):
            e0 = MEGATRON.configured(recompute_modules=list(base))
            m0 = kept(model, kind, base)
            t0 = layer_time(model, H100, plan, e0, kind=kind).recompute_s
            for extra in set(RECOMPUTE_MODULES) - set(base):
                e1 = MEGATRON.configured(recompute_modules=[*base, extra])
                assert kept(model, kind, [*base, extra]) <= m0, (base, extra)
                assert layer_time(model, H100, plan, e1, kind=kind).recompute_s >= t0, (base, extra)


def test_modules_count_in_hfu():
    plan = Plan(dp=8, global_batch=8, seq_len=8192, recompute="selective")
    coster = Coster(LLAMA, H100, MEGATRON.configured(recompute_modules=["core_attn", "mlp"]))
    base = Coster(LLAMA, H100, MEGATRON)
    assert coster.step(plan).hardware_flops_per_step > base.step(plan).hardware_flops_per_step
    assert coster.step(plan).recompute_s > base.step(plan).recompute_s


def test_moe_recompute_runs_the_all_to_alls_again():
    plan = Plan(dp=64, ep=8, pp=1, global_batch=64, seq_len=4096, recompute="selective", zero=1)
    moe = Coster(DSV3, H100, MEGATRON.configured(recompute_modules=["core_attn", "moe"]))
    assert moe.step(plan).comm_total_s["ep"] == pytest.approx(
        Coster(DSV3, H100, MEGATRON).step(plan).comm_total_s["ep"] * 6 / 4
    )


def test_engine_refusals_for_modules():
    bad = MEGATRON.configured(recompute_modules=["mla_up_proj"])
    plan = Plan(dp=8, global_batch=8, seq_len=4096, recompute="selective")
    assert "mla_up_proj without MLA" in [p.reason for p in plan_problems(LLAMA, plan, bad, 8, H100)]
    delayed = MEGATRON.configured(recompute_modules=["core_attn", "layernorm"])
    reasons = [
        p.reason for p in plan_problems(LLAMA, plan.model_copy(update={"precision": "fp8-delayed"}), delayed, 8, H100)
    ]
    assert "delayed scaling with moe_act/layernorm recompute" in reasons
    act = MEGATRON.configured(recompute_modules=["core_attn", "moe_act"])  # moe_act runs in grouped-GEMM experts
    assert "moe_act without grouped-GEMM experts" in [p.reason for p in plan_problems(LLAMA, plan, act, 8, H100)]
    ep = Plan(dp=64, ep=8, global_batch=64, seq_len=4096, recompute="selective", zero=1)
    assert "moe_act without grouped-GEMM experts" not in [p.reason for p in plan_problems(DSV3, ep, act, 64, H100)]
    overlap = MEGATRON.configured(recompute_modules=["core_attn", "moe"], ep_overlap=True)
    assert "moe recompute with the all-to-all overlap" in [p.reason for p in plan_problems(DSV3, ep, overlap, 64, H100)]
    alone = MEGATRON.configured(recompute_modules=["core_attn", "moe"])
    assert "moe recompute with the all-to-all overlap" not in [
        p.reason for p in plan_problems(DSV3, ep, alone, 64, H100)
    ]
    titan = load_engine("torchtitan").configured(recompute_modules=["mlp"])
    assert "recompute_modules not modelled for torchtitan" in [
        p.reason for p in plan_problems(LLAMA, plan.model_copy(update={"zero": 3, "sp": False}), titan, 8, H100)
    ]


# ---- offload ---------------------------------------------------------------------------------------------------
PLANS = [
    Plan(dp=2, tp=8, pp=4, global_batch=64, seq_len=8192, zero=1),
    Plan(dp=16, tp=2, pp=2, vpp=4, global_batch=128, seq_len=8192, zero=1, schedule="interleaved"),
    Plan(dp=64, global_batch=64, seq_len=8192, zero=1),
]


@pytest.mark.parametrize("plan", PLANS)
def test_offload_never_raises_gpu_memory(plan):
    model = load_model("llama3-70b")
    hw = H100
    pao = MEGATRON.configured(precision_aware_optimizer=True)
    before = memory_report(model, hw, plan, pao).total_bytes
    for f in (0.1, 0.5, 1.0):
        for settings in ({"activation_offload": f}, {"optimizer_offload": f}):
            after = memory_report(model, hw, plan, pao.configured(**settings)).total_bytes
            assert after <= before, (settings, after, before)


def test_optimizer_offload_keeps_the_rest_on_the_gpu():
    plan = PLANS[0]
    pao = MEGATRON.configured(precision_aware_optimizer=True)
    full = memory_report(LLAMA, H100, plan, pao).peak.breakdown.optimizer_bytes
    half = memory_report(LLAMA, H100, plan, pao.configured(optimizer_offload=0.25)).peak.breakdown.optimizer_bytes
    assert half == pytest.approx(0.75 * full)
    # Megatron: --optimizer-cpu-offload needs --use-precision-aware-optimizer (arguments.py l.1884)
    problems = plan_problems(LLAMA, plan, MEGATRON.configured(optimizer_offload=0.5), 64, H100)
    assert [p.reason for p in problems] == ["optimizer offload needs the precision-aware optimizer"]


def test_activation_offload_time_shows_when_the_host_link_is_slow():
    plan = Plan(dp=8, global_batch=8, seq_len=8192, zero=1, micro_batch=1)
    engine = MEGATRON.configured(activation_offload=1.0)
    slow = H100.model_copy(update={"gpu": H100.gpu.model_copy(update={"host_bandwidth_bytes_per_s": 1e9})})
    fast = Coster(LLAMA, H100, engine).step(plan)
    crawl = Coster(LLAMA, slow, engine).step(plan)
    assert crawl.exposed_comm_s["host"] > fast.exposed_comm_s["host"] >= 0
    assert crawl.step_s > fast.step_s
    assert "host" not in Coster(LLAMA, H100, MEGATRON).step(plan).exposed_comm_s  # documents unchanged without it
    cpu = load_hardware("cpu")
    assert "offload without a host link" in [p.reason for p in plan_problems(LLAMA, plan, engine, 8, cpu)]


def _offloaded(model, plan, engine):
    """The peak rank's memory terms (activations: what its layers keep; the transit is in the buffers term)."""
    return memory_report(model, H100, plan, engine).peak.breakdown


def _group_bytes(model, kind, recompute, names):
    """Bytes per token one layer keeps in the tensors the groups `names` hold (their offload tags within names)."""
    from planner.cost.saved_tensors import layer_tensors

    everything = activation_bytes_per_token(model, seq_len=8192, tp=1, sp=False, cp=1, recompute=recompute,
                                            act_bytes=2, kernels=MEGATRON.kernels, kind=kind)  # fmt: skip
    tensors = layer_tensors(model, seq_len=8192, act_bytes=2, kernels=MEGATRON.kernels, kind=kind)
    held = sum(t.bytes_per_token for t in tensors if t.offload and set(t.offload) <= set(names) and t.needed)
    return everything, held


def test_activation_offload_moves_only_what_the_named_modules_groups_hold():
    """Megatron offloads what autograd saves inside each named module's group (docs/user-guide/features/
    fine_grained_activation_offloading.md): a dense Llama layer's input, norm output, Q, K, V, the attention output
    and its statistics; never the dense MLP's tensors. The attention output leaves only with core_attn and attn_proj
    both (the output projection keeps it too)."""
    dense = LayerKind("attention", "dense", "global")
    everything, moved = _group_bytes(LLAMA, dense, "none", ("qkv_linear", "core_attn", "attn_proj"))
    h, q, kv = LLAMA.hidden_size, LLAMA.num_attention_heads * LLAMA.head_size, LLAMA.kv_heads * LLAMA.head_size
    assert moved == 2 * h + 2 * h + 2 * q + 2 * 2 * kv + 2 * q + 4 * LLAMA.num_attention_heads
    assert 0.2 < moved / everything < 0.3  # the MLP's tensors, most of the layer's, stay
    _all, core_only = _group_bytes(LLAMA, dense, "none", ("core_attn",))
    assert core_only == 2 * q + 2 * 2 * kv + 4 * LLAMA.num_attention_heads  # not the attention output
    plan = Plan(dp=8, global_batch=64, seq_len=8192, zero=1, micro_batch=1)
    base = _offloaded(LLAMA, plan, MEGATRON).activations_bytes
    both = _offloaded(LLAMA, plan, MEGATRON.configured(offload_modules=["core_attn", "attn_proj"]))
    core = _offloaded(LLAMA, plan, MEGATRON.configured(offload_modules=["core_attn", "qkv_linear"]))
    tokens, layers = 8192, LLAMA.num_layers
    assert base - both.activations_bytes == pytest.approx(tokens * layers * (core_only + 2 * q))
    assert base - core.activations_bytes == pytest.approx(tokens * layers * (core_only + 4 * h))


def test_moe_offload_moves_the_expert_groups_and_a_share_of_the_groups():
    """An MoE layer adds its pre-MLP norm's input (mlp_norm), the experts' permuted input (expert_fc1) and their fc1
    output (moe_act); --activation-offload F moves the share F of what the groups hold (the first F of them)."""
    mixtral = load_model("mixtral-8x7b")
    moe = LayerKind("attention", "moe", "global")
    names = ("expert_fc1", "moe_act", "mlp_norm")
    _everything, moved = _group_bytes(mixtral, moe, "none", names)
    m, h = mixtral.moe, mixtral.hidden_size
    assert moved == 2 * h + m.top_k * h * 2 + 2 * m.top_k * m.expert_ffn_hidden_size * 2
    plan = Plan(dp=8, ep=8, global_batch=64, seq_len=4096, zero=1, micro_batch=1)
    base = _offloaded(mixtral, plan, MEGATRON).activations_bytes
    full = base - _offloaded(mixtral, plan, MEGATRON.configured(offload_modules=list(names))).activations_bytes
    half = _offloaded(mixtral, plan, MEGATRON.configured(offload_modules=list(names), activation_offload=0.5))
    assert full == pytest.approx(4096 * mixtral.num_layers * moved)
    assert half.activations_bytes == pytest.approx(base - full / 2)


def test_offload_modules_alone_offload_every_group_and_nothing_under_full_recompute():
    """--offload-modules without --activation-offload offloads all their groups (Megatron's default fraction, 1.0);
    under full recompute the checkpointed layer input is in no group, so offloading moves nothing."""
    assert MEGATRON.configured(offload_modules="core_attn,attn_proj").memory.activation_offload == 1.0
    assert MEGATRON.configured(offload_modules="core_attn", activation_offload=0.25).memory.activation_offload == 0.25
    plan = Plan(dp=8, global_batch=64, seq_len=8192, zero=1, recompute="full")
    full = _offloaded(LLAMA, plan, MEGATRON.configured(activation_offload=1.0))
    assert full == _offloaded(LLAMA, plan, MEGATRON)


@pytest.mark.parametrize(
    ("settings", "reason"),
    [
        ({"offload_modules": ["attn_proj"]}, "attn_proj offload without core_attn"),
        ({"offload_modules": ["core_attn", "mlp_norm"], "cuda_graphs": True}, "norm offload with cuda graphs"),
        ({"offload_modules": ["expert_fc1"], "recompute_modules": ["moe"]}, "expert offload inside moe recompute"),
    ],
)
def test_megatron_refuses_the_offload_modules_it_refuses(settings, reason):
    """transformer_config.py l.2127-2175 (attn_proj needs core_attn; no expert offload inside a recomputed MoE
    layer) and the CUDA-graph constraints of the fine-grained offloading guide (no norm groups)."""
    mixtral = load_model("mixtral-8x7b")
    plan = Plan(dp=8, ep=8, global_batch=64, seq_len=4096, zero=1, recompute="selective")
    problems = plan_problems(mixtral, plan, MEGATRON.configured(**settings), 8, H100)
    assert reason in [p.reason for p in problems]


# ---- optimizer state bytes ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("settings", "precision", "per_param"),
    [
        # dist_optimizer.md: 6 + 12/d; notes §3.4 (optimizer_config.py l.192-195, distrib_optimizer.py l.1007-1008)
        ({}, "bf16", (2, 4, 12)),
        ({"grad_dtype": "param"}, "bf16", (2, 2, 12)),  # --grad-reduce-in-bf16: 4 + 12/d
        ({"precision_aware_optimizer": True, "optimizer_moment_dtype": "bf16"}, "bf16", (2, 4, 6)),  # 6 + 6/d
        # Megatron-Bridge DeepSeek-V3 H100 recipe (recipes/deepseek/h100/deepseek_v3.py l.221-225): 4 + 6/d
        (
            {"precision_aware_optimizer": True, "optimizer_moment_dtype": "bf16", "grad_dtype": "param"},
            "bf16",
            (2, 2, 6),
        ),
        ({"precision_aware_optimizer": True}, "bf16", (2, 4, 10)),  # fp32 moments, remainders: 2 + 4 + 4
        # no remainders under a recipe other than delayed scaling (use_precision_aware_optimizer_no_fp8_or_ds_fp8)
        ({"precision_aware_optimizer": True, "optimizer_moment_dtype": "bf16"}, "fp8-current", (2, 4, 8)),
        ({"precision_aware_optimizer": True, "optimizer_moment_dtype": "bf16"}, "fp8-delayed", (2, 4, 6)),
    ],
)
def test_bytes_per_parameter_table(settings, precision, per_param):
    d, n = 8, 1e9
    s = model_state_bytes(params=n, dp=d, zero=1, engine=MEGATRON.configured(**settings), precision=precision)
    w, g, o = per_param
    assert (s.weights_bytes, s.gradients_bytes, s.optimizer_bytes) == (w * n, g * n, pytest.approx(o * n / d))


def test_bf16_gradient_reduction_halves_the_reduce():
    plan = PLANS[2]
    fp32 = dp_traffic(LLAMA, H100, plan, MEGATRON, stage=0)
    bf16 = dp_traffic(LLAMA, H100, plan, MEGATRON.configured(grad_dtype="param"), stage=0)
    assert bf16.reduce_bytes == pytest.approx(fp32.reduce_bytes / 2)
    assert bf16.reduce_s < fp32.reduce_s


def test_precision_aware_optimizer_needs_the_distributed_optimizer():
    pao = MEGATRON.configured(precision_aware_optimizer=True)
    plan = PLANS[2].model_copy(update={"zero": 0})
    assert "megatron: precision-aware optimizer without zero 1" in [
        p.reason for p in plan_problems(LLAMA, plan, pao, 64, H100)
    ]
    moments = MEGATRON.configured(optimizer_moment_dtype="bf16")
    assert "moment dtype needs the precision-aware optimizer" in [
        p.reason for p in plan_problems(LLAMA, PLANS[2], moments, 64, H100)
    ]


# ---- fp8 parameter gather ------------------------------------------------------------------------------------
def test_fp8_param_gather_halves_the_all_gather_but_not_for_mxfp8():
    gather = MEGATRON.configured(fp8_param_gather=True)
    plan = PLANS[2].model_copy(update={"precision": "fp8-current"})
    assert dp_traffic(LLAMA, H100, plan, gather, stage=0).gather_bytes == pytest.approx(
        dp_traffic(LLAMA, H100, plan, MEGATRON, stage=0).gather_bytes / 2
    )
    b200, mx = load_hardware("b200"), plan.model_copy(update={"precision": "mxfp8"})
    assert (
        dp_traffic(LLAMA, b200, mx, gather, stage=0).gather_bytes
        == dp_traffic(LLAMA, b200, mx, MEGATRON, stage=0).gather_bytes
    )
    less = memory_report(LLAMA, b200, mx, gather).total_bytes
    assert less < memory_report(LLAMA, b200, mx, MEGATRON).total_bytes  # no bf16 weight copy


@pytest.mark.parametrize(("zero", "precision", "reason"), [
    (0, "fp8-current", "megatron: fp8 param gather without zero 1"),
    (3, "fp8-current", "megatron: fp8 param gather without zero 1"),
    (1, "bf16", "fp8 param gather needs a named recipe"),
])  # fmt: skip
def test_fp8_param_gather_refusals(zero, precision, reason):
    plan = Plan(dp=8, global_batch=8, seq_len=8192, zero=zero, precision=precision)
    problems = plan_problems(LLAMA, plan, MEGATRON.configured(fp8_param_gather=True), 8, H100)
    assert reason in [p.reason for p in problems]


# ---- CUDA graphs ---------------------------------------------------------------------------------------------
def test_cuda_graphs_hold_a_pool_and_remove_launch_cost():
    plan = Plan(dp=2, tp=8, pp=4, global_batch=64, seq_len=8192, zero=1)
    graphs = MEGATRON.configured(cuda_graphs=True)
    a = memory_report(LLAMA, H100, plan, MEGATRON).stages[0].breakdown  # stage 0: no logits
    b = memory_report(LLAMA, H100, plan, graphs).stages[0].breakdown
    assert b.buffers_bytes - a.buffers_bytes == pytest.approx(CUDA_GRAPH_POOL_FRACTION * a.activations_bytes)
    # the shipped GPU profiles charge no host cost per kernel (fitted: launches hide behind GPU work) ...
    assert Coster(LLAMA, H100, graphs).step(plan).step_s == Coster(LLAMA, H100, MEGATRON).step(plan).step_s
    # ... a profile that states one (a host-bound box, bench-hardware) loses it to the graphs
    eff = H100.efficiency.model_copy(update={"kernel_overhead_s": 2e-5})
    host_bound = H100.model_copy(update={"efficiency": eff})
    assert Coster(LLAMA, host_bound, graphs).step(plan).step_s < Coster(LLAMA, host_bound, MEGATRON).step(plan).step_s
    assert "cuda graphs need an NVIDIA GPU" in [
        p.reason for p in plan_problems(LLAMA, plan, graphs, 64, load_hardware("mi300x"))
    ]


# ---- the settings' round trips -----------------------------------------------------------------------------
SETTINGS = {
    "recompute_modules": ["core_attn", "layernorm", "moe_act"],
    "activation_offload": 0.25,
    "optimizer_offload": 0.5,
    "precision_aware_optimizer": True,
    "optimizer_moment_dtype": "bf16",
    "fp8_param_gather": True,
    "cuda_graphs": True,
}


def _check(engine):
    m, k = engine.memory, engine.kernels
    assert k.recompute_modules == ("core_attn", "layernorm", "moe_act") and k.cuda_graphs
    assert (m.activation_offload, m.optimizer_offload) == (0.25, 0.5)
    assert m.precision_aware_optimizer and m.optimizer_moment_dtype == "bf16" and m.fp8_param_gather


def test_plan_file_round_trip(tmp_path):
    path = str(tmp_path / "plan.yaml")
    write_plan_file(path, plan=Plan(dp=8, global_batch=8), model="llama3-8b", hardware="h100-sxm", engine="megatron",
                    gpus=8, training=SETTINGS)  # fmt: skip
    doc = read_plan_file(path)
    assert doc.training == SETTINGS
    _check(resolve_engine(None, {}, doc))


def test_runs_file_software_round_trip():
    raw = {"id": "r", "software": {"engine": "megatron", **SETTINGS}}
    _check(run_engine(raw))
    for key, bad in (("activation_offload", 1.5), ("recompute_modules", ["attn"]), ("cuda_graphs", "yes")):
        with pytest.raises(PlannerError, match=key):
            run_engine({"id": "r", "software": {key: bad}})


def test_plan_file_refuses_bad_settings(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump({"plan": {"dp": 8}, "training": {"optimizer_offload": 2}}))
    with pytest.raises(PlannerError, match=r"training\.optimizer_offload=2 is not valid"):
        read_plan_file(str(path))


def test_flags_reach_the_estimate_and_bad_ones_exit_2():
    args = ["estimate", "-m", "llama3-8b", "--gpus", "8", "--zero", "1", "--json"]
    code, out, err = run_planner(*args, "--precision-aware-optimizer", "--optimizer-moment-dtype", "bf16")
    assert code == 0, err
    code, base, err = run_planner(*args)
    assert json.loads(out)["per_gpu_bytes"]["optimizer"] < json.loads(base)["per_gpu_bytes"]["optimizer"]
    code, out, err = run_planner(*args[:-1], "--recompute-modules", "core_attn,bogus")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "bogus" in err
    code, out, err = run_planner(*args[:-1], "--engine", "deepspeed", "--cuda-graphs")
    assert code == 2 and "cuda_graphs: the planner does not model it for deepspeed" in err


def test_search_recipe_options_saves_the_variant(tmp_path):
    path = tmp_path / "best.yaml"
    code, out, err = run_planner("search", "-m", "deepseek-v3", "--gpus", "1024", "--hardware", "h800", "--seq-len",
                                 "4096", "--recipe-options", "--save", str(path), "--json", "--no-advice")  # fmt: skip
    assert code == 0, err
    best = json.loads(out)["plans"][0]["engine"]  # a variant: megatron+bf16grad+epoverlap
    assert best.startswith("megatron+")
    saved = yaml.safe_load(path.read_text())
    assert saved["engine"] == "megatron"  # the profile, and the variant's settings as its training block
    from planner.engine.recipe_variants import variant_named

    variant = variant_named(load_engine("megatron"), best, load_model("deepseek-v3"), "bf16")
    assert saved["training"] == variant.variant_settings
    code, out, err = run_planner("memory", "--plan", str(path), "--json")
    assert code == 0, err
    assert json.loads(out)["total_bytes"] == pytest.approx(saved["predicted"]["peak_memory_bytes"], abs=1)


def test_a_variant_saved_at_another_recompute_level_leaves_its_modules_out(tmp_path):
    """A +modules variant's best plan at recompute none re-runs no module: its plan file does not name them (which
    `launch --plan` would warn change nothing), and the plan is priced the same from the file. (At ep 1: with
    experts spread, the all-to-all overlap variant ranks first.)"""
    path = tmp_path / "best.yaml"
    code, out, err = run_planner("search", "-m", "mixtral-8x22b", "--gpus", "64", "--recipe-options", "--recompute",
                                 "none", "--ep", "1", "--no-advice", "--top", "1", "--save", str(path),
                                 "--json")  # fmt: skip
    assert code == 0, err
    best = json.loads(out)["plans"][0]
    assert "+modules" in best["engine"] and best["plan"]["recompute"] == "none"
    saved = yaml.safe_load(path.read_text())
    assert "recompute_modules" not in saved["training"] and saved["training"]["activation_offload"] == 0.5
    code, out, err = run_planner("estimate", "--plan", str(path), "--json")
    assert code == 0 and "change nothing" not in err and "applies to" not in err
    assert json.loads(out)["tokens_per_s"] == pytest.approx(best["tokens_per_s"])


def test_recompute_modules_without_selective_recompute_are_said_to_change_nothing():
    args = ("estimate", "-m", "deepseek-v3", "--gpus", "2048", "--hardware", "h800", "--engine", "hai-llm",
            "--pp", "16", "--ep", "64", "--recompute-modules", "layernorm")  # fmt: skip
    code, _out, err = run_planner(*args, "--recompute", "none")
    assert code == 0 and "--recompute-modules applies to --recompute selective" in " ".join(err.split())
    code, _out, err = run_planner(*args, "--recompute", "selective")
    assert code == 0 and "--recompute-modules applies" not in err


def test_recipe_options_add_a_speed_ladder_where_the_engine_runs_it():
    """`--recipe-options` ranks bf16 gradient reduction beside the memory ladder where the engine runs it; CUDA
    graphs only where they gain time: a model with layers priced as graphed (not MoE layers) and an engine whose
    fitted host cost per layer is not zero (megatron's is 0 on GPUs: graphs would only add their pool)."""
    from planner.engine.recipe_variants import option_variants

    megatron = load_engine("megatron")
    names = {e.name: e for e in option_variants(megatron, load_model("llama3-8b"), "bf16")}
    assert names["megatron+bf16grad"].memory.grad_dtype == "param"
    assert names["megatron+bf16grad"].variant_settings == {"grad_dtype": "param"}
    assert not any("graphs" in n for n in names)
    assert megatron.behaviour is not None and megatron.behaviour.host_layer_s.value == 0
    hosted = megatron.model_copy(update={"behaviour": megatron.behaviour.model_copy(
        update={"host_layer_s": megatron.behaviour.host_layer_s.model_copy(update={"value": 1e-4})})})  # fmt: skip
    graphs = {e.name: e for e in option_variants(hosted, load_model("llama3-8b"), "bf16")}
    assert graphs["megatron+bf16grad+graphs"].kernels.cuda_graphs
    assert graphs["megatron+bf16grad+graphs"].variant_settings == {"grad_dtype": "param", "cuda_graphs": True}
    mixtral = {e.name for e in option_variants(hosted, load_model("mixtral-8x7b"), "bf16")}
    assert "megatron+bf16grad" in mixtral and not any("graphs" in n for n in mixtral)  # MoE layers only
    # a MoE model: Megatron's all-to-all overlap, as the Bridge DeepSeek-V3 perf recipes turn it on
    overlap = {e.name: e for e in option_variants(megatron, load_model("mixtral-8x7b"), "bf16")}
    assert overlap["megatron+bf16grad+epoverlap"].moe.ep_overlap and not megatron.moe.ep_overlap
    assert not any("epoverlap" in n for n in names)  # llama3-8b: no experts
    # only where the overlap is Megatron's combined 1F1B: hai-llm's is DualPipe's, in its schedule
    hai = load_engine("hai-llm").configured(ep_overlap=False)
    assert not any("epoverlap" in v.name for v in option_variants(hai, load_model("deepseek-v3"), "bf16"))
    hai = {e.name for e in option_variants(load_engine("hai-llm"), load_model("deepseek-v3"), "bf16")}
    assert not any("bf16grad" in n or "graphs" in n for n in hai)  # hai-llm: fp32 gradients, no graphs


def test_optimizer_offload_with_fp8_param_gather_needs_delayed_scaling_as_megatron_asserts():
    """arguments.py l.1888-1892: with --fp8-param-gather the CPU-offloaded optimizer needs --fp8-recipe delayed; the
    assert names --fp8-param-gather only, so NVFP4's --fp4-param-gather is not refused by it."""
    b200 = load_hardware("b200")
    engine = MEGATRON.configured(precision_aware_optimizer=True, optimizer_offload=0.5, fp8_param_gather=True)
    reason = "optimizer offload with fp8 param gather needs delayed scaling"
    for precision, refused in (("fp8-current", True), ("mxfp8", True), ("fp8-delayed", False), ("nvfp4", False)):
        plan = Plan(dp=8, global_batch=64, seq_len=4096, zero=1, precision=precision)
        reasons = [p.reason for p in plan_problems(LLAMA, plan, engine, 8, b200)]
        assert (reason in reasons) == refused, (precision, reasons)


def test_a_module_named_twice_is_one_module():
    """--recompute-modules mlp,mlp re-runs the MLP once and is written once (a list as given, the same)."""
    engine = MEGATRON.configured(recompute_modules="mlp,core_attn,mlp", offload_modules=["core_attn", "core_attn"])
    assert engine.kernels.recompute_modules == ("mlp", "core_attn") and engine.memory.offload_modules == ("core_attn",)
    from planner.launch.emit.megatron import recompute_args

    plan = Plan(dp=8, global_batch=64, seq_len=4096, zero=1, recompute="selective")
    assert recompute_args(plan, {"recompute_modules": engine.kernels.recompute_modules})[-2:] == ["mlp", "core_attn"]


# ---- offload: what the audit of the twelfth session found ----------------------------------------------------
def test_expert_offload_inside_a_recomputed_moe_layer_is_refused_only_where_megatron_refuses_it():
    """transformer_config.py l.2165-2175 asserts against offloading the experts' groups while recomputing the whole
    MoE layer, under selective recompute only; the default module set leaves those groups out there instead."""
    mixtral = load_model("mixtral-8x7b")
    named = MEGATRON.configured(offload_modules=["expert_fc1"], recompute_modules=["moe"])
    reason = "expert offload inside moe recompute"
    for recompute, refused in (("selective", True), ("none", False), ("full", False)):
        plan = Plan(dp=8, ep=8, global_batch=64, seq_len=4096, zero=1, recompute=recompute)
        assert (reason in [p.reason for p in plan_problems(mixtral, plan, named, 8, H100)]) == refused, recompute
    default = MEGATRON.configured(activation_offload=1.0, recompute_modules=["moe"])
    plan = Plan(dp=8, ep=8, global_batch=64, seq_len=4096, zero=1, recompute="selective")
    assert reason not in [p.reason for p in plan_problems(mixtral, plan, default, 8, H100)]
    from planner.cost.recipe_options import offload_modules

    assert not {"expert_fc1", "moe_act"} & set(offload_modules(default, "selective"))
    assert {"expert_fc1", "moe_act"} <= set(offload_modules(default, "none"))


def test_an_empty_offload_module_list_is_one_line():
    code, out, err = run_planner("memory", "-m", "mixtral-8x7b", "--gpus", "8", "--ep", "8", "--activation-offload",
                                 "0.5", "--offload-modules", "")  # fmt: skip
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "offload_modules" in err


def test_offloaded_expert_inputs_are_kept_in_16_bits_under_fp8_but_mxfp8_and_nvfp4():
    """Megatron makes the experts' fc1 keep its original 16-bit input when expert_fc1 is offloaded under an fp8
    recipe other than MXFP8 and NVFP4 (moe/experts.py l.276-284): offloading moves the bf16 bytes (it keeps them
    quantized without offload); MXFP8 keeps and moves the quantized copy."""
    from planner.cost.memory import kind_pieces

    mixtral = load_model("mixtral-8x7b")
    kind = next(iter(mixtral.kind_params))
    off = MEGATRON.configured(offload_modules=["expert_fc1"])

    def pieces(precision, engine):
        plan = Plan(dp=8, ep=8, global_batch=64, seq_len=4096, zero=1, precision=precision)
        keep, work, groups = kind_pieces(mixtral, plan, engine, kind)
        return keep, work, sum(groups)  # the whole share moves: one entry, the group's bytes

    _k, _w, bf16_moved = pieces("bf16", off)
    fp8_plain, _w, _none = pieces("fp8-current", MEGATRON)
    fp8_keep, _w, fp8_moved = pieces("fp8-current", off)
    _k, _w, mx_moved = pieces("mxfp8", off)
    assert bf16_moved > 0 and fp8_moved == pytest.approx(bf16_moved) and mx_moved < bf16_moved
    assert fp8_keep - fp8_plain == pytest.approx(bf16_moved / 2)  # the input kept in 16 bits, not 8, to offload it


def test_a_hybrid_stack_offloads_its_attention_layers_qkv_group_and_its_moe_layers_norm():
    """Megatron's hybrid stack fuses the attention layers' norm into the QKV linear (hybrid_layer_specs.py
    attention_layer) and gives its MoE layers a pre-MLP norm module (moe_layer): their groups hold them."""
    from planner.cost.saved_tensors import layer_tensors

    hybrid = load_model("nemotron-h-56b")
    attention = next(k for k in hybrid.kind_params if k.mixer == "attention")
    tensors = layer_tensors(hybrid, seq_len=8192, act_bytes=2, kernels=MEGATRON.kernels, kind=attention)
    assert [t.offload for t in tensors[:2]] == [("qkv_linear",), ("qkv_linear",)]
    plan = Plan(tp=8, global_batch=8, seq_len=8192, zero=1)
    base = memory_report(hybrid, H100, plan, MEGATRON).peak.breakdown.activations_bytes
    off = memory_report(hybrid, H100, plan, MEGATRON.configured(offload_modules=["qkv_linear"]))
    assert off.peak.breakdown.activations_bytes < base
    moe = LayerKind("none", "moe", "global")
    qwen = load_model("qwen3-30b-a3b").model_copy(update={"layer_pattern": "E" * 48})
    first = layer_tensors(qwen, seq_len=4096, act_bytes=2, kernels=MEGATRON.kernels, kind=moe)[0]
    assert first.offload == ("mlp_norm",)


def test_offload_that_moves_nothing_is_said():
    args = ("estimate", "-m", "llama3-8b", "--gpus", "8", "--engine", "megatron")
    code, _out, err = run_planner(*args, "--offload-modules", "expert_fc1,core_attn")
    assert code == 0 and "--offload-modules expert_fc1: no tensor of llama3-8b" in " ".join(err.split())
    code, _out, err = run_planner(*args, "--activation-offload", "1", "--recompute", "full")
    assert code == 0 and "activation offload moves nothing with recompute=full" in " ".join(err.split())
    code, _out, err = run_planner(*args, "--activation-offload", "1", "--recompute", "none")
    assert code == 0 and "moves nothing" not in err and "no tensor" not in err
    # selective recompute re-runs core_attn (Megatron's default module): its checkpointed group moves nothing
    code, _out, err = run_planner(*args, "--recompute", "selective", "--offload-modules", "core_attn")
    said = " ".join(err.split())
    assert code == 0 and "activation offload moves nothing with recompute=selective" in said, err
    code, _out, err = run_planner(*args, "--activation-offload", "0", "--offload-modules", "core_attn")
    assert code == 0 and "with --activation-offload 0: nothing is offloaded" in " ".join(err.split())


def test_recompute_modules_a_model_lacks_are_said():
    """A module none of the model's layers has re-runs nothing and frees nothing (Megatron's mlp recompute on an
    all-MoE stack; layernorm where Transformer Engine fuses the norms into the linears): said, not silent. The
    attention core under flash frees little but re-runs the core: a choice, not said."""
    args = ("estimate", "-m", "qwen3-30b-a3b", "--gpus", "8", "--ep", "8", "--engine", "megatron", "--recompute",
            "selective")  # fmt: skip
    code, _out, err = run_planner(*args, "--recompute-modules", "mlp,core_attn")
    said = " ".join(err.split())
    assert code == 0 and "--recompute-modules mlp: no layer of qwen3-30b-a3b keeps what it re-runs" in said, err
    code, _out, err = run_planner(*args, "--recompute-modules", "moe_act,core_attn")
    assert code == 0 and "--recompute-modules" not in err, err


def test_memory_and_estimate_state_the_settings_they_priced():
    """The per-run settings that differ from the engine's profile are what the numbers assume: the header names
    them and --json carries them (`settings`; empty for the profile's own)."""
    args = ("-m", "mixtral-8x7b", "--gpus", "8", "--ep", "8", "--zero", "1", "--engine", "megatron")
    given = ("--activation-offload", "0.5", "--offload-modules", "core_attn,attn_proj")
    code, out, err = run_planner("memory", *args, *given)
    assert code == 0, err
    assert "with megatron (activation_offload=0.5, offload_modules=core_attn,attn_proj)" in " ".join(out.split())
    code, out, err = run_planner("estimate", *args, *given, "--json")
    assert code == 0, err
    assert json.loads(out)["settings"] == {"activation_offload": 0.5, "offload_modules": ["core_attn", "attn_proj"]}
    code, out, err = run_planner("estimate", *args, "--json")
    assert code == 0 and json.loads(out)["settings"] == {}


def test_each_searched_variants_plan_carries_the_settings_that_make_it():
    code, out, err = run_planner("search", "-m", "llama3-8b", "--gpus", "8", "--recipe-options", "--no-advice",
                                 "--json", "--top", "40")  # fmt: skip
    assert code == 0, err
    seen = {p["engine"]: p["memory"]["settings"] for p in json.loads(out)["plans"]}
    assert seen.get("megatron") == {} and seen.get("megatron+bf16grad") == {"grad_dtype": "param"}
    pao = seen.get("megatron+pao") or seen.get("megatron+pao+offload")
    assert pao is not None and pao["precision_aware_optimizer"] is True


def test_a_recomputed_attention_core_offloads_nothing_of_its_group():
    """Megatron skips the core_attn offload group when the attention core is checkpointed (attention.py,
    multi_latent_attention.py: checkpoint_core_attention): under selective recompute of core_attn it moves nothing."""
    plan = Plan(dp=8, global_batch=64, seq_len=8192, zero=1, recompute="selective")
    base = _offloaded(LLAMA, plan, MEGATRON).activations_bytes
    core = _offloaded(LLAMA, plan, MEGATRON.configured(offload_modules=["core_attn"])).activations_bytes
    assert core == base
    none = plan.model_copy(update={"recompute": "none"})
    moved = _offloaded(LLAMA, none, MEGATRON.configured(offload_modules=["core_attn"])).activations_bytes
    assert moved < _offloaded(LLAMA, none, MEGATRON).activations_bytes


def test_the_offload_fraction_counts_groups_in_forward_order_in_each_chunk():
    """Megatron offloads the first n - int(n(1 - F)) of each chunk's n eligible groups in forward order and keeps
    the later ones (fine_grained_activation_offload.py l.650-669; the guide: the fraction 'does not mean offload 50%
    of the activation bytes'). Per chunk, so a rank's virtual stages each keep their own tail."""
    from planner.cost.recipe_options import offloaded_bytes

    layer = (1.0, 2.0, 3.0)  # three groups in forward order
    assert offloaded_bytes([(layer, 4)], (2, 2), 0.5) == 2 * 6  # 2 layers a chunk: 6 groups, the first 3 (a layer)
    assert offloaded_bytes([(layer, 4)], (2, 2), 0.6) == 2 * (6 + 1)  # 6 - int(2.4) = 4 groups: a layer and one
    assert offloaded_bytes([(layer, 4)], (4,), 0.5) == 6 + 6  # one chunk of 12 groups: the first 6
    assert offloaded_bytes([(layer, 4)], (1,) * 4, 1.0) == 24 and offloaded_bytes([(layer, 4)], (4,), 0.0) == 0
    assert offloaded_bytes([((), 2), (layer, 2)], (2, 2), 0.5) == 6  # layers without groups count no groups
    # the rank's own chunk sizes, in model order (DeepSeek-V3's first rank over pp 4 x vpp 2: 7 then 8 layers, the
    # three dense ones first): the dense layers' one group and four MoE layers in the first chunk, eight in the next
    dense, moe = (5.0,), (1.0, 2.0, 3.0)
    first = 3 * 5.0 + 6 + (1 + 2)  # 15 groups, the first 15 - int(7.5) = 8: three dense, then five MoE groups
    second = 6 * 4  # 24 groups, the first 12: four layers
    assert offloaded_bytes([(dense, 3), (moe, 12)], (7, 8), 0.5) == first + second
    runs = [(dense, 3), (moe, 12)]
    assert offloaded_bytes(runs, (7, 8), 0.4) == 40 and offloaded_bytes(runs, (8, 7), 0.4) == 42  # the rank's sizes
    # Mixtral over pp 4 x vpp 8: one layer a chunk, seven groups, the first four (the attention's) go at F = 0.5
    mixtral = load_model("mixtral-8x7b")
    plan = Plan(dp=2, pp=4, vpp=8, ep=2, global_batch=64, seq_len=4096, zero=1, micro_batch=1)
    base = memory_report(mixtral, H100, plan, MEGATRON).stages[0].breakdown.activations_bytes
    half = MEGATRON.configured(activation_offload=0.5)
    attention_only = MEGATRON.configured(offload_modules=["attn_norm", "qkv_linear", "core_attn", "attn_proj"])
    everything = MEGATRON.configured(activation_offload=1.0)

    def moved(engine):
        return base - memory_report(mixtral, H100, plan, engine).stages[0].breakdown.activations_bytes

    assert moved(half) == pytest.approx(moved(attention_only))
    assert moved(half) < 0.3 * moved(everything)  # not half of the bytes: the experts' groups stay


def test_a_ranked_variant_estimates_as_ranked_by_its_name():
    """A --recipe-options plan names its variant (megatron+pao): estimate takes the name, rebuilt from its base for
    the model and precision, and gives the ranked figures (the Python API round trip, audit); a name that is no
    variant is one line naming those there are."""
    from planner.api import estimate, search

    found = search("qwen3-30b-a3b", gpus=8, hardware="h100-sxm", recipe_options=True)
    variant = next(p for p in found.plans if "+" in p.engine)
    again = estimate("qwen3-30b-a3b", gpus=8, hardware="h100-sxm", engine=variant.engine, plan=variant.plan)
    assert again.tokens_per_s == pytest.approx(variant.tokens_per_s)
    assert again.settings == variant.memory.settings != {}
    code, out, err = run_planner("estimate", "-m", "qwen3-30b-a3b", "--gpus", "8", "--engine", "megatron+foo")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "megatron+pao" in err, err


def test_a_reason_the_variants_share_is_one_line_of_the_table():
    """'megatron has no zero 2' and each variant's same reason are one line, counted together (--json keeps each)."""
    args = ("search", "-m", "qwen3-30b-a3b", "--gpus", "64", "--hardware", "b200", "--recipe-options", "--no-advice",
            "--tp", "1", "--pp", "1")  # fmt: skip
    code, out, err = run_planner(*args, "--json")
    assert code == 0, err
    rejected = json.loads(out)["rejected"]
    no_zero2 = {k: n for k, n in rejected.items() if k.endswith("has no zero 2")}
    assert len(no_zero2) == 6 and "megatron+pao has no zero 2" in no_zero2
    code, out, err = run_planner(*args)
    assert code == 0, err
    text = " ".join(out.split())
    assert f"{sum(no_zero2.values())} megatron (and 5 variants) has no zero 2" in text
    assert "megatron+pao has no zero 2" not in text


def test_the_search_says_when_its_best_plan_leaves_a_setting_idle():
    """Qwen3-235B on 256 B200s with half the activations offloaded ranks a fully recomputed plan first, whose
    offload moves nothing: the search says so of its best plan, as memory and estimate say it of theirs."""
    code, out, err = run_planner("search", "-m", "qwen3-235b-a22b", "--gpus", "256", "--hardware", "b200",
                                 "--activation-offload", "0.5", "--no-advice")  # fmt: skip
    said = " ".join(out.split())
    assert code == 0, err
    best = said.split("best: ")[1].split(" on ")[0]
    assert "rc=full" in best and "note: for the best plan, activation offload moves nothing with recompute=full" in said


@pytest.mark.parametrize(("flag", "value"), [("--recompute-modules", ""), ("--recompute-modules", ","),
                                             ("--offload-modules", " ")])  # fmt: skip
def test_a_module_list_that_names_no_module_is_refused(flag, value):
    """An empty comma list is a slip, not a choice of no modules: refused by name with the valid modules (it read
    as no modules, and selective recompute re-ran nothing)."""
    code, out, err = run_planner("estimate", "-m", "tiny", "--gpus", "2", f"{flag}={value}")
    assert code == 2 and out == "" and "names no module; give a comma list of" in err and "core_attn" in err


def test_a_refused_command_says_one_line_not_the_warnings_on_its_way(tmp_path):
    """A command refused with exit 2 says its error alone: the idle-setting warning its input raised first is not
    said (it came before the error, two lines for one mistake); a command that ends well still says it."""
    args = ("--recompute-modules", "moe")
    code, out, err = run_planner("launch", "-m", "llama3-8b", "--emit", "torchtitan", "--out", str(tmp_path / "o"),
                                 *args)  # fmt: skip
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and err.startswith("error:"), err
    code, out, err = run_planner("estimate", "-m", "llama3-8b", "--gpus", "8", "--zero", "1", *args)
    assert code == 0 and "warning: --recompute-modules applies to --recompute selective" in " ".join(err.split())


def test_moe_settings_for_a_dense_model_are_said_to_change_nothing():
    """--moe-dispatcher deepep --moe-imbalance 4 on Llama 3 8B: the header named them and the figures were the
    same (audit); said once. On Mixtral the same settings say nothing of the kind."""
    args = ("estimate", "--gpus", "8", "--moe-dispatcher", "deepep", "--moe-imbalance", "4")
    code, _out, err = run_planner(*args, "-m", "llama3-8b")
    said = " ".join(err.split())
    assert code == 0 and "--moe-dispatcher, --moe-imbalance: llama3-8b has no MoE layers; they change nothing" in said
    code, _out, err = run_planner(*args, "-m", "mixtral-8x7b", "--ep", "8")
    assert code == 0 and "no MoE layers" not in err, err


@pytest.mark.parametrize(
    ("schedule", "said"),
    [
        ("dualpipev", "--no-ep-overlap: the dualpipev schedule overlaps the all-to-alls by itself; it changes nothing"),
        ("1f1b", "--no-ep-overlap: the overlap needs pp 1 or the interleaved schedule and no full recompute"),
    ],
)
def test_an_ep_overlap_flag_the_plan_decides_is_said_to_change_nothing(schedule, said):
    """hai-llm's DualPipe plan echoed ep_overlap=False in its header and priced the overlap all the same (audit):
    where the schedule decides, the flag is said to change nothing, as other idle settings are."""
    code, _, err = run_planner(
        "estimate", "-m", "deepseek-v3", "--hardware", "h800", "--engine", "hai-llm", "--gpus", "2048", "--pp", "16",
        "--ep", "64", "--zero", "1", "--schedule", schedule, "--precision", "fp8-blockwise", "--seq-len", "4096",
        "--global-batch", "15360", "--micro-batch", "1", "--recompute", "full", "--no-ep-overlap",
    )  # fmt: skip
    assert code == 0 and said in " ".join(err.split()), err


def test_a_variant_the_megatron_file_writes_is_not_said_to_run_nowhere():
    """A search's best plan on megatron+bf16grad+epoverlap: the Megatron-LM file writes both settings
    (--grad-reduce-in-bf16, --overlap-moe-expert-parallel-comm), as `launch --plan --emit megatron` of the saved plan
    does; the search said no --emit file ran it, comparing the variant's name with the target's engine."""
    code, out, err = run_planner("search", "-m", "qwen3-235b-a22b", "--gpus", "256", "--recipe-options", "--top", "1",
                                 "--no-advice", "--json")  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    best = doc["plans"][0]
    assert best["engine"] == "megatron+bf16grad+epoverlap" and best["emit_targets"]["megatron"] is None
    p = best["plan"]  # as the README says it: dp16 tp4 pp4 vpp4 ep16 etp1, 560k tokens/s
    assert (p["dp"], p["tp"], p["pp"], p["vpp"], p["ep"], p["etp"]) == (16, 4, 4, 4, 16, 1)
    assert best["tokens_per_s"] == pytest.approx(560e3, rel=0.01)
    assert "the megatron-bridge file does not write" in best["emit_targets"]["megatron-bridge"]
    assert not any("no --emit file runs" in n for n in doc["notes"])


def test_megatron_fsdp_runs_the_precision_aware_optimizer_with_fp32_main_weights():
    """Megatron-FSDP (ZeRO-3 with ep > 1) runs on the distributed optimizer (arguments.py l.1124-1135), which the
    precision-aware optimizer needs (optimizer/__init__.py l.1057-1060), as Megatron-Bridge's DeepSeek-V3 64-GB300
    recipe runs it (perf_recipes/deepseek/common.py _apply_deepseek_v3_64gpu_gb300_fsdp_configs on the base recipe's
    bf16 moments). It keeps fp32 main weights of its own (distrib_optimizer.py l.704-706): 4 + 2 + 2 = 8 bytes of
    optimizer per parameter, not the 6 of the distributed optimizer's 16-bit remainders. torch FSDP2 (dense ZeRO-3)
    still refuses it. The recipe as the planner expresses it fits the GB300."""
    from planner.cost.states import state_bytes_per_param

    pao = MEGATRON.configured(precision_aware_optimizer=True, optimizer_moment_dtype="bf16")
    dsv3, gb300 = load_model("deepseek-v3"), load_hardware("gb300")
    fsdp = Plan(dp=64, ep=64, zero=3, micro_batch=2, global_batch=256, seq_len=4096, recompute="selective")
    assert not [p for p in plan_problems(dsv3, fsdp, pao, 64, gb300) if "precision-aware" in p.reason]
    dense = Plan(dp=8, zero=3, global_batch=8)
    assert "megatron: precision-aware optimizer without zero 1" in [p.reason for p in plan_problems(LLAMA, dense, pao)]
    offload = pao.configured(optimizer_offload=1.0)  # the CPU optimizer's path runs on zero 1's buffers only
    assert "megatron: optimizer offload without zero 1" in [p.reason for p in plan_problems(dsv3, fsdp, offload, 64)]
    bytes_of = lambda plan: state_bytes_per_param("bf16", pao, pao.zero_stage(plan)).optimizer  # noqa: E731
    assert (bytes_of(fsdp), bytes_of(Plan(dp=8, ep=8, zero=1, global_batch=8))) == (8, 6)
    recipe = pao.configured(
        recompute_modules="core_attn,layernorm,mla_up_proj,moe_act", activation_offload=1.0,
        offload_modules=["core_attn", "attn_proj"], moe_dispatcher="deepep",
    )  # fmt: skip
    report = memory_report(dsv3, gb300, fsdp, recipe)
    assert report.fits, report.peak.total_bytes / 2**30


def test_recipe_options_leave_a_setting_the_user_gave():
    """`--recipe-options` ranked megatron+bf16grad+epoverlap under an explicit --no-ep-overlap, and a header saying
    plain megatron (read-through): a ladder step that sets a given setting is left out, and a ranked variant's name
    rebuilds with the same settings given (estimate --engine megatron+epoverlap --grad-dtype fp32)."""
    args = ("search", "-m", "qwen3-235b-a22b", "--gpus", "256", "--recipe-options", "--no-advice", "--json")
    for flag, step in (("--no-ep-overlap", "epoverlap"), ("--grad-dtype", "bf16grad")):
        code, out, err = run_planner(*args, *([flag, "fp32"] if flag == "--grad-dtype" else [flag]))
        engines = {p["engine"] for p in json.loads(out)["plans"]}
        assert code == 0 and engines and not any(step in e for e in engines), (flag, engines, err)
    best = json.loads(out)["plans"][0]  # the search given --grad-dtype fp32
    assert best["engine"] == "megatron+epoverlap", err
    plan = {k: v for k, v in best["plan"].items() if v is not None and k not in ("sp", "engine")}
    fields = [f"--{k.replace('_', '-')}={v}" for k, v in plan.items()] + ["--sp" if best["plan"]["sp"] else "--no-sp"]
    code, out, err = run_planner("estimate", "-m", "qwen3-235b-a22b", "--engine", best["engine"], "--grad-dtype",
                                 "fp32", *fields, "--json")  # fmt: skip
    assert code == 0 and json.loads(out)["tokens_per_s"] == pytest.approx(best["tokens_per_s"]), err
