"""The slowdown experiments' delay: CPU work that holds a core, and the GIL for the share of its time the component holds it, for a requested number of ns.

time.sleep would release the GIL and the core, so other threads would run through the delay where they
could not run through the component's own work; a tight Python loop on perf_counter_ns keeps both, and
lets the interpreter hand the GIL over at its switch interval exactly as it does in the component's
loops. The loop stops at the first clock reading past its deadline, so it overshoots by one turn of the
loop; `calibrate` measures what a call costs beyond its request (the call itself, one turn) and the
spinner starts its deadline that much earlier, so short delays (a kv_alloc call's fraction) land on
their request too. The added time is always measured, never assumed: callers use `spin`'s return.

A component that spends part of its time in kernels (the sampler's torch calls) releases the GIL there,
and other threads run Python beside it; a delay that held the GIL throughout would stall them, and their
work would land on the steps after it, a cost a faster component would not save. So a delay may release
the GIL for a share of its time (`released`: the component's kernel share), in slices of SLICE_NS that
alternate released and held as the component's kernels alternate with its Python. The released part
busy-waits in C (profiler/checks/csrc/spin.c); without that extension the twin holds the GIL throughout,
and `gil_release()` says so.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from ...native_paths.loader import import_extension

Clock = Callable[[], int]
SLICE_NS = 500_000  # a released-then-held slice: well under the interpreter's 5 ms switch interval
CALIBRATION_CALLS = 200  # spins of CALIBRATION_NS each, a few ms in all, taken once per experiment
CALIBRATION_NS = 2_000
MODULE_NAME = f"{__package__}._spin"
# Point this at another build of the C wait (the sanitizer build of .ci/sanitize).
LIBRARY_PATH_VARIABLE = "INFER_PROF_SPIN_PATH"


def spin_until(deadline_ns: int, clock: Clock = time.perf_counter_ns) -> int:
    """Busy-wait on `clock` until it reads deadline_ns or later, holding the GIL; returns that reading."""
    now = clock()
    while now < deadline_ns:
        now = clock()
    return now


def _released_spinner() -> Callable[[int], int] | None:
    """The C busy wait that releases the GIL (`_spin.spin_released`, or the build INFER_PROF_SPIN_PATH names), or
    None when the extension is not built."""
    try:  # by name: the extension ships no stubs, and a ModuleType's attributes are what it holds
        module = import_extension(MODULE_NAME, LIBRARY_PATH_VARIABLE)
    except ImportError:
        return None
    spin_released: Callable[[int], int] = module.spin_released
    return spin_released


def gil_release() -> str:
    """How a delay's released share is spent: "released" (the C busy wait), or "held" (the twin: no extension)."""
    return "released" if _released_spinner() is not None else "held (the C extension _spin is not built)"


class Spinner:
    """Adds `requested` ns of busy CPU time from a given start (the caller's own clock reading), less the
    calibrated overshoot; `spin` returns the ns it added, measured from that start. `released`: the share of that
    time spent with the GIL released (on the real clock, with the C extension built; else held)."""

    __slots__ = ("clock", "overshoot_ns", "_released")

    def __init__(self, clock: Clock = time.perf_counter_ns, overshoot_ns: int = 0) -> None:
        self.clock = clock
        self.overshoot_ns = overshoot_ns
        # The C wait reads CLOCK_MONOTONIC, which is perf_counter_ns's clock: a fake clock gets the twin.
        self._released = _released_spinner() if clock is time.perf_counter_ns else None

    def spin(self, start_ns: int, requested_ns: int, released: float = 0.0) -> int:
        if requested_ns <= 0:
            return 0
        deadline = start_ns + max(0, requested_ns - self.overshoot_ns)
        if released <= 0.0 or self._released is None:
            return spin_until(deadline, self.clock) - start_ns
        now = start_ns
        while now < deadline:
            end = min(now + SLICE_NS, deadline)
            self._released(now + int(released * (end - now)))
            now = spin_until(end, self.clock)
        return now - start_ns

    def calibrate(self, calls: int = CALIBRATION_CALLS, requested_ns: int = CALIBRATION_NS) -> int:
        """Measure the median overshoot of uncorrected spins on this machine and keep it; returns it (ns)."""
        self.overshoot_ns = 0
        clock = self.clock
        overshoots = []
        for _ in range(calls):
            start = clock()
            overshoots.append(self.spin(start, requested_ns) - requested_ns)
        self.overshoot_ns = max(0, int(statistics.median(overshoots)))
        return self.overshoot_ns
