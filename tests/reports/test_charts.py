"""The run charts draw what the tables say: labels, reference lines and noise bands checked on the figures."""

from __future__ import annotations

from profiler.rundir.results import read_run
from reports.run import charts


def _texts(fig) -> list[str]:  # type: ignore[no-untyped-def]
    texts = [text.get_text() for ax in fig.axes for text in ax.texts]
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend:
            texts += [text.get_text() for text in legend.get_texts()]
    return texts


def test_predictions_chart_marks_gains_inside_the_noise(run_dir):
    predictions = read_run(run_dir).result.verdict["predictions"]
    with charts.chart_style():
        fig = charts.figure(10, 2)
        charts.draw_predictions(fig, predictions, noise=0.02)
    texts = _texts(fig)
    assert any(text == "+1.3% (within noise)" for text in texts), texts
    assert any(text.startswith("noise: Python runs differ by 2.0%") for text in texts)
    with charts.chart_style():
        quiet = charts.figure(10, 2)
        charts.draw_predictions(quiet, predictions)
    assert not any("noise" in text for text in _texts(quiet))
