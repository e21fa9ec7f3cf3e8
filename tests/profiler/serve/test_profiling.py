"""A profile window's step rows: the engine's step records matched by time to the window's span rows."""

from __future__ import annotations

from infer_prof.profiler.serve.profiling import aligned_steps


def test_each_record_takes_the_phases_of_the_step_span_it_starts_in() -> None:
    span_rows = [
        {"step": 1, "start_ns": 2_000, "end_ns": 2_900, "lock_wait_ms": 0.0, "gc_ms": 0.0, "model_ms": 0.5},
        {"step": 0, "start_ns": 1_000, "end_ns": 1_800, "lock_wait_ms": 0.1, "gc_ms": 0.0, "model_ms": 0.4},
        {"step": 2, "start_ns": None, "end_ns": None, "lock_wait_ms": 0.0, "gc_ms": 0.0, "model_ms": 9.0},
        {"step": 3, "start_ns": 3_000, "end_ns": None, "lock_wait_ms": 0.0, "gc_ms": 0.0, "model_ms": 7.0},
    ]
    records = [
        {"step": 40, "start_ns": 500, "end_ns": 900},  # before every step span: no phases
        {"step": 41, "start_ns": 1_010, "end_ns": 1_790},  # inside step 0's span
        {"step": 42, "start_ns": 1_900, "end_ns": 1_990},  # after step 0's span ended: no phases
        {"step": 43, "start_ns": 2_900, "end_ns": 2_950},  # at step 1's end: still inside
        {"step": 44, "start_ns": 3_100, "end_ns": 3_200},  # in a span that never ended: no phases
    ]
    rows = aligned_steps(records, span_rows)
    assert [row["step"] for row in rows] == [40, 41, 42, 43, 44]
    assert [row.get("model_ms") for row in rows] == [None, 0.4, None, 0.5, None]
    assert rows[1] == {
        "step": 41,
        "start_ns": 1_010,
        "end_ns": 1_790,
        "duration_ms": 0.00078,
        "lock_wait_ms": 0.1,
        "gc_ms": 0.0,
        "model_ms": 0.4,
    }
    assert list(rows[1]) == ["step", "start_ns", "end_ns", "duration_ms", "lock_wait_ms", "gc_ms", "model_ms"]
