"""Runs recorded before the spans took their components' names ("detokenize", "tokenize") read as if recorded now."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from infer_prof.profiler.analysis.breakdown import SPAN_COMPONENTS
from infer_prof.profiler.rundir.results import LEGACY_SPAN_NAMES, read_run
from infer_prof.reports.exports.trace import read_span_tables
from tests.support.run_dirs import make_run_dir


def _as_recorded_before_the_rename(run_dir: Path) -> None:
    """Rewrite steps.csv and spans.csv with the old span names, as a run of an older infer-prof wrote them."""
    old_names = {new: old for old, new in LEGACY_SPAN_NAMES.items()}
    steps = pd.read_csv(run_dir / "steps.csv")
    steps.rename(columns={f"{new}_ms": f"{old}_ms" for new, old in old_names.items()}).to_csv(
        run_dir / "steps.csv", index=False
    )
    spans = pd.read_csv(run_dir / "spans.csv")
    spans["name"] = spans["name"].replace(old_names)
    spans.to_csv(run_dir / "spans.csv", index=False)


def test_an_old_run_reads_its_spans_under_the_components_names(tmp_path: Path) -> None:
    new = make_run_dir(tmp_path / "new", seed=5)
    old = make_run_dir(tmp_path / "old", seed=5)
    _as_recorded_before_the_rename(old)
    assert "detokenize_ms" in pd.read_csv(old / "steps.csv").columns  # the file really is the old shape
    assert "detokenize" in set(pd.read_csv(old / "spans.csv")["name"])

    old_run, new_run = read_run(old), read_run(new)
    assert "detokenize_ms" not in old_run.steps.columns
    pd.testing.assert_frame_equal(old_run.steps, new_run.steps)
    old_spans, _ = read_span_tables(old_run)
    new_spans, _ = read_span_tables(new_run)
    assert old_spans is not None and new_spans is not None
    assert "detokenizer" in set(old_spans["name"]) and "detokenize" not in set(old_spans["name"])
    pd.testing.assert_frame_equal(old_spans, new_spans)


def test_the_breakdown_counts_an_old_span_name_against_the_same_component_as_the_new() -> None:
    for old, new in LEGACY_SPAN_NAMES.items():
        assert SPAN_COMPONENTS[old] == SPAN_COMPONENTS[new] == new
