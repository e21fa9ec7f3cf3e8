"""trace.json follows the Chrome Trace Event rules that Perfetto and chrome://tracing rely on."""

from __future__ import annotations

import json
from collections import defaultdict

from infer_prof.profiler.rundir.results import read_run
from infer_prof.reports.exports.trace import write_chrome_trace

EPSILON_US = 1e-3  # one nanosecond: timestamps carry ns precision as fractional microseconds


def validate_chrome_trace(trace: dict) -> list[str]:
    """Return every rule the trace breaks (empty when valid)."""
    problems = []
    events = trace.get("traceEvents")
    if not isinstance(events, list):
        return ["traceEvents is not a list"]
    slices = defaultdict(list)
    open_async: dict[tuple, list[str]] = defaultdict(list)
    for index, event in enumerate(events):
        phase = event.get("ph")
        if phase not in ("X", "B", "E", "C", "b", "e", "n", "i", "M"):
            problems.append(f"event {index}: unknown ph {phase!r}")
            continue
        if not isinstance(event.get("pid"), int) or not isinstance(event.get("tid", 0), int):
            problems.append(f"event {index}: pid/tid must be integers")
        if phase == "M":
            continue
        if not isinstance(event.get("ts"), (int, float)) or event["ts"] < 0:
            problems.append(f"event {index}: ts must be a non-negative number of microseconds")
            continue
        if phase == "X":
            if not isinstance(event.get("dur"), (int, float)) or event["dur"] < 0:
                problems.append(f"event {index}: X needs a non-negative dur")
            else:
                slices[(event["pid"], event["tid"])].append(
                    (event["ts"], event["ts"] + event["dur"], event["name"])
                )
        if phase == "C":
            args = event.get("args") or {}
            if not args or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in args.values()
            ):
                problems.append(f"event {index}: counter args must be numbers")
        if phase in ("b", "e", "n"):
            if "id" not in event or "cat" not in event:
                problems.append(f"event {index}: async events need id and cat")
                continue
            key = (event["pid"], event["cat"], event["id"])
            if phase == "b":
                open_async[key].append(event["name"])
            elif phase == "e":
                if not open_async[key] or open_async[key][-1] != event["name"]:
                    problems.append(
                        f"event {index}: 'e' {event['name']!r} without a matching 'b' for id {event['id']}"
                    )
                else:
                    open_async[key].pop()
            elif not open_async[key]:
                problems.append(f"event {index}: async instant outside its slice (id {event['id']})")
    problems += [f"async slice {key} never ended: {names}" for key, names in open_async.items() if names]
    for track, spans in slices.items():
        # On one track, X slices must nest: each one ends before the enclosing one does.
        spans.sort(key=lambda span: (span[0], -span[1]))
        stack: list[tuple[float, float, str]] = []
        for start, end, name in spans:
            while stack and start >= stack[-1][1] - EPSILON_US:
                stack.pop()
            if stack and end > stack[-1][1] + EPSILON_US:
                problems.append(
                    f"track {track}: {name} [{start}, {end}] overlaps {stack[-1][2]} [{stack[-1][0]}, {stack[-1][1]}]"
                )
            stack.append((start, end, name))
    return problems


def test_trace_is_valid_and_complete(run_copy):
    trace = json.loads(write_chrome_trace(run_copy).read_text())
    assert validate_chrome_trace(trace) == []
    run = read_run(run_copy)
    events = trace["traceEvents"]
    steps = [e for e in events if e["ph"] == "X" and e["name"] == "step"]
    assert len(steps) == len(run.steps)
    assert {e["name"] for e in events if e.get("cat") == "phase"} == {
        "queue",
        "scheduler",
        "kv_alloc",
        "prepare",
        "model",
        "sampler",
        "detokenizer",
    }
    assert {e["name"] for e in events if e["ph"] == "C"} == {"batch_size", "kv_utilization", "queue"}
    assert sum(
        1 for e in events if e["ph"] == "b" and e["cat"] == "request" and e["name"].startswith("req-")
    ) == len(run.requests)
    assert sum(1 for e in events if e["ph"] == "n") == run.requests["first_token_ns"].notna().sum()
    names = {
        (e["name"], e["args"]["name"]) for e in events if e["ph"] == "M" and e["name"] != "thread_sort_index"
    }
    assert ("thread_name", "engine loop") in names and any(kind == "process_name" for kind, _ in names)
    # Microseconds: the first step lasts as long in the trace as in steps.csv.
    assert abs(steps[0]["dur"] - (run.steps["end_ns"][0] - run.steps["start_ns"][0]) / 1000) < 0.01


