"""The run's health probe: the engine thread's CPU and run-queue time, the rest of the machine's load and steal, from /proc."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import TypedDict

PROC = Path("/proc")
# procs_running is an instant: sampled a few times a second it averages the run without costing a core.
SAMPLE_INTERVAL_S = 0.25


class Snapshot(TypedDict):
    """One look at the clocks: wall time, the machine's CPU ticks, this process's CPU, the engine thread's run/wait."""

    wall_ns: int
    cpu: dict[str, int] | None
    process_ns: int
    engine: tuple[int, int] | None


class HealthFigures(TypedDict, total=False):
    """HealthProbe.result(): the raw figures of a run (empty when the probe did not both start and stop)."""

    wall_s: float
    cpus: int
    engine_cpu_s: float | None
    engine_wait_s: float | None
    others_cores: float | None
    steal_fraction: float | None
    others_runnable_mean: float | None
    others_runnable_samples: int


def read_cpu_times(proc: Path = PROC) -> dict[str, int] | None:
    """The machine's aggregate `cpu` line of /proc/stat in clock ticks (busy, idle, steal, total); None off Linux."""
    try:
        for line in (proc / "stat").read_text(encoding="ascii").splitlines():
            if line.startswith("cpu "):
                ticks = [int(value) for value in line.split()[1:]]
                ticks += [0] * (8 - len(ticks))
                user, nice, system, idle, iowait, irq, softirq, steal = ticks[:8]
                busy = user + nice + system + irq + softirq
                return {
                    "busy": busy,
                    "idle": idle + iowait,
                    "steal": steal,
                    "total": busy + idle + iowait + steal,
                }
    except (OSError, ValueError):
        return None
    return None


def read_procs_running(proc: Path = PROC) -> int | None:
    """Runnable tasks on the whole machine right now (procs_running of /proc/stat), ours included."""
    try:
        for line in (proc / "stat").read_text(encoding="ascii").splitlines():
            if line.startswith("procs_running"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def our_running_threads(proc: Path = PROC, pid: int | None = None) -> int:
    """This process's threads in state R now: what procs_running counts of ours."""
    task_dir = proc / str(pid or os.getpid()) / "task"
    running = 0
    try:
        tasks = list(task_dir.iterdir())
    except OSError:
        return 0
    for task in tasks:
        try:
            stat = (task / "stat").read_text(encoding="ascii")
        except OSError:
            continue  # a thread that ended between the listing and the read
        # The state follows the parenthesised name, which may itself hold spaces or parentheses.
        if stat[stat.rfind(")") + 2 : stat.rfind(")") + 3] == "R":
            running += 1
    return running


def read_thread_schedstat(native_id: int, proc: Path = PROC) -> tuple[int, int] | None:
    """(ns on a CPU, ns runnable but waiting for one) of one of our threads; None where the kernel keeps no schedstat."""
    try:
        on_cpu, waiting, *_ = (proc / "self" / "task" / str(native_id) / "schedstat").read_text().split()
        return int(on_cpu), int(waiting)
    except (OSError, ValueError):
        return None


def read_process_cpu_ns() -> int:
    """CPU time of this whole process (every thread), in ns."""
    return time.process_time_ns()


class HealthProbe:
    """Measures, around one run, how much of a core the engine thread got and how busy the rest of the machine was.

    start() and stop() bracket the load; a sampler thread reads procs_running four times a second.
    Nothing here raises: a figure the kernel does not offer is None and the analysis says so."""

    def __init__(
        self, engine_thread_name: str, *, proc: Path = PROC, interval_s: float = SAMPLE_INTERVAL_S
    ) -> None:
        self.engine_thread_name = engine_thread_name
        self.proc = proc
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._sampler: threading.Thread | None = None
        self._others_runnable: list[int] = []
        self._start: Snapshot | None = None
        self._end: Snapshot | None = None
        self._native_id: int | None = None

    def _engine_native_id(self) -> int | None:
        for thread in threading.enumerate():
            if thread.name == self.engine_thread_name:
                return thread.native_id
        return None

    def _snapshot(self) -> Snapshot:
        sched = read_thread_schedstat(self._native_id, self.proc) if self._native_id else None
        return {
            "wall_ns": time.perf_counter_ns(),
            "cpu": read_cpu_times(self.proc),
            "process_ns": read_process_cpu_ns(),
            "engine": sched,
        }

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            running = read_procs_running(self.proc)
            if running is not None:
                # procs_running counts the reader too (it is running to read): it is one of ours.
                self._others_runnable.append(max(0, running - our_running_threads(self.proc)))

    @property
    def samples_taken(self) -> int:
        """How many times the sampler has read procs_running so far."""
        return len(self._others_runnable)

    def start(self) -> HealthProbe:
        self._native_id = self._engine_native_id()
        self._start = self._snapshot()
        self._sampler = threading.Thread(target=self._sample, name="infer-prof-health", daemon=True)
        self._sampler.start()
        return self

    def stop(self) -> None:
        self._end = self._snapshot()
        self._stop.set()
        if self._sampler is not None:
            self._sampler.join(timeout=2.0)

    def result(self) -> HealthFigures:
        """The raw figures of the run (profiler.analysis.health turns them into result.json's `health`)."""
        if not self._start or not self._end:
            return {}
        wall_s = (self._end["wall_ns"] - self._start["wall_ns"]) / 1e9
        figures: HealthFigures = {
            "wall_s": wall_s,
            "cpus": _usable_cpus(),
            "engine_cpu_s": None,
            "engine_wait_s": None,
            "others_cores": None,
            "steal_fraction": None,
            "others_runnable_mean": None,
            "others_runnable_samples": len(self._others_runnable),
        }
        start_engine, end_engine = self._start["engine"], self._end["engine"]
        if start_engine and end_engine:
            figures["engine_cpu_s"] = (end_engine[0] - start_engine[0]) / 1e9
            figures["engine_wait_s"] = (end_engine[1] - start_engine[1]) / 1e9
        start_cpu, end_cpu = self._start["cpu"], self._end["cpu"]
        if start_cpu and end_cpu and end_cpu["total"] > start_cpu["total"]:
            ticks = end_cpu["total"] - start_cpu["total"]
            tick_s = 1.0 / os.sysconf("SC_CLK_TCK")
            ours_s = (self._end["process_ns"] - self._start["process_ns"]) / 1e9
            busy_s = (end_cpu["busy"] - start_cpu["busy"]) * tick_s
            # Everything busy on the machine that was not this process: other programs (py-spy included).
            figures["others_cores"] = max(0.0, busy_s - ours_s) / wall_s if wall_s > 0 else None
            figures["steal_fraction"] = (end_cpu["steal"] - start_cpu["steal"]) / ticks
        if self._others_runnable:
            figures["others_runnable_mean"] = sum(self._others_runnable) / len(self._others_runnable)
        return figures


def _usable_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)
