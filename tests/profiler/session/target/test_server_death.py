"""A server that dies during a run is the run's headline: the load stops at once, the result keeps what was measured
before and names the process that died, when and how (its signal where the OS tells); `--launch` adds its log."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from infer_prof.engine.tokenizer import Tokenizer
from infer_prof.profiler.rundir.results import read_run
from infer_prof.profiler.session.target.launch import group_members, launched_server
from infer_prof.profiler.session.target.liveness import Liveness, _death, _signal_name
from infer_prof.profiler.session.target.probe import probe
from infer_prof.profiler.session.target.target_plan import plan_target
from infer_prof.profiler.session.target.target_session import run_target_session
from infer_prof.profiler.session.target.tree import descendants, parents
from infer_prof.reports.run.summary import headline
from infer_prof.scenarios.spec import load_scenario
from tests.profiler.session.target.conftest import alive, free_port, wait_for

DYING = Path(__file__).with_name("fake_dying_server.py")

# 60 quick requests at 20/s: a 3 s load the server dies early in.
QUICK = """
description = "quick, steady"
seed = 0
num_requests = 60
warmup_requests = 0
prompt_tokens = { dist = "fixed", value = 8 }
output_tokens = { dist = "fixed", value = 4 }
[load]
mode = "open-loop"
rate = 20.0
"""


def dying_command(*extra: str) -> list[str]:
    return [sys.executable, str(DYING), *extra]


def start(*extra: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(dying_command("--port", "0", *extra), stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    assert "listening on" in line, line
    return process, line.split("listening on ")[1].split()[0]


def session(tmp_path: Path, url: str, launched=None, profile: str = "off"):  # type: ignore[no-untyped-def]
    (tmp_path / "quick.toml").write_text(QUICK)
    out = tmp_path / "run"
    out.mkdir(exist_ok=True)
    plan = plan_target(probe(url), None, profile, launched=launched.root if launched else None)
    started = time.monotonic()
    outcome = run_target_session(
        plan,
        load_scenario(str(tmp_path / "quick.toml")),
        out,
        tokenizer=Tokenizer.byte_level(256),
        profile=profile,
        launched=launched,
    )
    return outcome, time.monotonic() - started, read_run(out).result


def test_a_target_that_crashes_with_sigsegv_is_the_headline(tmp_path: Path) -> None:
    server, url = start("--crash-after", "5", "--child")
    try:
        outcome, seconds, result = session(tmp_path, url, profile="default")
    finally:
        server.kill()
        server.wait()
    death = result.target["death"]
    assert death["pid"] == server.pid and death["signal"] == "SIGSEGV" and death["status_of"] == "its own"
    assert death["exit_status"] == -signal.SIGSEGV and death["log_tail"] is None
    assert 0 <= death["at_s"] < 3.0
    assert headline(result).startswith(
        f"The server died {death['at_s']:.1f} s into the load: pid {server.pid}"
    )
    assert "killed by SIGSEGV" in death["headline"]
    # The load stopped when it died: not every request was sent, and what completed before is kept.
    assert result.target["http"]["sent"] < 60 and result.metrics["completed"] >= 5
    assert result.partial and not outcome.interrupted
    exited = {entry["pid"]: entry["exited"] for entry in result.target["processes"]}
    assert exited[server.pid] is True  # as the run ended, not as the last poll saw it


def test_a_target_killed_from_outside_is_named_with_its_status_unknown(tmp_path: Path) -> None:
    """A server that is not infer-prof's child (a daemon here): Linux gives its status to its parent alone."""
    log = tmp_path / "daemon.log"
    with open(log, "w") as output:
        assert (
            subprocess.run(dying_command("--port", "0", "--daemonize"), stdout=output, timeout=30).returncode
            == 0
        )
    assert wait_for(lambda: "listening on" in log.read_text())
    line = log.read_text().split("listening on ")[1]
    url, pid = line.split()[0], int(line.split("(pid ")[1].split(")")[0])
    threading.Timer(0.6, os.kill, (pid, signal.SIGKILL)).start()
    try:
        _outcome, _seconds, result = session(tmp_path, url)
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    death = result.target["death"]
    assert death["pid"] == pid and result.target["http"]["sent"] < 60
    # Its status is the reaper's to read; caught as a zombie first, it is known.
    if death["status_of"] == "unknown":
        assert death["exit_status"] is None and "exit status unknown" in death["headline"]
    else:
        assert death["status_of"] == "its own" and death["signal"] == "SIGKILL"


def test_a_launched_server_that_crashes_shows_its_log_and_leaves_nothing(tmp_path: Path) -> None:
    port = free_port()
    command = " ".join(dying_command("--port", str(port), "--crash-after", "5", "--child"))
    (tmp_path / "run").mkdir()
    with launched_server(
        f"cd {tmp_path} && {command}", f"http://127.0.0.1:{port}", tmp_path / "run" / "server.log"
    ) as launched:
        assert launched is not None
        tree = descendants(launched.pid, parents())
        _outcome, _seconds, result = session(tmp_path, f"http://127.0.0.1:{port}", launched)
    assert not group_members(launched.pid) and not any(alive(pid) for pid in tree)
    death = result.target["death"]
    assert death["signal"] == "SIGSEGV" and "fake_dying_server" in death["cmdline"]
    assert any("crashing with signal 11" in line for line in death["log_tail"] or [])


def test_the_watch_stops_the_load_on_ctrl_c_too(tmp_path: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    outer = threading.Event()
    try:
        watch = Liveness(sleeper.pid, outer_stop=outer, poll_s=0.01)
        watch.start()
        outer.set()
        assert wait_for(watch.load_stop.is_set, 5) and watch.death is None
        sleeper.kill()
        assert wait_for(lambda: watch.death is not None, 5)
        watch.stop()
    finally:
        sleeper.kill()
        sleeper.wait()
    assert watch.death is not None and watch.death["signal"] == "SIGKILL"


@pytest.mark.parametrize(
    ("status", "shell", "name"),
    [
        (-11, False, "SIGSEGV"),
        (139, True, "SIGSEGV"),
        (137, True, "SIGKILL"),
        (139, False, None),
        (1, True, None),
    ],
)
def test_signal_names_from_statuses(status: int, shell: bool, name: str | None) -> None:
    assert _signal_name(status, shell=shell) == name


def test_the_death_sentence_says_what_is_known() -> None:
    death = _death(
        pid=7,
        title="python",
        cmdline="python -m llama_cpp.server",
        at_s=2.34,
        status=139,
        status_from="the launched command's",
        gone=[7],
        log=["a", "b"],
    )
    assert death["headline"] == (
        "The server died 2.3 s into the load: pid 7 (python: python -m llama_cpp.server) vanished first; "
        "killed by SIGSEGV (the launched command's status 139)."
    )
    assert _death(pid=7, title="x", cmdline="", at_s=0, status=3, status_from="its own", gone=[7], log=None)[
        "headline"
    ].endswith("pid 7 (x) vanished first; exited with status 3 (its own).")
    unknown = _death(
        pid=7, title="x", cmdline="", at_s=0, status=None, status_from="unknown", gone=[7], log=None
    )
    assert (
        unknown["signal"] is None
        and "vanished first; exit status unknown: the server is not" in unknown["headline"]
    )
