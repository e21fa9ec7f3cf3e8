"""sample_labels.csv labels each py-spy stack exactly as the breakdown counted it."""

from __future__ import annotations

from collections import Counter

from infer_prof.profiler.analysis.classify import parse_raw
from infer_prof.profiler.collectors.sampling import summarize_stacks
from infer_prof.profiler.session.record import sample_labels
from tests.support.run_dirs import make_run_dir


def test_labels_add_up_to_the_collectors_thread_totals(tmp_path):
    raw = (make_run_dir(tmp_path / "run", seed=2, n_requests=30, n_steps=60) / "samples.txt").read_text()
    raw += "thread (7): infer-prof-engine;Engine._run (engine/engine.py:246);Condition.wait (threading.py:320) 5\n"
    raw += "not a stack line\n"
    labels = sample_labels(raw, engine_thread_id=4242)
    totals = summarize_stacks(parse_raw(raw))
    for thread, summary in totals.items():
        mine = labels[labels["thread_name"] == thread]
        assert Counter(dict(mine.groupby("category")["samples"].sum())) == Counter(summary["categories"])
    engine = labels[labels["engine_thread"]]
    assert set(engine["thread_id"]) == {4242}, "the engine thread is found by its id, not its name"
    lines = raw.splitlines()
    assert all(
        lines[line - 1].rsplit(" ", 1)[1] == str(count)
        for line, count in zip(labels["line"], labels["samples"])
    )
    assert len(labels) == len(lines) - 1  # the malformed line has no label


def test_without_an_id_the_engine_thread_is_found_by_name():
    raw = "thread (1): infer-prof-engine;f (engine/sampler.py:3) 2\nthread (2): other;g (a.py:1) 1\n"
    labels = sample_labels(raw)
    assert list(labels["engine_thread"]) == [True, False] and list(labels["component"]) == ["sampler", ""]
