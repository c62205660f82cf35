"""Every file `--emit megatron|torchtitan|deepspeed` writes passes that engine's own checks (issue 11, item 5).

The validators below restate each engine's rules independently of the emitters, from the engine source:
Megatron-LM megatron/training/arguments.py validate_args and megatron/core/transformer/transformer_config.py
(NVIDIA/Megatron-LM @d98e8a64), torchtitan v0.2.2 (torchtitan/config/job_config.py, config/manager.py,
distributed/parallel_dims.py, distributed/pipeline_parallel.py, train.py) and DeepSpeed
(deepspeed/runtime/config.py _batch_assertion, runtime/pipe/engine.py). A plan either emits a file that passes
them, or is refused with the engine's rule; the shipped plans cover both.
"""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

import pytest
import tomllib

from planner.errors import PlannerError
from planner.io.catalog import load_engine, load_hardware, load_model
from planner.launch.command import RunConfig
from planner.launch.emit import emit
from planner.plan import Plan
from planner.specs import ModelSpec

# (model, plan fields): 16 plans a new user would try, across the catalog.
PLANS = [
    ("llama3-8b", {"dp": 8, "zero": 3, "global_batch": 64, "seq_len": 8192, "recompute": "selective"}),
    ("llama3-8b", {"dp": 4, "tp": 2, "sp": True, "zero": 1, "global_batch": 64, "seq_len": 8192}),
    ("llama3-8b", {"dp": 2, "tp": 2, "sp": True, "pp": 2, "zero": 2, "global_batch": 32, "seq_len": 8192}),
    (
        "llama3-70b",
        {
            "dp": 8,
            "tp": 8,
            "sp": True,
            "pp": 4,
            "vpp": 5,
            "zero": 1,
            "global_batch": 256,
            "seq_len": 8192,
            "schedule": "interleaved",
        },
    ),
    (
        "llama3-70b",
        {
            "dp": 32,
            "tp": 8,
            "sp": True,
            "zero": 3,
            "global_batch": 512,
            "seq_len": 8192,
            "recompute": "full",
            "precision": "fp8",
        },
    ),
    (
        "llama3-405b",
        {
            "dp": 1,
            "tp": 8,
            "sp": True,
            "pp": 16,
            "vpp": 8,
            "zero": 1,
            "global_batch": 128,
            "seq_len": 8192,
            "schedule": "interleaved",
        },
    ),
    ("llama3-405b", {"dp": 8, "tp": 8, "sp": True, "pp": 16, "zero": 1, "global_batch": 512, "seq_len": 8192}),
    (
        "llama3-405b",
        {
            "dp": 2,
            "tp": 8,
            "sp": True,
            "pp": 8,
            "vpp": 2,
            "zero": 3,
            "global_batch": 64,
            "seq_len": 8192,
            "schedule": "interleaved",
        },
    ),
    (
        "gpt3-175b",
        {"dp": 16, "tp": 8, "sp": True, "pp": 8, "zero": 1, "global_batch": 1536, "seq_len": 2048, "recompute": "full"},
    ),
    (
        "gpt3-175b",
        {
            "dp": 32,
            "tp": 2,
            "sp": True,
            "pp": 16,
            "vpp": 3,
            "zero": 1,
            "global_batch": 1536,
            "seq_len": 2048,
            "schedule": "interleaved",
        },
    ),
    ("gpt3-175b", {"dp": 1024, "zero": 3, "global_batch": 1024, "seq_len": 2048, "recompute": "full"}),
    ("mixtral-8x7b", {"dp": 8, "ep": 8, "tp": 2, "sp": True, "zero": 1, "global_batch": 64, "seq_len": 4096}),
    ("mixtral-8x7b", {"dp": 16, "ep": 4, "pp": 4, "zero": 1, "global_batch": 128, "seq_len": 4096}),
    (
        "llama3-8b",
        {"dp": 1, "tp": 8, "sp": True, "cp": 4, "zero": 3, "global_batch": 8, "seq_len": 131072, "recompute": "full"},
    ),
    ("llama3-8b", {"dp": 8, "zero": 2, "global_batch": 64, "seq_len": 8192, "recompute": "full"}),
    ("llama3-70b", {"dp": 8, "pp": 8, "zero": 1, "global_batch": 256, "seq_len": 4096, "recompute": "full"}),
]
TARGETS = ("megatron", "torchtitan", "deepspeed")


