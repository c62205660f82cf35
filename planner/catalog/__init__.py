"""The shipped catalogs (package data, so `pip install .` carries them): model_specs/, hardware_profiles/ and
engine_profiles/, read by planner.io.catalog."""
