"""Megatron-LM arguments for pretrain_gpt.py (pure), as megatron/training/arguments.py validate_args accepts them
(NVIDIA/Megatron-LM main @d98e8a64; Megatron-Core 0.12+: --num-virtual-stages-per-pipeline-rank, the uneven-pipeline
and account-for flags, --use-torch-fsdp2, --use-megatron-fsdp). The parallel, batch, recompute, overlap and
precision flags are here; the architecture's are in megatron_model.py, the precision recipes' and the per-run
settings' in megatron_settings.py.
"""

from __future__ import annotations

from collections.abc import Mapping

from planner.engine.split import MegatronSplit, plan_megatron_split
from planner.launch.emit.common import engine_torchrun, node_gpus
from planner.launch.emit.megatron_model import model_args, model_notes, model_problems
from planner.launch.emit.megatron_settings import PRECISION_FLAGS, setting_args
from planner.launch.emit.targets import Target, register
from planner.plan import Plan, nondefault_microbatch_group
from planner.specs import ModelSpec

FILE_NAME = "megatron_args.sh"
# The per-run settings the file writes (setting_args, recipe_option_args): --tp-comm-overlap, --grad-reduce-in-bf16,
# --overlap-moe-expert-parallel-comm, --moe-token-dispatcher-type, --no-overlap-p2p-communication, and the recipe
# options Megatron names as the planner prices them, fine-grained activation offloading among them (a share of the
# offload groups of named modules).
WRITES = frozenset({
    "tp_overlap", "grad_dtype", "ep_overlap", "moe_dispatcher", "recompute_modules", "optimizer_offload",
    "precision_aware_optimizer", "optimizer_moment_dtype", "fp8_param_gather", "cuda_graphs", "activation_offload",
    "offload_modules", "offload_layers", "p2p_overlap", "optimizer", "megatron_fsdp",
})  # fmt: skip
# Megatron-LM's --optimizer adam is AdamW: OptimizerConfig.decoupled_weight_decay (True) has no flag in arguments.py
# (core/optimizer/__init__.py l.559-561 reads it); sgd is SGD with momentum (--sgd-momentum, default 0.9: one moment,
# as the planner prices it).
VALUES: dict[str, tuple[object, ...]] = {"optimizer": ("adamw", "sgd")}


def format_problems(model: ModelSpec, plan: Plan) -> list[str]:
    """What Megatron's arguments cannot say (the layer split the engine's rules already refuse)."""
    return model_problems(model)


def expert_tp(plan: Plan) -> int | None:
    """The plan's expert tensor-parallel degree; None: Megatron's default, tp."""
    return plan.etp


def _split_args(model: ModelSpec, plan: Plan) -> tuple[list[str], str]:
    """The pipeline-split flags for the layout the cost model priced (engine/split.py plan_megatron_split: the
    plan's stated split, else megatron_split)."""
    if plan.pp == 1:
        return [], "pp=1: no pipeline split"
    split = plan_megatron_split(model.num_layers, plan)
    assert split is not None  # the engine's rules refuse a plan Megatron cannot split
    if split.method == "layout":  # the layout names every stage; vpp follows from it (arguments.py)
        return ["--pipeline-model-parallel-layout", layout_text(split, model.mtp_layers)], _describe(split)
    vpp = ["--num-virtual-stages-per-pipeline-rank", str(plan.vpp)] if plan.vpp > 1 else []
    if split.method == "even":
        if plan.vpp > 1:
            per = model.num_layers // (plan.pp * plan.vpp)
            return ["--num-layers-per-virtual-pipeline-stage", str(per)], f"even: {per} layers per virtual stage"
        return [], f"even: {model.num_layers // plan.pp} layers per stage"
    return vpp + _uneven_flags(split), _describe(split)


def layout_text(split: MegatronSplit, mtp_layers: int = 0) -> str:
    """--pipeline-model-parallel-layout for the split: the stages in model order separated by '|', E the embedding
    on the first, t a transformer layer, m each multi-token-prediction layer and L the loss on the last
    (docs: 'Custom Pipeline Model Parallel Layout'; Megatron-Bridge's DeepSeek-V3 recipe 'Et|(tt|)*30mL')."""
    stages = ["t" * n for n in split.sizes]
    stages[0] = "E" + stages[0]
    stages[-1] += "m" * mtp_layers + "L"
    return "|".join(stages)


def _uneven_flags(split: MegatronSplit) -> list[str]:
    if split.method == "account_embedding_loss":
        return ["--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"]
    if split.method == "account_loss":
        return ["--account-for-loss-in-pipeline-split"]
    out = ["--decoder-first-pipeline-num-layers", str(split.first)] if split.first else []  # 0: not stated
    return out + (["--decoder-last-pipeline-num-layers", str(split.last)] if split.last else [])