def _emit(tmp_path: Path, target: str, model_name: str, fields: dict) -> Path | str:
    model, plan = load_model(model_name), Plan(**fields)
    cfg = RunConfig(model=model_name, plan=plan, hardware="h100-sxm")
    try:
        return emit(
            target,
            cfg,
            model,
            tmp_path,
            engine=load_engine("planner"),
            hardware=load_hardware("h100-sxm"),
            hardware_ref="h100-sxm",
        )
    except PlannerError as e:
        return str(e)


# ---- Megatron-LM: arguments.py validate_args, transformer_config.py __post_init__ ---------------------------
def _megatron_args(text: str) -> tuple[dict[str, str | bool], dict[str, str]]:
    env = {}
    for line in text.splitlines():
        if line.startswith("export "):
            k, _, v = line[len("export ") :].split("#")[0].strip().partition("=")
            env[k] = v
    body = text[text.index("MEGATRON_ARGS=(") + len("MEGATRON_ARGS=(") : text.rindex(")")]
    words = shlex.split(body)
    args: dict[str, str | bool] = {}
    for i, w in enumerate(words):
        if w.startswith("--"):
            nxt = words[i + 1] if i + 1 < len(words) else ""
            args[w] = nxt if nxt and not nxt.startswith("--") else True
    return args, env


