"""A launched server's watchdog: a process in a session of its own that stops the server's process group, and every process carrying the launch's mark, when infer-prof ends without stopping them itself (SIGKILL included).

infer-prof holds the only write end of the watchdog's stdin. It tells the watchdog the launch's mark (an
environment variable every process of the server inherits, daemons and setsid'd children included), the
server's process group, and any process it follows outside them, one line each; `release` once it has stopped
the server itself. When stdin reaches its end with no `release` (infer-prof ended, however: the kernel closes
its pipes), the watchdog sends SIGTERM to all of them, SIGKILL after the grace period, and exits.

Standard library only, and run as a script with -S -I: it starts in a few milliseconds and imports nothing of
the environment it watches.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

MARK_VARIABLE = "INFER_PROF_LAUNCH"  # set in the launched command's environment: <the launch's mark>
ORPHAN_GRACE_S = 3.0  # after SIGTERM, before SIGKILL, once infer-prof is gone: nobody waits for a clean stop
PROC = Path("/proc")


def _stat_fields(pid: int, proc: Path = PROC) -> list[str] | None:
    """/proc/PID/stat's fields from the state on (index 0: state, 2: process group, 19: start time)."""
    try:
        return (proc / str(pid) / "stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def start_time(pid: int, proc: Path = PROC) -> str | None:
    """The process's start time (tells it from a later process given the same pid); None when it is gone or a
    zombie."""
    fields = _stat_fields(pid, proc)
    return fields[19] if fields and len(fields) > 19 and fields[0] != "Z" else None


def session_of(pid: int, proc: Path = PROC) -> int | None:
    """The process's session id (a daemon's setsid gives it one of its own); None when it is gone."""
    fields = _stat_fields(pid, proc)
    return int(fields[3]) if fields and len(fields) > 3 and fields[3].isdigit() else None


def group_members(group: int, proc: Path = PROC) -> list[int]:
    """Live (not zombie) processes whose process group is `group`."""
    members = []
    for name in os.listdir(proc):
        if name.isdigit():
            fields = _stat_fields(int(name), proc)
            if fields and len(fields) > 2 and fields[2] == str(group) and fields[0] != "Z":
                members.append(int(name))
    return members


def marked_pids(mark: str, proc: Path = PROC) -> list[int]:
    """Live processes whose environment carries MARK_VARIABLE=mark (those this user may read). One in the middle of
    its exec reads an empty environment for a moment, so a caller that must see a process just started asks again
    (stop_all reads them again before its SIGKILL)."""
    needle = f"{MARK_VARIABLE}={mark}".encode()
    found = []
    for name in os.listdir(proc):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            environment = (proc / name / "environ").read_bytes()
        except OSError:
            continue
        if needle in environment.split(b"\0") and start_time(int(name), proc) is not None:
            found.append(int(name))
    return sorted(found)


def _signal(pid: int, number: int, *, group: bool = False) -> None:
    try:
        (os.killpg if group else os.kill)(pid, number)
    except (ProcessLookupError, PermissionError):
        pass


def stop_all(group: int | None, mark: str | None, followed: dict[int, str], grace_s: float) -> None:
    """SIGTERM to the group, the marked processes and the followed ones; SIGKILL to what is left after `grace_s`."""

    def left() -> set[int]:
        alive = {pid for pid, started in followed.items() if start_time(pid) == started}
        alive |= set(group_members(group)) if group else set()
        return alive | (set(marked_pids(mark)) if mark else set())

    for number, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
        if group:
            _signal(group, number, group=True)
        for pid in left():
            _signal(pid, number)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and left():
            time.sleep(0.05)
        if not left():
            return


def watch(lines: Iterable[str], grace_s: float) -> bool:
    """Read the protocol from `lines` until `release` (True: nothing to do) or their end (stop everything: False)."""
    group: int | None = None
    mark: str | None = None
    followed: dict[int, str] = {}
    for line in lines:
        word, _, rest = line.strip().partition(" ")
        if word == "release":
            return True
        if word == "group" and rest.isdigit():
            group = int(rest)
        elif word == "mark" and rest:
            mark = rest
        elif word == "pid":
            pid, _, started = rest.partition(" ")
            if pid.isdigit() and started:
                followed[int(pid)] = started
    stop_all(group, mark, followed, grace_s)
    return False


class Watchdog:
    """infer-prof's end of the watchdog: start it before the server, then tell it what to stop."""

    def __init__(self, grace_s: float = ORPHAN_GRACE_S) -> None:
        self.process: subprocess.Popen[bytes] | None
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-S", "-I", __file__, str(grace_s)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # neither a Ctrl-C at infer-prof's terminal nor a kill of its group
            )
        except OSError:  # no watchdog: the server's shell still gets SIGTERM when infer-prof ends
            self.process = None

    def tell(self, line: str) -> None:
        if self.process is None or self.process.stdin is None:
            return
        try:
            self.process.stdin.write(f"{line}\n".encode())
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass

    def mark(self, mark: str) -> None:
        self.tell(f"mark {mark}")

    def group(self, group: int) -> None:
        self.tell(f"group {group}")

    def follow(self, pid: int) -> None:
        started = start_time(pid)
        if started is not None:
            self.tell(f"pid {pid} {started}")

    def release(self) -> None:
        """The server is stopped: the watchdog exits without touching anything."""
        self.tell("release")
        if self.process is not None:
            try:
                if self.process.stdin is not None:
                    self.process.stdin.close()
                self.process.wait(timeout=5.0)
            except (OSError, subprocess.TimeoutExpired):
                pass


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    watch(sys.stdin, float(sys.argv[1]) if len(sys.argv) > 1 else ORPHAN_GRACE_S)


if __name__ == "__main__":
    main()
