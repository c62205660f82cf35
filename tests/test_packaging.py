"""`pip install .` (not only -e) ships the catalogs: they are package data of planner.catalog (issue 13)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from planner.io.catalog import catalog_root, list_engines, list_hardware, list_models

REPO = Path(__file__).resolve().parents[1]


def test_catalogs_live_in_the_package():
    assert catalog_root() == REPO / "planner" / "catalog"
    assert len(list_models()) >= 20 and "h100-sxm" in list_hardware() and "megatron" in list_engines()


@pytest.mark.timeout(300)
def test_the_wheel_carries_every_catalog_file(tmp_path):
    src = tmp_path / "src"  # a copy, so the build leaves nothing in the working tree
    shutil.copytree(REPO / "planner", src / "planner", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(src),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=280,
    )
    if proc.returncode != 0 and "No module named" in proc.stderr:
        pytest.skip(f"cannot build a wheel here: {proc.stderr.strip().splitlines()[-1]}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = set(zipfile.ZipFile(next(tmp_path.glob("*.whl"))).namelist())
    shipped = {str(p.relative_to(REPO)) for p in (REPO / "planner" / "catalog").rglob("*.yaml")}
    assert shipped and shipped <= names
