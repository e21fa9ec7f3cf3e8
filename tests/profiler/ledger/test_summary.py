"""The ledger's score on a hand-made ledger: pairs, void pairs apart, median errors, interval coverage, the band."""

from __future__ import annotations

import pytest

from infer_prof.profiler.ledger.summary import score, summarize
from infer_prof.profiler.stats import wilson_interval
from tests.profiler.ledger.conftest import make_record

# (kind, component, predicted, low, high, measured, health)
HAND_MADE = [
    ("verify", "sampler", 0.30, 0.25, 0.35, 0.28, "ok"),  # error 2 pp, 6.7%, inside, within 20%
    ("verify", "sampler", 0.20, 0.15, 0.25, 0.10, "ok"),  # error 10 pp, 50%, outside, not within
    ("verify", "sampler", 0.40, None, None, 0.44, "ok"),  # error 4 pp, 10%, no interval, within
    ("verify", "scheduler", 0.05, 0.04, 0.06, 0.50, "void: the machine was busy"),  # not scored
    ("verify", "scheduler", 0.02, 0.01, 0.03, 0.025, "ok"),  # error 0.5 pp, 25%, inside, not within
    ("slowdown", "sampler", 0.25, 0.20, 0.30, 0.26, "ok"),  # error 1 pp, 4%, inside, within
]


def _records() -> list:
    return [
        make_record(
            kind=kind,
            component=component,
            predicted=predicted,
            predicted_low=low,
            predicted_high=high,
            measured=measured,
            health=health,
            recorded_at=f"2026-12-06T14:0{index}:00+00:00",
        )
        for index, (kind, component, predicted, low, high, measured, health) in enumerate(HAND_MADE)
    ]


def test_the_whole_ledger_s_score() -> None:
    summary = summarize(_records())
    total = summary.total
    assert (total.kind, total.component, total.pairs, total.void) == ("all", "all", 5, 1)
    # |errors| in points: 2, 10, 4, 0.5, 1 -> median 2; relative: 6.7%, 50%, 10%, 25%, 4% -> median 10%.
    assert total.median_error_points == pytest.approx(2.0)
    assert total.median_relative_error == pytest.approx(0.10)
    # Four healthy pairs had an interval; the measured gain fell inside three of them.
    assert (total.inside, total.with_interval) == (3, 4)
    expected = wilson_interval(3, 4)
    assert (total.inside_share, total.inside_low, total.inside_high) == pytest.approx(
        (0.75, expected.low, expected.high)
    )
    assert total.within_band == 3  # 6.7%, 10% and 4% are within 20%; 50% and 25% are not
    assert summary.records == 6
    assert (summary.first_recorded, summary.last_recorded) == (
        "2026-12-06T14:00:00+00:00",
        "2026-12-06T14:05:00+00:00",
    )


def test_each_kind_and_each_component_is_scored_apart() -> None:
    summary = summarize(_records())
    assert [(group.kind, group.pairs, group.void) for group in summary.by_kind] == [
        ("slowdown", 1, 0),
        ("verify", 4, 1),
    ]
    groups = {(group.kind, group.component): group for group in summary.by_component}
    assert list(groups) == [("slowdown", "sampler"), ("verify", "sampler"), ("verify", "scheduler")]
    sampler = groups[("verify", "sampler")]
    assert sampler.median_error_points == pytest.approx(4.0)  # 2, 10, 4
    assert (sampler.inside, sampler.with_interval, sampler.within_band) == (1, 2, 2)
    scheduler = groups[("verify", "scheduler")]
    assert (scheduler.pairs, scheduler.void) == (1, 1) and scheduler.median_error_points == pytest.approx(0.5)


def test_a_group_of_void_pairs_alone_has_counts_and_no_figures() -> None:
    void = [
        make_record(health="void: the machine changed"),
        make_record(health="void: the engine was saturated"),
    ]
    group = score(void, "verify", "sampler")
    assert (group.pairs, group.void, group.with_interval, group.within_band) == (0, 2, 0, 0)
    assert group.median_error_points is None and group.median_relative_error is None
    assert group.inside_share is None and group.inside_low is None


def test_an_empty_ledger_scores_nothing() -> None:
    summary = summarize([])
    assert summary.total.pairs == 0 and summary.by_kind == [] and summary.by_component == []
    assert summary.first_recorded is None


def test_a_prediction_of_no_gain_has_an_absolute_error_and_no_relative_one() -> None:
    group = score(
        [make_record(predicted=0.0, predicted_low=-0.01, predicted_high=0.01, measured=0.005)], "v", "c"
    )
    assert group.median_error_points == pytest.approx(0.5)
    assert group.median_relative_error is None and group.inside == 1 and group.within_band == 0


def test_with_void_the_void_pairs_are_scored_too_and_still_counted() -> None:
    summary = summarize(_records(), include_void=True)
    total = summary.total
    assert summary.include_void and (total.pairs, total.void) == (6, 1)
    # |errors| in points: 2, 10, 4, 45, 0.5, 1 -> median 3; the void pair's 45 pp is in.
    assert total.median_error_points == pytest.approx(3.0)
    assert (total.inside, total.with_interval) == (3, 5)
