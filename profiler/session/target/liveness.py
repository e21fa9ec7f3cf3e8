"""Notices a server's processes vanish during a run: which died first, when (seconds into the load) and how, so that a dead server stops the load and is the run's headline rather than its requests' errors."""

from __future__ import annotations

import re
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ...rundir.schema import ServerDeath
from .tree import PROC, ProcessInfo, read_process, tree_pids

if TYPE_CHECKING:
    from .launch import LaunchedServer

POLL_S = 0.2  # how often the server's processes are looked for: the death's time is known to this
STATUS_WAIT_S = 2.0  # for the launched command to exit after its server died, which gives the exit status
DEATH_LOG_LINES = 8
SHELL = re.compile(r"^(sh|bash|dash|zsh)$")


@dataclass
class _Known:
    info: ProcessInfo
    started: str | None
    gone_s: float | None = None  # seconds into the load when it was first seen gone
    exit_code: int | None = None  # waitpid's status, read while it was a zombie


@dataclass
class Liveness:
    """Watches `root`'s tree (and `listeners`, the processes holding the target's port) from start() to stop();
    sets `load_stop` when the server died, or when `outer_stop` (Ctrl-C) is set, and keeps the death."""

    root: int
    listeners: list[int] = field(default_factory=list)
    launched: LaunchedServer | None = None
    outer_stop: threading.Event | None = None
    poll_s: float = POLL_S
    proc: Path = PROC
    clock: Callable[[], float] = time.perf_counter
    load_stop: threading.Event = field(default_factory=threading.Event)
    death: ServerDeath | None = None

    def __post_init__(self) -> None:
        self._known: dict[int, _Known] = {}
        self._started = 0.0
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Take the server's processes as they are now (the load starts) and watch them on a thread."""
        self._started = self.clock()
        self._add(self._live_tree())
        self.poll()
        self._thread = threading.Thread(target=self._watch, name="infer-prof-liveness", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()

    def _watch(self) -> None:
        while not self._done.wait(self.poll_s):
            if self.poll():
                return

    def _live_tree(self) -> list[int]:
        return [*tree_pids(self.root, self.proc), *self.listeners]

    def _add(self, pids: Iterable[int]) -> None:
        for pid in pids:
            if pid in self._known:
                continue
            info = read_process(pid, self.proc)
            if info is not None:
                self._known[pid] = _Known(info, _start_time(pid, self.proc))

    def poll(self) -> bool:
        """One look: True once the server is dead (the death is kept and the load told to stop)."""
        if self.outer_stop is not None and self.outer_stop.is_set():
            self.load_stop.set()
        if self.death is not None:
            return True
        now = self.clock() - self._started
        self._add(self._live_tree())  # children that appear later: a crash of one of them names it
        for pid, known in self._known.items():
            if known.gone_s is not None:
                continue
            fields = _stat_fields(pid, self.proc)
            if fields is None or fields[19] != known.started:
                known.gone_s = now
            elif fields[0] == "Z":  # dead, not yet reaped by its parent: the kernel still holds its status
                known.gone_s = now
                known.exit_code = int(fields[49]) if len(fields) > 49 and fields[49].isdigit() else None
        if not self._dead():
            return False
        self.death = self._describe(now)
        self.load_stop.set()
        return True

    def _dead(self) -> bool:
        """The root is gone, or every process that held the port is: nothing serves any more."""
        root = self._known.get(self.root)
        if root is None or root.gone_s is not None:
            return True
        held = [self._known[pid] for pid in self.listeners if pid in self._known]
        return bool(held) and all(known.gone_s is not None for known in held)

    def _describe(self, now: float) -> ServerDeath:
        gone = [known for known in self._known.values() if known.gone_s is not None]
        first_s = min((known.gone_s for known in gone if known.gone_s is not None), default=now)
        # Among those seen gone in the same look, the highest in the tree that is not a shell: its children
        # follow a parent out within milliseconds, and the shell of --launch only reports its server's end.
        batch = [known for known in gone if known.gone_s == first_s]
        culprit = next(
            (known for known in batch if not SHELL.match(known.info.title)), batch[0] if batch else None
        )
        status, where = self._status(culprit)
        info = culprit.info if culprit else None
        return _death(
            pid=info.pid if info else self.root,
            title=info.title if info else "",
            cmdline=info.cmdline if info else "",
            at_s=max(0.0, first_s),
            status=status,
            status_from=where,
            gone=sorted(known.info.pid for known in gone),
            log=_log_lines(self.launched),
        )

    def _status(self, culprit: _Known | None) -> tuple[int | None, str]:
        """The exit status the OS gives, and whose it is: the culprit's own (read while it was a zombie), else the
        launched command's (Popen's returncode), else none (the server is not infer-prof's child)."""
        if culprit is not None and culprit.exit_code is not None:
            code = culprit.exit_code
            return (-(code & 0x7F) if code & 0x7F else code >> 8), "its own"
        if self.launched is not None and self.launched.process is not None and not self.launched.daemonized:
            deadline = time.monotonic() + STATUS_WAIT_S
            while (status := self.launched.process.poll()) is None and time.monotonic() < deadline:
                time.sleep(0.05)
            if status is not None:
                self.launched.exit_status = status
                return status, "the launched command's"
        return None, "unknown"


def _death(
    *,
    pid: int,
    title: str,
    cmdline: str,
    at_s: float,
    status: int | None,
    status_from: str,
    gone: list[int],
    log: list[str] | None,
) -> ServerDeath:
    signal_name = _signal_name(status, shell=status_from == "the launched command's")
    named = f"pid {pid} ({title}{': ' + cmdline if cmdline and cmdline != title else ''})"
    if status_from == "unknown":
        how = (
            "exit status unknown: the server is not infer-prof's child, and Linux tells a process's status to its "
            "parent alone (its own log, or the kernel's, `dmesg`, may say more)"
        )
    elif signal_name is not None:
        how = f"killed by {signal_name} ({status_from} status {status})"
    else:
        how = f"exited with status {status} ({status_from})"
    headline = f"The server died {at_s:.1f} s into the load: {named} vanished first; {how}."
    return {
        "pid": pid,
        "title": title,
        "cmdline": cmdline,
        "at_s": round(at_s, 3),
        "exit_status": status,
        "status_of": status_from,
        "signal": signal_name,
        "processes_gone": gone,
        "log_tail": log,
        "headline": headline,
    }


def _signal_name(status: int | None, *, shell: bool) -> str | None:
    """SIGSEGV for -11 (Popen), and for 139 from a shell (128 + the signal that killed its command)."""
    if status is None:
        return None
    number = -status if status < 0 else status - 128 if shell and status > 128 else None
    if number is None:
        return None
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _log_lines(launched: LaunchedServer | None) -> list[str] | None:
    if launched is None:
        return None
    from .launch import log_lines

    return log_lines(launched.log_path, DEATH_LOG_LINES)


def _stat_fields(pid: int, proc: Path) -> list[str] | None:
    try:
        fields = (proc / str(pid) / "stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return fields if len(fields) > 19 else None


def _start_time(pid: int, proc: Path) -> str | None:
    fields = _stat_fields(pid, proc)
    return fields[19] if fields else None
