"""Keep torch.profiler's start/stop chatter ("USDT: ... profiler_start") off the user's terminal."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

CHATTER_PREFIX = b"USDT:"


@contextmanager
def without_kineto_chatter() -> Iterator[None]:
    """Hold file descriptor 2 in a scratch file while torch.profiler starts or stops a window.

    torch 2.13's kineto writes two "USDT:" lines to stderr for every window, at a level no setting
    silences (KINETO_LOG_LEVEL and TORCH_CPP_LOG_LEVEL did not); a deep run opens dozens of windows.
    Every other line written meanwhile, from any thread, is passed on afterwards, only later.
    """
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield  # no usable fd 2 (a closed or replaced stderr): nothing to keep clean
        return
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            kept = [
                line
                for line in capture.read().splitlines(keepends=True)
                if not line.startswith(CHATTER_PREFIX)
            ]
            if kept:
                os.write(2, b"".join(kept))


@contextmanager
def quietly_profiling(profile: Any) -> Iterator[Any]:
    """`with torch.profiler.profile(...)`, its start and stop without the chatter."""
    with without_kineto_chatter():
        profile.__enter__()
    try:
        yield profile
    finally:
        with without_kineto_chatter():
            profile.__exit__(None, None, None)
