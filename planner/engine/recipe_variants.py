"""The variants `search --recipe-options` ranks beside each engine: the engine with the memory and speed options
current recipes combine, where it offers them (engine/recipes.py checks what each variant may run with).
"""

from __future__ import annotations

from planner.engine.profile import Engine
from planner.errors import PlannerError
from planner.precision import RECIPES
from planner.specs import ModelSpec


def option_variants(
    engine: Engine, model: ModelSpec, precision: str, given: frozenset[str] = frozenset()
) -> list[Engine]:
    """The engine with its memory and speed options, for `search --recipe-options`: a short ladder of settings current
    Megatron-Bridge recipes combine (the DeepSeek-V3 H100 recipe: the precision-aware optimizer with bf16 moments,
    recipes/deepseek/h100/deepseek_v3.py l.221-225), each variant adding memory savings to the one before, only
    where the engine offers the option and the model or recipe can use it:
    pao (precision-aware optimizer, bf16 moments); +modules (recompute of the output-discarding modules the model
    has: layernorm, moe_act, mla_up_proj); +gather (fp8 parameter gather, a named recipe); +offload (the optimizer
    state on the CPU, half the saved activations in host memory). Then the speed options, a second ladder from the
    engine itself (speed_ladder). The search ranks them with the base engine. A step that sets a setting the user
    gave (`given`, Engine.configured's names) is left out, so the search keeps what was said: `--no-ep-overlap` ranks
    no +epoverlap, `--grad-dtype fp32` no +bf16grad."""
    memory, speed = _memory_ladder(engine, model, precision), speed_ladder(engine, model)
    return _climbed(engine, _kept(memory, given)) + _climbed(engine, _kept(speed, given))


Ladder = list[tuple[str, dict[str, object]]]  # (the variant's name suffix, the settings it adds to the one before)


def speed_ladder(engine: Engine, model: ModelSpec) -> Ladder:
    """The options current recipes turn on for speed, where the engine runs them and the planner prices a gain:
    bf16 gradient reduction (half the reduce-scatter bytes and gradient buffer; --grad-reduce-in-bf16, as the
    16-GPU Qwen3 Megatron-Bridge recipes set it). CUDA graphs remove the per-kernel and per-layer host cost
    (cost/layer_time.py), which the engine's fitted host costs may put at zero (megatron's host_layer_s on GPUs):
    then they only add their memory pool, and are not searched. For a MoE model, Megatron's all-to-all overlap
    (--overlap-moe-expert-parallel-comm, combined_1f1b.py), which Megatron-Bridge's DeepSeek-V3 perf recipes turn on
    (perf_recipes/deepseek/common.py: comm_overlap.overlap_moe_expert_parallel_comm); its conditions (ep > 1,
    virtual stages with pp, no full recompute) refuse the plans it cannot run (engine/moe_rules.py)."""
    ladder: Ladder = []
    if engine.memory.grad_dtype == "fp32" and "param" in engine.rules.setting_words.get("grad_dtype", ()):
        ladder.append(("bf16grad", {"grad_dtype": "param"}))
    gain = engine.behaviour is not None and engine.behaviour.host_layer_s.value > 0  # kernels' own: 0 on GPUs
    dense = model.num_moe_layers < model.num_layers  # a layer priced as graphed (not MoE)
    if "cuda_graphs" in engine.rules.options and not engine.kernels.cuda_graphs and dense and gain:
        ladder.append(("graphs", {"cuda_graphs": True}))
    if model.moe is not None and engine.rules.ep_overlap == "combined_1f1b" and not engine.moe.ep_overlap:
        ladder.append(("epoverlap", {"ep_overlap": True}))
    return ladder


def _memory_ladder(engine: Engine, model: ModelSpec, precision: str) -> Ladder:
    offered = set(engine.rules.options)
    if "precision_aware_optimizer" not in offered or engine.memory.optimizer == "sgd":
        return []
    ladder: Ladder = [("pao", {"precision_aware_optimizer": True, "optimizer_moment_dtype": "bf16"})]
    moe = model.moe is not None
    modules = [
        m for m, has in (("layernorm", model.is_mla or moe), ("moe_act", moe), ("mla_up_proj", model.is_mla)) if has
    ]
    if modules and "recompute_modules" in offered and precision != "fp8-delayed":
        ladder.append(("modules", {"recompute_modules": ["core_attn", *modules]}))
    if precision in RECIPES and "fp8_param_gather" in offered:
        ladder.append(("gather", {"fp8_param_gather": True}))
    if {"optimizer_offload", "activation_offload"} <= offered:
        ladder.append(("offload", {"optimizer_offload": 1.0, "activation_offload": 0.5}))
    return ladder


def _kept(ladder: Ladder, given: frozenset[str]) -> Ladder:
    """The ladder's steps that set no setting the user gave."""
    return [(name, step) for name, step in ladder if not set(step) & given]


def _climbed(engine: Engine, ladder: Ladder) -> list[Engine]:
    """One variant per step of the ladder, each with the settings of the steps before it."""
    out: list[Engine] = []
    settings: dict[str, object] = {}
    label = engine.name
    for name, step in ladder:
        settings, label = {**settings, **step}, f"{label}+{name}"
        variant = engine.configured(**settings)
        out.append(variant.model_copy(update={"name": label, "variant_of": engine.name, "variant_settings": settings}))
    return out


def variant_named(
    base: Engine, name: str, model: ModelSpec, precision: str, given: frozenset[str] = frozenset()
) -> Engine:
    """The `search --recipe-options` variant a ranked plan names (megatron+pao+offload), rebuilt for the model,
    precision and given settings it was searched with: a search's plan estimates as ranked."""
    variants = option_variants(base, model, precision, given)
    for v in variants:
        if v.name == name:
            return v
    names = ", ".join(v.name for v in variants) or "none"
    raise PlannerError(
        f"engine {name!r}: {base.name} has no such --recipe-options variant for {model.name} at {precision} "
        f"(its variants: {names})"
    )
