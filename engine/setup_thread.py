"""Runs torch set-up work (loading weights, filling the KV cache) on a thread that exits when it is done."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# Why: libgomp (torch's OpenMP on Linux) gives every thread that runs a parallel region its own pool of
# worker threads, kept until that thread exits. A pool on the main thread (from loading weights, filling
# the KV cache or a microbenchmark) slows the engine thread's oneDNN linears (measured: docs/measurements.md,
# "Figures that stood in code comments"). A pool started on a thread that exits goes away with it, so the
# engine thread's pool is the only one.


def run_on_setup_thread(work: Callable[[], T], name: str = "infer-prof-setup") -> T:
    """work() on a fresh thread that exits afterwards; its result is returned and its exception re-raised."""
    outcome: dict[str, object] = {}

    def target() -> None:
        try:
            outcome["value"] = work()
        except BaseException as error:  # handed back to the caller's thread below
            outcome["error"] = error

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]
