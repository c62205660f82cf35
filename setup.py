"""The one thing pyproject.toml cannot say: the catalogs live at the top of the repository (model_specs/,
hardware_profiles/, engine_profiles/), where users add to them, and the wheel carries them as the package data
planner/catalog/<kind>/*.yaml. planner.io.catalog reads whichever of the two it finds."""

from setuptools import find_packages, setup

CATALOGS = ("model_specs", "hardware_profiles", "engine_profiles", "cluster_profiles")

setup(
    packages=find_packages(include=["planner*"]) + [f"planner.catalog.{kind}" for kind in CATALOGS],
    package_dir={f"planner.catalog.{kind}": kind for kind in CATALOGS},
    package_data={f"planner.catalog.{kind}": ["*.yaml"] for kind in CATALOGS},
)
