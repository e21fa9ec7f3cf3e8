"""`run --launch CMD`: start a server command in a session of its own, wait until it answers (following it when it daemonizes), and stop its whole process group and every process it started, however the run ends."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from ....errors import TargetError
from ...orphans import terminate_with_parent
from .tree import descendants, parents, pids_listening, tree_top
from .watchdog import (
    MARK_VARIABLE,
    Watchdog,
    group_members,
    marked_pids,
    session_of,
    start_time,
)

LAUNCH_TIMEOUT_S = 600.0  # room for vLLM's CPU build, slow to start on 2 cores (docs/measurements.md)
STOP_GRACE_S = 15.0  # after SIGTERM, before SIGKILL: vLLM shuts its engine and workers down in a few seconds
READY_POLL_S = 0.5
PROGRESS_EVERY_S = 15.0
LOG_TAIL_LINES = 3


def port_in_command(command: str) -> int | None:
    """The port a server command asks for (`--port N` or `--port=N`), if it names one."""
    match = re.search(r"--port[= ](\d+)\b", command)
    return int(match.group(1)) if match else None


def log_lines(path: Path, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The last non-empty lines of the server's log (its last 8 KiB)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, os.path.getsize(path) - 8192))
            text = handle.read().decode(errors="replace")
    except OSError:
        return []
    return [line.strip() for line in text.splitlines() if line.strip()][-lines:]


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last non-empty lines of the server's log, joined on one line."""
    return " | ".join(log_lines(path, lines))


