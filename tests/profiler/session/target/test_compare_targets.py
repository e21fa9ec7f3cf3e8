"""`compare` on two runs against another engine: they have py-spy samples and no spans, so the time-split shift comes from the samples."""

from __future__ import annotations

import json
from pathlib import Path

from infer_prof.reports.compare.analysis import compare_runs
from infer_prof.reports.compare.summary import shift_table
from tests.support.run_dirs import make_run_dir


def without_spans(path: Path) -> Path:
    result = json.loads((path / "result.json").read_text())
    result["breakdown"]["methods"]["spans"] = None
    (path / "result.json").write_text(json.dumps(result))
    return path


def test_two_runs_without_spans_compare_their_samples(tmp_path: Path) -> None:
    size = {"n_requests": 60, "n_steps": 200}
    before = without_spans(make_run_dir(tmp_path / "before", seed=1, **size))
    after = without_spans(make_run_dir(tmp_path / "after", seed=2, throughput_scale=1.5, **size))
    result = compare_runs([before], [after], n_boot=50, drift_guard=False)
    assert result.time_split_method == "samples" and result.time_split_shift["categories"]
    assert shift_table(result).title.startswith("Time split shift (samples") and shift_table(result).rows
    with_spans = compare_runs(
        [make_run_dir(tmp_path / "a", seed=3, **size)],
        [make_run_dir(tmp_path / "b", seed=4, **size)],
        n_boot=50,
        drift_guard=False,
    )
    assert with_spans.time_split_method == "spans"
    mixed = compare_runs(
        [before], [make_run_dir(tmp_path / "c", seed=5, **size)], n_boot=50, drift_guard=False
    )
    assert mixed.time_split_method == "samples"  # one side has no spans: both sides' samples
