"""A sweep cell whose noise swamps its effect is unresolved (no verdict), with the repeats that would resolve it."""

from __future__ import annotations

import pytest

from infer_prof.profiler.stats import Interval, mean_interval, repeats_to_resolve
from infer_prof.profiler.sweep.table import resolve


def test_mean_interval_needs_two_repeats_and_widens_with_spread():
    assert mean_interval([0.2]) is None
    tight, loose = mean_interval([0.20, 0.21, 0.19]), mean_interval([0.10, 0.30, 0.20])
    assert tight.low < 0.2 < tight.high and loose.high - loose.low > 5 * (tight.high - tight.low)


def test_repeats_to_resolve_scales_as_the_square_of_the_width():
    assert repeats_to_resolve(2, half_width=0.1, distance=0.05) == 8
    assert repeats_to_resolve(2, half_width=0.1, distance=0.0) is None


def test_a_gain_straddling_zero_is_unresolved_with_a_count():
    share = Interval(0.15, 0.12, 0.18)
    gain = Interval(-0.43, -1.2, 0.34)
    result = resolve(share, gain, 2, gains=True)
    assert not result["resolved"] and result["share_resolved"]
    assert "straddles 0" in result["reason"] and result["repeats"] > 2


def test_one_repeat_gain_is_unresolved_and_a_share_on_the_rule_has_no_verdict():
    one = resolve(Interval(0.15, 0.12, 0.18), None, 1, gains=True)
    assert not one["resolved"] and "noise is unknown" in one["reason"] and one["repeats"] == 3
    straddling = resolve(Interval(0.29, 0.25, 0.33), None, 3, gains=False)
    assert not straddling["share_resolved"] and "30% rule" in straddling["reason"]
    clear = resolve(Interval(0.50, 0.45, 0.55), Interval(0.2, 0.15, 0.25), 3, gains=True)
    assert clear["resolved"] and clear["reason"] is None and clear["repeats"] is None


def test_a_void_run_leaves_its_cell_unresolved():
    result = resolve(
        Interval(0.50, 0.45, 0.55), None, 2, gains=False, voids=["the machine was busy (8% of a core)"]
    )
    assert not result["resolved"] and "the machine was busy" in result["reason"]


@pytest.mark.parametrize("value", [0.01, 0.30])
def test_each_rule_threshold_is_checked(value):
    assert not resolve(Interval(value, value - 0.005, value + 0.005), None, 3, gains=False)["share_resolved"]


def test_the_drift_guard_voids_a_gain_whose_machine_moved():
    import pandas as pd

    from infer_prof.profiler.sweep.table import _drift

    python = pd.DataFrame({"yardstick_us_per_token": [100.0, 102.0]})
    steady = pd.DataFrame({"yardstick_us_per_token": [101.0, 99.0]})
    moved = pd.DataFrame({"yardstick_us_per_token": [160.0, 150.0]})
    assert _drift(steady, python) is None
    assert "the machine changed" in _drift(moved, python)
