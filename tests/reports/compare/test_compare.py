"""compare_runs: same distribution -> no significant change; 1.5x throughput -> faster, interval excluding 1."""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console

from infer_prof.errors import CompareError
from infer_prof.profiler.stats import Interval
from infer_prof.reports.compare.analysis import FASTER, NO_CHANGE, compare_runs, verdict
from infer_prof.reports.compare.report import write_comparison_report
from infer_prof.reports.compare.terminal import render_comparison
from tests.support.run_dirs import make_run_dir

THROUGHPUT = ("request_throughput", "output_token_throughput", "goodput")
# E2E is left out: it follows each request's output length, which differs more between seeds than 1.5x hides.
LATENCY = ("ttft_ms.p50", "tpot_ms.p50", "itl_ms.p50")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    size = {"n_requests": 150, "n_steps": 600}
    return {
        "a": make_run_dir(root / "a", seed=101, **size),
        "b": make_run_dir(root / "b", seed=202, **size),
        "fast": make_run_dir(root / "fast", seed=303, throughput_scale=1.5, **size),
    }


def test_same_distribution_is_no_significant_change(runs):
    result = compare_runs([runs["a"]], [runs["b"]], n_boot=600)
    assert result.mode == "samples"
    for name in THROUGHPUT:
        metric = result.metric(name)
        assert metric.verdict == NO_CHANGE, metric
        assert metric.ci_low < 1 < metric.ci_high


def test_one_and_a_half_times_throughput_is_faster(runs):
    result = compare_runs([runs["a"]], [runs["fast"]], n_boot=600, drift_guard=False)
    for name in THROUGHPUT:
        metric = result.metric(name)
        assert metric.verdict == FASTER, metric
        assert metric.ci_low > 1 and 1.3 < metric.ratio < 1.7
    for name in LATENCY:
        # Lower latency is the good direction: a ratio below 1 reads "faster".
        metric = result.metric(name)
        assert metric.verdict == FASTER and metric.ci_high < 1, metric


def test_reversed_order_is_slower(runs):
    result = compare_runs([runs["fast"]], [runs["a"]], n_boot=300, drift_guard=False)
    assert result.metric("output_token_throughput").verdict == "slower"
    assert result.metric("ttft_ms.p50").verdict == "slower"


def test_repeats_use_per_run_values_and_mann_whitney(tmp_path):
    size = {"n_requests": 30, "n_steps": 120}
    before = [make_run_dir(tmp_path / f"b{i}", seed=400 + i, **size) for i in range(4)]
    after = [make_run_dir(tmp_path / f"a{i}", seed=500 + i, throughput_scale=1.5, **size) for i in range(4)]
    result = compare_runs(before, after, n_boot=300, drift_guard=False)
    metric = result.metric("output_token_throughput")
    assert result.mode == "repeats"
    assert metric.p_value == pytest.approx(2 / 70)  # 4 vs 4, fully separated: the smallest exact p
    assert metric.verdict == FASTER


def test_verdict_rules():
    assert verdict(1.5, Interval(1.5, 1.2, 1.8), "higher", 0.02) == FASTER
    assert verdict(1.5, Interval(1.5, 1.2, 1.8), "lower", 0.02) == "slower"
    assert (
        verdict(1.01, Interval(1.01, 1.005, 1.015), "higher", 0.02) == NO_CHANGE
    )  # real but below min_effect
    assert verdict(1.5, Interval(1.5, 0.9, 2.0), "higher", 0.02) == NO_CHANGE
    assert verdict(1.5, Interval(1.5, 1.2, 1.8), None, 0.02) == "higher"
    assert verdict(1.5, Interval(1.5, 1.2, 1.8), "higher", 0.02, p_value=0.2) == NO_CHANGE


def test_time_split_shift_in_percentage_points(runs):
    result = compare_runs([runs["a"]], [runs["fast"]], n_boot=100, drift_guard=False)
    shift = result.time_split_shift["components"]
    assert set(shift) >= {"scheduler", "sampler", "kv_alloc", "model_kernels"}
    assert all(abs(value) < 5 for value in shift.values())  # same engine, only faster: shares barely move


