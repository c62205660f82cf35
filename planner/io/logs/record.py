"""One ingested run, and the runs file it becomes (the schema of tests/data/calibration_runs.yaml, read by
planner/fit/runs.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

import yaml

from planner.errors import PlannerError
from planner.plan import STATED_SPLIT

PLAN_FIELDS = (
    "dp", "tp", "pp", "vpp", "cp", "ep", "sp", "zero", "recompute",
    "micro_batch", "global_batch", "seq_len", "precision", "schedule",
)  # fmt: skip
# Plan fields an entry writes only where the log or --plan states them: the expert tensor-parallel degree and a
# stated pipeline split (plan.py STATED_SPLIT)
OPTIONAL_FIELDS = ("etp", *STATED_SPLIT)
INGESTED = "read by planner ingest from"  # each entry's notes: what ingest -o may replace
MEASURED_FIELDS = ("step_s", "tokens_per_s_per_gpu", "peak_memory_bytes", "peak_memory_kind", "mfu", "tflops_per_gpu")


@dataclass(frozen=True)
class IngestedRun:
    """A training log read as a run: what ran (null where neither the log nor the options say), what was
    measured in the steady state, and what was assumed or derived on the way."""

    id: str
    source: str
    engine: str
    plan: dict[str, Any]
    software: dict[str, Any]
    measured: dict[str, Any]
    assumed: list[str]
    derived: list[str]
    model: dict[str, Any] | None
    hardware: str | None
    gpus: int | None
    steps_used: int
    steps_left_out: dict[str, int]
    iterations: tuple[int, int] | None  # the first and last step the median is taken over

    @property
    def missing(self) -> list[str]:
        """What a runs file needs and this run lacks: model, hardware, gpus, plan fields."""
        out = [k for k in ("model", "hardware", "gpus") if getattr(self, k) is None]
        return out + [f"plan.{k}" for k in PLAN_FIELDS if self.plan.get(k) is None]

    def as_json(self) -> dict[str, Any]:
        """The document of `planner ingest --json` (DESIGN.md): SI units, null where unknown."""
        return {
            "id": self.id,
            "source": self.source,
            "engine": self.engine,
            "model": self.model,
            "hardware": self.hardware,
            "gpus": self.gpus,
            "plan": self.plan,
            "software": self.software,
            "measured": self.measured,
            "assumed": self.assumed,
            "derived": self.derived,
            "steps": {
                "used": self.steps_used,
                "left_out": self.steps_left_out,
                "first": self.iterations[0] if self.iterations else None,
                "last": self.iterations[1] if self.iterations else None,
            },
        }

    def as_entry(self) -> dict[str, Any]:
        """The runs-file entry."""
        return {
            "id": self.id,
            "source": self.source,
            "model": self.model,
            "hardware": self.hardware,
            "gpus": self.gpus,
            "gpus_per_node": None,
            "plan": self.plan,
            "software": self.software,
            "assumed": self.assumed,
            "measured": self.measured,
            "derived": self.derived,
            "notes": f"{INGESTED} {self.source}",
        }


def ingested_runs(doc: Any) -> bool:
    """A runs file `ingest -o` wrote: a list of entries each noted as read by it (a runs file gathered by hand, as
    calibration_runs.yaml, lost its runs to `ingest -o` over it)."""
    return isinstance(doc, list) and all(
        isinstance(e, dict) and str(e.get("notes", "")).startswith(INGESTED) for e in doc
    )


def run_id(source: str) -> str:
    """A run id from the log's file name: its stem, with anything but letters, digits, '.', '-', '_' as '-'."""
    stem = re.sub(r"\.(log|txt|out|err)$", "", source.rsplit("/", 1)[-1])
    return re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-") or "run"


def unique_ids(runs: list[IngestedRun]) -> list[IngestedRun]:
    """The runs with ids made unique ("-2", "-3" after a repeated one)."""
    seen: dict[str, int] = {}
    out = []
    for r in runs:
        seen[r.id] = seen.get(r.id, 0) + 1
        out.append(r if seen[r.id] == 1 else replace(r, id=f"{r.id}-{seen[r.id]}"))
    return out


WRITE_PURPOSE = "to write a runs file (--json and the table show what was read)"


def runs_entries(runs: list[IngestedRun], *, purpose: str = WRITE_PURPOSE) -> list[dict[str, Any]]:
    """Runs-file entries for runs that name their model and hardware; PlannerError naming what the first run
    lacks and which option fills it otherwise (a runs file with such a run cannot be read back), and what for."""
    for r in runs:
        lacks = [k for k in ("model", "hardware") if getattr(r, k) is None]
        if lacks:
            options = " and ".join(f"--{k}" for k in lacks)
            raise PlannerError(
                f"run {r.id!r} ({r.source}): the log does not say its {' or '.join(lacks)}; give {options} " + purpose
            )
    return [r.as_entry() for r in unique_ids(runs)]


def runs_yaml(runs: list[IngestedRun]) -> str:
    """The runs file's text: a YAML list in the schema of calibration_runs.yaml."""
    header = "# Runs read from training logs by `planner ingest` (schema: tests/data/calibration_runs.yaml).\n"
    return header + yaml.safe_dump(runs_entries(runs), sort_keys=False, default_flow_style=None, width=120)
