"""The emit targets: each target module registers one `Target` when it is imported (planner.launch.emit imports
them all), and everything that lists, checks or writes targets reads this registry (pure)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planner.launch.command import RunConfig
    from planner.plan import Plan
    from planner.specs import ModelSpec


@dataclass(frozen=True)
class Layout:
    """What a target's file is written from: the run, the model, the nodes it runs on and the engine settings."""

    cfg: RunConfig
    model: ModelSpec
    nodes: int
    per_node: int
    max_restarts: int = 0
    image: str | None = None
    settings: Mapping[str, object] = field(default_factory=dict)
    device: str = "nvidia"  # the cluster nodes' accelerators: nvidia, amd or cpu (checks.device_kind)
    segment: int | None = None  # nodes a job places in each NVLink domain wider than a node (NVL72), as priced
    architecture: str | None = None  # the GPUs' (hardware/gpu.py GPUSpec.architecture); None: not known
    time_limit_s: float | None = None  # a batch job's wall-clock limit (Slurm --time): wall_limit_s; None: not priced


@dataclass(frozen=True)
class Target:
    """One --emit target. An engine target names the engine profile whose rules its runs follow, the per-run
    settings its file writes, and what its format cannot express; a cluster target (engine None) launches this
    project's worker."""

    name: str
    order: int  # its place in listings: cluster targets, then engine targets, as `launch --help` shows them
    file_name: str
    render: Callable[[Layout], str]
    engine: str | None = None
    writes: frozenset[str] = frozenset()
    values: Mapping[str, tuple[object, ...]] = field(default_factory=dict)  # a written setting's values its file says
    format_problems: Callable[[ModelSpec, Plan], list[str]] | None = None
    # what its file runs otherwise than the plan was priced, where that is no reason to refuse: said once written
    format_notes: Callable[[ModelSpec, Plan], list[str]] | None = None
    precisions: frozenset[str] = frozenset()  # the named precision recipes (precision.RECIPES) its file writes
    # what its file cannot say of the per-run settings the plan is priced with, where a setting its file does not
    # write would run at another value (Megatron-Bridge's fp8 recipes gather weights in fp8 whatever is priced)
    settings_problems: Callable[[Plan, Mapping[str, object]], list[str]] | None = None
    timed: bool = False  # its file asks for a wall-clock limit (Layout.time_limit_s: a Slurm job's --time)
    run_line: bool = True  # its file says how to start the job (nodes, processes per node); DeepSpeed's config does not

    @property
    def is_engine(self) -> bool:
        return self.engine is not None


_TARGETS: dict[str, Target] = {}


def register(target: Target) -> Target:
    _TARGETS[target.name] = target
    return target


def target(name: str) -> Target | None:
    return _TARGETS.get(name)


def target_names(*, engine: bool) -> tuple[str, ...]:
    """The registered engine targets (engine=True) or cluster targets, in listing order."""
    chosen = [t for t in _TARGETS.values() if t.is_engine == engine]
    return tuple(t.name for t in sorted(chosen, key=lambda t: t.order))
