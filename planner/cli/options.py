"""The command-line options, declared once (name, type, range, help) as typer Annotated types, and the groups of
them that commands share (`with_options`): every command spells --tp, --micro-batch, ... the same way, with the
same checks and help (DESIGN.md "Common options"). The engine settings' options are cli/engine_options.py, the
callbacks that check a value cli/callbacks.py.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass
from inspect import Parameter
from typing import Annotated, Any, Optional, TypeVar, get_args

import typer

from planner.cli.callbacks import catalog_names, finite, nonempty, words
from planner.cli.engine_options import (
    ActivationOffloadOpt,
    CompiledLossOpt,
    CompileOpt,
    CudaGraphsOpt,
    EdgeGroupsOpt,
    EpOverlapOpt,
    Fp8ParamGatherOpt,
    GradDtypeOpt,
    MasterCopyOpt,
    MegatronFsdpOpt,
    MoeDispatchDtypeOpt,
    MoeDispatcherOpt,
    MoeImbalanceOpt,
    MomentDtypeOpt,
    NoFlashOpt,
    OffloadLayersOpt,
    OffloadModulesOpt,
    OptimizerOffloadOpt,
    OptimizerOpt,
    P2pOverlapOpt,
    PrecisionAwareOpt,
    RecomputeModulesOpt,
    RmsnormOpt,
    SelectivePolicyOpt,
    TpOverlapOpt,
    Zero3GatherOpt,
)
from planner.cluster.fabric import CHECKPOINT_BYTES_PER_S_RANGE, MTBF_HOURS_RANGE
from planner.explore.space import RESTART_MINUTES_RANGE, TOKENS_RANGE
from planner.plan import MAX_BATCH, MAX_DEGREE, RECOMPUTES, SCHEDULES
from planner.specs import MAX_LAYERS, MAX_SEQ_LEN, Precision


def _named(kind: str, help_: str, *flags: str) -> Any:
    """--model / --hardware: a catalog name (completed from the catalog's `kind`) or a file."""
    return typer.Option(*flags, callback=nonempty, autocompletion=catalog_names(kind), help=help_)


_MODEL_HELP, _HARDWARE_HELP = "catalog name, model YAML, or HF config.json", "catalog name or hardware profile YAML"
_MODEL = _named("models", f"{_MODEL_HELP} (default: the --plan file's)", "--model", "-m")
ModelOpt = Annotated[str, _MODEL]
MaybeModelOpt = Annotated[Optional[str], _MODEL]  # launch: the --plan file may name it
HardwareOpt = Annotated[Optional[str], _named("hardware", f"{_HARDWARE_HELP} (default: h100-sxm, or the --plan file's)",
                                              "--hardware")]  # fmt: skip
# search and scale take no --plan: their help does not offer one (it did: audit)
SearchModelOpt = Annotated[str, _named("models", _MODEL_HELP, "--model", "-m")]
SearchHardwareOpt = Annotated[Optional[str], _named("hardware", f"{_HARDWARE_HELP} (default: h100-sxm)", "--hardware")]
PowerLimitOpt = Annotated[
    Optional[float],
    typer.Option(
        "--power-limit",
        help="board power cap in W (nvidia-smi -pl): the GPU's compute peaks scale with the clock the cap sustains "
        "(P = P_idle + c f^3); HBM and links do not; a GPU whose profile states its idle power",
    ),
]
GpusOpt = Annotated[
    Optional[int], typer.Option("--gpus", min=1, max=MAX_DEGREE, help="GPUs in all; derives the degree left out (dp)")
]
TpOpt = Annotated[Optional[int], typer.Option("--tp", min=1, max=MAX_DEGREE, help="tensor-parallel degree")]
PpOpt = Annotated[Optional[int], typer.Option("--pp", min=1, max=MAX_DEGREE, help="pipeline-parallel degree")]
DpOpt = Annotated[Optional[int], typer.Option("--dp", min=1, max=MAX_DEGREE, help="data-parallel degree")]
CpOpt = Annotated[Optional[int], typer.Option("--cp", min=1, max=MAX_DEGREE, help="context-parallel degree")]
EpOpt = Annotated[
    Optional[int],
    typer.Option(
        "--ep",
        min=1,
        max=MAX_DEGREE,
        help="expert-parallel degree (ep x etp within tp x cp x dp, as Megatron folds it)",
    ),
]
EtpOpt = Annotated[
    Optional[int],
    typer.Option(
        "--etp", min=1, max=MAX_DEGREE, help="expert tensor-parallel degree (default: tp; ep x etp within tp x cp x dp)"
    ),
]
VppOpt = Annotated[Optional[int], typer.Option("--vpp", min=1, max=MAX_DEGREE, help="virtual pipeline stages per rank")]
SpOpt = Annotated[Optional[bool], typer.Option("--sp/--no-sp", help="Megatron sequence parallelism")]
ZeroOpt = Annotated[Optional[int], typer.Option("--zero", min=0, max=3, help="ZeRO/FSDP stage 0-3")]
RecomputeOpt = Annotated[
    Optional[str], typer.Option("--recompute", help=" | ".join(RECOMPUTES), autocompletion=words(RECOMPUTES))
]
MicroBatchOpt = Annotated[
    Optional[int], typer.Option("--micro-batch", min=1, max=MAX_BATCH, help="sequences per micro-batch")
]
GlobalBatchOpt = Annotated[
    Optional[int], typer.Option("--global-batch", min=1, max=MAX_BATCH, help="sequences per step")
]
SeqLenOpt = Annotated[Optional[int], typer.Option("--seq-len", min=1, max=MAX_SEQ_LEN, help="tokens per sequence")]
PrecisionOpt = Annotated[
    Optional[str],
    typer.Option(
        "--precision",
        autocompletion=words(get_args(Precision)),
        help="fp32 | bf16 | fp16 | fp8 (the engine's default fp8 recipe) | fp8-delayed | fp8-current | fp8-rowwise "
        "| fp8-rowwise-gw-hp | fp8-blockwise | mxfp8 | nvfp4 (named recipes: see `planner engines show NAME`)",
    ),
]
ScheduleOpt = Annotated[
    Optional[str], typer.Option("--schedule", help=" | ".join(SCHEDULES), autocompletion=words(SCHEDULES))
]
_STAGE = "transformer layers on the {0} pipeline rank, the middle ranks sharing the rest evenly (Megatron-LM "
_STAGE += "--decoder-{0}-pipeline-num-layers; default: the engine's own split)"
FirstStageLayersOpt = Annotated[
    Optional[int], typer.Option("--first-stage-layers", min=1, max=MAX_LAYERS, help=_STAGE.format("first"))
]
LastStageLayersOpt = Annotated[
    Optional[int], typer.Option("--last-stage-layers", min=1, max=MAX_LAYERS, help=_STAGE.format("last"))
]
PlanFileOpt = Annotated[
    Optional[str],
    typer.Option(
        "--plan",
        callback=nonempty,
        help="a saved plan (search --save) or a YAML mapping of plan fields; flags override it",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="machine-readable output on stdout")]
EngineOpt = Annotated[
    Optional[str],
    typer.Option(
        "--engine",
        callback=nonempty,
        autocompletion=catalog_names("engines"),
        help="the training stack that runs the plan: catalog name or profile YAML (see `planner engines`; "
        "default: megatron, or the --plan file's)",
    ),
]
EnginesOpt = Annotated[
    Optional[str],
    typer.Option(
        "--engine",
        callback=nonempty,
        autocompletion=catalog_names("engines"),
        help="the training stack(s): a catalog name, a profile YAML, a comma list, or 'all' to rank plans "
        "across every engine (see `planner engines`; default: megatron)",
    ),
]

# Runs and failures: their ranges are explore/space.py's, which the Python API checks too.
TokensOpt = Annotated[
    Optional[float],
    typer.Option("--tokens", callback=finite(*TOKENS_RANGE), help="tokens to train: time and GPU-hours"),
]
MtbfOpt = Annotated[
    Optional[float],
    typer.Option("--mtbf-hours", callback=finite(*MTBF_HOURS_RANGE), help="mean time between failures, hours (>= 1)"),
]
MtbfPerOpt = Annotated[str, typer.Option("--mtbf-per", help="gpu | node: what --mtbf-hours is per")]
CheckpointBwOpt = Annotated[
    Optional[float],
    typer.Option(
        "--checkpoint-bandwidth",
        callback=finite(*CHECKPOINT_BYTES_PER_S_RANGE),
        help="checkpoint write bandwidth of the whole job, bytes/s, >= 1e6 (default: the profile's per node x nodes)",
    ),
]
RestartOpt = Annotated[
    Optional[float],
    typer.Option(
        "--restart-minutes",
        callback=finite(*RESTART_MINUTES_RANGE),
        help="wall time a failure costs besides the lost work: detection, a new node, restart, communicator init, "
        "reading the checkpoint (default 10: Meta's FT-HSDP at 100K GPUs)",
    ),
]


# ---- options declared once, shared by every command that takes them ---------------------------------------
def _catalogs(value: list[str] | None) -> list[str] | None:
    """--catalog DIR (repeatable): user catalogs searched before the shipped ones, set before anything loads."""
    if value:
        from planner.io.catalog import set_user_catalogs

        missing = [d for d in value if not os.path.isdir(d)]
        if missing:
            raise typer.BadParameter(
                f"{missing[0]!r} is not a directory; give a folder holding model_specs/, hardware_profiles/ "
                "or engine_profiles/"
            )
        set_user_catalogs(value)
    return value


CatalogOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--catalog",
        callback=_catalogs,
        is_eager=True,
        help="a folder of your own model_specs/, hardware_profiles/, engine_profiles/ (repeatable), searched "
        "before PLANNER_CATALOG_PATH, ~/.config/planner and the shipped catalogs",
    ),
]


