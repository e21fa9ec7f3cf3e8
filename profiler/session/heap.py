"""Hands memory the engine freed back to the operating system now and then while a run or a server goes on.

Why: on a long soak (benchmarks/bench_soak.py) the process's resident memory crept up far faster than the
Python heap and every table the run keeps. The rest was memory already freed (torch's per-step tensors,
the profiler windows' results) that glibc's malloc keeps in its arenas, and malloc_trim(0) gives it back;
the creep starts again after a trim, hence one now and then, and a trim is cheap against the run but holds
malloc's locks while it runs (docs/measurements.md, "Figures that stood in code comments"). On a C library
without malloc_trim (musl, macOS) the trimmer does nothing and says so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
import time
from typing import Any

from ..rundir.schema import HeapTrims

TRIM_INTERVAL_S = 10.0


def _malloc_trim() -> Any | None:
    """glibc's malloc_trim, or None where the C library has none."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


class HeapTrimmer:
    """A daemon thread that calls malloc_trim(0) every `interval_s` between start() and stop()."""

    def __init__(self, interval_s: float = TRIM_INTERVAL_S) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s!r}")
        self.interval_s = interval_s
        self.trims = 0
        self.trim_ns = 0
        self._trim = _malloc_trim()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> HeapTrimmer:
        if self._trim is not None and self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="infer-prof-heap-trim", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.trim()

    def trim(self) -> None:
        if self._trim is None:
            return
        start = time.perf_counter_ns()
        self._trim(0)
        self.trim_ns += time.perf_counter_ns() - start
        self.trims += 1

    def result(self) -> HeapTrims:
        """What the trims cost, for result.json (they hold malloc's locks while they run)."""
        return {
            "available": self._trim is not None,
            "interval_s": self.interval_s,
            "trims": self.trims,
            "total_ms": self.trim_ns / 1e6,
        }
