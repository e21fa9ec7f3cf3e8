"""Replicas' (or ranks') busy shares with intervals: balanced while the intervals overlap, the busier one named when they are apart."""

from __future__ import annotations

from infer_prof.profiler.analysis.replica_balance import ProcessLoad, balance


def test_equal_loads_within_sampling_noise_are_balanced() -> None:
    result = balance("2 workers", [ProcessLoad("rank 0", 60, 100), ProcessLoad("rank 1", 55, 100)])
    assert result is not None and result.balanced
    assert (
        result.line.startswith("2 workers: busy rank 0 60% [")
        and "balanced within sampling noise" in result.line
    )


def test_a_busier_replica_beyond_noise_is_named() -> None:
    result = balance(
        "replicas", [ProcessLoad("a", 90, 200), ProcessLoad("b", 170, 200), ProcessLoad("c", 100, 200)]
    )
    assert result is not None and not result.balanced
    assert (result.busiest, result.idlest) == ("b", "a")
    assert "not balanced: b was busier than a beyond sampling noise" in result.line
    assert result.shares["b"].low > result.shares["a"].high


def test_fewer_than_two_sampled_processes_say_nothing() -> None:
    assert balance("one", [ProcessLoad("a", 5, 10)]) is None
    assert balance("one sampled", [ProcessLoad("a", 5, 10), ProcessLoad("b", 0, 0)]) is None
