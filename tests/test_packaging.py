"""The catalogs live at the top of the repository (model_specs/, hardware_profiles/, engine_profiles/), where users
add to them, and `pip install .` (not only -e) ships them as package data under planner/catalog/ (setup.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from planner.io.catalog import catalog_root, list_engines, list_hardware, list_models

REPO = Path(__file__).resolve().parents[1]


CATALOGS = ("model_specs", "hardware_profiles", "engine_profiles", "cluster_profiles")


def test_catalogs_live_at_the_top_of_the_checkout():
    assert catalog_root() == REPO
    assert all((REPO / kind).is_dir() for kind in CATALOGS)
    assert len(list_models()) >= 20 and "h100-sxm" in list_hardware() and "megatron" in list_engines()


@pytest.mark.timeout(300)
def test_the_wheel_carries_every_catalog_file(tmp_path):
    src = tmp_path / "src"  # a copy, so the build leaves nothing in the working tree
    shutil.copytree(REPO / "planner", src / "planner", ignore=shutil.ignore_patterns("__pycache__"))
    for kind in CATALOGS:
        shutil.copytree(REPO / kind, src / kind)
    for name in ("pyproject.toml", "setup.py", "README.md"):
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
    shipped = {f"planner/catalog/{p.relative_to(REPO)}" for kind in CATALOGS for p in (REPO / kind).glob("*.yaml")}
    assert len(shipped) > 30 and shipped <= names
