"""A server's process tree from /proc: the listener of a port, the tree around any of its pids, the checks on --pid,
process roles, and the watcher that samples children that appear later (with a stand-in sampler: no py-spy)."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import ClassVar

import pytest

from infer_prof.errors import TargetError
from infer_prof.profiler.collectors.base import Collector
from infer_prof.profiler.session.target.tree import (
    ProcessInfo,
    assign_role,
    find_server_tree,
    parse_listeners,
    tree_processes,
)
from infer_prof.profiler.session.target.watch import TreeSampler, at_once
from tests.profiler.session.target.conftest import FakeServer, wait_for

# /proc/net/tcp: a listener on 8000 (0x1F40), a connection to 8000 and a listener on another port.
PROC_NET_TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0 100 0 0 10 0
   1: 0100007F:1F40 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0 20 4 30 10 -1
   2: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4444 1 0 100 0 0 10 0
"""


def test_only_listening_sockets_of_the_port_count() -> None:
    assert parse_listeners(PROC_NET_TCP, 8000) == {4242}
    assert parse_listeners(PROC_NET_TCP, 22) == {4444}
    assert parse_listeners(PROC_NET_TCP, 9000) == set()


@pytest.mark.parametrize(
    ("title", "cmdline", "listening", "role"),
    [
        ("VLLM::EngineCor", "VLLM::EngineCore", False, "engine core"),
        ("VLLM::Worker", "VLLM::Worker", False, "model worker"),
        ("python3", "python3 -m vllm.entrypoints.openai.api_server --model m", True, "API server"),
        ("python3", "python3 -m llama_cpp.server --model m.gguf", True, "API server + engine loop"),
        (
            "python3",
            "python3 -c from multiprocessing.resource_tracker import main;main(5)",
            False,
            "idle helper (multiprocessing resource tracker)",
        ),
        ("python3", "python3 myserver.py", True, "API server"),
        ("python3", "python3 myworker.py", False, "unknown"),
        (
            "sh",
            "/bin/sh -c python -m vllm.entrypoints.openai.api_server --port 8000",
            False,
            "shell (starts the server)",
        ),
    ],
)
def test_roles_come_from_titles_then_from_the_listening_socket(
    title: str, cmdline: str, listening: bool, role: str
) -> None:
    process = ProcessInfo(pid=10, ppid=1, title=title, cmdline=cmdline, python=True, listening=listening)
    assign_role(process, 8000)
    assert process.role == role
    assert ("8000" in process.role_source) == (
        role == "API server" and title == "python3" and "vllm" not in cmdline
    )
    if title.startswith("VLLM::"):
        assert process.role_source == f"process title {title!r}"  # the words that decided it


def test_the_tree_is_found_from_its_port_and_from_any_of_its_pids(fake_server: FakeServer) -> None:
    assert wait_for(lambda: len(tree_processes(fake_server.pid)) == 2)
    parent, child = tree_processes(fake_server.pid)
    assert (parent.pid, child.ppid) == (fake_server.pid, fake_server.pid) and parent.python and child.python
    by_port = find_server_tree(None, fake_server.port)
    assert by_port.root == fake_server.pid and by_port.listeners == [fake_server.pid]
    by_child = find_server_tree(
        child.pid, fake_server.port
    )  # the engine child's pid stands for the whole tree
    assert by_child.root == fake_server.pid and by_child.note is None
    assert (
        find_server_tree(child.pid, None).note is not None
    )  # a remote target: nothing to check --pid against


def test_a_pid_that_is_not_python_or_not_the_server_is_refused(fake_server: FakeServer) -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with pytest.raises(TargetError, match=r"--pid \d+ \(sleep\) is not a Python process"):
            find_server_tree(sleeper.pid, fake_server.port)
        with pytest.raises(TargetError, match=rf"is not the server: .*\(pid {fake_server.pid} does\)"):
            find_server_tree(stranger.pid, fake_server.port)
        with pytest.raises(TargetError, match="no process on this machine listens on port"):
            find_server_tree(None, 9)
    finally:
        for process in (sleeper, stranger):
            process.kill()
            process.wait()


class StandIn(Collector):
    """A sampler that records which pids it was started on."""

    started: ClassVar[list[int]] = []

    def __init__(self, pid: int) -> None:
        super().__init__()
        self.pid = pid

    def _start(self) -> None:
        StandIn.started.append(self.pid)


def test_children_that_appear_later_are_sampled_too() -> None:
    server = FakeServer("--late-child-after", "2")
    StandIn.started = []
    watcher = TreeSampler(server.pid, StandIn, port=server.port, poll_s=0.1)
    try:
        assert wait_for(lambda: len(tree_processes(server.pid)) == 2)
        watcher.start()
        engine = next(p.pid for p in tree_processes(server.pid) if p.pid != server.pid)
        assert StandIn.started == [server.pid, engine]
        server.complete(2)
        assert wait_for(lambda: len(StandIn.started) == 3)
    finally:
        watcher.stop()
        server.stop()
    seen = {watched.info.pid: watched for watched in watcher.processes()}
    late = seen[StandIn.started[2]]
    assert late.late and late.info.role == "model worker" and not seen[engine].late
    assert seen[server.pid].info.listening and seen[engine].info.role == "engine core"


def test_a_look_restarts_every_process_s_sampler_at_once_and_keeps_their_order() -> None:
    # Each call waits until all four are under way: called one after another, the first would wait for ever
    # (the barrier breaks after its timeout and the call raises).
    barrier = threading.Barrier(4, timeout=10)

    def restart(pid: int) -> int:
        barrier.wait()
        return pid * 10

    assert at_once(restart, [4, 3, 2, 1]) == [40, 30, 20, 10]
    assert at_once(restart, []) == []
