"""The Engine: what one training stack does with a plan, loaded from engine_profiles/NAME.yaml.

A plan is run by a training stack (Megatron-LM, torchtitan, DeepSpeed, llm-foundry, or this project's own
launch worker), and the stack decides which combinations run at all (rules), what memory holds (ZeRO stages
as the stack realises them, gradient dtype, vocabulary padding), which collectives run when and what
overlaps (comm), and which kernels compute the layer (kernels). An engine profile is data, like a hardware
profile: every field is commented in the YAML with the engine source file it comes from. The cost model and
the launch worker both read it, so they cannot disagree.

Per-run choices a runs file's `software` block or the command line can change (attention kernel, TP
overlap, torch.compile, optimizer, selective-recompute policy) are fields too; ``Engine.configured`` returns
a copy with them overridden. ``fitted`` holds what `planner calibrate` fitted for this engine on each
hardware profile, with its provenance and the residual spread behind the error bars.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationError, model_validator

from planner.engine.architectures import ModelFeature, ModelFile
from planner.engine.execution import Comm, Kernels, MoE
from planner.engine.fitted import Behaviour, Fitted
from planner.engine.memory_settings import Memory
from planner.engine.settings import (
    LIST_SETTINGS,
    SETTINGS,
    DispatchDtype,
    Dispatcher,
    RecipeOption,
    Switch,
    WordSetting,
    check_setting_words,
    listed,
)
from planner.engine.split import Split
from planner.engine.zero import ZeroStage, check_stage_tables
from planner.errors import PlannerError
from planner.plan import RECOMPUTES, Plan, Recompute, Schedule
from planner.precision import RECIPE_NAMES, Architecture
from planner.specs import Frozen


class Rules(Frozen):
    """What runs: combinations outside these are rejected with the engine's rule as the reason."""

    zero: dict[int, ZeroStage] = Field(min_length=1, description="the ZeRO stages it runs without pipeline parallelism")
    zero_pp: dict[int, ZeroStage] | None = Field(
        None,
        description="the ZeRO stages it runs with pp > 1, and how (default: the same as zero); a stage "
        "absent here does not run with pipeline parallelism",
    )
    schedules: tuple[Schedule, ...] = Field(("gpipe", "1f1b", "interleaved"), min_length=1)
    shards_one_rank: bool = Field(
        True,
        description="false: at dp·cp = 1 the engine applies no FSDP, whatever the ZeRO stage, and the plan runs as "
        "its zero 0 does (torchtitan v0.2.2 parallelize.py applies FSDP only where parallel_dims.fsdp_enabled, "
        "dp_shard or cp > 1; the planner worker, launch/parallelize.py data_parallel_kind)",
    )
    mixed_precision_needs_fsdp: bool = Field(
        False,
        description="without FSDP (dp·cp = 1) the engine trains in fp32 when tp or pp > 1: a 16-bit or fp8 plan "
        "there is refused (torchtitan v0.2.2 distributed/utils.py maybe_enable_amp: 'Mixed precision training "
        "with TP or PP is only supported when FSDP/HSDP/CP is enabled')",
    )
    interleaved_microbatches: Literal["multiple_of_pp", "grouped", "torch_looped"] = Field(
        "multiple_of_pp",
        description="multiple_of_pp: m ≥ pp and m % pp == 0 (Megatron before Core 0.10); grouped: m ≥ pp, each "
        "virtual stage taking the micro-batches in groups (Megatron-Core 0.10+, "
        "--microbatch-group-size-per-virtual-pipeline-stage; plan.py microbatch_group); torch_looped: "
        "m % max(1, m // pp) == 0 (torch.distributed.pipelining)",
    )
    interleaved_pp_without_p2p_overlap: int = Field(
        2,
        ge=2,
        description="the least pp the interleaved schedule runs with pipeline sends not overlapped (Megatron: 3, "
        "arguments.py validate_args: two ranks would exchange several sends and receives per batch)",
    )
    tensor_parallel: bool = True
    sequence_parallel: Literal["optional", "required", "never"] = Field(
        "optional",
        description="Megatron-style sequence parallelism with tp > 1: optional, always on "
        "(torchtitan), or not available",
    )
    pipeline_parallel: bool = True
    context_parallel: bool = True
    seq_len_divisor: Literal["none", "2cp", "2tpcp"] = Field(
        "none",
        description="seq_len must divide by 2·cp when cp > 1 (Megatron), by 2·tp·cp always (torchtitan), or nothing",
    )
    expert_parallel: bool = True
    expert_tensor_parallel: Literal["any", "tp_or_1", "tp"] = Field(
        "tp",
        description="the expert tensor-parallel degrees it runs: any divisor that folds (Megatron-Core, "
        "--expert-tensor-parallel-size), tp or 1 (torchtitan v0.2 expert_tensor_parallel_degree), or tp only",
    )
    moe_tp_needs_sp: bool = Field(
        False, description="ep > 1 with tp > 1 needs sequence parallelism (Megatron's moe_layer.py raises without)"
    )
    switches: tuple[Switch, ...] = Field(
        (),
        description="the on/off settings it has (tp_overlap: TP communication overlap; compile: torch.compile of "
        "the model; compiled_loss: of the loss); one turned on that it lacks is refused",
    )
    switch_needs: dict[Switch, Switch] = Field(
        default_factory=dict,
        description="a switch that runs only with another one on (torchtitan's async TP needs the model compiled)",
    )
    setting_words: dict[WordSetting, tuple[str, ...]] = Field(
        default_factory=dict,
        description="for the per-run settings that take a word (optimizer, attention, selective_recompute, "
        "zero3_gather, rmsnorm, grad_dtype), the words the engine runs; a run that sets another is refused; a "
        "setting not listed: any the planner models",
    )
    moe_dispatchers: tuple[Dispatcher, ...] = Field(
        ("alltoall",), description="the MoE token dispatchers it has (moe.dispatcher must be one)"
    )
    moe_dispatch_dtypes: tuple[DispatchDtype, ...] = Field(
        ("bf16",), description="the dtypes it dispatches MoE tokens in (moe.dispatch_dtype must be one)"
    )
    moe_capacity_dispatchers: tuple[Dispatcher, ...] = Field(
        ("alltoall",),
        description="the dispatchers with which it drops tokens at the model's capacity factor "
        "(moe.capacity_factor); empty: it routes dropless only",
    )
    ep_overlap: Literal["none", "combined_1f1b", "dualpipe"] = Field(
        "none",
        description="how the engine can hide the MoE dispatch/combine all-to-alls behind compute (moe.ep_overlap "
        "turns it on): combined_1f1b = Megatron's --overlap-moe-expert-parallel-comm, one micro-batch's "
        "all-to-all behind another's compute, with Megatron's conditions on the plan (engine/rules.py); "
        "dualpipe = the DualPipe schedule's paired chunks; none = it cannot, and moe.ep_overlap is refused",
    )
    model_features: tuple[ModelFeature, ...] | None = Field(
        None,
        description="the model features beyond a plain GPT/Llama transformer the engine implements (MoE, MLA, "
        "Mamba-2 hybrids, sliding-window and chunked attention, sinks, q/k norms, sandwich norms, MTP, no position "
        "embedding: engine/architectures.py); a model with another is refused; null: any (the engine trains the "
        "PyTorch or Hugging Face module it is handed)",
    )
    model_files: tuple[ModelFile, ...] = Field(
        (),
        description="where the engine builds the model from files of its own (torchtitan/models/NAME), each with "
        "its features and the dimensions it does not run: a model is trained by the first whose features hold all "
        "of its own, and one that none holds is refused; empty: the features combine freely",
    )
    fp8: bool = True
    precision_recipes: dict[str, tuple[Architecture, ...]] = Field(
        default_factory=dict,
        description="the named precision recipes it runs (precision.py), each with the GPU architectures its "
        "quantization library accepts; a recipe absent here, or a GPU of another architecture, is refused",
    )
    options: tuple[RecipeOption, ...] = Field(
        (),
        description="the memory and speed options it offers (recompute modules, activation and optimizer offload, "
        "the precision-aware optimizer, fp8 parameter gather, CUDA graphs); the others are refused when set",
    )
    recompute: tuple[Recompute, ...] = RECOMPUTES
    vocab_padding: int = Field(
        0,
        ge=0,
        description="the vocabulary is padded to a multiple of this x tp (Megatron's "
        "--make-vocab-size-divisible-by, default 128); 0 = not padded",
    )
    vocab_divisible_by_tp: bool = Field(
        False, description="the vocabulary must divide by tp (no padding of the embedding)"
    )
    kv_head_replication: bool = Field(
        True,
        description="tp may exceed num_kv_heads, each kv head replicated on tp / kv ranks (Megatron); "
        "false: tp must divide num_kv_heads",
    )
    pipeline_split: Split = Field(
        "even",
        description="how layers split over (virtual) stages: even (the first and last chunk get fewer "
        "when they do not divide), megatron (even, or --decoder-first/last-pipeline-num-"
        "layers, or the embedding and loss counted as layers), torchtitan (the embedding "
        "and the output each count as 0 or 1 layer: first/last_stage_less_layers)",
    )

    @model_validator(mode="after")
    def _check(self) -> Rules:
        if not self.shards_one_rank and 0 not in self.zero:
            raise ValueError("shards_one_rank: false runs dp·cp = 1 as zero 0, which `zero` must then list")
        unknown = sorted(set(self.precision_recipes) - set(RECIPE_NAMES))
        if unknown:
            raise ValueError(f"precision_recipes: {unknown} are not recipes; known: {list(RECIPE_NAMES)}")
        check_setting_words(self.setting_words)
        check_stage_tables(self.zero, self.zero_pp or {})
        beyond = {x for f in self.model_files for x in f.features} - set(self.model_features or ())
        if self.model_features is not None and beyond:
            raise ValueError(f"model_files: {sorted(beyond)} are not in model_features")
        return self

    def runs_zero(self, zero: int) -> bool:
        """Whether the engine runs ZeRO stage `zero` at any pipeline degree."""
        return zero in self.zero or zero in (self.zero_pp or {})

    def stages(self, pp: int) -> dict[int, ZeroStage]:
        """The ZeRO stages runnable at this pipeline degree, and how."""
        return self.zero if pp == 1 or self.zero_pp is None else self.zero_pp

    def run_stage(self, zero: int, *, pp: int, dp_cp: int, precision: str, ep: int, megatron_fsdp: bool) -> ZeroStage:
        """How the engine runs ZeRO stage `zero` over dp_cp ranks at this precision, ep and comm.megatron_fsdp: as
        zero 0 where it shards nothing over one rank (shards_one_rank), else as the stage says."""
        stage = (self.stages(pp).get(0) or self.zero[0]) if dp_cp == 1 and not self.shards_one_rank else None
        return (stage or self.stages(pp)[zero]).running(precision, ep=ep, megatron_fsdp=megatron_fsdp)


