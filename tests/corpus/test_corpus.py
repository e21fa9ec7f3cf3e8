"""Every corpus case (tests/corpus/cases.py) ends with exit 2 and one line on stderr: no traceback, no hang,
no half-written file, and no model loaded for input that can be checked before work starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.corpus.cases import Case, build

ROOT = Path(__file__).resolve().parent.parent.parent
CASE_SECONDS = 60  # a hang guard, not a speed claim: each case is refused long before this
MIN_CASES = 150


def _leftovers(root: Path) -> list[str]:
    """Temp files of an atomic write that never finished (`.name.XXXX.tmp`)."""
    return sorted(str(path.relative_to(root)) for path in root.rglob(".*.tmp"))


def _run_worker(cases: list[Case], root: Path, cwd: Path | None = None) -> dict[str, dict]:
    """Run `cases` in one worker process (in `cwd`, by default `root`, where the case list is written)."""
    spec = root / "cases.json"
    spec.write_text(
        json.dumps(
            [{"id": case.id, "args": case.args, "cwd": str(cwd or root), "env": case.env} for case in cases]
        )
    )
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", "NO_COLOR": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.corpus.worker", str(spec)],
        cwd=ROOT,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=CASE_SECONDS * 4 + 3 * len(cases))
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
    results, started = {}, None
    for line in stdout.splitlines():
        record = json.loads(line)
        if "start" in record:
            started = record["start"]
        else:
            results[record["id"]] = record
            started = None
    assert started is None, (
        f"case {started!r} never finished (a hang or a crash of the worker): {stderr[-2000:]}"
    )
    assert process.returncode == 0, f"the worker died: {stderr[-2000:]}"
    return results


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Case], dict[str, dict], Path]:
    root = tmp_path_factory.mktemp("corpus")
    cases = build(root)
    return cases, _run_worker(cases, root), root


def test_the_corpus_is_large_and_reaches_every_command(corpus) -> None:  # type: ignore[no-untyped-def]
    cases, _results, _root = corpus
    assert len(cases) >= MIN_CASES
    commands = {case.args[0] for case in cases}
    assert {
        "run",
        "compare",
        "report",
        "budget",
        "generate",
        "golden",
        "bench",
        "selftest",
        "scenarios",
        "serve",
        "sweep",
    } <= commands


def test_every_bad_input_is_exit_2_with_one_line(corpus) -> None:  # type: ignore[no-untyped-def]
    cases, results, root = corpus
    wrong = []
    for case in cases:
        result = results[case.id]
        lines = [line for line in result["stderr"].splitlines() if line.strip()]
        problems = []
        if result["code"] != 2:
            problems.append(f"exit {result['code']}")
        if len(lines) != 1:
            problems.append(f"{len(lines)} lines on stderr")
        if "Traceback" in result["stderr"] + result["stdout"]:
            problems.append("a traceback")
        if result["seconds"] > CASE_SECONDS:
            problems.append(f"took {result['seconds']:.0f} s")
        if case.before_work and result["loaded_model"]:
            problems.append(f"loaded {result['loaded_model']} before refusing")
        if any((root / path).exists() for path in case.watch):
            problems.append(f"left {[path for path in case.watch if (root / path).exists()]}")
        if problems:
            wrong.append(f"{case.id}: {', '.join(problems)}: {(lines or [''])[-1][:160]}")
    assert wrong == [], f"{len(wrong)} of {len(cases)} cases broke the contract:\n" + "\n".join(wrong)


def test_no_half_written_file_anywhere(corpus) -> None:  # type: ignore[no-untyped-def]
    _cases, _results, root = corpus
    assert _leftovers(root) == []
