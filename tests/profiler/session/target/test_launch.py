"""`--launch`: the server started in its own session, ready once /v1/models answers, and stopped with every process
of its group; each way it can fail is one TargetError line, and nothing of it is left running."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import httpx
import pytest

from infer_prof.errors import TargetError
from infer_prof.profiler.session.target.launch import (
    LaunchedServer,
    group_members,
    launched_server,
    port_in_command,
    target_url,
)
from infer_prof.profiler.session.target.tree import descendants, parents
from tests.profiler.session.target.conftest import alive, fake_command, free_port, wait_for


def test_a_launched_server_answers_and_leaves_nothing_behind(tmp_path: Path) -> None:
    port = free_port()
    with launched_server(
        fake_command("--port", str(port)), f"http://127.0.0.1:{port}", tmp_path / "server.log", timeout_s=60
    ) as server:
        assert server is not None
        tree = descendants(server.pid, parents())
        assert len(tree) >= 3  # the shell, the fake server and its engine child
        assert httpx.get(f"http://127.0.0.1:{port}/v1/models").json()["data"][0]["id"] == "fake"
    assert not group_members(server.pid) and not any(alive(pid) for pid in tree)
    assert "listening on" in (tmp_path / "server.log").read_text()


def test_a_server_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    port = free_port()
    command = (
        f"trap '' TERM; {fake_command('--port', str(port))}"  # the shell and its children ignore SIGTERM
    )
    with launched_server(
        command, f"http://127.0.0.1:{port}", tmp_path / "server.log", timeout_s=60
    ) as server:
        assert server is not None
        server.grace_s = 0.5
        tree = descendants(server.pid, parents())
    assert not group_members(server.pid) and not any(alive(pid) for pid in tree)


@pytest.mark.parametrize(
    ("command", "timeout_s", "message"),
    [
        (
            "no-such-server-command --port {port}",
            30,
            r"exited with status 127 before it answered \(the shell found no such command\); its log ends: .*not found",
        ),
        (
            fake_command("--exit-after", "0", "--port", "{port}"),
            30,
            r"exited with status 3 before it answered; its log ends: fake server: giving up",
        ),
        (
            fake_command("--ready-after", "60", "--port", "{port}"),
            1.5,
            r"did not answer at http://127.0.0.1:\d+/v1/models within 1.5 s",
        ),
        (
            fake_command("--spam", "300000", "--port", "{port}") + " | head -c 1",
            30,
            r"exited with status 0 before it answered",
        ),
    ],
)
def test_a_server_that_fails_to_start_is_one_line_and_leaves_nothing(
    tmp_path: Path, command: str, timeout_s: float, message: str
) -> None:
    port = free_port()
    launched = []
    with (
        pytest.raises(TargetError, match=message) as caught,
        launched_server(
            command.format(port=port),
            f"http://127.0.0.1:{port}",
            tmp_path / "server.log",
            timeout_s=timeout_s,
            say=launched.append,
        ) as server,
    ):
        raise AssertionError(f"{server} should not have become ready")
    assert "\n" not in str(caught.value)
    pid = int(launched[0].split()[2].rstrip(":"))  # "launched pid N: ..."
    assert not group_members(pid) and not alive(pid)


def test_where_the_launched_server_answers() -> None:
    assert port_in_command("python -m vllm.entrypoints.openai.api_server --model m --port 8123") == 8123
    assert port_in_command("llama-server --port=9001 -m x") == 9001 and port_in_command("serve -p 1") is None
    assert target_url(None, None, "server --port 8123") == "http://127.0.0.1:8123"
    assert target_url(None, 7000, "server --port 8123") == "http://127.0.0.1:7000"
    assert target_url("http://h:1", None, "server") == "http://h:1"
    with pytest.raises(TargetError, match="names no --port"):
        target_url(None, None, "server")
    with pytest.raises(TargetError, match="give one of them"):
        target_url("http://h:1", 2, None)
    with pytest.raises(TargetError, match="--launch-timeout=0: give a positive"):
        LaunchedServer("server --port 1", "http://127.0.0.1:1", Path("unused.log"), timeout_s=0)
    with pytest.raises(TargetError, match="the command is empty"):
        LaunchedServer("  ", "http://127.0.0.1:1", Path("unused.log"))


def test_ctrl_c_while_waiting_or_while_running_stops_the_whole_group(tmp_path: Path) -> None:
    port, stop, said = free_port(), threading.Event(), []
    slow = fake_command("--ready-after", "60", "--port", str(port))
    threading.Timer(0.5, stop.set).start()  # the first Ctrl-C sets the stop event
    with (
        pytest.raises(KeyboardInterrupt),
        launched_server(
            slow, f"http://127.0.0.1:{port}", tmp_path / "a.log", stop_event=stop, say=said.append
        ),
    ):
        pass
    waited = int(said[0].split()[2].rstrip(":"))
    port = free_port()
    with (
        pytest.raises(KeyboardInterrupt),  # the second Ctrl-C raises inside the run
        launched_server(
            fake_command("--port", str(port)), f"http://127.0.0.1:{port}", tmp_path / "b.log"
        ) as server,
    ):
        assert server is not None
        tree = descendants(server.pid, parents())
        raise KeyboardInterrupt
    for group in (waited, server.pid):
        assert not group_members(group)
    assert not any(alive(pid) for pid in tree)


def test_a_server_that_dies_during_the_run_is_one_line(tmp_path: Path) -> None:
    port = free_port()
    with launched_server(
        fake_command("--port", str(port)), f"http://127.0.0.1:{port}", tmp_path / "server.log"
    ) as server:
        assert server is not None
        server.check_alive()  # answering: nothing to say
        api = next(
            pid
            for pid in descendants(server.pid, parents())
            if pid != server.pid
            and "fake_server" in Path(f"/proc/{pid}/cmdline").read_text()
            and "--child" not in Path(f"/proc/{pid}/cmdline").read_text()
        )
        os.kill(api, signal.SIGKILL)
        assert wait_for(lambda: server.process is not None and server.process.poll() is not None)
        with pytest.raises(TargetError, match=r"exited with status 137 during the run \(killed by SIGKILL\)"):
            server.check_alive()
    assert not group_members(server.pid)
