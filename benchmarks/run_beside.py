"""`infer-prof run ARGS` as a child process, beside busy-loop hogs, on this or another checkout's code, timed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

HOG = "while 1: pass"


def run_cli(
    args: list[str], *, hogs: int = 0, tree: Path | None = None
) -> tuple[subprocess.CompletedProcess[str], float]:
    """The finished `infer-prof run ARGS` and its wall seconds. `hogs` processes of `python -c 'while 1: pass'` start
    before it and are killed after it; `tree`: another checkout whose .pkg folder goes first on PYTHONPATH (its
    built extensions in place), so two revisions are timed on one machine in one sitting."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree / ".pkg") + os.pathsep + env.get("PYTHONPATH", "")
    command = [sys.executable, "-m", "infer_prof.cli", "run", *args]
    procs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(hogs)]
    started = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    return done, time.monotonic() - started
