"""The heap trimmer gives freed memory back to the system, on its own thread, and reports what it cost."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from infer_prof.profiler.session.heap import HeapTrimmer


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    pytest.skip("no /proc/self/status")


def test_a_trim_returns_memory_that_was_freed_inside_the_heap() -> None:
    trimmer = HeapTrimmer()
    if not trimmer.result()["available"]:
        pytest.skip("this C library has no malloc_trim")
    # 120 MB of 2 KB blocks from malloc's heap, all freed but the last, which pins the heap's top so
    # that free() alone cannot shrink it: the memory stays resident until a trim.
    blocks = [bytes(2000) + bytes([index % 256]) for index in range(60_000)]
    pinned = blocks[-1]
    del blocks
    before = rss_mib()
    trimmer.trim()
    after = rss_mib()
    assert pinned  # still alive through the trim
    assert before - after > 50, f"RSS {before:.0f} -> {after:.0f} MiB"
    assert trimmer.result()["trims"] == 1 and trimmer.result()["total_ms"] > 0


def test_the_thread_trims_between_start_and_stop_and_then_stops() -> None:
    trimmer = HeapTrimmer(interval_s=0.005)
    if not trimmer.result()["available"]:
        pytest.skip("this C library has no malloc_trim")
    trimmer.start()
    waited = threading.Event()
    for _ in range(400):
        if trimmer.trims >= 2:
            break
        waited.wait(0.01)
    trimmer.stop()
    done = trimmer.trims
    assert done >= 2
    assert not any(thread.name == "infer-prof-heap-trim" for thread in threading.enumerate())
    assert trimmer.trims == done


def test_a_bad_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="interval_s"):
        HeapTrimmer(interval_s=0)
