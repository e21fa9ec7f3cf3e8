"""One torch thread while other processes want this machine's cores, all of them again once the cores are free."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypedDict

# Why: libgomp's spin-wait is the fastest on a quiet machine, and with one thread nothing spins at a
# barrier, so a busy neighbour takes a share of a core instead of stalling every parallel region.
# benchmarks/bench_contention.py measures them side by side; docs/measurements.md has the figures.
WINDOW_S = 0.5  # how often /proc is read; the engine thread calls tick() once a step
DOWN_WAIT = 0.2  # our threads' summed run-queue wait, in cores, that lowers torch to one thread ...
DOWN_OTHERS = 0.3  # ... when other processes use this many cores too: a wait our own threads cause is not it
UP_BUSY = 0.3  # cores the rest of the machine may use (everything but the engine thread) to raise it again
UP_WINDOWS = 4  # ... over this many windows in a row, so that a short lull does not bounce the count


class GovernorRecord(TypedDict):
    """What a governor did (ThreadGovernor.record): torch's thread count, its switches, the time at one thread."""

    threads: int
    threads_at_end: int
    switches: int
    one_thread_s: float
    watched_s: float  # the engine thread's life so far, which one_thread_s is part of


@dataclass(frozen=True)
class CpuReading:
    """One look at /proc: wall clock, the machine's busy CPU time, our threads' run-queue wait, the engine
    thread's CPU time, and this process's (every thread's)."""

    wall_ns: int
    machine_busy_ns: int
    own_wait_ns: int
    engine_cpu_ns: int
    process_cpu_ns: int


def machine_busy_ns(stat_path: str = "/proc/stat") -> int:
    """All CPUs' non-idle time so far (user, nice, system, irq, softirq, steal), in ns."""
    with open(stat_path, "rb") as handle:
        fields = handle.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(value) for value in fields[:8])
    return (user + nice + system + irq + softirq + steal) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def own_wait_ns(task_dir: str = "/proc/self/task") -> int:
    """Summed over this process's threads: time spent runnable but waiting for a CPU (schedstat's 2nd field)."""
    total = 0
    for tid in os.listdir(task_dir):
        try:
            with open(f"{task_dir}/{tid}/schedstat", "rb") as handle:
                total += int(handle.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended between listdir and open
    return total


def read_cpu() -> CpuReading:
    return CpuReading(
        time.monotonic_ns(), machine_busy_ns(), own_wait_ns(), time.thread_time_ns(), time.process_time_ns()
    )


def available() -> bool:
    """Whether this kernel gives what the governor reads (Linux with schedstat)."""
    try:
        read_cpu()
    except (OSError, ValueError, IndexError):
        return False
    return True


def outside_cores(last: CpuReading, now: CpuReading) -> float:
    """Cores the machine's other processes kept busy between two readings (the machine's busy time less ours)."""
    wall = max(1, now.wall_ns - last.wall_ns)
    return ((now.machine_busy_ns - last.machine_busy_ns) - (now.process_cpu_ns - last.process_cpu_ns)) / wall


class ThreadGovernor:
    """Called by the engine thread once a step: lowers torch to one thread when our threads wait for CPUs while
    other processes use them, raises it back when the rest of the machine has been quiet for UP_WINDOWS windows."""

    def __init__(
        self,
        threads: int,
        set_threads: Callable[[int], None],
        read: Callable[[], CpuReading] = read_cpu,
        clock: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self.threads, self.current = threads, threads
        self._set_threads, self._read, self._clock = set_threads, read, clock
        self._started_ns = clock()
        self._last: CpuReading | None = None
        self._quiet_windows = 0
        self._watching = threads > 1
        self.switches = 0
        self.lowered_ns = 0
        self._lowered_since: int | None = None

    def tick(self) -> None:
        if not self._watching or (
            self._last is not None and self._clock() - self._last.wall_ns < WINDOW_S * 1e9
        ):
            return
        try:
            reading = self._read()
        except (OSError, ValueError, IndexError):
            self._watching = False  # /proc stopped answering: leave the count where it is
            return
        last, self._last = self._last, reading
        if last is not None:
            self._decide(last, reading)

    def _decide(self, last: CpuReading, now: CpuReading) -> None:
        wall = max(1, now.wall_ns - last.wall_ns)
        if self.current > 1:
            # Why both: with many threads of our own (an in-process load's clients waking for every token) our
            # spinning OpenMP worker makes them wait on a quiet machine too, which alone lowered torch for a
            # large part of such runs (docs/measurements.md).
            if (now.own_wait_ns - last.own_wait_ns) / wall >= DOWN_WAIT and outside_cores(
                last, now
            ) >= DOWN_OTHERS:
                self._switch(1, now.wall_ns)
            return
        others = (
            (now.machine_busy_ns - last.machine_busy_ns) - (now.engine_cpu_ns - last.engine_cpu_ns)
        ) / wall
        self._quiet_windows = self._quiet_windows + 1 if others < UP_BUSY else 0
        if self._quiet_windows >= UP_WINDOWS:
            self._switch(self.threads, now.wall_ns)

    def _switch(self, threads: int, at_ns: int) -> None:
        self._set_threads(threads)
        self.current, self._quiet_windows = threads, 0
        self.switches += 1
        if threads == 1:
            self._lowered_since = at_ns
        elif self._lowered_since is not None:
            self.lowered_ns += at_ns - self._lowered_since
            self._lowered_since = None

    def close(self) -> None:
        """Give torch its threads back (the count is per process; the next engine here starts from it)."""
        if self.current != self.threads:
            self._switch(self.threads, self._clock())
        self._watching = False

    def record(self) -> GovernorRecord:
        """What it did so far, for the run's result: its thread count, the switches and the time at one thread."""
        lowered = self.lowered_ns
        if self._lowered_since is not None:
            lowered += self._clock() - self._lowered_since
        return {
            "threads": self.threads,
            "threads_at_end": self.current,
            "switches": self.switches,
            "one_thread_s": round(lowered / 1e9, 3),
            "watched_s": round((self._clock() - self._started_ns) / 1e9, 3),
        }  # the engine thread's life so far


def starting_threads(
    threads: int,
    read: Callable[[], CpuReading] = read_cpu,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """The count a governed engine would run at under the machine's load now, for runs that must keep one count:
    one when other processes use DOWN_OTHERS cores or more over one window, else `threads`."""
    if threads <= 1:
        return threads
    try:
        first = read()
        sleep(WINDOW_S)
        now = read()
    except (OSError, ValueError, IndexError):
        return threads  # nothing to read here: the count torch has
    return 1 if outside_cores(first, now) >= DOWN_OTHERS else threads


def default_governor() -> ThreadGovernor | None:
    """A governor for the calling (engine) thread when infer-prof chose the threading (engine.threads), torch
    has more than one thread, and this kernel gives what it reads; None otherwise."""
    import torch

    from .threads import adaptive_threads

    threads = torch.get_num_threads()
    if threads <= 1 or not adaptive_threads() or not available():
        return None
    return ThreadGovernor(threads, torch.set_num_threads)
