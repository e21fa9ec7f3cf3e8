"""`infer-prof run --launch` as a user meets it, in a subprocess: killed with SIGKILL mid-run it leaves no server
process behind; a server that crashes with SIGSEGV mid-run is the summary's first line, the result is written and
the run exits 1, with nothing left running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.engine.conftest import SMOLLM2_MISSING
from tests.profiler.session.target.conftest import alive, free_port, wait_for

HERE = Path(__file__).parent
ROOT = HERE.parents[3]
DYING = HERE / "fake_dying_server.py"
CLI = [sys.executable, "-m", "infer_prof.cli"]
RUN_S = 240  # a hang guard: the prompts' tokenizer loads first, which takes tens of seconds on a busy machine

# 400 quick requests at 20/s: a 20 s load, long enough to be killed in.
LONG = """
description = "quick, steady, long"
seed = 0
num_requests = 400
warmup_requests = 0
prompt_tokens = { dist = "fixed", value = 8 }
output_tokens = { dist = "fixed", value = 4 }
[load]
mode = "open-loop"
rate = 20.0
"""

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _smollm2() -> None:
    from infer_prof.engine.loader import _local_smollm2

    if _local_smollm2() is None:
        pytest.skip(SMOLLM2_MISSING)  # prompts are sized with SmolLM2's tokenizer


def server_processes(port: int) -> list[int]:
    """Every process whose command line names this test's port."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if str(DYING) in command and f"--port {port}" in command and alive(int(entry.name)):
                found.append(int(entry.name))
    return found


def launch(tmp_path: Path, port: int, *extra: str) -> tuple[subprocess.Popen[str], Path]:
    (tmp_path / "long.toml").write_text(LONG)
    out = tmp_path / "run"
    command = f"cd {tmp_path} && {sys.executable} {DYING} --child --port {port} {' '.join(extra)}"
    process = subprocess.Popen(
        [*CLI, "run", "--launch", command, "-s", str(tmp_path / "long.toml"), "--no-report", "-o", str(out)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
    )
    return process, out


def requests_served(out: Path) -> int:
    try:
        return (out / "server.log").read_text().count("request:")
    except OSError:
        return 0


def test_infer_prof_killed_with_sigkill_mid_run_leaves_no_server(tmp_path: Path) -> None:
    port = free_port()
    process, out = launch(tmp_path, port, "--ignore-term")  # the worst case: only SIGKILL ends it
    try:
        assert wait_for(lambda: requests_served(out) >= 5, RUN_S), (
            process.stderr.read() if process.poll() else ""
        )
        assert server_processes(port)
        process.kill()
        process.wait()
        killed = time.monotonic()
        gone = wait_for(lambda: not server_processes(port), 10)
        assert gone, f"pid {server_processes(port)} outlived infer-prof by {time.monotonic() - killed:.0f} s"
    finally:
        process.kill()
        for pid in server_processes(port):
            os.kill(pid, signal.SIGKILL)


def test_a_launched_server_that_crashes_mid_run_is_the_headline_and_exit_1(tmp_path: Path) -> None:
    port = free_port()
    process, out = launch(tmp_path, port, "--crash-after", "20")
    try:
        stdout, stderr = process.communicate(timeout=RUN_S)
    finally:
        process.kill()
    assert process.returncode == 1, stderr[-2000:]
    flat = " ".join(stdout.split())  # the terminal folds long lines
    assert flat.startswith("The server died ") and "killed by SIGSEGV" in flat[:400]
    assert "The server's log ends (server.log):" in flat and "crashing with signal 11" in flat
    assert "infer-prof: The server died" in stderr and "Traceback" not in stderr
    result = json.loads((out / "result.json").read_text())
    death = result["target"]["death"]
    assert death["signal"] == "SIGSEGV" and result["partial"] is True
    assert 20 <= result["target"]["http"]["sent"] < 400  # stopped when it died; what came before is kept
    assert not server_processes(port)
