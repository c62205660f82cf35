"""Training logs read as runs: Megatron-LM / NeMo / Megatron-Bridge, Megatron-DeepSpeed, DeepSpeed, torchtitan
and llm-foundry (Composer). One module per family, the shared cleaning in log_text.py, the steady state in
step_times.py, and `read_log` (build.py), the one front door `planner ingest` and `calibrate` call."""

from planner.io.logs.build import ENGINES, detect, read_log
from planner.io.logs.log_file import log_file_text
from planner.io.logs.log_text import DEFAULT_WARMUP
from planner.io.logs.record import IngestedRun, ingested_runs, runs_entries, runs_yaml, unique_ids

__all__ = [
    "DEFAULT_WARMUP",
    "ENGINES",
    "IngestedRun",
    "detect",
    "ingested_runs",
    "log_file_text",
    "read_log",
    "runs_entries",
    "runs_yaml",
    "unique_ids",
]
