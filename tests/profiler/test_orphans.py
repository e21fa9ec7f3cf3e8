"""Children started with die_with_parent end when infer-prof does, even while stopped by SIGSTOP."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

# The parent: starts a long sleep with the given preexec_fn, stops it as the in-run A/B stops py-spy, prints
# its pid and nice value, then dies without cleaning up (as a profiler killed outright would).
PARENT = """
import functools, os, signal, subprocess, sys
from infer_prof.profiler.collectors.sampling import _prepare_child
from infer_prof.profiler.orphans import kill_with_parent
prepare = {"kill": kill_with_parent, "sampler": functools.partial(_prepare_child, "low", True), "none": None}[sys.argv[1]]
child = subprocess.Popen(
    ["sleep", "60"], preexec_fn=prepare, start_new_session=True,
    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,  # so that the test reads the parent's output to its end
)
os.kill(child.pid, signal.SIGSTOP)
nice = open(f"/proc/{child.pid}/stat").read().rsplit(")", 1)[1].split()[16]
print(child.pid, nice, flush=True)
os._exit(0)
"""


def _state(pid: int) -> str | None:
    """The process's state letter (T stopped, Z zombie), or None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def _orphan_after_parent_dies(how: str, patience_s: float = 10.0) -> tuple[int, int, str | None]:
    parent = subprocess.run([sys.executable, "-c", PARENT, how], capture_output=True, text=True, timeout=60)
    assert parent.returncode == 0, parent.stderr
    pid, nice = (int(value) for value in parent.stdout.split())
    deadline = time.monotonic() + patience_s
    while _state(pid) not in (None, "Z", "X") and time.monotonic() < deadline:
        time.sleep(0.05)
    return pid, nice, _state(pid)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc (Linux)")
@pytest.mark.parametrize("how", ["kill", "sampler"])
def test_a_stopped_child_ends_with_its_parent(how: str) -> None:
    pid, nice, state = _orphan_after_parent_dies(how)
    assert state in (None, "Z", "X")  # gone, or dead and waiting for init to reap it
    if how == "sampler":
        assert nice == 19  # py-spy's default low priority is still set beside the death signal


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc (Linux)")
def test_without_it_the_stopped_child_outlives_its_parent() -> None:
    # The control: what the A/B left behind before, a child stopped for good.
    pid, _nice, state = _orphan_after_parent_dies("none", patience_s=1.0)  # the others end in well under that
    try:
        assert state == "T"
    finally:
        subprocess.run(["kill", "-KILL", str(pid)], check=False)