class LaunchedServer:
    """A server command run by /bin/sh in its own session (so a Ctrl-C meant for infer-prof does not reach
    it), its output in `log_path`; stop() ends every process of its group, every process that carries the
    launch's mark in its environment (a daemon that left the group), and any `extra_pids` given. A watchdog
    does the same if infer-prof ends without stop() (killed with SIGKILL)."""

    def __init__(
        self,
        command: str,
        url: str,
        log_path: Path,
        *,
        timeout_s: float = LAUNCH_TIMEOUT_S,
        grace_s: float = STOP_GRACE_S,
        say: Callable[[str], None] = lambda text: None,
        stop_event: threading.Event | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        if not command.strip():
            raise TargetError("--launch: the command is empty; give the server's command line in quotes")
        if not (timeout_s > 0):
            raise TargetError(f"--launch-timeout={timeout_s:g}: give a positive number of seconds")
        self.command, self.url, self.log_path = command, url.rstrip("/"), log_path
        self.timeout_s, self.grace_s, self.say = timeout_s, grace_s, say
        self.stop_event = stop_event or threading.Event()
        self.extra_env = dict(env or {})
        self.process: subprocess.Popen[bytes] | None = None
        self.ready_s: float | None = None
        self.exit_status: int | None = None
        self.mark = uuid.uuid4().hex  # in every process the command starts: how its daemons are found
        self.watchdog: Watchdog | None = None
        self.followed: dict[int, str | None] = {}  # a daemonized server's processes, with their start times
        self._listening_before: set[int] = set()

    @property
    def daemonized(self) -> bool:
        """The command exited and left its server running (it forked into the background)."""
        return bool(self.followed)

    @property
    def root(self) -> int:
        """The process whose tree is the server: the command's shell, or the process a daemon listens from."""
        if not self.daemonized:
            return self.pid
        port = port_in_url(self.url)
        listeners = [pid for pid in pids_listening(port) if pid in self.followed] if port else []
        alive = _alive(self.followed)
        return tree_top(listeners[0], parents()) if listeners else min(alive or self.followed)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self) -> None:
        env = {**os.environ, **self.extra_env, MARK_VARIABLE: self.mark}
        port = port_in_url(self.url)
        self._listening_before = set(pids_listening(port)) if port else set()
        # The watchdog first: from the server's first instant something stops it if infer-prof is killed.
        self.watchdog = Watchdog()
        self.watchdog.mark(self.mark)
        try:
            with open(self.log_path, "ab") as log:
                self.process = subprocess.Popen(
                    ["/bin/sh", "-c", self.command],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    env=env,
                    preexec_fn=terminate_with_parent,  # infer-prof killed outright: the shell gets SIGTERM
                )
        except BaseException:
            self.watchdog.release()  # nothing started: nothing for it to stop
            raise
        self.watchdog.group(self.process.pid)

    def wait_ready(self) -> float:
        """Seconds until GET /v1/models answered 200; TargetError if the server exits or never answers."""
        assert self.process is not None
        started = time.perf_counter()
        next_note = started + PROGRESS_EVERY_S
        with httpx.Client(timeout=2.0) as client:
            while True:
                status = self.process.poll()
                if status is not None and not self._follow_daemon(status):
                    self.exit_status = status
                    raise TargetError(
                        f"--launch: the server exited with status {status} before it answered"
                        f"{_why(status)}{self._tail()}"
                    )
                if (
                    self.stop_event.is_set()
                ):  # Ctrl-C or SIGTERM while waiting: the CLI's "interrupted", exit 130
                    raise KeyboardInterrupt
                try:
                    if client.get(f"{self.url}/v1/models").status_code == 200:
                        self.ready_s = time.perf_counter() - started
                        return self.ready_s
                except httpx.HTTPError:
                    pass
                now = time.perf_counter()
                if now - started > self.timeout_s:
                    raise TargetError(
                        f"--launch: the server did not answer at {self.url}/v1/models within "
                        f"{self.timeout_s:g} s (raise --launch-timeout, or check --port/--target)"
                        f"{self._tail()}"
                    )
                if now >= next_note:
                    next_note = now + PROGRESS_EVERY_S
                    self.say(
                        f"waiting for {self.url}/v1/models: {now - started:.0f} s"
                        f" of {self.timeout_s:.0f}{self._tail(1, ', log: ')}"
                    )
                self.stop_event.wait(READY_POLL_S)

    def _follow_daemon(self, status: int) -> bool:
        """After the command exited: whether it left a server running (True: follow it; the watchdog and stop()
        end it with the rest). A daemon is what the command left in a session of its own (setsid), or what listens
        on the port already. A command that failed, or left nothing behind, has exited; one that left processes
        in its own session (`server &`) is refused, and stop() ends them."""
        if self.daemonized:
            return bool(_alive(self.followed))
        if status != 0:
            return False
        port = port_in_url(self.url)
        new_listeners = set(pids_listening(port)) - self._listening_before if port else set()
        survivors = set(marked_pids(self.mark))
        left = sorted({pid for pid in survivors if session_of(pid) != self.pid} | new_listeners)
        if not left and survivors:
            raise TargetError(
                f"--launch: the server exited with status 0 before it answered, and left pid "
                f"{', '.join(map(str, sorted(survivors)))} in the background (stopped now): run the server in the "
                f"foreground (no trailing &, or its own no-daemon option){self._tail()}"
            )
        for pid in left:
            self.followed[pid] = start_time(pid)
            if self.watchdog is not None:
                self.watchdog.follow(pid)
        if left:
            self.say(
                f"the command exited (status 0) and left pid {', '.join(map(str, left))} running: a server that "
                "daemonizes; following it, and stopping it when the run ends"
            )
        return bool(left)

    def check_alive(self) -> None:
        """TargetError when the server has exited (during the run)."""
        if self.daemonized:
            if not _alive(self.followed):
                raise TargetError(
                    f"--launch: the server (pid {', '.join(map(str, self.followed))}, daemonized) exited during "
                    f"the run{self._tail()}"
                )
            return
        if self.process is not None and (status := self.process.poll()) is not None:
            self.exit_status = status
            raise TargetError(
                f"--launch: the server exited with status {status} during the run{_why(status)}{self._tail()}"
            )

    def stop(self, extra_pids: Iterable[int] = ()) -> None:
        """SIGTERM to the group, SIGKILL to what is left after the grace period; returns once none is left."""
        if self.process is None:
            return
        group = self.process.pid  # start_new_session: the shell leads its own group
        previous = _ignore_sigint()  # a Ctrl-C now must not leave the server half-stopped
        try:
            # Children that left the group (setsid) are still in the tree while their parents live.
            tree = set(descendants(group, parents())) | set(extra_pids) | set(marked_pids(self.mark))
            for pid in self.followed:
                tree |= set(descendants(pid, parents()))
            strays = {pid: start_time(pid) for pid in tree - set(group_members(group))}
            _signal_group(group, signal.SIGTERM)
            for pid in _alive(strays):
                _signal(pid, signal.SIGTERM)
            deadline = time.perf_counter() + self.grace_s
            while time.perf_counter() < deadline and (group_members(group) or _alive(strays)):
                self._reap()
                time.sleep(0.05)
            if group_members(group) or _alive(strays):
                _signal_group(group, signal.SIGKILL)
                for pid in _alive(strays):
                    _signal(pid, signal.SIGKILL)
            self._reap(wait=True)
            deadline = time.perf_counter() + 5.0
            while time.perf_counter() < deadline and (group_members(group) or _alive(strays)):
                time.sleep(0.02)  # killed processes vanish once their parents (or init) reap them
            if self.watchdog is not None:
                self.watchdog.release()
        finally:
            _restore_sigint(previous)

    def _reap(self, wait: bool = False) -> None:
        assert self.process is not None
        try:
            status = self.process.wait(timeout=5.0) if wait else self.process.poll()
        except subprocess.TimeoutExpired:
            return
        if status is not None and self.exit_status is None:
            self.exit_status = status

    def _tail(self, lines: int = LOG_TAIL_LINES, prefix: str = "; its log ends: ") -> str:
        tail = log_tail(self.log_path, lines)
        if lines != LOG_TAIL_LINES:  # a progress line: the latest log line, if any
            return f"{prefix}{tail}" if tail else ""
        return f"{prefix}{tail or '(nothing)'} (whole log: {self.log_path})"


