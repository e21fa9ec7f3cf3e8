"""Child processes that end when the thread that started them does, so a killed infer-prof leaves none behind."""

from __future__ import annotations

import ctypes
import os
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent(signum: int) -> None:
    """For a child between fork and exec (subprocess's preexec_fn): ask the kernel to send it `signum` when
    its parent thread ends. The kernel ties this to the thread that forked, not to the process, so the
    caller starts the child on a thread that outlives it. SIGKILL also ends a child stopped by SIGSTOP,
    which holds every other signal until it is continued. Off Linux, or without prctl, nothing changes."""
    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before prctl took effect: nobody would signal this child
        os.kill(os.getpid(), signum)


def terminate_with_parent() -> None:
    """preexec_fn: SIGTERM when the parent thread ends (a server's shell, which then stops its own children)."""
    die_with_parent(signal.SIGTERM)


def kill_with_parent() -> None:
    """preexec_fn: SIGKILL when the parent thread ends (a sampler that may be stopped, with nothing to save)."""
    die_with_parent(signal.SIGKILL)
