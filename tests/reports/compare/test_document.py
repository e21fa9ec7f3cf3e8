"""compare.json's TypedDicts name the fields of the dataclasses that asdict() writes, in their order."""

from __future__ import annotations

from dataclasses import fields

from infer_prof.reports.compare.analysis import (
    ComparisonDict,
    ComparisonResult,
    MetricComparison,
    MetricComparisonDict,
)


def test_comparison_dict_names_every_field_of_the_result() -> None:
    assert list(ComparisonDict.__annotations__) == [field.name for field in fields(ComparisonResult)]


def test_metric_dict_names_every_field_of_a_metric() -> None:
    assert list(MetricComparisonDict.__annotations__) == [field.name for field in fields(MetricComparison)]
