"""Small readers the summary's parts share: the spans' split, a latency statistic, an interval's text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ....profiler.rundir.results import RunResult
from ....profiler.rundir.schema import Split


def engine_spans(result: RunResult) -> Split:
    """The spans method's split of the engine thread (empty when the run has none)."""
    return ((result.breakdown or {}).get("methods") or {}).get("spans") or {}


def metric_stat(metrics: Mapping[str, Any], name: str, stat: str) -> Any:
    """One statistic (p50, p99, ...) of one latency metric, or None."""
    return (metrics.get(name) or {}).get(stat)


def summed_components(split: Mapping[str, Any], names: tuple[str, ...]) -> float | None:
    """The split's shares of the named components added, or None when any of them is missing."""
    values = [(split.get("components") or {}).get(name) for name in names]
    return sum(values) if all(isinstance(value, (int, float)) for value in values) else None  # type: ignore[arg-type]


def interval_text(low: float | None, high: float | None, fmt: Any) -> str:
    """' [low, high]' for an interval both of whose ends were measured, else ''."""
    return f" [{fmt(low)}, {fmt(high)}]" if low is not None and high is not None else ""
