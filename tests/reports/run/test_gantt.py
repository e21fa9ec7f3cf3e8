"""The request timeline draws each request's states where requests.csv puts them, and stays readable when long."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from infer_prof.profiler.rundir.results import read_run
from infer_prof.reports.run import charts
from infer_prof.reports.run.gantt import draw_request_timeline, request_timeline
from infer_prof.reports.rundata import run_start_ns


def test_states_follow_the_request_table(run_dir):
    run = read_run(run_dir)
    start = run_start_ns(run)
    timeline = request_timeline(run, start)
    assert not timeline.sampled and timeline.total == len(run.requests)
    first = run.requests.sort_values("arrival_ns", kind="stable").iloc[0]
    row = timeline.rows.iloc[0]
    assert row["arrival"] == pytest.approx((first["arrival_ns"] - start) / 1e9)
    assert row["first"] == pytest.approx((first["first_token_ns"] - start) / 1e9)
    # At any instant, the three counts are the requests between arrival and finish.
    t = float(timeline.states["t_s"].iloc[100])
    arrival = (run.requests["arrival_ns"] - start) / 1e9
    finish = ((run.requests["finish_ns"] - start) / 1e9).fillna(timeline.end_s)
    alive = int(((arrival <= t) & (t < finish)).sum())
    counts = timeline.states.iloc[100]
    assert counts["queued"] + counts["prefill"] + counts["decode"] == alive


def test_thousands_of_requests_are_sampled_and_preemptions_kept(tmp_path):
    from tests.support.run_dirs import make_run_dir

    run = read_run(make_run_dir(tmp_path / "run", seed=9, n_requests=60, n_steps=120))
    many = pd.concat([run.requests] * 50, ignore_index=True)  # 3,000 requests
    many["num_preemptions"] = 0
    many.loc[[7, 1500, 2999], "num_preemptions"] = [1, 2, 1]
    run.requests = many
    run.steps.loc[[10, 50], "preemptions"] = 1
    timeline = request_timeline(run, run_start_ns(run), max_rows=200)
    assert timeline.sampled and len(timeline.rows) <= 200 and timeline.total == 3000
    assert (timeline.rows["preemptions"] > 0).sum() == 3, "every preempted request is shown"
    assert sorted(timeline.preemptions_s) == sorted(
        (run.steps.loc[[10, 50], "start_ns"] - run_start_ns(run)) / 1e9
    )
    assert int(timeline.states[["queued", "prefill", "decode"]].sum(axis=1).max()) > 200, (
        "counts cover all requests"
    )
    with charts.chart_style():
        fig = charts.figure(10, 6)
        draw_request_timeline(fig, timeline)
    gantt_ax = fig.axes[0]
    assert f"of {3000:,} requests" in gantt_ax.get_title()
    assert len(gantt_ax.patches) == 3 * len(timeline.rows)  # queued, prefill, decode per row
    crosses = [c for c in gantt_ax.collections if c.get_label() == "preempted (recomputed)"]
    assert len(crosses) == 1 and len(crosses[0].get_offsets()) == 3


def test_no_requests_no_timeline(run_dir):
    run = read_run(run_dir)
    run.requests = run.requests.iloc[0:0]
    assert request_timeline(run, 0) is None
    assert np.isfinite(request_timeline(read_run(run_dir), 0).end_s)