@dataclass(frozen=True)
class Opt:
    """One shared option: the parameter name the command receives it by, its typer type and its default."""

    name: str
    annotation: Any
    default: Any = None


WHAT = (Opt("model", ModelOpt), Opt("hardware", HardwareOpt), Opt("engine", EngineOpt), Opt("gpus", GpusOpt))
SEARCH_WHAT = (Opt("model", SearchModelOpt), Opt("hardware", SearchHardwareOpt), *WHAT[2:])
POWER = (Opt("power_limit", PowerLimitOpt),)
PLAN_FIELDS = (
    Opt("tp", TpOpt), Opt("pp", PpOpt), Opt("dp", DpOpt), Opt("cp", CpOpt), Opt("ep", EpOpt), Opt("etp", EtpOpt),
    Opt("vpp", VppOpt),
    Opt("sp", SpOpt), Opt("zero", ZeroOpt), Opt("recompute", RecomputeOpt), Opt("micro_batch", MicroBatchOpt),
    Opt("global_batch", GlobalBatchOpt), Opt("seq_len", SeqLenOpt), Opt("precision", PrecisionOpt),
    Opt("schedule", ScheduleOpt), Opt("first_stage_layers", FirstStageLayersOpt),
    Opt("last_stage_layers", LastStageLayersOpt),
)  # fmt: skip
PLAN_FILE = (Opt("plan", PlanFileOpt),)
ENGINE_SETTINGS = (
    Opt("optimizer", OptimizerOpt), Opt("selective_policy", SelectivePolicyOpt), Opt("no_flash", NoFlashOpt, False),
    Opt("tp_overlap", TpOverlapOpt), Opt("p2p_overlap", P2pOverlapOpt), Opt("zero3_gather", Zero3GatherOpt),
    Opt("fsdp_edge_groups", EdgeGroupsOpt), Opt("megatron_fsdp", MegatronFsdpOpt),
    Opt("compile", CompileOpt), Opt("rmsnorm", RmsnormOpt), Opt("grad_dtype", GradDtypeOpt),
    Opt("master_copy", MasterCopyOpt), Opt("compiled_loss", CompiledLossOpt),
    Opt("moe_dispatcher", MoeDispatcherOpt), Opt("ep_overlap", EpOverlapOpt), Opt("moe_imbalance", MoeImbalanceOpt),
    Opt("moe_dispatch_dtype", MoeDispatchDtypeOpt),
    Opt("recompute_modules", RecomputeModulesOpt), Opt("activation_offload", ActivationOffloadOpt),
    Opt("offload_modules", OffloadModulesOpt), Opt("offload_layers", OffloadLayersOpt),
    Opt("optimizer_offload", OptimizerOffloadOpt), Opt("precision_aware_optimizer", PrecisionAwareOpt),
    Opt("optimizer_moment_dtype", MomentDtypeOpt), Opt("fp8_param_gather", Fp8ParamGatherOpt),
    Opt("cuda_graphs", CudaGraphsOpt),
)  # fmt: skip
RUN = (
    Opt("tokens", TokensOpt), Opt("mtbf_hours", MtbfOpt), Opt("mtbf_per", MtbfPerOpt, "gpu"),
    Opt("checkpoint_bandwidth", CheckpointBwOpt), Opt("restart_minutes", RestartOpt),
)  # fmt: skip
CATALOG = (Opt("catalog", CatalogOpt),)