def test_validator_catches_broken_traces():
    base = {"pid": 1, "tid": 1}
    overlapping = [
        {**base, "ph": "X", "name": "a", "ts": 0, "dur": 10},
        {**base, "ph": "X", "name": "b", "ts": 5, "dur": 10},
    ]
    unmatched = [{**base, "ph": "b", "name": "r", "cat": "request", "id": "0x1", "ts": 0}]
    text_counter = [{**base, "ph": "C", "name": "c", "ts": 0, "args": {"value": "3"}}]
    for events in (overlapping, unmatched, text_counter):
        assert validate_chrome_trace({"traceEvents": events})


def test_phases_are_clamped_inside_their_step(tmp_path):
    from tests.support.run_dirs import make_run_dir

    path = make_run_dir(tmp_path / "run", seed=8, n_requests=20, n_steps=30)
    steps_csv = path / "steps.csv"
    steps = read_run(path).steps
    steps.loc[0, "model_ms"] = steps.loc[0, "duration_ms"] * 3  # a recorder rounding gone wrong
    steps.to_csv(steps_csv, index=False)
    (path / "spans.csv").unlink()  # phases are then placed from steps.csv, end to end
    assert validate_chrome_trace(json.loads(write_chrome_trace(path).read_text())) == []


def test_phases_sit_at_their_recorded_start_times(run_copy):
    import pandas as pd

    from infer_prof.reports.rundata import run_start_ns

    run = read_run(run_copy)
    spans = pd.read_csv(run_copy / "spans.csv")
    trace = json.loads(write_chrome_trace(run_copy).read_text())
    assert validate_chrome_trace(trace) == []
    assert "spans.csv" in trace["metadata"]["phase_placement"]
    start = run_start_ns(run)
    phases = [e for e in trace["traceEvents"] if e.get("cat") == "phase"]
    recorded = spans[spans["name"] != "step"]
    assert len(phases) == len(recorded)
    assert sorted(e["ts"] for e in phases) == sorted(
        round((ns - start) / 1000, 3) for ns in recorded["start_ns"]
    )
    # Not laid end to end: the first phase of a step starts after the loop's own code, not at the step start.
    first_step = next(e for e in trace["traceEvents"] if e.get("name") == "step")
    first_phase = min((e for e in phases if e["ts"] >= first_step["ts"]), key=lambda e: e["ts"])
    assert first_phase["ts"] > first_step["ts"]
    assert first_step["args"]["batch_size"] == int(run.steps["batch_size"].iloc[0])


def test_deep_runs_put_torch_ops_on_the_engine_lane_at_their_times(tmp_path):
    import pandas as pd

    from infer_prof.reports.exports.trace import ENGINE_TID
    from infer_prof.reports.rundata import run_start_ns
    from tests.support.run_dirs import make_run_dir

    path = make_run_dir(tmp_path / "deep", seed=5, n_requests=40, n_steps=80, deep=True)
    ops = pd.read_csv(path / "kernel_events.csv")
    trace = json.loads(write_chrome_trace(path).read_text())
    assert validate_chrome_trace(trace) == [], "an op that overshoots its span must be clamped into it"
    aten = [e for e in trace["traceEvents"] if e.get("cat") == "aten"]
    assert len(aten) == len(ops) and {e["tid"] for e in aten} == {ENGINE_TID}
    start = run_start_ns(read_run(path))
    assert sorted(e["ts"] for e in aten) == sorted(round((ns - start) / 1000, 3) for ns in ops["start_ns"])
    assert {e["name"] for e in aten} == {"aten::linear", "aten::addmm", "aten::silu", "aten::mul"}
    assert "torch.profiler ops" in trace["metadata"]["torch_ops"]
    model = {round(e["ts"] + e["dur"], 3) for e in trace["traceEvents"] if e.get("name") == "model"}
    assert any(round(e["ts"] + e["dur"], 3) in model for e in aten), (
        "the overshooting op ends at its span's end"
    )


def test_without_spans_csv_phases_fall_back_to_engine_order(tmp_path):
    from tests.support.run_dirs import make_run_dir

    path = make_run_dir(tmp_path / "old", seed=6, n_requests=20, n_steps=30)
    (path / "spans.csv").unlink()
    trace = json.loads(write_chrome_trace(path).read_text())
    assert validate_chrome_trace(trace) == [] and "laid end to end" in trace["metadata"]["phase_placement"]
    assert "none" in trace["metadata"]["torch_ops"]


def test_nesting_clamps_children_into_their_parent():
    from infer_prof.reports.exports.trace import nest_on_track

    events = [
        {"ph": "X", "name": "parent", "ts": 0.0, "dur": 10.0},
        {"ph": "X", "name": "child", "ts": 8.0, "dur": 5.0},
        {"ph": "X", "name": "next", "ts": 10.0, "dur": 3.0},
    ]
    by_name = {e["name"]: e for e in nest_on_track(events)}
    assert by_name["child"]["dur"] == 2.0 and by_name["next"] == {
        "ph": "X",
        "name": "next",
        "ts": 10.0,
        "dur": 3.0,
    }
