"""What a Hugging Face config.json says that the importer cannot represent, or that transformers itself would not
build, is refused in one line naming the key, its value and what is valid (never a traceback, never an import
that quietly drops or rereads it); and families whose keys mean something of their own are read their way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import run_planner

from planner.errors import PlannerError
from planner.io.catalog import load_model
from planner.specs import ModelSpec

CONFIGS = Path(__file__).parent / "data" / "hf_configs"


def _fixture(name: str, **changes: Any) -> dict[str, Any]:
    cfg = json.loads((CONFIGS / f"{name}.json").read_text())
    cfg.update(changes)
    return cfg


def _write(tmp_path: Path, cfg: dict[str, Any]) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def _refused_in_one_line(tmp_path: Path, cfg: dict[str, Any]) -> str:
    """The CLI's whole answer to `models show` on `cfg`: exit 2 and one line on stderr, which is returned."""
    code, out, err = run_planner("models", "show", str(_write(tmp_path, cfg)))
    assert code == 2 and out == "" and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    return err


def test_gemma3_sliding_window_pattern_0_is_refused_not_a_traceback(tmp_path):
    """Gemma3TextConfig: a layer is global where (layer + 1) % sliding_window_pattern == 0; 0 divides by zero."""
    cfg = _fixture("gemma3_27b")
    cfg["text_config"]["sliding_window_pattern"] = 0
    err = _refused_in_one_line(tmp_path, cfg)
    assert "sliding_window_pattern=0" in err and ">= 1" in err