def test_reports_and_terminal(runs, tmp_path):
    result = compare_runs([runs["a"]], [runs["fast"]], n_boot=200, drift_guard=False)
    written = write_comparison_report(result, tmp_path / "out")
    assert set(written) == {"compare_json", "compare_html", "compare_pdf"}
    data = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert {m["name"] for m in data["metrics"]} >= set(THROUGHPUT) | {"ttft_ms.p99", "e2e_ms.p50"}
    html = (tmp_path / "out" / "compare.html").read_text()
    assert html.count("<svg") == 3 and "<script" not in html  # ratios, shift, yardstick
    assert data["yardstick"]["name"] == "model_us_per_token" and len(data["yardstick"]["runs"]) == 2
    assert (tmp_path / "out" / "compare.pdf").read_bytes().startswith(b"%PDF")
    console = Console(file=io.StringIO(), width=80, no_color=True, force_terminal=False)
    render_comparison(result, console)
    text = console.file.getvalue()
    assert not re.search(r"\x1b\[", text)
    assert text.startswith("After is faster") and "requests/s" in text and "no significant change" in text


def test_needs_runs_on_both_sides(runs):
    with pytest.raises(CompareError):
        compare_runs([], [runs["a"]])


def test_drift_shows_the_machine_moving_not_the_change(tmp_path):
    """The yardstick (model time per token) follows a slower machine and ignores faster control paths."""
    import pandas as pd

    from infer_prof.reports.compare.charts import draw_yardstick
    from infer_prof.reports.run import charts

    size = {"n_requests": 30, "n_steps": 80}
    before = [make_run_dir(tmp_path / f"b{i}", seed=600 + i, **size) for i in range(2)]
    after = [make_run_dir(tmp_path / f"a{i}", seed=700 + i, **size) for i in range(2)]
    for path in after:  # the change: control paths five times faster; the model untouched
        steps = pd.read_csv(path / "steps.csv")
        steps[["scheduler_ms", "sampler_ms", "kv_alloc_ms"]] /= 5
        steps.to_csv(path / "steps.csv", index=False)
    steady = compare_runs(before, after, n_boot=100).yardstick
    assert abs(steady["ratio"] - 1) < 0.1, steady
    steps = pd.read_csv(after[1] / "steps.csv")
    steps["model_ms"] *= 1.5  # the machine slowed down during the last run
    steps.to_csv(after[1] / "steps.csv", index=False)
    result = compare_runs(before, after, n_boot=100)
    drifted = result.yardstick
    assert drifted["spread"] > steady["spread"] + 0.3 and drifted["ratio"] > steady["ratio"] * 1.15
    assert sorted(run["order"] for run in drifted["runs"]) == [1, 2, 3, 4]
    assert any("Yardstick" in note and f"{drifted['ratio']:.3f}x" in note for note in result.notes)
    assert result.void and all(
        metric.verdict == "void" for metric in result.metrics if metric.verdict != "not comparable"
    )
    with charts.chart_style():
        fig = charts.figure(10, 3)
        draw_yardstick(fig, drifted)
    points = [line for line in fig.axes[0].get_lines() if line.get_marker() in ("o", "s")]
    assert sorted(len(line.get_xdata()) for line in points) == [2, 2]
    assert max(max(line.get_ydata()) for line in points) == pytest.approx(
        max(run["value"] for run in drifted["runs"])
    )


def test_the_drift_guard_voids_an_a_a_on_a_machine_that_changed_and_not_a_control_path_change(tmp_path):
    """Identical configurations, the machine 1.6x slower for the after runs: void, never 'faster'/'slower'.
    A change that only makes control paths faster keeps the yardstick, and its verdict stands."""
    import pandas as pd

    from infer_prof.reports.compare.summary import headline

    size = {"n_requests": 40, "n_steps": 120}
    before = [make_run_dir(tmp_path / f"b{i}", seed=800 + i, **size) for i in range(2)]
    busy = [
        make_run_dir(tmp_path / f"busy{i}", seed=800 + i, throughput_scale=1 / 1.6, **size) for i in range(2)
    ]
    result = compare_runs(before, busy, n_boot=100)
    assert result.void and "the machine changed" in result.void and "1.6" in result.void
    assert {metric.verdict for metric in result.metrics} <= {"void", "not comparable"}
    assert headline(result).startswith("Void: the machine changed")
    unguarded = compare_runs(before, busy, n_boot=100, drift_guard=False)
    assert unguarded.void is None and unguarded.metric("output_token_throughput").verdict == "slower"
    control_only = [make_run_dir(tmp_path / f"c{i}", seed=800 + i, **size) for i in range(2)]
    for path in control_only:
        steps = pd.read_csv(path / "steps.csv")
        steps[["scheduler_ms", "sampler_ms"]] /= 4
        steps.to_csv(path / "steps.csv", index=False)
    assert compare_runs(before, control_only, n_boot=100).void is None
