"""speedscope.json follows the speedscope file-format schema, from py-spy samples or from step phases."""

from __future__ import annotations

import json

import pytest

from infer_prof.errors import ReportError
from infer_prof.reports.exports.speedscope import SCHEMA_URL, parse_frame, write_speedscope

UNITS = {"none", "nanoseconds", "microseconds", "milliseconds", "seconds", "bytes"}


def validate_speedscope(document: dict) -> list[str]:
    """Return every schema rule the document breaks (empty when valid)."""
    problems = []
    if document.get("$schema") != SCHEMA_URL:
        problems.append("$schema must be the speedscope file-format schema URL")
    frames = (document.get("shared") or {}).get("frames")
    if not isinstance(frames, list) or not all(
        isinstance(f, dict) and isinstance(f.get("name"), str) for f in frames
    ):
        return problems + ["shared.frames must be a list of {name, ...}"]
    profiles = document.get("profiles")
    if not isinstance(profiles, list) or not profiles:
        return problems + ["profiles must be a non-empty list"]
    for number, profile in enumerate(profiles):
        where = f"profile {number}"
        for key in ("type", "name", "unit", "startValue", "endValue"):
            if key not in profile:
                problems.append(f"{where}: missing {key}")
        if profile.get("unit") not in UNITS:
            problems.append(f"{where}: unit {profile.get('unit')!r} is not a speedscope unit")
        if profile.get("type") == "sampled":
            samples, weights = profile.get("samples", []), profile.get("weights", [])
            if len(samples) != len(weights):
                problems.append(f"{where}: {len(samples)} samples but {len(weights)} weights")
            for stack in samples:
                if any(not isinstance(i, int) or not 0 <= i < len(frames) for i in stack):
                    problems.append(f"{where}: frame index out of range in {stack}")
            if any(not isinstance(w, (int, float)) or w < 0 for w in weights):
                problems.append(f"{where}: weights must be non-negative numbers")
        elif profile.get("type") == "evented":
            stack: list[int] = []
            last = profile.get("startValue", 0)
            for event in profile.get("events", []):
                if event.get("type") not in ("O", "C") or not 0 <= event.get("frame", -1) < len(frames):
                    problems.append(f"{where}: bad event {event}")
                    continue
                if event["at"] < last:
                    problems.append(f"{where}: events go back in time at {event['at']}")
                last = event["at"]
                if event["type"] == "O":
                    stack.append(event["frame"])
                elif not stack or stack.pop() != event["frame"]:
                    problems.append(
                        f"{where}: close of frame {event['frame']} does not match the last open frame"
                    )
            if stack:
                problems.append(f"{where}: {len(stack)} frames never closed")
            if last > profile.get("endValue", last):
                problems.append(f"{where}: events after endValue")
        else:
            problems.append(f"{where}: unknown type {profile.get('type')!r}")
    return problems


def test_samples_become_one_sampled_profile_per_thread_group_engine_first(run_copy):
    document = json.loads(write_speedscope(run_copy).read_text())
    assert validate_speedscope(document) == []
    kinds = [profile["type"] for profile in document["profiles"]]
    assert kinds == ["sampled", "sampled", "sampled", "evented"]
    engine, clients, main = document["profiles"][:3]
    assert document["activeProfileIndex"] == 0 and "infer-prof-engine (engine thread" in engine["name"]
    # The six waiting clients are one profile, not six that bury the engine thread.
    assert "loadgen-client-* (6 threads" in clients["name"] and "MainThread" in main["name"]
    lines = [line for line in (run_copy / "samples.txt").read_text().splitlines() if line.strip()]
    counts = [int(line.rsplit(" ", 1)[1]) for line in lines]
    assert sum(len(profile["samples"]) for profile in document["profiles"][:3]) == len(lines)
    assert sum(profile["endValue"] for profile in document["profiles"][:3]) == sum(counts)
    engine_lines = [count for line, count in zip(lines, counts) if "infer-prof-engine" in line.split(";")[0]]
    assert engine["endValue"] == sum(engine_lines)
    frames = document["shared"]["frames"]
    leaf = frames[engine["samples"][0][-1]]
    assert leaf["file"] and isinstance(leaf["line"], int)
    assert not any(frame["name"].startswith("thread (") for frame in frames), (
        "the thread is the profile, not a frame"
    )


def test_without_samples_the_steps_make_an_evented_profile(bare_run_dir):
    document = json.loads(write_speedscope(bare_run_dir).read_text())
    assert validate_speedscope(document) == []
    assert [profile["type"] for profile in document["profiles"]] == ["evented"]
    names = {frame["name"] for frame in document["shared"]["frames"]}
    assert {"engine step", "scheduler", "model", "sampler"} <= names


def test_validator_catches_broken_documents():
    frames = {"$schema": SCHEMA_URL, "shared": {"frames": [{"name": "a"}, {"name": "b"}]}}
    unbalanced = {
        **frames,
        "profiles": [
            {
                "type": "evented",
                "name": "x",
                "unit": "none",
                "startValue": 0,
                "endValue": 2,
                "events": [{"type": "O", "frame": 0, "at": 0}, {"type": "C", "frame": 1, "at": 1}],
            }
        ],
    }
    mismatched = {
        **frames,
        "profiles": [
            {
                "type": "sampled",
                "name": "x",
                "unit": "none",
                "startValue": 0,
                "endValue": 1,
                "samples": [[0, 5]],
                "weights": [],
            }
        ],
    }
    assert validate_speedscope(unbalanced) and validate_speedscope(mismatched)


def test_frame_parsing():
    assert parse_frame("step (engine/engine.py:97)") == ("step", "engine/engine.py", 97)
    assert parse_frame("take_gil (libpython3.11.so)") == ("take_gil", "libpython3.11.so", None)
    assert parse_frame("<module>") == ("<module>", None, None)


def test_malformed_samples_name_the_line(run_dir, tmp_path):
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    (copy / "samples.txt").write_text("main (a.py:1);f (a.py:2) 3\nthis line has no count\n")
    with pytest.raises(ReportError, match=r"samples.txt:2"):
        write_speedscope(copy)


def test_evented_profile_places_phases_where_they_ran(run_copy):
    import pandas as pd

    from infer_prof.profiler.rundir.results import read_run
    from infer_prof.reports.rundata import run_start_ns

    document = json.loads(write_speedscope(run_copy).read_text())
    assert validate_speedscope(document) == []
    evented = document["profiles"][-1]
    names = [frame["name"] for frame in document["shared"]["frames"]]
    opens = [
        event for event in evented["events"] if event["type"] == "O" and names[event["frame"]] == "model"
    ]
    spans = pd.read_csv(run_copy / "spans.csv")
    start = run_start_ns(read_run(run_copy))
    expected = sorted(round((ns - start) / 1e6, 6) for ns in spans.loc[spans["name"] == "model", "start_ns"])
    assert [event["at"] for event in opens] == expected
