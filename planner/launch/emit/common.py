"""What several targets share: the plan as comments, the layers of each chunk, and which of an engine's own
models a catalog model is."""

from __future__ import annotations

import json
from typing import TypeVar

from planner.cost.stages import Layout
from planner.errors import PlannerError
from planner.launch.command import RDZV_PORT, RunConfig
from planner.plan import Plan
from planner.specs import ModelSpec

K = TypeVar("K")
# What a model's name, aliases, declared totals, context and norm epsilon say is not its architecture.
NOT_ARCHITECTURE = {"name", "aliases", "params", "max_seq_len", "norm_eps"}


def plain_transformer(model: ModelSpec) -> bool:
    """A GPT/Llama transformer that its sizes describe whole: no experts, attention variants (q/k norms, windows,
    sinks, MLA, q/k/v biases alone), a gate other than SiLU, explicit head width, Mamba layers, MTP or sandwich
    norms. An engine's model of the same sizes builds it; anything more is matched field for field (catalog_match)."""
    plain = model.moe is None and model.attention is None and model.head_dim is None and model.mamba is None
    plain = plain and not model.qkv_bias and model.gate is None
    return plain and model.layer_pattern is None and model.mtp_layers == 0 and not model.sandwich_norm


def catalog_match(model: ModelSpec, built: dict[K, str]) -> K | None:
    """The key whose catalog model (`built`: key -> catalog name) has this architecture, field for field."""
    from planner.io.catalog import load_model

    arch = model.model_dump(exclude=NOT_ARCHITECTURE)
    return next((k for k, name in built.items() if load_model(name).model_dump(exclude=NOT_ARCHITECTURE) == arch), None)


def eps_problems(model: ModelSpec, built: str | float, engine: str) -> list[str]:
    """The engine's model normalises with its own epsilon (`built`: that catalog model's, or the value), which its
    configuration cannot set and a match does not compare (NOT_ARCHITECTURE): refused where the model's differs."""
    from planner.io.catalog import load_model

    eps = load_model(built).norm_eps if isinstance(built, str) else built
    if model.norm_eps is None or eps is None or model.norm_eps == eps:
        return []
    return [
        f"{engine}'s model normalises with eps {eps:g}, not {model.name}'s norm_eps {model.norm_eps:g}, and its "
        "configuration cannot set it"
    ]


def plan_comment(cfg: RunConfig) -> list[str]:
    return [
        f"# plan: {cfg.plan.headline()}",
        f"# plan (all fields): {json.dumps(cfg.plan.model_dump())}",
        f"# model: {cfg.model}",
    ]


def node_gpus(plan: Plan, nodes: int, per_node: int | None) -> int:
    """GPUs per node of an engine target's run line: as given, else the plan's spread over `nodes`."""
    return per_node or plan.gpus // nodes


def engine_torchrun(nodes: int, per_node: int, program: str) -> str:
    """The torchrun line that starts an engine's own trainer (`program`: its module or script and arguments) on
    `nodes` nodes of `per_node` GPUs, run on each node; rendezvous as the cluster targets' (command.py
    torchrun_argv) and torchtitan's multinode_trainer.slurm do it: c10d at one node's address."""
    if nodes == 1:
        return f"torchrun --standalone --nnodes 1 --nproc-per-node {per_node} {program}"
    return (
        f"torchrun --nnodes {nodes} --rdzv-backend c10d --rdzv-endpoint $MASTER_ADDR:{RDZV_PORT} --rdzv-id planner "
        f"--nproc-per-node {per_node} {program}"
    )


def layers_per_chunk(layout: Layout, target: str) -> int:
    """The one layer count every chunk of the layout holds; an uneven layout is refused (for now) rather
    than written as a wrong even split."""
    sizes = {c.num_layers for c in layout.chunks}
    if len(sizes) != 1:
        counts = [c.num_layers for c in layout.chunks]
        raise PlannerError(
            f"--emit {target}: the layout puts {counts} layers on the {len(counts)} chunks; "
            f"{target} takes an even split here; choose pp·vpp dividing num_layers={layout.num_layers}"
        )
    return sizes.pop()
