"""compare.html's charts say what its table says, and their axes stay legible at any spread of ratios."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from infer_prof.reports.compare.analysis import FASTER, NO_CHANGE, SLOWER, ComparisonResult, MetricComparison
from infer_prof.reports.compare.charts import draw_improvements, log_ticks, ratio_limits
from infer_prof.reports.compare.summary import metrics_table
from infer_prof.reports.run import charts


def _metric(name: str, better: str, ratio: float, low: float, high: float, verdict: str) -> MetricComparison:
    unit = "ms" if better == "lower" else "req/s"
    return MetricComparison(
        name, name.replace("_", " "), unit, better, 1.0, ratio, ratio, low, high, None, verdict, "m"
    )


def _result(metrics: list[MetricComparison]) -> ComparisonResult:
    return ComparisonResult(["b"], ["a"], "samples", 0.95, 0.02, 0, metrics)


def _draw(result: ComparisonResult):  # type: ignore[no-untyped-def]
    with charts.chart_style():
        fig = charts.figure(10, 1.4 + 0.3 * len(result.metrics))
        draw_improvements(fig, result)
        FigureCanvasAgg(fig).draw()
    return fig


def test_each_row_prints_the_ratio_the_table_prints():
    # The reported bug: TTFT 2.037x slower in the table, drawn as 0.491x (inverted) on the chart.
    result = _result(
        [
            _metric("request_throughput", "higher", 1.21, 1.1, 1.3, FASTER),
            _metric("ttft_ms.p50", "lower", 2.037, 1.8, 2.3, SLOWER),
            _metric("tpot_ms.p50", "lower", 0.8, 0.7, 0.9, FASTER),
        ]
    )
    fig = _draw(result)
    labels = {text.get_text().split()[0] for ax in fig.axes for text in ax.texts}
    table = {row[0]: row[3] for row in metrics_table(result).rows}
    assert labels == set(table.values()) == {"1.210x", "2.037x", "0.800x"}
    # And the point sits at that ratio: right of 1 for the slower latency.
    ttft_axis = fig.axes[1]
    points = [line for line in ttft_axis.get_lines() if line.get_marker() == "o"]
    assert points[0].get_xdata()[0] == pytest.approx(2.037)


def test_chart_and_table_agree_on_a_real_comparison(tmp_path):
    from infer_prof.reports.compare.analysis import compare_runs
    from tests.support.run_dirs import make_run_dir

    before = make_run_dir(tmp_path / "a", seed=101, n_requests=60, n_steps=200)
    after = make_run_dir(tmp_path / "b", seed=303, n_requests=60, n_steps=200, throughput_scale=0.6)
    result = compare_runs([before], [after], n_boot=200, drift_guard=False)
    fig = _draw(result)
    drawn = sorted(text.get_text().split()[0] for ax in fig.axes for text in ax.texts)
    expected = sorted(
        f"{m.ratio:.3f}x"
        for m in result.metrics
        if m.better is not None and m.ratio and m.ci_low and m.ci_high
    )
    assert drawn == expected and drawn


def _overlaps(fig) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    renderer = fig.canvas.get_renderer()
    clashes = []
    for ax in fig.axes:
        labels = [label for label in ax.get_xticklabels() if label.get_visible() and label.get_text()]
        boxes = [label.get_window_extent(renderer) for label in labels]
        for (a, box_a), (b, box_b) in zip(zip(labels, boxes), list(zip(labels, boxes))[1:]):
            if box_a.x1 + 2 > box_b.x0:  # 2 px of air at least
                clashes.append((a.get_text(), b.get_text()))
    return clashes


@pytest.mark.parametrize("spread", [1.005, 1.03, 1.1, 1.3, 2.037, 4.0, 12.0, 60.0])
def test_log_axis_tick_labels_never_collide(spread):
    result = _result(
        [
            _metric("request_throughput", "higher", spread, spread * 0.97, spread * 1.02, FASTER),
            _metric("ttft_ms.p99", "lower", 1 / spread, 0.98 / spread, 1.03 / spread, FASTER),
            _metric("tpot_ms.p50", "lower", 1.0, 0.99, 1.01, NO_CHANGE),
        ]
    )
    fig = _draw(result)
    ticks = [label.get_text() for label in fig.axes[-1].get_xticklabels()]
    assert "1x" in ticks and len(ticks) >= 3, ticks
    assert _overlaps(fig) == []


def test_overlap_check_sees_a_collision():
    # Guards the test above: the old tick list on a wide axis did collide.
    with charts.chart_style():
        fig = charts.figure(10, 2)
        ax = fig.subplots()
        ax.set_xscale("log")
        ax.set_xlim(0.2, 12)
        ax.minorticks_off()
        ticks = [0.5, 0.67, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0]
        ax.set_xticks(ticks, [f"{t:g}x" for t in ticks])
        FigureCanvasAgg(fig).draw()
    assert _overlaps(fig)


def test_log_ticks_are_spread_and_include_one():
    for low, high in [(0.9, 1.2), (0.3, 8.0), (0.05, 30.0), (1 / 1.05**1.15, 1.05**1.9)]:
        ticks = log_ticks(low, high)
        assert 1.0 in ticks and all(low <= t <= high for t in ticks)
        gaps = np.diff(np.log(ticks))
        assert (gaps >= (np.log(high) - np.log(low)) / 8 - 1e-9).all(), (low, high, ticks)
    low, high = ratio_limits([2.037, 1.8, 2.3, None, float("nan")])
    assert low < 1 / 2.3 and high > 2.3