def _describe(split: MegatronSplit) -> str:
    """'account embedding loss: layers per chunk 0, 1 x 126, 0' (runs of equal counts collapsed)."""
    runs: list[list[int]] = []
    for n in split.sizes:
        if runs and runs[-1][0] == n:
            runs[-1][1] += 1
        else:
            runs.append([n, 1])
    text = ", ".join(f"{n} x {k}" if k > 1 else str(n) for n, k in runs)
    return f"{split.method.replace('_', ' ')}: layers per chunk {text}"


def megatron_fsdp(plan: Plan, settings: Mapping[str, object]) -> bool:
    """Whether Megatron runs the plan's ZeRO-3 as Megatron-FSDP: with ep > 1, which torch FSDP2 refuses, or where the
    run was priced with it (engine_profiles/megatron.yaml rules.zero.3.with_ep, comm.megatron_fsdp)."""
    return plan.zero == 3 and (plan.ep > 1 or settings.get("megatron_fsdp") is True)


def _zero_args(plan: Plan, settings: Mapping[str, object]) -> tuple[list[str], str]:
    # Megatron-FSDP v1 runs on the distributed optimizer (arguments.py l.1118-1176); without gradient-accumulation
    # fusion, as its functional tests run it (mcore_fsdp_adapter.py needs TE 2.10 for the fusion)
    if megatron_fsdp(plan, settings):
        flags = "--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params --use-distributed-optimizer"
        flags += " --no-gradient-accumulation-fusion --ckpt-format fsdp_dtensor"
        flags += " --overlap-grad-reduce --overlap-param-gather" if plan.dp * plan.cp > 1 else ""
        return flags.split(), f"zero=3 as Megatron-FSDP: {flags}"
    if plan.zero == 3:  # torch FSDP2: no distributed optimizer, no gradient-accumulation fusion (arguments.py)
        return ["--use-torch-fsdp2", "--no-gradient-accumulation-fusion", "--ckpt-format", "torch_dist"], (
            "zero=3: --use-torch-fsdp2 (with --no-gradient-accumulation-fusion, torch_dist checkpoints)"
        )
    a = []
    if plan.zero == 1:
        a.append("--use-distributed-optimizer")
    if plan.dp * plan.cp > 1:
        a.append("--overlap-grad-reduce")
        if plan.zero == 1:
            a.append("--overlap-param-gather")
    return a, "zero=1: --use-distributed-optimizer (+ --overlap-grad-reduce --overlap-param-gather); zero=0: DDP"


def _parallel_args(plan: Plan) -> tuple[list[str], dict[str, str]]:
    """The parallel degrees' flags, and which flag carries each (dp is implied: world / (tp·pp·cp))."""
    a = [
        "--tensor-model-parallel-size", str(plan.tp),
        "--pipeline-model-parallel-size", str(plan.pp),
        "--context-parallel-size", str(plan.cp),
        "--expert-model-parallel-size", str(plan.ep),
    ]  # fmt: skip
    etp = expert_tp(plan)
    if etp is not None:  # arguments.py: None means "equal to --tensor-model-parallel-size"
        a += ["--expert-tensor-parallel-size", str(etp)]
    m: dict[str, str] = {
        "tp": "--tensor-model-parallel-size",
        "pp": "--pipeline-model-parallel-size",
        "cp": "--context-parallel-size",
        "ep": "--expert-model-parallel-size",
        "etp": "--expert-tensor-parallel-size (left out: Megatron's default, tp)"
        if plan.etp is None
        else "--expert-tensor-parallel-size",
        "dp": f"implied: world size {plan.gpus} / (tp*pp*cp)",
        "first_stage_layers": "--decoder-first-pipeline-num-layers",
        "last_stage_layers": "--decoder-last-pipeline-num-layers",
    }
    return a, m


def recompute_args(plan: Plan, settings: Mapping[str, object]) -> list[str]:
    """The recompute level, and under selective recompute the modules it re-runs where the plan names them
    (TransformerConfig recompute_modules; Megatron's default is core_attn)."""
    if plan.recompute == "selective":
        modules = settings.get("recompute_modules")
        if isinstance(modules, (list, tuple)) and not modules:  # re-runs nothing: no recompute, which Megatron
            return []  # says by no flag (--recompute-modules takes one module or more)
        named = ["--recompute-modules", *map(str, modules)] if isinstance(modules, (list, tuple)) else []
        return ["--recompute-granularity", "selective", *named]
    if plan.recompute == "full":
        return ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
    return []