def target_url(target: str | None, port: int | None, launch: str | None) -> str:
    """Where the server answers: --target, else http://127.0.0.1:--port, else the --port the launched command names."""
    if launch is not None and not launch.strip():
        raise TargetError("--launch: the command is empty; give the server's command line in quotes")
    if target is not None and port is not None:
        raise TargetError(
            f"--target {target} and --port {port}: give one of them (--port N means http://127.0.0.1:N)"
        )
    if port is not None:
        if not 1 <= port <= 65535:
            raise TargetError(f"--port={port}: give the server's TCP port, 1 to 65535")
        return f"http://127.0.0.1:{port}"
    if target is not None:
        return target
    named = port_in_command(launch or "")
    if named is None:
        raise TargetError(
            "--launch: the command names no --port; say where the server answers with --port N or "
            "--target URL"
        )
    return f"http://127.0.0.1:{named}"


@contextmanager
def launched_server(
    command: str | None,
    url: str,
    log_path: Path,
    *,
    timeout_s: float = LAUNCH_TIMEOUT_S,
    say: Callable[[str], None] = lambda text: None,
    stop_event: threading.Event | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[LaunchedServer | None]:
    """Start `command` and yield it once it answers at `url` (None without a command); stop its whole group on
    the way out, whatever happens inside."""
    if command is None:
        yield None
        return
    server = LaunchedServer(
        command, url, log_path, timeout_s=timeout_s, say=say, stop_event=stop_event, env=env
    )
    if port_in_url(url) is not None and pids_listening(port_in_url(url) or 0):
        raise TargetError(
            f"--launch: something already listens on {url}; stop it, or launch on another --port"
        )
    server.start()
    try:
        say(
            f"launched pid {server.pid}: {command} (log: {log_path}); waiting up to {timeout_s:.0f} s for "
            f"{server.url}/v1/models"
        )
        ready_s = server.wait_ready()
        say(f"the server answered after {ready_s:.1f} s")
        yield server
    finally:
        server.stop()


def port_in_url(url: str) -> int | None:
    try:
        return urlsplit(url).port
    except ValueError:
        return None


def _why(status: int) -> str:
    if status == 127:
        return " (the shell found no such command)"
    if status == 126:
        return " (the command is not executable)"
    if status < 0 or status > 128:
        number = -status if status < 0 else status - 128
        try:
            return f" (killed by {signal.Signals(number).name})"
        except ValueError:
            return ""
    return ""


def _alive(processes: dict[int, str | None]) -> list[int]:
    return [pid for pid, started in processes.items() if started is not None and start_time(pid) == started]


def _signal_group(group: int, number: int) -> None:
    try:
        os.killpg(group, number)
    except (ProcessLookupError, PermissionError):
        pass


def _signal(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except (ProcessLookupError, PermissionError):
        pass


def _ignore_sigint() -> object:
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGINT, signal.SIG_IGN)


def _restore_sigint(previous: object) -> None:
    if previous is not None:
        signal.signal(signal.SIGINT, previous)  # type: ignore[arg-type]
