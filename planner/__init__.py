"""planner: parallelism planning, memory and step-time estimation, and launch for LLM training."""

__version__ = "0.1.0"