def replaced(group: tuple[Opt, ...], **annotations: Any) -> tuple[Opt, ...]:
    """The group with some options' types replaced (search takes comma lists where a plan takes one value)."""
    return tuple(Opt(o.name, annotations.get(o.name, o.annotation), o.default) for o in group)


def without(group: tuple[Opt, ...], *names: str) -> tuple[Opt, ...]:
    return tuple(o for o in group if o.name not in names)


F = TypeVar("F", bound=Callable[..., Any])


def with_options(*groups: tuple[Opt, ...], after: str | None = None) -> Callable[[F], F]:
    """A command whose first parameter, `opts: dict[str, Any]`, receives the shared options of `groups` by name;
    its other parameters are its own options. typer sees one signature: the shared options, declared once here
    (name, type, range, help), then the command's own (or, with `after`, the command's own up to that parameter,
    the shared ones, then the rest: the order --help lists them in)."""

    def deco(fn: F) -> F:
        shared = [o for g in groups for o in g]
        names = [o.name for o in shared]
        own = [p for p in inspect.signature(fn, eval_str=True).parameters.values() if p.name != "opts"]
        kw = Parameter.KEYWORD_ONLY
        mine = [p.replace(kind=kw) for p in own]
        cut = next(i + 1 for i, p in enumerate(own) if p.name == after) if after else 0
        params = [*mine[:cut], *(Parameter(o.name, kw, default=o.default, annotation=o.annotation) for o in shared)]
        params += mine[cut:]

        @functools.wraps(fn)
        def command(**kwargs: Any) -> Any:
            opts = {n: kwargs.pop(n) for n in names}
            return fn(opts, **kwargs)

        del command.__wrapped__  # typer must read the signature below, not fn's
        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command  # type: ignore[return-value]

    return deco
