"""The probe's timing of the engine loop's own work bounds the foreign verdict's interpreter share from above."""

from __future__ import annotations

import numpy as np

from infer_prof.profiler.analysis.foreign import with_probe_bound
from infer_prof.profiler.analysis.probe_spans import exclusive_ns, loop_work_ms

COMPONENTS = ["step", "scheduler", "worker", "model"]
MS = 1_000_000


def records() -> np.ndarray:
    """Ten 100 ms steps on thread 7: a 0.3 ms scheduler call and a 99 ms wait on the worker inside each (so the
    step's own code is 0.7 ms), and the worker's 90 ms model call on thread 9, which is not the loop's work."""
    rows = []
    for n in range(10):
        start = n * 200 * MS
        rows.append((7, 0, start, start + 100 * MS, 1))
        rows.append((7, 1, start + 100_000, start + 400_000, 1))
        rows.append((7, 2, start + MS, start + 100 * MS, 1))
        rows.append((9, 3, start + 2 * MS, start + 92 * MS, 1))
    table = np.array(rows, dtype=np.int64)
    return np.column_stack([table, exclusive_ns(table)])


def test_loop_work_is_the_steps_own_code_and_its_calls_that_are_not_waits() -> None:
    kept = {1: records()}
    steps = kept[1][kept[1][:, 1] == 0][:, [2, 3, 4]]
    own = loop_work_ms(kept, COMPONENTS, 1, steps)
    assert own is not None and len(own) == 10
    np.testing.assert_allclose(own, 1.0)  # 0.7 ms of the step's own code + 0.3 ms of scheduler


def verdict(low: float, high: float, share: float) -> dict:
    return {
        "interpreter_share": share,
        "interpreter_interval": {
            "share": share,
            "low": low,
            "high": high,
            "samples": 200,
            "method": "Wilson 95% interval of interpreter samples among the engine loop's 200 busy samples",
        },
        "straddles": [0.01],
        "rule": "targeted native paths",
        "reasons": [],
    }


def probe(high: float) -> dict:
    return {
        "steps": {"with_probes_on": 121, "loop_work": {"ms_per_step": 0.5, "share": high / 2, "high": high}}
    }


def test_a_tight_bound_settles_stay_in_python() -> None:
    found = verdict(0.001, 0.037, 0.007)
    with_probe_bound(found, probe(0.004))  # type: ignore[arg-type]
    assert found["interpreter_interval"]["high"] == 0.004
    assert found["straddles"] == [] and found["rule"] == "stay in Python"
    assert "clears the rule's thresholds" in found["reasons"][-1]
    # The samples' point (0.7%) lies above the bound: the verdict's share is held inside its interval.
    assert found["interpreter_share"] == found["interpreter_interval"]["share"] == 0.004
    # The samples' side is made at 97.5%, so the joined interval keeps 95%: its low end moved down.
    assert found["interpreter_interval"]["low"] < 0.001 + 1e-9


def test_a_loose_bound_changes_nothing_and_a_disagreeing_one_is_said() -> None:
    loose = verdict(0.02, 0.08, 0.05)
    with_probe_bound(loose, probe(0.5))  # type: ignore[arg-type]
    assert loose["interpreter_interval"]["high"] > 0.08 and "still straddling" not in loose["reasons"][-1]
    disagree = verdict(0.10, 0.20, 0.15)
    with_probe_bound(disagree, probe(0.01))  # type: ignore[arg-type]
    assert disagree["interpreter_interval"]["high"] == 0.20 and "disagree" in disagree["reasons"][-1]


def test_no_bound_without_the_probes_loop_work() -> None:
    found = verdict(0.001, 0.037, 0.007)
    with_probe_bound(found, {"steps": {}})  # type: ignore[arg-type]
    assert found["interpreter_interval"]["high"] == 0.037 and found["reasons"] == []
