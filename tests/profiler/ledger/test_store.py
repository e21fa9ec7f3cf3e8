"""The ledger file: records read back as written, concurrent appends lose nothing, damage is named and skipped."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
from pathlib import Path

import pytest

from infer_prof.errors import LedgerError, OutputError
from infer_prof.profiler.ledger import LedgerRecord, append_record, ledger_path, load_ledger, read_ledger
from infer_prof.profiler.ledger.records import from_line, health_text, to_line
from infer_prof.profiler.ledger.store import check_appendable, chosen_ledger
from tests.profiler.ledger.conftest import make_record

WRITERS = 4
APPENDS_EACH = 75


def test_a_record_reads_back_as_written(tmp_path: Path) -> None:
    first = make_record()
    second = make_record(
        kind="slowdown",
        component="scheduler",
        predicted_low=None,
        predicted_high=None,
        measured_low=None,
        measured_high=None,
        commit=None,
        health="void: the machine was busy",
        method="sensitivity 0.97",
    )
    path = tmp_path / "ledger.jsonl"
    assert append_record(first, path) == path
    append_record(second, path)
    assert read_ledger(path) == [first, second]
    assert path.read_text(encoding="utf-8").count("\n") == 2  # one line each
    assert second.void and not first.void


def test_an_integer_gain_reads_back_as_a_float_and_unknown_fields_are_ignored() -> None:
    data = json.loads(to_line(make_record()))
    data.update(predicted=0, newer_field="from a newer infer-prof")
    record = from_line(json.dumps(data))
    assert record.predicted == 0.0 and isinstance(record.predicted, float)


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"predicted": float("nan")}, "Out of range float"),
        ({"kind": "guess"}, "kind 'guess'"),
    ],
)
def test_a_record_that_would_not_read_back_is_refused(tmp_path: Path, change: dict, needle: str) -> None:
    path = tmp_path / "ledger.jsonl"
    with pytest.raises(ValueError, match=needle):
        append_record(make_record(**change), path)
    assert not path.exists() or path.read_text() == ""


def _append_many(path: str, writer: int) -> None:
    for index in range(APPENDS_EACH):
        append_record(make_record(run_dir=f"w{writer}/{index}", method="x" * 2000), Path(path))


def test_concurrent_appends_from_several_processes_lose_nothing(tmp_path: Path) -> None:
    # Long lines (over 2 kB each) so that an unlocked writer's line could be split by another's.
    path = tmp_path / "ledger.jsonl"
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_append_many, args=(str(path), writer)) for writer in range(WRITERS)]
    for process in writers:
        process.start()
    for process in writers:
        process.join(timeout=120)
        assert process.exitcode == 0
    ledger = load_ledger(path)
    assert ledger.damaged == []
    assert sorted(record.run_dir for record in ledger.records) == sorted(
        f"w{writer}/{index}" for writer in range(WRITERS) for index in range(APPENDS_EACH)
    )


def test_a_damaged_line_is_named_and_skipped(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    append_record(make_record(component="sampler"), path)
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"kind": "verify", "scenario": \n')  # a truncated line
        handle.write("\n")  # blank lines are not damage
        handle.write(json.dumps({**json.loads(to_line(make_record())), "measured": "high"}) + "\n")
    append_record(make_record(component="prepare"), path)
    ledger = load_ledger(path)
    assert [record.component for record in ledger.records] == ["sampler", "prepare"]
    assert [(line.number, line.reason) for line in ledger.damaged] == [
        (2, "not JSON (Expecting value at column 32)"),
        (4, "'measured' is missing or not a finite number"),
    ]
    with pytest.warns(UserWarning) as warned:
        assert len(read_ledger(path)) == 2
    assert [str(warning.message).split("ledger.jsonl:")[1][:14] for warning in warned] == [
        "2: skipped, no",
        "4: skipped, 'm",
    ]


def test_an_append_after_a_half_written_line_starts_a_line_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    path.write_text('{"kind": "verify", "sce', encoding="utf-8")  # a crash mid-write left this
    append_record(make_record(), path)
    ledger = load_ledger(path)
    assert ledger.records == [make_record()] and [line.number for line in ledger.damaged] == [1]


def test_a_missing_ledger_is_one_user_error(tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match="no ledger at .*nowhere.jsonl"):
        load_ledger(tmp_path / "nowhere.jsonl")
    with pytest.raises(LedgerError, match="is not a file"):
        load_ledger(tmp_path)


def test_the_ledger_is_the_one_given_else_the_environment_s_else_beside_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / "runs" / "20261206-chat"
    assert chosen_ledger(run_dir) == (tmp_path / "runs" / "ledger.jsonl", "the default ledger")
    assert ledger_path() == Path("runs") / "ledger.jsonl"
    monkeypatch.setenv("INFER_PROF_LEDGER", str(tmp_path / "team.jsonl"))
    assert chosen_ledger(run_dir) == (tmp_path / "team.jsonl", "INFER_PROF_LEDGER")
    assert chosen_ledger(run_dir, tmp_path / "mine.jsonl") == (tmp_path / "mine.jsonl", "--ledger")


def test_a_ledger_that_cannot_be_appended_to_is_refused_before_a_run(tmp_path: Path) -> None:
    check_appendable(tmp_path / "new" / "deeper" / "ledger.jsonl", source="--ledger")  # folders are made
    with pytest.raises(LedgerError, match="--ledger: .* is not a file"):
        check_appendable(tmp_path, source="--ledger")
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder", encoding="utf-8")
    with pytest.raises(
        LedgerError, match="INFER_PROF_LEDGER: cannot create .*a-file is not a writable folder"
    ):
        check_appendable(a_file / "ledger.jsonl", source="INFER_PROF_LEDGER")
    with pytest.raises(OutputError, match="cannot append to .*a-file/ledger.jsonl"):
        append_record(make_record(), a_file / "ledger.jsonl")


def test_health_says_ok_or_void_with_its_reason_once() -> None:
    assert health_text(None) == "ok"
    assert health_text("the machine was busy") == "void: the machine was busy"
    assert health_text("void: the machine changed") == "void: the machine changed"


def test_the_record_s_fields_are_the_interface_others_write() -> None:
    # profiler.analysis.sensitivity writes these by name: a rename here must be deliberate.
    assert [field.name for field in dataclasses.fields(LedgerRecord)] == [
        "kind",
        "scenario",
        "model",
        "dtype",
        "component",
        "predicted",
        "predicted_low",
        "predicted_high",
        "measured",
        "measured_low",
        "measured_high",
        "health",
        "commit",
        "run_dir",
        "recorded_at",
        "method",
    ]
