"""A budget report as files for CI: a JUnit XML file and Bencher Metric Format JSON."""

from __future__ import annotations

import re
import statistics
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from ..rundir.atomic import write_bytes_atomic, write_json_atomic
from ..rundir.results import RunResult
from .check import (
    AssertionResult,
    BudgetReport,
    RunLike,
    benchmark_name,
    format_value,
    load_results,
)
from .spec import ALIASES, KNOWN_COUNTERS

# What `write_bmf(runs)` reports when there is no budget to say which metrics matter.
BMF_DEFAULT_METRICS = (
    "throughput",
    "request_throughput",
    "p50_ttft_ms",
    "p99_ttft_ms",
    "p99_tpot_ms",
    "p99_itl_ms",
    "interpreter_share",
    *KNOWN_COUNTERS,
)


def write_junit(report: BudgetReport, path: str | Path) -> Path:
    """One testsuite, one testcase per assertion: error failures as <failure>, warnings as <skipped>."""
    failures = len(report.failed_errors)
    skipped = sum(1 for r in report.results if r.status in ("WARN", "SKIP"))
    counts = {
        "tests": str(len(report.results)),
        "failures": str(failures),
        "errors": "0",
        "skipped": str(skipped),
        "time": f"{report.elapsed_s:.3f}",
    }
    suites = ET.Element("testsuites", {"name": "infer-prof budget", **counts})
    suite = ET.SubElement(suites, "testsuite", {"name": f"budget.{report.budget.name}", **counts})
    properties = ET.SubElement(suite, "properties")
    for run in report.runs:
        ET.SubElement(properties, "property", {"name": "run", "value": run})
    for run in report.baseline_runs:
        ET.SubElement(properties, "property", {"name": "baseline_run", "value": run})
    for result in report.results:
        case = ET.SubElement(
            suite,
            "testcase",
            {"classname": f"infer_prof.budget.{report.budget.name}", "name": result.name, "time": "0"},
        )
        message = _one_line(result)
        if result.status == "FAIL":
            failure = ET.SubElement(case, "failure", {"message": message, "type": "BudgetExceeded"})
            failure.text = _details(result)
        elif result.status == "WARN":
            ET.SubElement(case, "skipped", {"message": f"warning: {message}"})
        elif result.status == "SKIP":
            ET.SubElement(case, "skipped", {"message": message})
        system_out = ET.SubElement(case, "system-out")
        system_out.text = _details(result)
    ET.indent(suites)
    return write_bytes_atomic(path, ET.tostring(suites, encoding="utf-8", xml_declaration=True) + b"\n")


def write_bmf(report_or_runs: BudgetReport | Sequence[RunLike], path: str | Path) -> Path:
    """Bencher Metric Format: {benchmark: {measure slug: {value, lower_value?, upper_value?}}}.

    From a report, one measure per evaluated assertion; from runs, BMF_DEFAULT_METRICS where present.
    Over repeats, value is the aggregate and lower/upper the smallest and largest run.
    """
    return write_json_atomic(path, bmf_document(report_or_runs))


def bmf_document(report_or_runs: BudgetReport | Sequence[RunLike]) -> dict[str, dict[str, dict[str, float]]]:
    document: dict[str, dict[str, dict[str, float]]] = {}
    if isinstance(report_or_runs, BudgetReport):
        benchmark = report_or_runs.benchmark or f"infer-prof/{report_or_runs.budget.name}"
        for result in report_or_runs.results:
            if result.measured is None:
                continue
            slug = (
                _slug(result.assertion.name)
                if result.assertion.is_ratio
                else measure_slug(result.assertion.paths[0])
            )
            document.setdefault(benchmark, {})[slug] = _metric(result.measured, result.values)
        return document
    groups: dict[str, list[RunResult]] = {}
    for run in load_results(report_or_runs):
        groups.setdefault(benchmark_name(run), []).append(run)
    for benchmark, results in groups.items():
        for alias in BMF_DEFAULT_METRICS:
            values = [v for v in (_number(result, ALIASES[alias]) for result in results) if v is not None]
            if values:
                document.setdefault(benchmark, {})[measure_slug(ALIASES[alias])] = _metric(
                    statistics.median(values), values
                )
    return document


def measure_slug(path: str) -> str:
    """A metric's Bencher measure slug: its first alias (e.g. p99-ttft-ms), else the dotted path."""
    for alias, target in ALIASES.items():
        if target == path:
            return _slug(alias)
    return _slug(path)


def _slug(text: str) -> str:
    # Bencher slugs: lowercase kebab case, at most 64 characters.
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:64] or "metric"


def _metric(value: float, values: Sequence[float | None]) -> dict[str, float]:
    entry = {"value": float(value)}
    numbers = [float(v) for v in values if v is not None]
    if len(numbers) > 1:
        entry["lower_value"], entry["upper_value"] = min(numbers), max(numbers)
    return entry


def _number(result: RunResult, path: str) -> float | None:
    try:
        value: object = result.get(path)
    except KeyError:
        return None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _one_line(result: AssertionResult) -> str:
    measured = "-" if result.measured is None else format_value(result.measured)
    return f"{result.metric} = {measured}, bound {result.bound}: {result.reason}"


def _details(result: AssertionResult) -> str:
    lines = [
        f"metric:   {result.metric} ({' / '.join(result.assertion.paths)})",
        f"level:    {result.level}",
        f"measured: {'-' if result.measured is None else format_value(result.measured)}"
        + (
            f" ({result.assertion.aggregate} of {[format_value(v) for v in result.values]})"
            if len(result.values) > 1
            else ""
        ),
        f"bound:    {result.bound}",
    ]
    if result.baseline is not None:
        lines.append(
            f"baseline: {format_value(result.baseline)} (ratio {format_value(result.ratio or 0.0)}x)"
        )
    if result.test:
        lines.append(f"test:     {result.test}")
    lines.append(f"result:   {result.status}: {result.reason}")
    return "\n".join(lines)
