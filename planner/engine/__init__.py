"""What a training stack does with a plan: the Engine (profile.py, loaded from engine_profiles/; its memory,
kernels, comm and MoE blocks execution.py, its per-run settings settings.py, what calibrate fitted fitted.py) and
the rules that say which plans it runs (rules.py; a ZeRO stage's zero_rules.py)."""

from planner.engine.fitted import Behaviour, Domain, Fitted, Interval, Parameter
from planner.engine.profile import Comm, Engine, Kernels, Memory, Rules
from planner.engine.rules import (
    engine_problems,
    plan_problems,
    recompute_problems,
    require_runs,
    structure_problems,
)
from planner.engine.zero import ZERO_STATES, ZeroStage
from planner.engine.zero_rules import zero_problems

__all__ = [
    "ZERO_STATES",
    "Behaviour",
    "Comm",
    "Domain",
    "Engine",
    "Fitted",
    "Interval",
    "Kernels",
    "Memory",
    "Parameter",
    "Rules",
    "ZeroStage",
    "engine_problems",
    "plan_problems",
    "recompute_problems",
    "require_runs",
    "structure_problems",
    "zero_problems",
]
