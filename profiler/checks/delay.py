"""The slowdown experiments' delay: CPU work that holds the GIL and a core, as a Python component's own work does, for a requested number of ns.

time.sleep would release the GIL and the core, so other threads would run through the delay where they
could not run through the component's own work; a tight Python loop on perf_counter_ns keeps both, and
lets the interpreter hand the GIL over at its switch interval exactly as it does in the component's
loops. The loop stops at the first clock reading past its deadline, so it overshoots by one turn of the
loop; `calibrate` measures what a call costs beyond its request (the call itself, one turn) and the
spinner starts its deadline that much earlier, so short delays (a kv_alloc call's fraction) land on
their request too. The added time is always measured, never assumed: callers use `spin`'s return.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

Clock = Callable[[], int]
CALIBRATION_CALLS = 200  # spins of CALIBRATION_NS each, a few ms in all, taken once per experiment
CALIBRATION_NS = 2_000


def spin_until(deadline_ns: int, clock: Clock = time.perf_counter_ns) -> int:
    """Busy-wait on `clock` until it reads deadline_ns or later, holding the GIL; returns that reading."""
    now = clock()
    while now < deadline_ns:
        now = clock()
    return now


class Spinner:
    """Adds `requested` ns of busy CPU time from a given start (the caller's own clock reading), less the
    calibrated overshoot; `spin` returns the ns it added, measured from that start."""

    __slots__ = ("clock", "overshoot_ns")

    def __init__(self, clock: Clock = time.perf_counter_ns, overshoot_ns: int = 0) -> None:
        self.clock = clock
        self.overshoot_ns = overshoot_ns

    def spin(self, start_ns: int, requested_ns: int) -> int:
        if requested_ns <= 0:
            return 0
        return spin_until(start_ns + max(0, requested_ns - self.overshoot_ns), self.clock) - start_ns

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