class Engine(Frozen):
    """engine_profiles/NAME.yaml: what one training stack does with a plan."""

    name: str
    description: str = ""
    source: str = Field("", description="the engine version and files this profile was read from")
    rules: Rules
    memory: Memory = Memory()
    kernels: Kernels = Kernels()
    comm: Comm = Comm()
    moe: MoE = MoE()
    fitted: dict[str, Fitted] = Field(default_factory=dict, description="by hardware profile name")
    behaviour: Behaviour | None = Field(None, description="what it does on any GPU (engine/fitted.py)")
    aliases: tuple[str, ...] = Field((), description="other names the catalog finds this entry by (case-insensitive)")
    installable: bool = Field(
        True,
        description="a stack users can install and run; false for an in-house stack described from its reports "
        "(hai-llm), kept to check the cost model against them: named it is used, `--engine all` leaves it out",
    )
    variant_of: str | None = Field(
        None, description="a search variant of this engine (search --recipe-options): the profile it was made from"
    )
    variant_settings: dict[str, object] = Field(
        default_factory=dict,
        description="the per-run settings (SETTINGS) that make the variant, as a plan file keeps them",
    )
    profile_settings: dict[str, object] | None = Field(
        None,
        exclude=True,
        description="the per-run settings of the profile as it was loaded, before `configured` changed any (what "
        "given_settings compares with: a profile read from a file is its own baseline); None: never configured",
    )

    def zero_stage(self, p: Plan, zero: int | None = None) -> ZeroStage:
        """How this engine runs the plan's ZeRO stage (or `zero` in its place) with the plan's other dimensions and
        the run's settings (the plan must pass the engine's rules)."""
        z, fsdp = p.zero if zero is None else zero, self.comm.megatron_fsdp
        return self.rules.run_stage(z, pp=p.pp, dp_cp=p.dp * p.cp, precision=p.precision, ep=p.ep, megatron_fsdp=fsdp)

    def factors(self, hardware: str, proxy: str | None = None) -> Fitted:
        """The fitted factors for a hardware profile, or for its calibration proxy (none fitted: neutral)."""
        return self.fitted.get(hardware) or (self.fitted.get(proxy) if proxy else None) or Fitted()

    def setting(self, name: str) -> object:
        """The value of one per-run setting (SETTINGS' name) in this profile."""
        block, field = SETTINGS[name]
        return getattr(getattr(self, block), field)

    def settings(self) -> dict[str, object]:
        """Every per-run setting's value in this profile, by SETTINGS' name."""
        return {name: self.setting(name) for name in SETTINGS}

    def configured(self, **settings: object) -> Engine:
        """A copy with per-run choices overridden (None keeps the profile's default): SETTINGS' names, checked by
        the blocks' own validation (one PlannerError naming the setting and what is valid)."""
        unknown = sorted(set(settings) - set(SETTINGS))
        if unknown:
            raise PlannerError(f"unknown engine setting(s) {', '.join(unknown)}; valid: {', '.join(SETTINGS)}")
        if settings.get("compile") is True and settings.get("compiled_loss") is None:
            settings = {**settings, "compiled_loss": self.memory.loss_compiles_with_model or None}
        blocks: dict[str, dict[str, object]] = {}
        for name, value in settings.items():
            if isinstance(value, str) and name in LIST_SETTINGS and not listed(value):  # '' or ',': a slip
                raise PlannerError(
                    f"{name} {value!r} names no module; give a comma list of {', '.join(LIST_SETTINGS[name])}"
                )
            if value is not None:
                block, field = SETTINGS[name]
                blocks.setdefault(block, {})[field] = listed(value) if name in LIST_SETTINGS else value
        if (
            settings.get("offload_modules")
            and settings.get("activation_offload") is None
            and not self.memory.activation_offload
        ):
            blocks["memory"]["activation_offload"] = 1.0  # Megatron's --activation-offload-fraction default
        if not blocks:
            return self
        base = self.profile_settings
        update: dict[str, object] = {"profile_settings": base if base is not None else self.settings()}
        for block, values in blocks.items():
            current = getattr(self, block)
            try:
                update[block] = type(current).model_validate({**current.model_dump(), **values})
            except ValidationError as e:
                first = {err["loc"][0]: err for err in reversed(e.errors())}  # a setting's first error says it
                bad = "; ".join(
                    f"{'.'.join(map(str, err['loc']))}={err.get('input')!r}: {err['msg'].removeprefix('Value error, ')}"
                    for err in first.values()
                )
                raise PlannerError(f"engine setting {bad}") from None
        return self.model_copy(update=update)