def megatron_violations(text: str, model: ModelSpec, plan: Plan) -> list[str]:
    a, env = _megatron_args(text)
    num = lambda k, d=0: int(a.get(k, d))  # noqa: E731
    out = []
    tp, pp, cp, ep = (num(f"--{n}-model-parallel-size", 1) for n in ("tensor", "pipeline", "context", "expert"))
    cp = num("--context-parallel-size", 1)
    world = plan.gpus
    if world % (tp * pp * cp):  # arguments.py l.423-447
        out.append("world size not divisible by tp*pp*cp")
    dp = world // (tp * pp * cp)
    if num("--global-batch-size") % (num("--micro-batch-size") * dp):  # num_microbatches_calculator.py
        out.append("global batch not divisible by micro batch x dp")
    heads, groups = num("--num-attention-heads"), num("--num-query-groups", num("--num-attention-heads"))
    if heads % tp or (groups % tp and tp % groups):  # transformer_config.py l.1446-1468
        out.append("heads or query groups do not split over tp")
    if model.moe is not None and "--num-experts" not in a:  # a dense model would be built
        out.append("MoE model without --num-experts")
    if ep > 1 and ("--num-experts" not in a or num("--num-experts") % ep):  # arguments.py l.1654-1658
        out.append("ep needs --num-experts divisible by ep")
    vpp_flags = [
        k for k in ("--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank") if k in a
    ]
    if len(vpp_flags) > 1:  # arguments.py l.928-938
        out.append("two virtual-pipeline flags")
    layers = num("--num-layers")
    first, last = num("--decoder-first-pipeline-num-layers"), num("--decoder-last-pipeline-num-layers")
    emb, loss = "--account-for-embedding-in-pipeline-split" in a, "--account-for-loss-in-pipeline-split" in a
    eff = layers + emb + loss
    if "--num-layers-per-virtual-pipeline-stage" in a:  # arguments.py l.953-977
        per = num("--num-layers-per-virtual-pipeline-stage")
        if first or last or eff % pp or (eff // pp) % per:
            out.append("--num-layers-per-virtual-pipeline-stage does not split the layers")
        vpp = eff // pp // per
    else:
        vpp = num("--num-virtual-stages-per-pipeline-rank", 1)
    if (first or last) and (emb or loss):  # transformer_config.py l.2241-2258
        out.append("uneven first/last combined with account-for flags")
    if first or last:  # transformer_config.py l.2294-2370
        middle = pp - (first > 0) - (last > 0)
        rest = layers - first - last
        if first % vpp or last % vpp or (middle and (rest % middle or (rest // middle) % vpp)) or (not middle and rest):
            out.append("uneven first/last stages do not divide")
    elif pp > 1 and eff % (pp * vpp):  # arguments.py l.985-998
        out.append("layers (+ embedding/loss) not divisible by pp*vpp")
    fsdp = "--use-torch-fsdp2" in a
    if fsdp and (
        pp > 1
        or ep > 1
        or "--use-distributed-optimizer" in a
        or "--no-gradient-accumulation-fusion" not in a
        or "--untie-embeddings-and-output-weights" not in a
    ):  # arguments.py l.1031-1049
        out.append("torch FSDP2 with pp/ep/dist-opt/grad-accum fusion/tied embeddings")
    if fsdp and env.get("CUDA_DEVICE_MAX_CONNECTIONS") == "1":  # arguments.py l.1166-1167
        out.append("FSDP with CUDA_DEVICE_MAX_CONNECTIONS=1")
    if not fsdp and (tp > 1 or cp > 1) and env.get("CUDA_DEVICE_MAX_CONNECTIONS") != "1":  # l.1449-1479
        out.append("tp/cp > 1 without CUDA_DEVICE_MAX_CONNECTIONS=1")
    if "--overlap-param-gather" in a and not ("--use-distributed-optimizer" in a and "--overlap-grad-reduce" in a):
        out.append("--overlap-param-gather without the distributed optimizer and --overlap-grad-reduce")  # l.1024
    if cp > 1 and num("--seq-length") % (2 * cp):  # arguments.py l.1335
        out.append("seq length not divisible by 2*cp")
    m = num("--global-batch-size") // (num("--micro-batch-size") * dp)
    if vpp > 1 and (m < pp or m % pp):  # schedules.py l.1160-1180
        out.append("interleaving needs micro-batches >= pp and divisible by pp")
    if num("--max-position-embeddings") < num("--seq-length"):
        out.append("max position embeddings below seq length")
    return out


# ---- torchtitan v0.2.2 -------------------------------------------------------------------------------------
TORCHTITAN_KEYS = {  # config/job_config.py at v0.2.2: the fields the emitter may use (unknown keys raise)
    "job": {"description", "dump_folder", "print_config"},
    "model": {"name", "flavor", "hf_assets_path", "converters", "print_after_conversion"},
    "training": {
        "local_batch_size",
        "global_batch_size",
        "seq_len",
        "mixed_precision_param",
        "mixed_precision_reduce",
        "steps",
        "dtype",
        "max_norm",
        "dataset",
    },
    "parallelism": {
        "data_parallel_replicate_degree",
        "data_parallel_shard_degree",
        "fsdp_reshard_after_forward",
        "tensor_parallel_degree",
        "disable_loss_parallel",
        "enable_async_tensor_parallel",
        "pipeline_parallel_degree",
        "pipeline_parallel_schedule",
        "pipeline_parallel_microbatch_size",
        "pipeline_parallel_layers_per_stage",
        "context_parallel_degree",
        "expert_parallel_degree",
        "expert_tensor_parallel_degree",
        "module_fqns_per_model_part",
    },
    "activation_checkpoint": {"mode", "selective_ac_option"},
    "compile": {"enable", "components"},
    "quantize": {"linear"},
}
TORCHTITAN_FLAVORS = {"llama3": {"debugmodel", "8B", "70B", "405B"}}
SINGLE_STAGE = {"1F1B", "GPipe"}


def torchtitan_violations(text: str, model: ModelSpec, plan: Plan) -> list[str]:
    doc = tomllib.loads(text)
    out = [f"unknown key {s}.{k}" for s, keys in doc.items() for k in keys if k not in TORCHTITAN_KEYS.get(s, set())]
    md, tr, par = doc.get("model", {}), doc.get("training", {}), doc.get("parallelism", {})
    if md.get("flavor") not in TORCHTITAN_FLAVORS.get(md.get("name", "llama3"), set()):  # train.py 138
        out.append(f"flavor {md.get('flavor')!r} is not a torchtitan flavor (unset: the debug model)")
    rep, shard = par.get("data_parallel_replicate_degree", 1), par.get("data_parallel_shard_degree", -1)
    tp, pp, cp = (par.get(f"{n}_parallel_degree", 1) for n in ("tensor", "pipeline", "context"))
    if rep * shard * cp * tp * pp != plan.gpus:  # parallel_dims.py _validate
        out.append("dp_replicate*dp_shard*cp*tp*pp != world size")
    if tr["seq_len"] % (tp * 2 * cp):  # parallel_dims.py seq_len_divisor
        out.append("seq_len not divisible by tp*2*cp")
    local, gbs = tr["local_batch_size"], tr["global_batch_size"]
    if gbs % (local * rep * shard):  # train.py 196-215
        out.append("global batch not a multiple of local batch x data-parallel degree")
    if rep > 1 and shard == 1 and rep != plan.gpus:  # llama3 parallelize.py 148-151
        out.append("DDP has not supported > 1D parallelism")
    if tr.get("mixed_precision_param", "bfloat16") not in ("bfloat16", "float32"):
        out.append("mixed_precision_param must be bfloat16 or float32")
    if plan.precision == "fp8" and "quantize.linear.float8" not in md.get("converters", []):  # float8.py 238
        out.append("fp8 without the quantize.linear.float8 converter")
    if pp > 1:
        mbs, sched = par.get("pipeline_parallel_microbatch_size", 1), par.get("pipeline_parallel_schedule", "1F1B")
        if local % mbs:  # pipeline_parallel.py build_pipeline_schedule
            out.append("local batch not divisible by the pipeline micro-batch")
        lps = par.get("pipeline_parallel_layers_per_stage")
        stages = math.ceil((model.num_layers + 2) / lps) if lps else pp * (1 if sched in SINGLE_STAGE else 2)
        if stages % pp or stages > model.num_layers + 2:  # pipeline_parallel.py 75-109, 269-296
            out.append("pipeline stages do not divide over pp")
        per_rank = stages // pp
        if (sched in SINGLE_STAGE) != (per_rank == 1):
            out.append(f"{sched} with {per_rank} stages per rank")
        if stages != plan.pp * plan.vpp:
            out.append(f"{stages} stages, not the plan's pp*vpp = {plan.pp * plan.vpp}")
        n = local // mbs
        if sched == "Interleaved1F1B" and n % max(1, n // pp):  # torch pipelining/schedules.py
            out.append("Interleaved1F1B micro-batches not a multiple of the rounds")
    return out


# ---- DeepSpeed: runtime/config.py, runtime/pipe/engine.py ----------------------------------------------------
def deepspeed_violations(text: str, model: ModelSpec, plan: Plan) -> list[str]:
    cfg = json.loads(text)
    out = []
    dp = plan.gpus // (plan.tp * plan.pp * plan.cp)
    if cfg["train_batch_size"] != cfg["train_micro_batch_size_per_gpu"] * cfg["gradient_accumulation_steps"] * dp:
        out.append("train_batch_size != micro * grad_acc * dp (config.py _batch_assertion)")
    stage = cfg["zero_optimization"]["stage"]
    if plan.pp > 1 and stage >= 2:  # pipe/engine.py: "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism"
        out.append("ZeRO-2/3 with pipeline parallelism")
    if stage == 3 and cfg.get("tensor_parallel", {}).get("autotp_size", 1) > 1:  # engine.py _configure_tensor_parallel
        out.append("AutoTP with ZeRO-3")
    if cfg["bf16"]["enabled"] and cfg["fp16"]["enabled"]:
        out.append("bf16 and fp16 both enabled")
    return out


VALIDATORS = {"megatron": megatron_violations, "torchtitan": torchtitan_violations, "deepspeed": deepspeed_violations}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", range(len(PLANS)))
def test_emitted_files_pass_the_engines_own_checks(tmp_path, target, case):
    model_name, fields = PLANS[case]
    result = _emit(tmp_path, target, model_name, fields)
    if isinstance(result, str):  # refused: with the engine's rule, and nothing written
        assert f"--emit {target}: {target} would refuse this plan:" in result
        assert not list(tmp_path.iterdir())
        return
    violations = VALIDATORS[target](result.read_text(), load_model(model_name), Plan(**fields))
    assert not violations, f"{target} {model_name} {fields}: {violations}"


def test_the_plans_cover_emitted_and_refused_files(tmp_path):
    """Each target writes some of the plans and refuses others (so neither branch above is vacuous)."""
    for target in TARGETS:
        outcomes = [isinstance(_emit(tmp_path / f"{target}{i}", target, m, f), Path) for i, (m, f) in enumerate(PLANS)]
        assert any(outcomes) and not all(outcomes), target


def test_issue_cases():
    """The files the issue found rejected or misread are now right or refused."""
    cases = {  # (target, model, fields) -> what the file or the refusal must say
        ("torchtitan", "llama3-8b", (("dp", 8), ("zero", 3), ("global_batch", 64), ("seq_len", 8192))): 'flavor = "8B"',
        ("torchtitan", "gpt3-175b", (("dp", 8), ("zero", 3), ("global_batch", 64))): "no model",
        ("torchtitan", "mixtral-8x7b", (("dp", 8), ("zero", 3), ("global_batch", 64))): "no model",
        ("megatron", "mixtral-8x7b", (("dp", 8), ("ep", 8), ("zero", 1), ("global_batch", 64))): "--num-experts 8",
        (
            "megatron",
            "llama3-405b",
            (("dp", 8), ("tp", 8), ("sp", True), ("pp", 16), ("zero", 1), ("global_batch", 512)),
        ): "--account-for-loss-in-pipeline-split",
        (
            "deepspeed",
            "llama3-8b",
            (("dp", 4), ("pp", 2), ("zero", 2), ("global_batch", 64)),
        ): "zero=2 does not run with pipeline",
    }
    import tempfile

    for (target, model, fields), says in cases.items():
        with tempfile.TemporaryDirectory() as d:
            result = _emit(Path(d), target, model, dict(fields))
            text = result if isinstance(result, str) else result.read_text()
            assert says in text, (target, model, text[:300])
