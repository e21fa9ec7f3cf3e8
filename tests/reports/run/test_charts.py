"""The run charts draw what the tables say: labels, reference lines and noise bands checked on the figures."""

from __future__ import annotations

from infer_prof.profiler.rundir.results import read_run
from infer_prof.reports.run import charts


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


def test_latency_charts_draw_the_slo_targets_with_the_share_within(run_dir):
    from infer_prof.reports.rundata import prepare

    data = prepare(run_dir)
    assert data.slo.targets == {"ttft_ms": 2000.0, "tpot_ms": 50.0}
    with charts.chart_style():
        fig = charts.figure(10, 5)
        charts.draw_latency_cdfs(fig, data.latencies, data.slo.targets)
    ttft_ax, tpot_ax, itl_ax, e2e_ax = fig.axes
    for ax, name in ((ttft_ax, "ttft_ms"), (tpot_ax, "tpot_ms")):
        target = data.slo.targets[name]
        lines = [line for line in ax.get_lines() if line.get_color() == charts.SLO_COLOUR]
        assert len(lines) == 1 and list(lines[0].get_xdata()) == [target, target]
        within = (data.latencies[name] <= target).mean()
        assert f"{within:.1%} within" in " ".join(text.get_text() for text in ax.get_legend().get_texts())
        assert ax.get_xlim()[0] <= target <= ax.get_xlim()[1], (
            "the target is on the chart even when no sample reaches it"
        )
    for ax in (itl_ax, e2e_ax):  # no target set for these
        assert not [line for line in ax.get_lines() if line.get_color() == charts.SLO_COLOUR]


def test_a_split_without_spans_draws_its_categories_from_the_samples(run_dir):
    import copy

    breakdown = copy.deepcopy(read_run(run_dir).result.breakdown)
    breakdown["methods"]["spans"] = None  # a foreign --target server: py-spy samples only
    samples = breakdown["methods"]["samples"]
    samples["resolution"] = "python"
    samples["categories"].update(interpreter=None, kernel=None, allocation=None)
    samples["components"].update(model=0.6, model_glue=None, model_kernels=None)
    with charts.chart_style():
        fig = charts.figure(10, 3.4)
        charts.draw_time_split(fig, breakdown)  # raised "All wedge sizes are zero" before
    titles = [ax.get_title() for ax in fig.axes] + [ax.get_title(loc="left") for ax in fig.axes]
    assert "Categories (samples)" in titles
    texts = " ".join(_texts(fig))
    assert "Python or the native\ncode it calls" in texts, (
        "interpreter named for what python-only samples see"
    )
    rows = dict(charts.component_rows(breakdown))
    assert rows["samples (py-spy)"]["model"] == 0.6 and rows["samples (py-spy)"]["unattributed"] < 0.4
    breakdown["methods"]["samples"] = None
    with charts.chart_style():
        empty = charts.figure(10, 3.4)
        charts.draw_time_split(empty, breakdown)
    assert "no category split\nin this run" in _texts(empty)
