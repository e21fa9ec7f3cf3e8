"""--verify's pairs become ledger records: one a component with both gains, with its run's health and commit."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from infer_prof.profiler.ledger import load_ledger
from infer_prof.profiler.ledger.verify_pairs import append_verify_pairs, verify_records

BUSY = {"void": "the machine was busy", "engine_thread": {"core_share": 0.28}}


def fake_result(health: dict | None = None) -> Any:
    """What the hook reads of the main run's RunResult: config, environment, health and the verdict's predictions."""
    return SimpleNamespace(
        config={"model": "synthetic:tiny", "dtype": "float32", "scenario": "sampler-heavy"},
        environment={"git_revision": "0123456789ab"},
        health=health,
        verdict={
            "predictions": {
                "sampler": {"predicted_gain": 0.20, "predicted_gain_low": 0.15, "predicted_gain_high": 0.26},
                "scheduler": {
                    "predicted_gain": 0.01,
                    "predicted_gain_low": 0.005,
                    "predicted_gain_high": 0.02,
                },
            }
        },
    )


def components() -> dict[str, dict[str, Any]]:
    """A verify section's components as compare_component and inrun_entry write them (the fields the hook reads)."""
    return {
        "sampler": {
            "method": "in-run",
            "share": 0.5,
            "native_speedup": 1.67,
            "speedup_source": "replay",
            "predicted_gain": 0.20,
            "measured_gain": 0.22,
            "measured_low": 0.19,
            "measured_high": 0.25,
            "void": None,
            "run_dir": "verify/switched-sampler",
            "run_dirs": ["verify/switched-sampler"],
        },
        "scheduler": {
            "share": 0.02,
            "native_speedup": 3.1,  # a span speedup: not the verdict's prediction, so no interval
            "speedup_source": "verify-run spans",
            "predicted_gain": 0.0135,
            "measured_gain": 0.011,
            "void": None,
            "run_dir": "verify/native-scheduler",
            "python_neighbours": [".", "verify/python-after-scheduler"],
        },
        "prepare": {  # no prediction: no pair
            "share": 0.01,
            "native_speedup": None,
            "predicted_gain": None,
            "measured_gain": 0.002,
            "void": None,
        },
    }


def test_each_component_with_both_gains_is_one_record(tmp_path: Path) -> None:
    records = verify_records(tmp_path, fake_result(), components(), recorded_at="2026-12-06T14:00:00+00:00")
    assert [record.component for record in records] == ["sampler", "scheduler"]
    sampler, scheduler = records
    assert (sampler.kind, sampler.scenario, sampler.model, sampler.dtype) == (
        "verify",
        "sampler-heavy",
        "synthetic:tiny",
        "float32",
    )
    assert (sampler.predicted, sampler.predicted_low, sampler.predicted_high) == (0.20, 0.15, 0.26)
    assert (sampler.measured, sampler.measured_low, sampler.measured_high) == (0.22, 0.19, 0.25)
    assert sampler.health == "ok" and sampler.commit == "0123456789ab" and sampler.run_dir == str(tmp_path)
    assert sampler.method == "Amdahl: share 50.0%, replay speedup 1.7x; measured: twins in turns in one run"
    assert (
        scheduler.predicted == 0.0135 and scheduler.predicted_low is None and scheduler.measured_low is None
    )
    assert scheduler.method.endswith("verify-run spans speedup 3.1x; measured: whole runs, twin on vs off")


def test_a_pair_is_void_by_its_drift_guard_the_main_run_or_a_run_it_was_measured_in(tmp_path: Path) -> None:
    entries = components()
    entries["scheduler"]["void"] = "void: the machine changed: the yardstick moved 1.38x"
    records = verify_records(tmp_path, fake_result(), entries)
    assert [record.health for record in records] == [
        "ok",
        "void: the machine changed: the yardstick moved 1.38x",
    ]

    main_busy = verify_records(tmp_path, fake_result(health=BUSY), components())
    assert {record.health for record in main_busy} == {
        "void: the main run: the machine was busy (the engine thread got 28% of a core)"
    }

    neighbour = tmp_path / "verify" / "python-after-scheduler"
    neighbour.mkdir(parents=True)
    (neighbour / "result.json").write_text(json.dumps({"health": {"void": "the engine was saturated"}}))
    records = verify_records(tmp_path, fake_result(), components())
    assert [record.health for record in records] == [
        "ok",
        "void: its run verify/python-after-scheduler: the engine was saturated",
    ]


def test_the_pairs_are_appended_beside_the_run_directory_by_default(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "demo"
    note = append_verify_pairs(run_dir, fake_result(), components())
    ledger = tmp_path / "runs" / "ledger.jsonl"
    assert note == f"2 pair(s) appended to {ledger}"
    assert [record.component for record in load_ledger(ledger).records] == ["sampler", "scheduler"]
    assert append_verify_pairs(run_dir, fake_result(), {}) == "no pair to record"


def test_a_ledger_that_cannot_be_written_does_not_fail_the_run(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder", encoding="utf-8")
    note = append_verify_pairs(tmp_path / "run", fake_result(), components(), a_file / "ledger.jsonl")
    assert note.startswith("not recorded: cannot append to")


def test_verify_records_its_pairs_where_it_records_its_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """verify's _record, with the verdict's recomputation stubbed: the ledger gets the pairs and the section says where."""
    from infer_prof.profiler.checks import verify

    monkeypatch.setattr(verify, "diagnose", lambda *args, **kwargs: {"predictions": {}})
    result = fake_result()
    result.breakdown, result.engine, result.collectors, result.replay = {}, {}, {}, None
    result.to_dict = lambda: {"verdict": result.verdict}
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    outcome = SimpleNamespace(run_dir=run_dir, result=result)
    verify._record(outcome, None, components(), {}, [result], tmp_path / "mine.jsonl")  # type: ignore[arg-type]
    assert [record.component for record in load_ledger(tmp_path / "mine.jsonl").records] == [
        "sampler",
        "scheduler",
    ]
    written = json.loads((run_dir / "result.json").read_text())
    assert written["verdict"]["verify"]["ledger"] == f"2 pair(s) appended to {tmp_path / 'mine.jsonl'}"


def test_a_pair_whose_measurement_cannot_check_its_prediction_is_void_with_the_reason(tmp_path: Path) -> None:
    entries = components()
    entries["sampler"] |= {"resolves": False, "half_width": 0.09}  # ±9 points around a 20% prediction
    records = verify_records(tmp_path, fake_result(), entries, spread=0.125)
    sampler, scheduler = records
    assert sampler.health.startswith("void: unresolvable: the measured gain's interval (±9.0%)")
    # A 1.35% gain measured between whole runs that differ by 12.5% among themselves: noise, not the twin.
    assert scheduler.health == (
        "void: unresolvable: the predicted gain +1.4% is smaller than the 12.5% by which --verify's Python runs differ"
    )
    resolved = verify_records(tmp_path, fake_result(), components(), spread=0.005)
    assert [record.health for record in resolved] == ["ok", "ok"]
