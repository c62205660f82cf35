"""Which rank holds which mesh coordinates and which layers (pure; mirrors the worker's DeviceMesh).

The mesh is ("pp", "dp", "cp", "tp") in row-major order, tp innermost so a TP group stays inside a node
(the order torchtitan's ParallelDims uses). Pipeline chunk c of rank r is global stage r + c·pp
(Narayanan et al. 2021, section 2.2.2); layers are assigned to stages by ``planner.plan.stage_layers``.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.plan import Plan, stage_layers

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
        chunks = ", ".join(
            f"stage {s}: layers {_span(ls)}" for s, ls in zip(self.stages, self.layers)
        )
        return f"rank {self.rank}: pp={self.pp} dp={self.dp} cp={self.cp} tp={self.tp} | {chunks}"


def _span(layers: tuple[int, ...]) -> str:
    if not layers:
        return "none"
    return f"{layers[0]}-{layers[-1]}" if len(layers) > 1 else str(layers[0])


def mesh_shape(plan: Plan) -> tuple[int, int, int, int]:
    return (plan.pp, plan.dp, plan.cp, plan.tp)


def stage_layer_ranges(num_layers: int, *, pp: int, vpp: int) -> list[tuple[int, ...]]:
    """Global layer indices of each pipeline stage 0 … pp·vpp−1."""
    per_rank = stage_layers(num_layers, pp, vpp)
    sizes = [0] * (pp * vpp)
    for r in range(pp):
        for c in range(vpp):
            sizes[r + c * pp] = per_rank[r][c]
    out, start = [], 0
    for n in sizes:
        out.append(tuple(range(start, start + n)))
        start += n
    return out


def stages_of(pp_rank: int, *, pp: int, vpp: int) -> tuple[int, ...]:
    return tuple(pp_rank + c * pp for c in range(vpp))


def coordinates(rank: int, plan: Plan) -> tuple[int, int, int, int]:
    """(pp, dp, cp, tp) coordinates of a global rank, row-major like init_device_mesh."""
    coords = []
    for size in reversed(mesh_shape(plan)):
        coords.append(rank % size)
        rank //= size
    return tuple(reversed(coords))  # type: ignore[return-value]


def rank_layout(rank: int, plan: Plan, num_layers: int) -> RankLayout:
    pp_i, dp_i, cp_i, tp_i = coordinates(rank, plan)
    ranges = stage_layer_ranges(num_layers, pp=plan.pp, vpp=plan.vpp)
    stages = stages_of(pp_i, pp=plan.pp, vpp=plan.vpp)
    return RankLayout(rank, pp_i, dp_i, cp_i, tp_i, stages, tuple(ranges[s] for s in stages))


def layout(plan: Plan, num_layers: int) -> list[RankLayout]:
    return [rank_layout(r, plan, num_layers) for r in range(plan.gpus)]
