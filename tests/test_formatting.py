"""Numbers as a person reads them (planner/units.py, plan_checks' divisor lists): a dogfooding pass found
'1000000.00T tokens', '0 GPU-hours' for a six-minute job, '135785393.6 d' and "try [1, ..., 128, '...']" hiding 256."""

from __future__ import annotations

import pytest

from planner.io.catalog import load_model
from planner.plan import Plan
from planner.plan_checks import check_plan
from planner.units import YEAR_S, fmt_count, fmt_hours, fmt_seconds, fmt_seconds_range


@pytest.mark.parametrize(
    ("n", "said"), [(4.19e6, "4.19M"), (15e12, "15.00T"), (999e12, "999.00T"), (1e18, "1.00e+18"), (512, "512")]
)
def test_counts(n, said):
    assert fmt_count(n) == said


@pytest.mark.parametrize(
    ("hours", "said"), [(0.11, "0.11"), (0.0, "0"), (4e-5, "< 0.01"), (9.96, "10"), (26070.8, "26,071")]
)
def test_gpu_hours_never_print_zero_for_a_short_job(hours, said):
    assert fmt_hours(hours) == said


def test_years_past_a_year():
    assert fmt_seconds(135785393.6 * 86400) == "371,760.1 y"
    assert fmt_seconds(300 * 86400) == "300.0 d"
    assert fmt_seconds_range(2 * YEAR_S, 3 * YEAR_S) == "2.0–3.0 y"


def test_a_long_divisor_list_ends_in_the_number_itself():
    spec = load_model("llama3-8b")
    (ffn,) = [r for r in check_plan(spec, Plan(tp=3, dp=8, global_batch=24)) if "ffn_hidden_size" in r.detail]
    assert "(try 1, 2, 4, 7, 8, 14, 16, 28, ..., 14336)" in ffn.detail and "[" not in ffn.detail
    (heads,) = [r for r in check_plan(spec, Plan(tp=3, dp=8, global_batch=24)) if "num_attention_heads" in r.detail]
    assert "(try tp in 1, 2, 4, 8, 16, 32)" in heads.detail
