"""The engine's rules on pipeline sends: Megatron's interleaved schedule without --overlap-p2p-communication needs
pp > 2 (megatron/training/arguments.py validate_args l.1000-1009 @d98e8a64: "pipeline-model-parallel size should be
greater than 2 to avoid having multiple p2p sends and recvs between same 2 ranks per communication batch")."""

from __future__ import annotations

from planner.engine.profile import Engine
from planner.plan import Plan, Rejected


def p2p_problems(engine: Engine, plan: Plan) -> list[Rejected]:
    """The interleaved schedule on too few stages for sends the engine does not overlap."""
    least = engine.rules.interleaved_pp_without_p2p_overlap
    if plan.schedule != "interleaved" or engine.comm.p2p_overlap or not 1 < plan.pp < least:
        return []
    detail = (
        f"schedule=interleaved with pp={plan.pp} and pipeline sends not overlapped (p2p_overlap off): {engine.name} "
        f"needs pp >= {least} for it; use --p2p-overlap or pp >= {least}"
    )
    return [Rejected(f"{engine.name}: interleaved without p2p overlap needs more stages", detail)]
