"""The local servers a process tree is connected to, read from /proc/net/tcp{,6} and the tree's open sockets: loopback
and this host's own addresses count, a remote host on a port also listened on here does not, nor another owner's socket;
and the replica watch over a /proc of its own: a port that answers /v1/models is a replica, sampled from its
listener's tree, one that never answers is given up after ANSWER_TRIES reads."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

from infer_prof.profiler.session.target.replica_links import (
    local_ports_reached,
    parse_sockets,
    read_sockets,
    socket_inodes,
)
from infer_prof.profiler.session.target.replicas import ANSWER_TRIES, ReplicaWatch

HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"


def line(local: str, remote: str, state: str, inode: int) -> str:
    return f"   0: {local} {remote} {state} 00000000:00000000 00:00000000 00000000  1000        0 {inode} 1\n"


# 127.0.0.1 is 0100007F, 10.0.0.5 is 0500000A and 0.0.0.0 is 00000000 in the kernel's little-endian words.
TCP = HEADER + "".join(
    [
        line("0100007F:1F41", "00000000:0000", "0A", 1),  # a replica listening on 127.0.0.1:8001
        line("00000000:1F42", "00000000:0000", "0A", 2),  # another on every address, :8002
        line("0500000A:1F40", "00000000:0000", "0A", 3),  # the router itself, 10.0.0.5:8000
        line("0100007F:A000", "0100007F:1F41", "01", 10),  # router -> :8001 over loopback
        line("0500000A:A001", "0500000A:1F42", "01", 11),  # router -> :8002 at this host's own address
        line("0500000A:A002", "0900000A:1F41", "01", 12),  # router -> 10.0.0.9:8001, another machine
        line("0100007F:A003", "0100007F:1F41", "01", 13),  # someone else -> :8001
        line("0500000A:1F40", "0100007F:B000", "01", 14),  # a client -> the router (its accepted socket)
        line("0100007F:A004", "0100007F:1F43", "01", 15),  # router -> :8003, where nothing listens here
    ]
)
# ::ffff:127.0.0.1 (IPv4-mapped) and ::1 in tcp6's four little-endian words.
TCP6 = HEADER + "".join(
    [
        line("0000000000000000FFFF00000100007F:A005", "0000000000000000FFFF00000100007F:1F41", "01", 16),
        line("00000000000000000000000001000000:1F44", "00000000000000000000000000000000:0000", "0A", 4),
        line("00000000000000000000000001000000:A006", "00000000000000000000000001000000:1F44", "01", 17),
    ]
)


def test_addresses_are_read_in_the_kernel_s_byte_order() -> None:
    sockets = parse_sockets(TCP) + parse_sockets(TCP6)
    first = sockets[3]
    assert (first.local_ip, first.local_port, first.remote_ip, first.remote_port) == (
        "127.0.0.1",
        40960,
        "127.0.0.1",
        8001,
    )
    assert (sockets[1].local_ip, sockets[2].local_ip) == ("0.0.0.0", "10.0.0.5")
    assert sockets[9].local_ip == "127.0.0.1"  # IPv4-mapped read as IPv4
    assert sockets[10].local_ip == "::1" and sockets[11].remote_port == 8004
    assert parse_sockets(HEADER + "garbage line\n") == []


def test_the_router_s_connections_name_the_local_listeners_it_talks_to() -> None:
    sockets = parse_sockets(TCP) + parse_sockets(TCP6)
    router = {3, 10, 11, 12, 14, 15, 16, 17}
    reached = {8001: "127.0.0.1", 8002: "10.0.0.5", 8004: "::1"}  # each port at the address the router used
    assert local_ports_reached(sockets, router, exclude={8000}) == reached
    assert local_ports_reached(sockets, {13}) == {8001: "127.0.0.1"}  # another owner's connection is its own
    assert local_ports_reached(sockets, {12}) == {}  # 10.0.0.9 is not this host, though :8001 listens here
    assert local_ports_reached(sockets, router, exclude={8000, 8001, 8002, 8004}) == {}


def test_this_process_s_own_connection_is_found_from_proc() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = server.accept()
    try:
        found = local_ports_reached(read_sockets(), socket_inodes([os.getpid()]))
        assert port in found
    finally:
        for each in (client, accepted, server):
            each.close()


class StubSampler:
    """What ReplicaWatch starts on a replica's tree, without py-spy."""

    def __init__(self, root: int, port: int) -> None:
        self.root, self.port, self.started, self.stopped = root, port, False, False

    def start(self) -> None:
        self.started = True

    def stop(self) -> None:
        self.stopped = True

    def pids(self) -> set[int]:
        return {self.root}

    def processes(self) -> list[object]:
        return []


