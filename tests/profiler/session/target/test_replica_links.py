"""The local servers a process tree is connected to, read from /proc/net/tcp{,6} and the tree's open sockets: loopback
and this host's own addresses count, a remote host on a port also listened on here does not, nor another owner's socket."""

from __future__ import annotations

import os
import socket

from infer_prof.profiler.session.target.replica_links import (
    local_ports_reached,
    parse_sockets,
    read_sockets,
    socket_inodes,
)

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
    assert local_ports_reached(sockets, router, exclude={8000}) == {8001, 8002, 8004}
    assert local_ports_reached(sockets, {13}) == {8001}  # another owner's connection is its own
    assert (
        local_ports_reached(sockets, {12}) == set()
    )  # 10.0.0.9 is not this host, whatever listens on :8001 here
    assert local_ports_reached(sockets, router, exclude={8000, 8001, 8002, 8004}) == set()


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
