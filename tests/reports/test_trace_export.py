"""trace.json follows the Chrome Trace Event rules that Perfetto and chrome://tracing rely on."""

from __future__ import annotations

import json
from collections import defaultdict

from profiler.rundir.results import read_run
from reports.exports.trace import write_chrome_trace

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


def test_trace_is_valid_and_complete(run_dir):
    trace = json.loads(write_chrome_trace(run_dir).read_text())
    assert validate_chrome_trace(trace) == []
    run = read_run(run_dir)
    events = trace["traceEvents"]
    steps = [e for e in events if e["ph"] == "X" and e["name"] == "step"]
    assert len(steps) == len(run.steps)
    assert {e["name"] for e in events if e.get("cat") == "phase"} == {
        "queue",
        "scheduler",
        "kv_alloc",
        "model",
        "sampler",
        "detokenize",
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
    assert validate_chrome_trace(json.loads(write_chrome_trace(path).read_text())) == []
