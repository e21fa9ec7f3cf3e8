"""Process corpus cases the shared corpus cannot hold: a user engine table that does not read (set through the
environment) is refused before any run starts, built-in, --target or --launch, with or without --probe; and a
server command that fails ends in one error line and exit 2 with nothing of it left running."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.corpus.cases import SYNTH, Case
from tests.corpus.process import DYING, FAKE, free_port, server
from tests.corpus.test_corpus import _run_worker
from tests.profiler.session.target.conftest import alive, wait_for

BAD_TABLE = 'name = "mine"\ndetect = 5\n'  # `detect` must be a list of file patterns


def _processes_naming(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in command and alive(int(entry.name)):
                found.append(int(entry.name))
    return found


def test_a_bad_engine_table_is_refused_before_any_run_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = tmp_path / "mine.toml"
    table.write_text(BAD_TABLE)
    monkeypatch.setenv("INFER_PROF_ENGINE_TABLES", str(table))  # the worker inherits it
    launch = {
        name: server(tmp_path / f"ran-{name}", "--port", str(free_port())) for name in ("launch", "probe")
    }
    cases = [
        Case("table-builtin", ["run", *SYNTH, "-r", "2", "-o", "out-builtin"], watch=["out-builtin"]),
        Case("table-target", ["run", "--target", "http://127.0.0.1:1", "-r", "2", "-o", "out-target"]),
        Case("table-launch", ["run", "--launch", launch["launch"], "-r", "2", "-o", "out-launch"]),
        Case(
            "table-launch-probe",
            ["run", "--launch", launch["probe"], "--probe", "-r", "2", "-o", "out-probe"],
        ),
    ]
    results = _run_worker(cases, tmp_path)
    for case in cases:
        result = results[case.id]
        lines = [line for line in result["stderr"].splitlines() if line.strip()]
        assert result["code"] == 2 and len(lines) == 1, (case.id, result)
        assert f"engine table {table}" in lines[0] and result["loaded_model"] == [], (case.id, lines)
    for name in ("builtin", "target", "launch", "probe"):
        assert not (tmp_path / f"out-{name}").exists()  # no run directory was claimed
    assert not list(tmp_path.glob("ran-*"))  # neither server command ran


def test_a_server_command_that_fails_is_one_error_line_and_leaves_nothing(tmp_path: Path) -> None:
    ports = {name: free_port() for name in ("exits", "missing", "silent", "background", "true")}
    commands = {
        "exits": f"{sys.executable} {FAKE} --exit-after 0 --port {ports['exits']}",
        "missing": f"no-such-server-command --port {ports['missing']}",
        "silent": f"sleep 30  # --port {ports['silent']}",
        "background": f"(sleep 2; exec {sys.executable} {DYING} --port {ports['background']}) &",
        "true": f"true  # --port {ports['true']}",
    }
    timeouts = {"silent": ["--launch-timeout", "1"]}
    cases = [
        Case(
            f"launch-{name}",
            ["run", "--launch", command, *timeouts.get(name, []), "-r", "2", "-o", f"out-{name}"],
        )
        for name, command in commands.items()
    ]
    results = _run_worker(cases, tmp_path)
    messages = {
        "exits": "exited with status 3 before it answered; its log ends: fake server: giving up",
        "missing": "exited with status 127 before it answered (the shell found no such command)",
        "silent": "did not answer at http://127.0.0.1:",
        "background": "exited with status 0 before it answered, and left pid",
        "true": "exited with status 0 before it answered",
    }
    for case in cases:
        result = results[case.id]
        lines = [line for line in result["stderr"].splitlines() if line.strip()]
        assert result["code"] == 2 and "Traceback" not in result["stderr"], (case.id, result)
        assert lines[-1].startswith("infer-prof: error: --launch: the server "), (case.id, lines)
        assert messages[case.id.removeprefix("launch-")] in lines[-1], (case.id, lines[-1])
    for name, port in ports.items():
        assert wait_for(lambda port=port: not _processes_naming(f"--port {port}"), 5), name
