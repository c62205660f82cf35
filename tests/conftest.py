import warnings
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, settings

# One example sequence per test on every run, so a red run names a change, not a draw (the unseeded exploration is
# a separate, deliberate run); tests that draw a catalog and then keep what an engine runs filter by design.
settings.register_profile(
    "planner", derandomize=True, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow]
)
settings.load_profile("planner")

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference"
REPO = Path(__file__).resolve().parents[1]


def _reference_file(name: str) -> Path:
    """The repository's own copy under tests/data, so a local run and CI test the same data; the shared
    reference beside the checkout only when the copy is missing."""
    for candidate in (REPO / "tests" / "data" / name, REFERENCE / name):
        if candidate.is_file():
            return candidate
    pytest.skip(f"{name} not found beside the checkout or in tests/data")


@pytest.fixture(scope="session")
def calibration_runs() -> list[dict]:
    return yaml.safe_load(_reference_file("calibration_runs.yaml").read_text())


@pytest.fixture(scope="session")
def worked_examples() -> list[dict]:
    return yaml.safe_load(_reference_file("worked_examples.yaml").read_text())


@pytest.fixture(autouse=True)
def _quiet_param_warnings():
    # Run files declare rounded sizes ("8B"); the 3% mismatch warning is for users, not tests.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*declared params.*")
        yield
