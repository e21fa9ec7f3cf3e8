"""--what-if's rounds: runs of the slowdown pooled until every sensitivity is precise, each in its own directory."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

from infer_prof.profiler.checks.what_if import run_what_if
from infer_prof.profiler.collectors.spans import RecordingTracer
from infer_prof.profiler.rundir.results import RunResult
from infer_prof.profiler.rundir.schema import check_file
from infer_prof.profiler.session.options import EngineOptions

STEPS = 160  # a round's steps: 40 turns of 4, 20 delayed
SAMPLER_NS = 1_000_000


def _result() -> RunResult:
    return RunResult(
        config={"scenario": "sampler-heavy", "model": "synthetic:tiny", "dtype": "float32"},
        environment={},
        scenario={},
        metrics={},
        breakdown={"wall_s": 10.0, "methods": {"spans": {"categories": {"idle": 0.0}}}},
        verdict={"predictions": {"sampler": {"share": 0.5, "native_speedup": 4.0, "predicted_gain": 0.37}}},
    )


def _run_again(noise_ms: float, labels: list[str]):  # type: ignore[no-untyped-def]
    """A run-again that steps a recording tracer on a fake clock: a 1 ms sampler on the serial path, plus per step a
    normal noise of `noise_ms` outside it (seeded by the round), so the delay's response is the truth, 1."""
    clock = {"now": 0}

    def tick() -> int:
        clock["now"] += 100
        return clock["now"]

    class Spinner:
        def calibrate(self) -> int:
            return 0

        def spin(self, start_ns: int, requested_ns: int, released: float = 0.0) -> int:
            clock["now"] = start_ns + requested_ns
            return requested_ns

    def run_again(native: frozenset[str], run_dir: Path, label: str, hook: object) -> SimpleNamespace:
        labels.append(label)
        rng = np.random.default_rng(len(labels))
        hook.spinner, hook.clock = Spinner(), tick  # type: ignore[attr-defined]
        tracer = RecordingTracer(clock=tick, cpu_clock=None)
        hook.install(SimpleNamespace(tracer=tracer))  # type: ignore[attr-defined]
        hook.start()  # type: ignore[attr-defined]
        rows = []
        for step in range(STEPS):
            start = clock["now"]
            with tracer.span("step"):
                with tracer.span("sampler"):
                    clock["now"] += SAMPLER_NS
                clock["now"] += int(max(0.0, 5.0 + rng.normal(0.0, noise_ms)) * 1e6)
            rows.append({"step": step, "duration_ms": (clock["now"] - start) / 1e6})
        run_dir.mkdir(parents=True, exist_ok=True)
        return SimpleNamespace(steps=pd.DataFrame(rows), result=_result(), interrupted=False)

    return run_again


def _what_if(tmp_path: Path, noise_ms: float, rounds: int = 3) -> tuple[dict, list[str]]:  # type: ignore[type-arg]
    labels: list[str] = []
    outcome = SimpleNamespace(run_dir=tmp_path, result=_result())
    section = run_what_if(
        outcome,  # type: ignore[arg-type]
        EngineOptions(model="synthetic:tiny"),
        ["sampler"],
        _run_again(noise_ms, labels),  # type: ignore[arg-type]
        rounds=rounds,
    )
    written = json.loads((tmp_path / "result.json").read_text())
    check_file(written, "result.json")
    assert written["what_if"]["rounds"] == section["rounds"]
    return dict(section), labels


def test_a_precise_first_round_stops_there(tmp_path: Path) -> None:
    section, labels = _what_if(tmp_path, noise_ms=0.0)
    assert [entry["run_dir"] for entry in section["rounds"]] == ["what-if"]
    assert section["max_rounds"] == 3 and len(labels) == 1
    sampler = section["components"]["sampler"]
    assert abs(sampler["sensitivity"] - 1.0) < 0.01 and sampler["void"] is None
    assert not (tmp_path / "what-if-2").exists()


def test_an_imprecise_sensitivity_runs_more_rounds_and_pools_their_pairs(tmp_path: Path) -> None:
    """Steps noisier than the delay: every round leaves the interval wide, so all three run, each in its own
    directory with its turns, and the sensitivity pools their pairs (a round's 20 each)."""
    section, labels = _what_if(tmp_path, noise_ms=6.0)
    assert [entry["run_dir"] for entry in section["rounds"]] == ["what-if", "what-if-2", "what-if-3"]
    assert labels[1].endswith("(round 2 of at most 3)")
    for name in ("what-if", "what-if-2", "what-if-3"):
        turns = pd.read_csv(tmp_path / name / "turns.csv")
        assert len(turns) == STEPS
    assert section["steps"] == 3 * STEPS
    sampler = section["components"]["sampler"]
    assert sampler["pairs"] == 60
    assert sampler["low"] <= 1.0 <= sampler["high"]
    assert sampler["accuracy"]["calls"] == 3 * STEPS // 2


def test_pooling_rounds_narrows_the_interval_and_one_round_is_one_run(tmp_path: Path) -> None:
    one, labels = _what_if(tmp_path / "one", noise_ms=6.0, rounds=1)
    assert len(labels) == 1 and labels[0] == "what-if: slowdowns in turns"
    three, _ = _what_if(tmp_path / "three", noise_ms=6.0)
    width = lambda entry: entry["high"] - entry["low"]  # noqa: E731
    assert width(three["components"]["sampler"]) < width(one["components"]["sampler"])