def megatron_args(
    model: ModelSpec, plan: Plan, settings: Mapping[str, object] | None = None
) -> tuple[list[str], dict[str, str]]:
    """Arguments for Megatron-LM's pretrain_gpt.py, and which flag carries each plan field."""
    a, m = _parallel_args(plan)
    split, m["vpp"] = _split_args(model, plan)
    a += split
    m["schedule"] = (
        "interleaved: set by the virtual-stage flags (+ --microbatch-group-size-per-virtual-pipeline-stage where "
        "pp does not divide the micro-batches)"
        if plan.schedule == "interleaved"
        else f"{plan.schedule}: Megatron runs 1F1B without virtual stages"
    )
    if (group := nondefault_microbatch_group(plan)) is not None:
        a += ["--microbatch-group-size-per-virtual-pipeline-stage", str(group)]
    if plan.sp:
        a.append("--sequence-parallel")
    m["sp"] = "--sequence-parallel"
    zero, m["zero"] = _zero_args(plan, settings or {})
    a += zero + recompute_args(plan, settings or {})
    m["recompute"] = "--recompute-granularity"
    a += [
        "--micro-batch-size",
        str(plan.micro_batch),
        "--global-batch-size",
        str(plan.global_batch),
        "--seq-length",
        str(plan.seq_len),
    ]
    m.update(micro_batch="--micro-batch-size", global_batch="--global-batch-size", seq_len="--seq-length")
    a += PRECISION_FLAGS[plan.precision]
    m["precision"] = "--bf16 / --fp16 / --fp8-format with --fp8-recipe / --fp4-format (fp32: no flag)"
    a += model_args(model, seq_len=plan.seq_len, dispatcher=str((settings or {}).get("moe_dispatcher", "alltoall")))
    return a + setting_args(model, plan, settings or {}), m


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


def device_connections(plan: Plan, architecture: str | None = None) -> str | None:
    """CUDA_DEVICE_MAX_CONNECTIONS as Megatron requires it: 1 with tp > 1 or cp > 1 before Blackwell
    (arguments.py l.1452-1479 @d98e8a64: "Using tensor model parallelism or context parallelism require setting
    ... to 1" where get_device_arch_version() < 10; "no longer exists since the Blackwell architecture"; an
    unknown GPU gets the rule), but not 1 under FSDP ("FSDP requires CUDA_DEVICE_MAX_CONNECTIONS > 1 or unset")."""
    if plan.zero == 3 or architecture == "blackwell":
        return None
    return "1" if (plan.tp > 1 or plan.cp > 1) else None


def megatron_file(
    model: ModelSpec,
    plan: Plan,
    settings: Mapping[str, object] | None = None,
    *,
    nodes: int = 1,
    per_node: int | None = None,
    architecture: str | None = None,
) -> str:
    """The arguments as a bash array, and the torchrun line that runs pretrain_gpt.py with them on `nodes` nodes
    of `per_node` GPUs (default: the plan's GPUs on one node) of `architecture` (None: not known)."""
    args, m = megatron_args(model, plan, settings)
    lines: list[str] = []
    for arg in args:  # one flag per line, with its value
        if arg.startswith("--") or not lines:
            lines.append(arg)
        else:
            lines[-1] += f" {_quote(arg)}"
    body = "\n  ".join(lines)
    program = 'pretrain_gpt.py "${MEGATRON_ARGS[@]}"'
    run = "from Megatron-LM's folder" if nodes == 1 else "on each node, MASTER_ADDR set to one node's address"
    conn = device_connections(plan, architecture)
    env = (
        f"export CUDA_DEVICE_MAX_CONNECTIONS={conn}  # required by Megatron with tp/cp > 1 (H100 and earlier)\n"
        if conn
        else "unset CUDA_DEVICE_MAX_CONNECTIONS  # FSDP needs it > 1 or unset\n"
        if plan.zero == 3
        else ""
    )
    if "--fine-grained-activation-offloading" in args:  # arguments.py l.1938-1940: TE 2.10+ offloads weights without
        env += "export NVTE_CPU_OFFLOAD_V1=1  # fine-grained activation offloading with Transformer Engine 2.10+\n"
    return (
        f"# Megatron-LM arguments for pretrain_gpt.py; plan: {plan.headline()}\n"
        f"# pipeline split: {m['vpp']}\n"
        + "".join(line + "\n" for line in model_notes(model))
        + "# The NullTokenizer stands for your tokenizer (same vocabulary size); add the data (or --mock-data) and\n"
        f"# optimizer arguments of your run; then, {run}:\n"
        f"#   {engine_torchrun(nodes, node_gpus(plan, nodes, per_node), program)} ...\n"
        f"{env}MEGATRON_ARGS=(\n  {body}\n)\n"
    )


register(
    Target(
        "megatron",
        3,
        FILE_NAME,
        lambda o: megatron_file(
            o.model, o.cfg.plan, o.settings, nodes=o.nodes, per_node=o.per_node, architecture=o.architecture
        ),
        engine="megatron",
        writes=WRITES,
        values=VALUES,
        format_problems=format_problems,
        precisions=frozenset(PRECISION_FLAGS) - {"fp32", "bf16", "fp16", "fp8"},
    )
)
