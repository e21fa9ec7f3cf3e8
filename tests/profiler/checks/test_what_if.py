"""--what-if's section: the slowdown-predicted gain from the main run's share and speedup, paired with --verify's, and the ledger."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from infer_prof.profiler.analysis.sensitivity import LevelSensitivity, Sensitivity
from infer_prof.profiler.checks.slowdown import ComponentSlowdown
from infer_prof.profiler.checks.what_if import pair_with_verify, released_share, what_if_section
from infer_prof.profiler.ledger.store import read_ledger
from infer_prof.profiler.rundir.results import RunResult
from infer_prof.profiler.rundir.schema import check_file
from infer_prof.reports.run import summary


def _sensitivity(component: str, value: float, low: float, high: float) -> Sensitivity:
    levels = tuple(
        LevelSensitivity(level, value, low, high, 10, level * 2.0, level * 2.0 * value)
        for level in (0.5, 1.0)
    )
    return Sensitivity(component, value, low, high, levels, True, 20)


def _result() -> RunResult:
    return RunResult(
        config={"scenario": "sampler-heavy", "model": "synthetic:tiny", "dtype": "float32"},
        environment={"git_revision": "abc123"},
        scenario={},
        metrics={},
        breakdown={
            "wall_s": 10.0,
            "methods": {"spans": {"categories": {"idle": 0.2}, "components": {"detokenizer": 0.08}}},
        },
        verdict={
            "predictions": {
                "sampler": {
                    "share": 0.5,
                    "native_speedup": 10.0,
                    "speedup_source": "replay",
                    "predicted_gain": 0.45,
                    "predicted_gain_low": 0.44,
                    "predicted_gain_high": 0.46,
                },
                "scheduler": {"share": 0.0004, "native_speedup": 2.0, "predicted_gain": 0.0002},
            }
        },
    )


def _found() -> list[ComponentSlowdown]:
    return [
        ComponentSlowdown("sampler", _sensitivity("sampler", 0.96, 0.9, 1.02), None, 100.0, 101.0, 50, 0.48),
        ComponentSlowdown(
            "detokenizer", _sensitivity("detokenizer", 0.02, -0.05, 0.08), None, 8.0, 8.1, 50, 0.09
        ),
        ComponentSlowdown("kv_alloc", None, "kv_alloc: the delay added no time", 0.0, 0.0, 0, None),
    ]


def test_the_slowdown_gain_uses_the_main_runs_share_and_replayed_speedup() -> None:
    result = _result()
    section = what_if_section(_found(), result, levels=(0.5, 1.0), block_steps=4, steps=200)
    sampler = section["components"]["sampler"]
    assert sampler["share"] == 0.5 and sampler["speedup"] == 10.0 and sampler["amdahl_gain"] == 0.45
    assert sampler["gain"]["gain"] == pytest.approx(0.96 * 0.5 * 0.9)
    assert sampler["gain"]["low"] == pytest.approx(0.9 * 0.45) and sampler["gain"]["high"] == pytest.approx(
        1.02 * 0.45
    )
    assert sampler["accuracy"]["ratio"] == pytest.approx(1.01)
    assert [level["level"] for level in sampler["levels"]] == [0.5, 1.0]
    # No C twin: the share comes from the breakdown (over busy time), and only the cost-free bound is given.
    detokenizer = section["components"]["detokenizer"]
    assert detokenizer["share"] == pytest.approx(0.1) and "gain" not in detokenizer
    assert detokenizer["gain_if_free"]["gain"] == pytest.approx(0.002)
    assert section["components"]["kv_alloc"]["sensitivity"] is None
    assert "added no time" in section["components"]["kv_alloc"]["void"]
    result.what_if = section
    check_file(result.to_dict(), "result.json")  # the section is the schema's


def test_a_delay_releases_the_gil_for_the_share_the_main_run_measured_inside_torchs_ops() -> None:
    result = _result()
    assert result.breakdown is not None
    result.breakdown["methods"]["spans"]["kernel_fraction_by_span"] = {"sampler": 0.45, "prepare": None}
    result.breakdown["methods"]["spans"]["fee_fraction_by_span"] = {"sampler": 0.05}
    assert released_share(result, "sampler") == pytest.approx(0.5)
    # No torch calls measured: the delay holds the GIL throughout, as the component's Python does.
    assert released_share(result, "prepare") == 0.0 and released_share(result, "scheduler") == 0.0
    assert released_share(_result(), "sampler") == 0.0  # a run without kernel windows


def test_prediction_lines_say_how_each_prediction_was_obtained() -> None:
    result = _result()
    plain = summary.prediction_lines(result)
    assert any(line.strip().startswith("sampler:") and "bound only" in line for line in plain)
    result.what_if = what_if_section(_found(), result, levels=(0.5, 1.0), block_steps=4, steps=200)
    result.verdict["predictions"]["sampler"]["measured_gain"] = 0.42
    lines = summary.prediction_lines(result)
    sampler = next(line for line in lines if line.strip().startswith("sampler:"))
    assert "verified +42.0% (twin on)" in sampler
    assert "slowdown-measured (sensitivity 0.96 [0.90, 1.02]) -> +43.2%" in sampler
    assert "bound only" not in sampler
    detokenizer = next(line for line in lines if line.strip().startswith("detokenizer:"))
    assert "sensitivity 0.02" in detokenizer and "if it cost nothing -> +0.2%" in detokenizer
    assert any("kv_alloc: slowdown gave no sensitivity" in line for line in lines)


def test_verify_pairs_go_beside_the_slowdown_and_into_the_ledger(tmp_path: Path) -> None:
    result = _result()
    result.what_if = what_if_section(_found(), result, levels=(0.5, 1.0), block_steps=4, steps=200)
    result.verdict["verify"] = {
        "components": {
            "sampler": {"measured_gain": 0.40, "measured_low": 0.38, "measured_high": 0.43, "void": None}
        }
    }
    outcome = SimpleNamespace(run_dir=tmp_path, result=result)
    ledger = tmp_path / "ledger.jsonl"
    pairs = pair_with_verify(outcome, ledger)  # type: ignore[arg-type]
    assert [pair["component"] for pair in pairs] == ["sampler"]
    measured = result.what_if["components"]["sampler"]["measured"]
    assert measured["agreement"] == pytest.approx(0.40 / 0.432) and measured["within_band"] is True
    (record,) = read_ledger(ledger)
    assert record.kind == "slowdown" and record.component == "sampler" and record.health == "ok"
    assert record.predicted == pytest.approx(0.432) and record.measured == 0.40 and record.commit == "abc123"
    assert record.predicted_low == pytest.approx(0.405) and record.measured_high == 0.43
    written = json.loads((tmp_path / "result.json").read_text())
    assert written["what_if"]["components"]["sampler"]["measured"]["gain"] == 0.40
    assert "1 pair(s) appended" in written["what_if"]["ledger"]


def test_a_void_verify_pair_is_recorded_as_void_and_no_pair_without_a_measured_gain(tmp_path: Path) -> None:
    result = _result()
    result.what_if = what_if_section(_found(), result, levels=(0.5, 1.0), block_steps=4, steps=200)
    result.verdict["verify"] = {
        "components": {"sampler": {"measured_gain": 0.1, "void": "the machine drifted"}}
    }
    outcome = SimpleNamespace(run_dir=tmp_path, result=result)
    pair_with_verify(outcome, tmp_path / "ledger.jsonl")  # type: ignore[arg-type]
    (record,) = read_ledger(tmp_path / "ledger.jsonl")
    assert record.void and "drifted" in record.health
    result.verdict["verify"] = {"components": {"sampler": {"measured_gain": None}}}
    assert pair_with_verify(outcome, tmp_path / "other.jsonl") == []  # type: ignore[arg-type]
    assert not (tmp_path / "other.jsonl").exists()


def test_a_sensitivity_too_wide_to_tell_serial_from_overlapped_is_unresolved() -> None:
    from infer_prof.profiler.checks.slowdown import unresolved

    assert unresolved(_sensitivity("sampler", 0.96, 0.9, 1.02)) is None
    wide = unresolved(_sensitivity("scheduler", -14.7, -783.6, -0.5))
    assert wide is not None and "cannot tell a serial path from an overlapped one" in wide
    lone = Sensitivity("prepare", 1.0, None, None, (), True, 1)
    assert "too few delayed turns" in (unresolved(lone) or "")
    result = _result()
    found = [ComponentSlowdown("sampler", _sensitivity("sampler", 8.5, -8.9, 114.6), wide, 1.0, 1.0, 5, 0.5)]
    result.what_if = what_if_section(found, result, levels=(0.5, 1.0), block_steps=4, steps=50)
    sampler = next(line for line in summary.prediction_lines(result) if line.strip().startswith("sampler:"))
    assert (
        "slowdown unresolved (sensitivity 8.50 [-8.90, 114.60])" in sampler
        and "slowdown-measured" not in sampler
    )


def test_a_void_slowdown_run_is_said_on_the_line_and_in_the_ledger(tmp_path: Path) -> None:
    result = _result()
    result.what_if = what_if_section(
        _found(), result, levels=(0.5, 1.0), block_steps=4, steps=200, run_void="the machine was busy"
    )
    assert result.what_if["components"]["sampler"]["void"] is None  # the component's own figure stands
    sampler = next(line for line in summary.prediction_lines(result) if line.strip().startswith("sampler:"))
    assert (
        "slowdown-measured (sensitivity 0.96" in sampler and "its run void: the machine was busy" in sampler
    )
    result.verdict["verify"] = {"components": {"sampler": {"measured_gain": 0.40}}}
    pair_with_verify(SimpleNamespace(run_dir=tmp_path, result=result), tmp_path / "ledger.jsonl")  # type: ignore[arg-type]
    (record,) = read_ledger(tmp_path / "ledger.jsonl")
    assert record.health == "void: the slowdown run: the machine was busy"


def test_the_slowdown_run_releases_each_components_measured_share_and_the_section_says_so(
    tmp_path: Path,
) -> None:
    """run_what_if end to end, with a run-again that steps a recording tracer on a fake clock: the experiment it hands
    the run delays the sampler with the GIL released for the main run's kernel share, and result.json says so."""
    import pandas as pd

    from infer_prof.profiler.checks.delay import gil_release
    from infer_prof.profiler.checks.what_if import run_what_if
    from infer_prof.profiler.collectors.spans import RecordingTracer
    from infer_prof.profiler.session.options import EngineOptions

    clock = {"now": 0}

    def tick() -> int:
        clock["now"] += 100
        return clock["now"]

    spins: list[float] = []

    class Spinner:
        def calibrate(self) -> int:
            return 0

        def spin(self, start_ns: int, requested_ns: int, released: float = 0.0) -> int:
            spins.append(released)
            clock["now"] = start_ns + requested_ns
            return requested_ns

    def run_again(native: frozenset[str], run_dir: Path, label: str, hook: object) -> SimpleNamespace:
        assert hook is not None and label.startswith("what-if")
        hook.spinner, hook.clock = Spinner(), tick  # type: ignore[attr-defined]
        tracer = RecordingTracer(clock=tick, cpu_clock=None)
        hook.install(SimpleNamespace(tracer=tracer))  # type: ignore[attr-defined]
        hook.start()  # type: ignore[attr-defined]
        rows = []
        for step in range(160):
            start = clock["now"]
            with tracer.span("step"):
                with tracer.span("sampler"):
                    clock["now"] += 1_000_000
            rows.append({"step": step, "duration_ms": (clock["now"] - start) / 1e6})
        return SimpleNamespace(steps=pd.DataFrame(rows), result=_result(), interrupted=False)

    result = _result()
    assert result.breakdown is not None
    result.breakdown["methods"]["spans"]["kernel_fraction_by_span"] = {"sampler": 0.4}
    outcome = SimpleNamespace(run_dir=tmp_path, result=result)
    section = run_what_if(
        outcome,  # type: ignore[arg-type]
        EngineOptions(model="synthetic:tiny"),
        ["sampler"],
        run_again,  # type: ignore[arg-type]
    )
    assert section["released"] == {"sampler": 0.4} and section["gil_release"] == gil_release()
    assert spins and set(spins) == {0.4}
    written = json.loads((tmp_path / "result.json").read_text())
    assert written["what_if"]["released"] == {"sampler": 0.4}
    check_file(written, "result.json")
