"""The summary's SLO lines: a broken target says by how much (counted or by p99), a met one says so, none says nothing."""

from __future__ import annotations

from infer_prof.profiler.rundir.results import RunResult
from infer_prof.profiler.rundir.schema import Metrics
from infer_prof.reports.run.summary import slo_lines
from infer_prof.reports.slo import SloCheck


def _result(metrics: Metrics) -> RunResult:
    return RunResult(config={}, environment={}, scenario={}, metrics=metrics)


def test_a_p99_over_its_target_is_a_breach_without_a_count() -> None:
    result = _result({"slo": {"ttft_ms": 200.0}, "ttft_ms": {"p50": 120.0, "p99": 350.0}})
    assert slo_lines(result) == ["SLO breached: TTFT p99 350 ms is over its 200 ms target."]


def test_a_p99_within_its_target_or_unmeasured_is_met() -> None:
    within = _result({"slo": {"ttft_ms": 200.0}, "ttft_ms": {"p50": 120.0, "p99": 150.0}})
    assert slo_lines(within) == ["SLOs met by every measured request (TTFT 200 ms)."]
    unmeasured = _result({"slo": {"e2e_ms": 2000.0}, "e2e_ms": {"p50": None, "p99": None}})
    assert slo_lines(unmeasured) == ["SLOs met by every measured request (E2E 2,000 ms)."]
    absent = _result({"slo": {"e2e_ms": 2000.0}})
    assert slo_lines(absent) == ["SLOs met by every measured request (E2E 2,000 ms)."]


def test_a_counted_breach_says_how_many_and_the_spread() -> None:
    result = _result({"slo": {"e2e_ms": 2000.0}, "e2e_ms": {"p50": 900.0, "p99": 2500.0}})
    check = SloCheck(targets={"e2e_ms": 2000.0}, requests=300, breaches={"e2e_ms": 3}, met_all=297)
    assert slo_lines(result, check) == [
        "SLO breached: E2E 3 of 300 over 2,000 ms (p50 900 ms, p99 2,500 ms)."
    ]
    check.breaches["e2e_ms"] = 0  # counted: a p99 over the target is not a breach when no request broke it
    assert slo_lines(result, check) == ["SLOs met by every measured request (E2E 2,000 ms)."]


def test_no_target_means_no_line() -> None:
    assert slo_lines(_result({"ttft_ms": {"p99": 350.0}})) == []
