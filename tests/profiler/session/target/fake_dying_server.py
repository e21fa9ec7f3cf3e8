"""fake_server.py's server in the ways a server leaves a run: it crashes with a signal after some requests, it
daemonizes (forks, starts a session of its own and lets the launched command exit), it ignores SIGTERM, or it
leaves a marker file showing that its command ran."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from fake_server import (  # run as a script: its folder is on the path
    ENGINE_TITLE,
    FakeServer,
    set_title,
    spawn_child,
)


class CrashingServer(FakeServer):
    """Kills itself with `crash_signal` once `crash_after` requests have been answered."""

    def __init__(self, port: int, crash_after: int | None, crash_signal: int) -> None:
        super().__init__(port, None)
        self.crash_after, self.crash_signal = crash_after, crash_signal

    def request_done(self) -> None:
        super().request_done()
        if self.crash_after is not None and self.done >= self.crash_after:
            print(
                f"fake server: crashing with signal {self.crash_signal} after {self.done} requests",
                flush=True,
            )
            os.kill(os.getpid(), self.crash_signal)


def daemonize() -> None:
    """The classic double fork: the launched command's process exits 0, the server runs on in a new session."""
    if os.fork() > 0:
        os._exit(0)
    os.setsid()
    if os.fork() > 0:
        os._exit(0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--crash-after", type=int, help="kill itself after this many requests")
    parser.add_argument("--crash-signal", default="SIGSEGV", help="the signal it kills itself with")
    parser.add_argument(
        "--daemonize", action="store_true", help="fork into a new session; the command exits 0"
    )
    parser.add_argument("--ignore-term", action="store_true", help="ignore SIGTERM (only SIGKILL ends it)")
    parser.add_argument("--child", action="store_true", help="start fake_server's engine child too")
    parser.add_argument("--marker", help="create this file first")
    args = parser.parse_args()
    if args.marker:
        Path(args.marker).touch()
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.daemonize:
        daemonize()
    set_title("VLLM::APIServer")
    server = CrashingServer(args.port, args.crash_after, signal.Signals[args.crash_signal].value)
    if args.child:
        server.children.append(spawn_child(ENGINE_TITLE))
    print(f"listening on http://127.0.0.1:{server.server_address[1]} (pid {os.getpid()})", flush=True)
    sys.stdout.flush()
    server.serve_forever(poll_interval=0.1)


if __name__ == "__main__":
    main()
