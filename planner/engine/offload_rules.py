"""What Megatron refuses of activation offloading: the fine-grained offload's modules together
(transformer_config.py l.2127-2175 @d98e8a64) and the layer-wise CPU offload's plans (l.1884-1899, l.2799-2800).
Split by what each rule depends on, as the search checks them (engine/rules.py): the settings alone (option
problems), the pipeline degree (per structure) and the recompute level (once per level)."""

from __future__ import annotations

from planner.engine.profile import Engine
from planner.engine.settings import EXPERT_GROUPS, GRAPH_CROSSING_MODULES
from planner.plan import Plan, Rejected
from planner.specs import ModelSpec


def offload_problems(engine: Engine, model: ModelSpec | None) -> list[Rejected]:
    """The offload settings' rules that depend on no plan field."""
    return _module_offload_problems(engine) + _layer_offload_problems(engine, model)


def offload_structure_problems(engine: Engine, plan: Plan) -> list[Rejected]:
    """--cpu-offloading-num-layers has no pipeline parallelism (transformer_config.py l.1891-1894)."""
    n = engine.memory.offload_layers
    if not n or plan.pp == 1:
        return []
    detail = f"offload_layers={n} with pp={plan.pp}: CPU offloading has no pipeline parallelism; give --pp 1"
    return [Rejected("layer offload with pipeline parallelism", f"{detail} (Megatron)")]


def offload_recompute_problems(engine: Engine, recompute: str) -> list[Rejected]:
    """--cpu-offloading-num-layers runs without recompute (l.1896-1899); the experts' offload groups do not run
    inside a recomputed MoE layer (recompute module moe, l.2165-2175)."""
    n, out = engine.memory.offload_layers, list[Rejected]()
    if n and recompute != "none":
        detail = f"offload_layers={n} with recompute={recompute}: CPU offloading runs without recompute"
        out.append(Rejected("layer offload with recompute", f"{detail} (Megatron)"))
    inside = sorted(set(engine.memory.offload_modules or ()) & set(EXPERT_GROUPS))
    if inside and recompute == "selective" and "moe" in (engine.kernels.recompute_modules or ()):
        detail = (
            f"offload modules {', '.join(inside)} run inside the recomputed MoE layer (recompute module moe); drop "
            "them from --offload-modules or moe from --recompute-modules"
        )
        out.append(Rejected("expert offload inside moe recompute", f"{detail} (Megatron)"))
    return out


def _layer_offload_problems(engine: Engine, model: ModelSpec | None) -> list[Rejected]:
    """--cpu-offloading-num-layers N (Transformer Engine's layer-wise CPU offload): fewer layers than the model
    has (l.1884-1889), no per-layer CUDA graphs (l.2799-2800), and not with the fine-grained offloading
    (l.2127-2130)."""
    n = engine.memory.offload_layers
    if not n:
        return []
    out: list[Rejected] = []
    if model is not None and n >= model.num_layers:
        detail = f"offload_layers={n}: CPU offloading takes fewer layers than {model.name}'s {model.num_layers}"
        out.append(Rejected("offload layers beyond the model", f"{detail} (Megatron)"))
    if engine.kernels.cuda_graphs:  # l.2799-2800: per-layer graphs only under full-iteration capture
        detail = f"offload_layers={n} with cuda_graphs: CPU offloading runs without per-layer CUDA graphs"
        out.append(Rejected("layer offload with cuda graphs", f"{detail} (Megatron)"))
    if engine.memory.activation_offload:
        detail = f"offload_layers={n} with activation_offload={engine.memory.activation_offload:g}: one or the other"
        out.append(Rejected("layer and fine-grained offload together", f"{detail} (Megatron)"))
    return out


def _module_offload_problems(engine: Engine) -> list[Rejected]:
    """Offload modules Megatron-Core refuses together (transformer_config.py l.2127-2175 @d98e8a64, and the CUDA-graph
    constraints of docs/user-guide/features/fine_grained_activation_offloading.md); the default set leaves them out
    (cost/recipe_options.py default_offload_modules)."""
    named = set(engine.memory.offload_modules or ())
    out: list[Rejected] = []
    if "attn_proj" in named and "core_attn" not in named:  # its input is the core's output, which core_attn saves
        detail = "offload module attn_proj needs core_attn too (its input is the attention core's output) (Megatron)"
        out.append(Rejected("attn_proj offload without core_attn", detail))
    norms = sorted(named & set(GRAPH_CROSSING_MODULES))
    if engine.kernels.cuda_graphs and norms:
        detail = f"offload modules {', '.join(norms)} cross CUDA graph boundaries; drop them or cuda_graphs (Megatron)"
        out.append(Rejected("norm offload with cuda graphs", detail))
    return out
