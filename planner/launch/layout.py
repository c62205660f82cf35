"""Which rank holds which mesh coordinates and which layers (pure; mirrors the worker's DeviceMesh).

The mesh is ("pp", "dp", "cp", "tp") in row-major order, tp innermost so a TP group stays inside a node
(the order torchtitan's ParallelDims uses). Pipeline chunk c of rank r is global stage r + c·pp
(Narayanan et al. 2021, section 2.2.2); which layers, embedding and loss each stage holds comes from the
one layer layout, ``planner.cost.stages``.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.cost.stages import Layout, layer_layout
from planner.plan import Plan

MESH_DIMS = ("pp", "dp", "cp", "tp")


@dataclass(frozen=True)
class RankLayout:
    rank: int
    pp: int
    dp: int
    cp: int
    tp: int
    stages: tuple[int, ...]  # global pipeline stage indices this rank runs
    layers: tuple[tuple[int, ...], ...]  # per stage, the global layer indices

    @property
    def first_stage(self) -> bool:
        return 0 in self.stages

    def describe(self) -> str:
        chunks = ", ".join(f"stage {s}: layers {_span(ls)}" for s, ls in zip(self.stages, self.layers))
        return f"rank {self.rank}: pp={self.pp} dp={self.dp} cp={self.cp} tp={self.tp} | {chunks}"


def _span(layers: tuple[int, ...]) -> str:
    if not layers:
        return "none"
    return f"{layers[0]}-{layers[-1]}" if len(layers) > 1 else str(layers[0])


def mesh_shape(plan: Plan) -> tuple[int, int, int, int]:
    return (plan.pp, plan.dp, plan.cp, plan.tp)


def coordinates(rank: int, plan: Plan) -> tuple[int, int, int, int]:
    """(pp, dp, cp, tp) coordinates of a global rank, row-major like init_device_mesh."""
    coords = []
    for size in reversed(mesh_shape(plan)):
        coords.append(rank % size)
        rank //= size
    return tuple(reversed(coords))  # type: ignore[return-value]


def plan_layout(plan: Plan, num_layers: int) -> Layout:
    """The layer layout the worker builds (cost.stages, the same one the cost model prices)."""
    return layer_layout(num_layers, plan.pp, plan.vpp)


def rank_layout(rank: int, plan: Plan, num_layers: int) -> RankLayout:
    pp_i, dp_i, cp_i, tp_i = coordinates(rank, plan)
    chunks = plan_layout(plan, num_layers).rank_chunks(pp_i)
    return RankLayout(
        rank, pp_i, dp_i, cp_i, tp_i, tuple(c.index for c in chunks), tuple(tuple(c.layers) for c in chunks)
    )


def layout(plan: Plan, num_layers: int) -> list[RankLayout]:
    return [rank_layout(r, plan, num_layers) for r in range(plan.gpus)]
