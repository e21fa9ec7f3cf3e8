"""A launched server never outlives infer-prof, however it ends (SIGKILL included): the watchdog stops the server's
group and every process carrying the launch's mark; a command that daemonizes is followed to the process that
listens, and one that leaves its server in the background is refused; nothing is left running either way."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infer_prof.errors import TargetError
from infer_prof.profiler.session.target.launch import group_members, launched_server
from infer_prof.profiler.session.target.tree import descendants, parents, pids_listening
from infer_prof.profiler.session.target.watchdog import MARK_VARIABLE, marked_pids, stop_all, watch
from tests.profiler.session.target.conftest import alive, fake_command, free_port, wait_for

HERE = Path(__file__).parent
ROOT = HERE.parents[3]
DYING = HERE / "fake_dying_server.py"
LEFT_S = 8.0  # a hang guard for "nothing left": the watchdog's grace is 3 s, SIGKILL's effect immediate


def dying(*extra: str) -> str:
    return " ".join([sys.executable, str(DYING), *extra])


def launch_then_kill(tmp_path: Path, command: str, port: int) -> tuple[list[int], float]:
    """Launch `command` from a child process, SIGKILL that process once the server answers; the server's
    processes (and the seconds they took to go) once none is left, or those left after LEFT_S."""
    parent = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "launch_and_wait.py"),
            command,
            f"http://127.0.0.1:{port}",
            str(tmp_path / "s.log"),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        assert line.startswith("ready"), (line, (tmp_path / "s.log").read_text())
        root, group = map(int, line.split()[1:])
        server = sorted(
            set(descendants(root, parents())) | set(group_members(group)) | set(pids_listening(port))
        )
        assert server
    finally:
        parent.kill()
        parent.wait()
    killed = time.monotonic()
    wait_for(lambda: not any(alive(pid) for pid in server), LEFT_S)
    return [pid for pid in server if alive(pid)], time.monotonic() - killed


@pytest.mark.parametrize(
    "shape",
    ["exec", "shell-stays", "bash-wrapper", "ignores-sigterm", "daemonizes"],
)
def test_a_server_never_outlives_a_killed_launcher(tmp_path: Path, shape: str) -> None:
    port = free_port()
    server = {
        "exec": fake_command("--port", str(port)),
        "shell-stays": f"cd {tmp_path} && {fake_command('--port', str(port))}",
        "bash-wrapper": f"bash -c '{fake_command('--port', str(port))}; echo done'",
        "ignores-sigterm": f"cd {tmp_path} && {dying('--ignore-term', '--child', '--port', str(port))}",
        "daemonizes": dying("--daemonize", "--port", str(port)),
    }[shape]
    left, _seconds = launch_then_kill(tmp_path, server, port)
    try:
        assert left == [], f"{shape}: pid {left} outlived the launcher by {LEFT_S:g} s"
    finally:
        for pid in left:
            os.kill(pid, signal.SIGKILL)


def test_a_daemonizing_command_is_followed_to_its_listener_and_stopped(tmp_path: Path) -> None:
    port, said = free_port(), []
    with launched_server(
        dying("--daemonize", "--port", str(port)),
        f"http://127.0.0.1:{port}",
        tmp_path / "s.log",
        say=said.append,
    ) as server:
        assert server is not None and server.daemonized
        listener = pids_listening(port)
        assert server.root in listener and server.root != server.pid
        assert any("daemonizes; following it" in line for line in said)
        server.check_alive()  # the command's exit is no death: its server runs
    assert not alive(server.root) and not pids_listening(port)


def test_a_command_that_backgrounds_its_server_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    port = free_port()
    with (
        pytest.raises(
            TargetError,
            match=r"exited with status 0 before it answered, and left pid [\d, ]+ in the background",
        ) as caught,
        # Not listening yet when the command exits (one that already listens is followed, as a daemon is).
        launched_server(
            f"(sleep 2; exec {dying('--port', str(port))}) &", f"http://127.0.0.1:{port}", tmp_path / "s.log"
        ),
    ):
        pass
    assert "\n" not in str(caught.value)
    pids = [int(pid) for pid in str(caught.value).split("left pid ")[1].split(" in")[0].split(", ")]
    assert wait_for(lambda: not any(alive(pid) for pid in pids), 5)


def test_the_watchdog_stops_the_group_and_the_marked_unless_released() -> None:
    mark = "test-" + os.urandom(4).hex()
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    marked = subprocess.Popen(
        ["sleep", "60"], start_new_session=True, env={**os.environ, MARK_VARIABLE: mark}
    )
    try:
        # Popen returns once the exec closed its pipe, which the kernel does before it sets the new environment: for
        # a moment /proc/PID/environ reads empty (docs/measurements.md, "Two flaky tests"). Ask again.
        assert wait_for(lambda: marked_pids(mark) == [marked.pid], 5)
        assert watch([f"group {sleeper.pid}\n", f"mark {mark}\n", "release\n"], 0.5) is True
        assert alive(sleeper.pid) and alive(marked.pid)
        assert (
            watch([f"group {sleeper.pid}\n", f"mark {mark}\n"], 0.5) is False
        )  # the pipe's end: infer-prof is gone
        assert sleeper.wait(5) == -signal.SIGTERM and marked.wait(5) == -signal.SIGTERM
    finally:
        for process in (sleeper, marked):
            process.kill()
            process.wait()


def test_the_watchdog_kills_what_ignores_sigterm_after_its_grace() -> None:
    stubborn = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert stubborn.stdout is not None and stubborn.stdout.readline()
        from infer_prof.profiler.session.target.watchdog import start_time

        stop_all(None, None, {stubborn.pid: str(start_time(stubborn.pid))}, 0.2)
        assert stubborn.wait(5) == -signal.SIGKILL
    finally:
        stubborn.kill()
        stubborn.wait()
