"""A fake clock for time-dependent load logic: time moves only when someone sleeps (pyinstrument's pattern)."""

from __future__ import annotations

import threading


class FakeClock:
    """`clock()` returns fake nanoseconds; `sleep(seconds)` advances them instead of waiting."""

    def __init__(self, start_ns: int = 1_000_000_000) -> None:
        self.now_ns = start_ns
        self.sleeps: list[float] = []
        self._lock = threading.Lock()

    def clock(self) -> int:
        with self._lock:
            return self.now_ns

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            self.now_ns += round(seconds * 1e9)