def fake_proc(root: Path, processes: dict[int, list[int]], tcp: str) -> Path:
    """A /proc with net/tcp and, per pid, its stat (parent 1; 5 + 3 ticks of CPU), comm, cmdline, exe, sockets."""
    proc = root / "proc"
    (proc / "net").mkdir(parents=True)
    (proc / "net" / "tcp").write_text(tcp)
    (proc / "net" / "tcp6").write_text(HEADER)
    for pid, inodes in processes.items():
        (proc / str(pid) / "fd").mkdir(parents=True)
        (proc / str(pid) / "task" / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "task" / str(pid) / "children").write_text("")
        (proc / str(pid) / "stat").write_text(
            f"{pid} (python3) S 1 {pid} {pid} 0 -1 0 0 0 0 0 5 3 0 0 20 0 1\n"
        )
        (proc / str(pid) / "comm").write_text("python3\n")
        (proc / str(pid) / "cmdline").write_bytes(b"python3\0server.py\0")
        os.symlink("/usr/bin/python3", proc / str(pid) / "exe")
        for fd, inode in enumerate(inodes, start=3):
            os.symlink(f"socket:[{inode}]", proc / str(pid) / "fd" / str(fd))
    return proc


def test_the_watch_takes_a_port_that_answers_and_drops_one_that_never_does(tmp_path: Path) -> None:
    tcp = HEADER + "".join(
        [
            line("0100007F:1F40", "00000000:0000", "0A", 1),  # the router, :8000
            line("0100007F:1F41", "00000000:0000", "0A", 2),  # a replica, :8001
            line("0100007F:1538", "00000000:0000", "0A", 3),  # a database, :5432
            line("0100007F:A000", "0100007F:1F41", "01", 10),  # router -> replica
            line("0100007F:A001", "0100007F:1538", "01", 11),  # router -> database
        ]
    )
    proc = fake_proc(tmp_path, {100: [1, 10, 11], 200: [2], 300: [3]}, tcp)
    asked: list[str] = []

    def answers(url: str) -> bool:
        asked.append(url)
        return url == "http://127.0.0.1:8001"

    samplers: list[StubSampler] = []

    def make_sampler(root: int, port: int) -> Any:
        samplers.append(StubSampler(root, port))
        return samplers[-1]

    watch = ReplicaWatch(100, 8000, [], make_sampler, proc=proc, answers=answers)
    for _ in range(ANSWER_TRIES + 2):
        watch._poll()
    watch.stop()
    database, replica = "http://127.0.0.1:5432", "http://127.0.0.1:8001"
    assert asked == [database, replica] + [database] * (ANSWER_TRIES - 1)  # until given up; the replica once
    assert [(sampler.root, sampler.port, sampler.started, sampler.stopped) for sampler in samplers] == [
        (200, 8001, True, True)
    ]
    (found,) = watch.samples({})
    assert (found.url, found.name, found.root, found.pids, found.found_by) == (
        replica,
        "127.0.0.1:8001",
        200,
        [200],
        "the router's connections",
    )
    assert found.cpu_s == 8 / os.sysconf("SC_CLK_TCK") and not found.with_router
