"""`infer-prof ledger`: the score as a table or JSON; a missing ledger is one line and exit 2, an empty one exit 0."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from infer_prof.profiler.ledger import append_record
from tests.profiler.ledger.conftest import make_record


def infer_prof(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[object, str, str]:
    """The console script's entry run in this process: (exit code, stdout, stderr)."""
    from infer_prof.cli.main import main

    monkeypatch.setattr(sys, "argv", ["infer-prof", *argv])
    monkeypatch.setenv("COLUMNS", "140")
    monkeypatch.delenv("INFER_PROF_LEDGER", raising=False)
    with pytest.raises(SystemExit) as exit:
        main()
    captured = capsys.readouterr()
    return exit.value.code, captured.out, captured.err


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.jsonl"
    append_record(make_record(component="sampler", predicted=0.30, measured=0.28), path)  # inside, 2 pp
    append_record(make_record(component="sampler", predicted=0.20, measured=0.10), path)  # outside, 10 pp
    append_record(make_record(component="prepare", health="void: the machine was busy"), path)
    return path


def test_the_table_scores_the_pairs(
    ledger: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = infer_prof(["ledger", str(ledger)], monkeypatch, capsys)
    assert code == 0 and err == ""
    assert f"ledger {ledger}: 3 record(s)" in out
    rows = {tuple(line.split()[:2]): line.split()[2:] for line in out.splitlines() if line.startswith(" ")}
    # pairs, void, median |error| (pp), relative, in interval (with its Wilson interval), within 20%
    assert rows[("all", "all")] == ["2", "1", "6.00", "28%", "1/2", "(9-91%)", "1/2"]
    assert rows[("verify", "prepare")][:2] == ["0", "1"]


def test_json_is_the_summary_for_machines(
    ledger: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = infer_prof(["ledger", str(ledger), "--json"], monkeypatch, capsys)
    data = json.loads(out)
    assert code == 0 and data["path"] == str(ledger) and data["records"] == 3
    assert (data["total"]["pairs"], data["total"]["void"], data["total"]["inside"]) == (2, 1, 1)
    assert data["total"]["median_error_points"] == pytest.approx(6.0)
    assert [group["component"] for group in data["by_component"]] == ["prepare", "sampler"]
    assert data["damaged_lines"] == []


def test_a_missing_ledger_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = infer_prof(["ledger", str(tmp_path / "nowhere.jsonl")], monkeypatch, capsys)
    assert code == 2 and out == ""
    assert err.startswith("infer-prof: error: no ledger at") and len(err.strip().splitlines()) == 1


def test_an_empty_ledger_has_no_pairs_yet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "ledger.jsonl"
    empty.write_text("")
    code, out, _ = infer_prof(["ledger", str(empty)], monkeypatch, capsys)
    assert code == 0 and "no pairs yet" in out


def test_a_damaged_line_is_named_and_the_rest_scored(
    ledger: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with ledger.open("a", encoding="utf-8") as handle:
        handle.write("{not json\n")
    code, out, err = infer_prof(["ledger", str(ledger)], monkeypatch, capsys)
    assert code == 0 and "3 record(s)" in out
    assert err.startswith(f"infer-prof: {ledger}:4: skipped, not JSON")


def test_a_file_that_is_no_ledger_at_all_is_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("these are my notes\nnot a ledger\n")
    code, _, err = infer_prof(["ledger", str(other)], monkeypatch, capsys)
    assert code == 2 and err.strip().splitlines()[-1].startswith("infer-prof: error:")
    assert "holds no ledger record (2 damaged line(s))" in err


def test_with_void_scores_the_void_pairs_and_says_so(
    ledger: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = infer_prof(["ledger", str(ledger), "--with-void"], monkeypatch, capsys)
    assert code == 0 and "void pairs scored too (--with-void)" in out
    rows = {tuple(line.split()[:2]): line.split()[2:] for line in out.splitlines() if line.startswith(" ")}
    assert rows[("verify", "prepare")][:3] == ["1", "1", "2.00"]  # scored: 0.30 predicted, 0.28 measured
    code, out, _ = infer_prof(["ledger", str(ledger), "--with-void", "--json"], monkeypatch, capsys)
    assert json.loads(out)["include_void"] is True and json.loads(out)["total"]["pairs"] == 3
