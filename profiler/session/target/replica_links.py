"""The local servers a process tree talks to: its established TCP connections to ports that a process on this machine listens on, read from /proc/net/tcp{,6} and its processes' open files."""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .tree import LISTEN_STATE, PROC, fd_targets

ESTABLISHED_STATE = "01"  # TCP_ESTABLISHED in /proc/net/tcp's `st` column


@dataclass(frozen=True, slots=True)
class Socket:
    """One line of /proc/net/tcp{,6}: its two ends, its state and the inode its owner's fd links to."""

    local_ip: str
    local_port: int
    remote_ip: str
    remote_port: int
    state: str
    inode: int


def _address(text: str) -> tuple[str, int]:
    """An `ADDR:PORT` field of /proc/net/tcp{,6}."""
    raw, _, port = text.rpartition(":")
    return _ip(raw), int(port, 16)


@functools.lru_cache(maxsize=1024)  # a machine's sockets share a few addresses; a poll reads them all
def _ip(raw: str) -> str:
    """The kernel's hex address, its 32-bit words in host (little-endian) order, as text (IPv4-mapped as IPv4)."""
    packed = bytes.fromhex(raw)
    words = b"".join(packed[index : index + 4][::-1] for index in range(0, len(packed), 4))
    address = ipaddress.ip_address(words)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address)


def parse_sockets(text: str) -> list[Socket]:
    """The sockets in the text of /proc/net/tcp or tcp6 (lines that do not parse are skipped)."""
    found = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10:
            continue
        try:
            local, remote = _address(fields[1]), _address(fields[2])
            found.append(Socket(*local, *remote, fields[3], int(fields[9])))
        except ValueError:
            continue
    return found


def read_sockets(proc: Path = PROC) -> list[Socket]:
    sockets: list[Socket] = []
    for name in ("tcp", "tcp6"):
        try:
            sockets += parse_sockets((proc / "net" / name).read_text())
        except OSError:
            continue
    return sockets


def socket_inodes(pids: Iterable[int], proc: Path = PROC) -> set[int]:
    """The inodes of the sockets the processes hold open (those this user may read)."""
    return {
        int(target[8:-1]) for pid in pids for target in fd_targets(pid, proc) if target.startswith("socket:[")
    }


def _is_wildcard(ip: str) -> bool:
    return ipaddress.ip_address(ip).is_unspecified


def local_ports_reached(
    sockets: list[Socket], owned: set[int], *, exclude: Iterable[int] = ()
) -> dict[int, str]:
    """Ports listened on here that the sockets in `owned` are connected to, each with the address it was reached at:
    the servers on this machine that the owner is a client of. A remote end is on this machine when it is a loopback
    address or an address one of this machine's sockets is bound to, and a listener there takes it (bound to that
    address, or to every address)."""
    here = {socket.local_ip for socket in sockets if not _is_wildcard(socket.local_ip)}
    listening: dict[int, set[str]] = {}
    for socket in sockets:
        if socket.state == LISTEN_STATE:
            listening.setdefault(socket.local_port, set()).add(socket.local_ip)
    skipped = set(exclude)
    ports: dict[int, str] = {}
    for socket in sockets:
        if socket.state != ESTABLISHED_STATE or socket.inode not in owned or socket.remote_port in skipped:
            continue
        bound = listening.get(socket.remote_port)
        if not bound:
            continue
        remote = ipaddress.ip_address(socket.remote_ip)
        on_this_machine = remote.is_loopback or socket.remote_ip in here
        if on_this_machine and (socket.remote_ip in bound or any(_is_wildcard(ip) for ip in bound)):
            ports.setdefault(socket.remote_port, socket.remote_ip)
    return ports
