"""Small readers the summary's parts share: the spans' split, a latency statistic, an interval's text."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal

from ....profiler.rundir.results import RunResult
from ....profiler.rundir.schema import Split

Group = Literal["categories", "components"]  # a split's two tables of shares, by name


def split_shares(split: Split | None, group: Group) -> dict[str, float | None]:
    """The split's shares of the group's names (none for a split not measured)."""
    return (split.get(group) if split else None) or {}


def engine_spans(result: RunResult) -> Split:
    """The spans method's split of the engine thread (empty when the run has none)."""
    return ((result.breakdown or {}).get("methods") or {}).get("spans") or {}


def metric_stat(metrics: Mapping[str, object], name: str, stat: str) -> float | None:
    """One statistic (p50, p99, ...) of one latency metric (schema.Latency), or None."""
    found = metrics.get(name)
    value = found.get(stat) if isinstance(found, dict) else None
    return value if isinstance(value, (int, float)) else None


def summed_components(split: Split, names: tuple[str, ...]) -> float | None:
    """The split's shares of the named components added, or None when any of them is missing."""
    components = split.get("components") or {}
    values = [value for value in (components.get(name) for name in names) if isinstance(value, (int, float))]
    return sum(values) if len(values) == len(names) else None


def interval_text(low: float | None, high: float | None, fmt: Callable[[float], str]) -> str:
    """' [low, high]' for an interval both of whose ends were measured, else ''."""
    return f" [{fmt(low)}, {fmt(high)}]" if low is not None and high is not None else ""
