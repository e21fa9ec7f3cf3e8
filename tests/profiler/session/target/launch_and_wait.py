"""Launches a server command as `run --launch` does, prints `ready ROOT GROUP` once it answers, then waits to be
killed (the test kills this process with SIGKILL, and checks that the server does not outlive it)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from infer_prof.profiler.session.target.launch import launched_server


def main() -> None:
    command, url, log = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    with launched_server(command, url, log, timeout_s=60) as server:
        assert server is not None
        print(f"ready {server.root} {server.pid}", flush=True)
        time.sleep(600)


if __name__ == "__main__":
    main()
