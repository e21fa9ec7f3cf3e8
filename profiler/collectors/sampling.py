"""Out-of-process stack sampling: py-spy records this process, and its raw stacks are classified here.

Modes (their costs, measured on a 2-core machine with a torch workload, in docs/measurements.md):
`--nonblocking` (default) reads the process without pausing it, the cheaper, with a few failed samples,
Python frames only; `--native` (deep) pauses the process to unwind native frames, and cannot be
combined with --nonblocking. `--idle` keeps samples of threads py-spy thinks are idle (its guess drops
most samples of a thread inside a torch kernel here, so it is on by default: we classify idleness
ourselves); `--gil` keeps only samples of the thread holding the GIL (a filter, off by default).
If py-spy is missing or cannot attach (ptrace permission), the collector is "skipped" with the reason.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from ..analysis.classify import (
    IDLE_MARKER,
    ComponentRules,
    Stack,
    classify,
    is_gil_wait,
    parse_raw,
)
from ..orphans import kill_with_parent
from ..session.machine import REALTIME_PRIORITY, realtime_allowed  # noqa: F401 (moved there: `doctor` runs it without torch)
from .base import Collector, CollectorResult

_ATTACHED = "Sampling process"
_SUMMARY = re.compile(r"Samples:\s*(\d+)\s+Errors:\s*(\d+)")


def find_py_spy(explicit: str | None = None) -> str | None:
    """The py-spy executable: the one given, on PATH, or next to this Python."""
    if explicit:
        return explicit if Path(explicit).is_file() and os.access(explicit, os.X_OK) else None
    found = shutil.which("py-spy")
    if found:
        return found
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.is_file() else None


def py_spy_command(
    py_spy: str,
    pid: int,
    output: str,
    *,
    rate: int,
    native_stacks: bool,
    idle: bool,
    gil: bool,
    duration_s: int | None = None,
) -> list[str]:
    command = [
        py_spy,
        "record",
        "--pid",
        str(pid),
        "--rate",
        str(rate),
        "--format",
        "raw",
        "--output",
        output,
        "--threads",
    ]
    # --nonblocking cannot be combined with --native (py-spy refuses): native stacks need the pause.
    command.append("--native" if native_stacks else "--nonblocking")
    if idle:
        command.append("--idle")
    if gil:
        command.append("--gil")
    if duration_s is not None:
        command += ["--duration", str(int(duration_s))]  # py-spy takes whole seconds only
    return command


class ThreadCounts(TypedDict):
    """One thread name's samples (summarize_stacks): in all, with native frames, and counted by label."""

    thread_ids: list[int]
    samples: int
    native_samples: int
    categories: dict[str, int]
    components: dict[str, int]
    lock_components: dict[str, int]
    gil_components: dict[str, int]
    dispatch: int


class SamplingOverhead(TypedDict):
    py_spy_cpu_s: float | None  # py-spy's own CPU use: on a 2-core box it competes with torch's threads
    py_spy_cpu_fraction: float | None
    failed_sample_fraction: float | None


class SamplingResult(CollectorResult, total=False):
    """SamplingCollector.result(): how py-spy sampled, its raw stacks, each thread's counts and its cost."""

    mode: str
    rate_hz: int
    scheduling: str | None
    native_stacks: bool
    samples: int
    errors: int
    raw_path: str | None
    raw_text: str  # py-spy's collapsed stacks, for speedscope/flame graph exports
    engine_thread_id: int | None
    threads: dict[str, ThreadCounts]
    overhead: SamplingOverhead


def summarize_stacks(
    stacks: Iterable[Stack],
    *,
    idle_marker: str | tuple[str, ...] = IDLE_MARKER,
    rules: ComponentRules | None = None,
) -> dict[str, ThreadCounts]:
    """Sample counts per thread name: {name: {thread_ids, samples, native_samples, categories, components,
    lock_components, gil_components, dispatch}}; lock_components counts the lock samples by component,
    gil_components those of them that wait for the GIL (native stacks only: see classify.is_gil_wait).

    `native_samples` counts stacks that hold at least one native frame: only those resolve
    interpreter vs kernel vs allocation (see profiler.analysis.classify).
    """
    rules = rules or ComponentRules()
    threads: dict[str, ThreadCounts] = {}
    for stack in stacks:
        name = stack.thread_name or (
            f"thread-{stack.thread_id}" if stack.thread_id is not None else "unknown"
        )
        entry = threads.setdefault(
            name,
            {
                "thread_ids": [],
                "samples": 0,
                "native_samples": 0,
                "categories": Counter(),
                "components": Counter(),
                "lock_components": Counter(),
                "gil_components": Counter(),
                "dispatch": 0,
            },
        )
        if stack.thread_id is not None and stack.thread_id not in entry["thread_ids"]:
            entry["thread_ids"].append(stack.thread_id)
        label = classify(stack, idle_marker=idle_marker, rules=rules)
        entry["samples"] += stack.count
        if stack.has_native_frames:
            entry["native_samples"] += stack.count
        entry["categories"][label.category] += stack.count
        entry["components"][label.component or "none"] += stack.count
        if label.category == "lock":
            entry["lock_components"][label.component or "none"] += stack.count
            if stack.has_native_frames and is_gil_wait(stack.frames):
                entry["gil_components"][label.component or "none"] += stack.count
        if label.dispatch:
            entry["dispatch"] += stack.count
    for entry in threads.values():  # the Counters as plain dicts
        entry["categories"] = dict(entry["categories"])
        entry["components"] = dict(entry["components"])
        entry["lock_components"] = dict(entry["lock_components"])
        entry["gil_components"] = dict(entry["gil_components"])
    return threads


def _process_cpu_seconds(pid: int) -> float | None:
    """User+system CPU seconds of a live process, from /proc (None where there is no /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


class SamplingCollector(Collector[SamplingResult]):
    """Runs `py-spy record` against `pid` (normally this process) between start() and stop().

    result() = {mode, rate_hz, scheduling, native_stacks, samples, errors, raw_path, raw_text, engine_thread_id,
    threads: summarize_stacks(...), overhead: {py_spy_cpu_s, py_spy_cpu_fraction, failed_sample_fraction}}
    """

    name = "sampling"

    def __init__(
        self,
        *,
        pid: int | None = None,
        rate: int = 59,
        native_stacks: bool = False,
        idle: bool = True,
        gil: bool = False,
        py_spy: str | None = None,
        output_dir: str | Path | None = None,
        idle_marker: str | tuple[str, ...] = IDLE_MARKER,
        rules: ComponentRules | None = None,
        engine_thread_id_getter: Callable[[], int | None] | None = None,
        duration_s: int | None = None,
        attach_timeout_s: float = 10.0,
        stop_timeout_s: float = 60.0,
        priority: str = "low",
        ends_with_starter: bool = False,
    ) -> None:
        super().__init__()
        self.pid = pid if pid is not None else os.getpid()
        # py-spy gets SIGKILL when the thread that called start() ends: for callers that stop it on that thread.
        self.ends_with_starter = ends_with_starter
        self.rate = rate
        self.native_stacks = native_stacks
        if priority not in PRIORITIES:
            raise ValueError(f"priority={priority!r}: use one of {', '.join(PRIORITIES)}")
        self.priority = priority
        self.scheduling: str | None = None  # what the sampler got: "low", "normal" or "realtime"
        self.idle = idle
        self.gil = gil
        self.idle_marker = idle_marker
        self.duration_s = duration_s  # cap the sampling (deep mode pauses the process per sample)
        self.rules = rules or ComponentRules()
        self._engine_thread_id_getter = engine_thread_id_getter
        self._attach_timeout_s = attach_timeout_s
        self._stop_timeout_s = stop_timeout_s
        self._output_dir = Path(output_dir) if output_dir is not None else None
        self._process: subprocess.Popen[bytes] | None = None
        self._log_path: Path | None = None
        self.raw_path: Path | None = None
        self._temp_dir: Path | None = None
        self._raw_text: str | None = None
        self._final_log: str | None = None
        self._started_at = 0.0
        self._wall_s = 0.0
        self._cpu_s: float | None = None
        self._engine_thread_id: int | None = None
        self._stretches: list[_Stretch] = []  # what py-spy sampled before each restart()
        self._py_spy = find_py_spy(py_spy)
        if self._py_spy is None:
            where = f"at {py_spy!r}" if py_spy else "on PATH or beside this Python"
            self.skip(f"py-spy is not installed ({where}); install it with `pip install py-spy`")

    @property
    def mode(self) -> str:
        return "native" if self.native_stacks else "nonblocking"

    def _start(self) -> None:
        assert self._py_spy is not None
        if self._output_dir is None:
            # Read back into memory when sampling stops, then removed: a run leaves nothing in /tmp.
            self._temp_dir = Path(tempfile.mkdtemp(prefix="infer-prof-pyspy-"))
        folder = self._output_dir or self._temp_dir
        assert folder is not None
        folder.mkdir(parents=True, exist_ok=True)
        self.raw_path = folder / "py-spy.raw.txt"
        self._log_path = folder / "py-spy.log"
        command = py_spy_command(
            self._py_spy,
            self.pid,
            str(self.raw_path),
            rate=self.rate,
            native_stacks=self.native_stacks,
            idle=self.idle,
            gil=self.gil,
            duration_s=self.duration_s,
        )
        with open(self._log_path, "wb") as log:
            # A session of its own: a Ctrl-C meant for the profiled run must not stop the sampler early.
            self._process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, "RUST_BACKTRACE": "0"},
                preexec_fn=functools.partial(_prepare_child, self.priority, self.ends_with_starter),
            )
        self.scheduling = _scheduling_of(self._process.pid, self.priority)
        self._started_at = time.perf_counter()
        deadline = self._started_at + self._attach_timeout_s
        while time.perf_counter() < deadline:
            if self._process.poll() is not None:
                self.skip(self._attach_failure())
                self._remove_temp_dir()
                return
            if _ATTACHED in self._log_text():
                return
            time.sleep(0.02)
        # No banner yet but still running: py-spy may be slow to read a big process; keep sampling.

    def _attach_failure(self) -> str:
        text = self._log_text().strip()
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        # py-spy (anyhow) writes "Error: <what>", then "Caused by:" and numbered causes.
        error = next((line for line in lines if line.startswith("Error:")), None)
        causes = [line for line in lines if re.match(r"^0:", line)]
        if error:
            last = error[len("Error:") :].strip() + (f" ({causes[0][2:].strip()})" if causes else "")
        else:
            last = lines[-1] if lines else f"exit status {self._process.returncode if self._process else '?'}"
        hint = ""
        if re.search(r"[Pp]ermission|ptrace|Operation not permitted", text):
            hint = " (needs ptrace permission: run as root, grant CAP_SYS_PTRACE, or set kernel.yama.ptrace_scope=0)"
        return f"py-spy could not attach to pid {self.pid}: {last}{hint}"

    def _log_text(self) -> str:
        if self._final_log is not None:
            return self._final_log
        try:
            return self._log_path.read_text(errors="replace") if self._log_path else ""
        except OSError:
            return ""

    def _read_back(self) -> None:
        """Keep py-spy's output in memory and remove the temporary folder it was written to."""
        self._final_log = self._log_text()
        try:
            if self.raw_path is not None and self.raw_path.exists():
                self._raw_text = self.raw_path.read_text(errors="replace")
        finally:
            self._remove_temp_dir()

    def _remove_temp_dir(self) -> None:
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None

    def _can_pause(self) -> bool:
        # A native-mode py-spy holds the process under ptrace while it samples: stopping it then
        # could leave the engine stopped too. A non-blocking one only reads memory, so it can pause.
        return not self.native_stacks and self._process is not None and self._process.poll() is None

    def _pause(self) -> None:
        assert self._process is not None
        self._process.send_signal(signal.SIGSTOP)

    def _resume(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGCONT)

    def _stop(self) -> None:
        process = self._process
        if process is None:
            return
        if self._engine_thread_id_getter is not None:
            try:
                self._engine_thread_id = self._engine_thread_id_getter()
            except Exception:  # only a label
                self._engine_thread_id = None
        self._wall_s = time.perf_counter() - self._started_at
        self._cpu_s = _process_cpu_seconds(process.pid)
        if process.poll() is None:
            process.send_signal(signal.SIGINT)  # py-spy writes its output on Ctrl-C
            try:
                process.wait(timeout=self._stop_timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                self._read_back()
                self.fail(f"py-spy did not finish writing within {self._stop_timeout_s:.0f} s and was killed")
                return
        self._read_back()
        if self._raw_text is None:
            self.fail(f"py-spy wrote no samples: {self._log_text().strip()[-300:] or 'no output'}")

    def restart(self) -> None:
        """Stop py-spy, keep what it sampled, and start it again on the same process: py-spy writes its samples only
        when it stops, so a run that reads them between rounds (`run --until resolved` on a server) restarts it
        there. result() covers every stretch; a process that is gone by then keeps what was sampled before."""
        if self._output_dir is not None:
            raise ValueError(
                "restart() keeps stretches in memory: a sampler writing to output_dir cannot restart"
            )
        if self.status != "ok" or self._process is None:
            return
        self.stop()
        if self.status != "ok":  # this stretch wrote nothing (the process ended): the earlier ones stand
            if self._stretches:
                self.status, self.reason, self._process = "ok", None, None
            return
        self._stretches.append(_Stretch(self._raw_text or "", self._log_text(), self._wall_s, self._cpu_s))
        self._process, self._raw_text, self._final_log = None, None, None
        with self._pause_lock:
            self._stopping = False
        self._start()
        if self.status != "ok":  # not attached again (the process ended): the stretches so far stand
            self.status, self.reason, self._process = "ok", None, None

    def _result(self) -> SamplingResult:
        current = _Stretch(self._raw_text or "", self._log_text(), self._wall_s, self._cpu_s)
        # The stretch under way counts once it has stopped (before, py-spy has written nothing), or when it is all.
        ended = self._process is not None and self._raw_text is not None
        stretches = [*self._stretches, current] if ended or not self._stretches else self._stretches
        raw_text = "\n".join(stretch.raw.rstrip("\n") for stretch in stretches if stretch.raw)
        stacks = parse_raw(raw_text)
        threads = summarize_stacks(stacks, idle_marker=self.idle_marker, rules=self.rules)
        samples = errors = 0
        for stretch in stretches:
            counted = stretch.counts()
            samples += counted[0] if counted else sum(stack.count for stack in parse_raw(stretch.raw))
            errors += counted[1] if counted else 0
        cpu_s = None if any(s.cpu_s is None for s in stretches) else sum(s.cpu_s or 0.0 for s in stretches)
        wall_s = sum(stretch.wall_s for stretch in stretches)
        cpu_fraction = cpu_s / wall_s if cpu_s is not None and wall_s > 0 else None
        return {
            "mode": self.mode,
            "rate_hz": self.rate,
            "scheduling": self.scheduling,
            "native_stacks": self.native_stacks,
            "samples": samples,
            "errors": errors,
            "raw_path": str(self.raw_path) if self._output_dir is not None else None,
            "raw_text": raw_text,  # py-spy's collapsed stacks, for speedscope/flame graph exports
            "engine_thread_id": self._engine_thread_id,
            "threads": threads,
            "overhead": {
                # py-spy's own CPU use: on a 2-core box it competes with torch's threads.
                "py_spy_cpu_s": cpu_s,
                "py_spy_cpu_fraction": cpu_fraction,
                "failed_sample_fraction": errors / (samples + errors) if samples + errors else None,
            },
        }


@dataclass(frozen=True, slots=True)
class _Stretch:
    """What one py-spy process sampled, from its start to its stop: raw stacks, its log, its wall and CPU time."""

    raw: str
    log: str
    wall_s: float
    cpu_s: float | None

    def counts(self) -> tuple[int, int] | None:
        """(samples, errors) from py-spy's last summary line, or None where it wrote none."""
        matches = list(_SUMMARY.finditer(self.log))
        return (int(matches[-1].group(1)), int(matches[-1].group(2))) if matches else None


# How the sampler is scheduled. A --native sample stops the threads one at a time, in thread-id order,
# and a sleeping thread must be woken and get a core before it stops; meanwhile the engine thread runs
# on, so when the engine keeps every core busy its sample lands late, in the serial code after a
# kernel. The bias this gives, by priority, against direct timing, is measured by
# benchmarks/bench_sampling_bias.py (docs/measurements.md, "Figures that stood in code comments"):
# large only while an idle OpenMP pool sat on the main thread (see engine/setup_thread.py).
#   low:      nice 19; the cheap default mode (Python-only stacks, where the delay matters least),
#             so that the sampler takes a core only when one is free;
#   normal:   the default priority;
#   realtime: SCHED_FIFO (needs root or CAP_SYS_NICE; falls back to normal, reported as such).
PRIORITIES = ("low", "normal", "realtime")


def _scheduling_of(pid: int, wanted: str) -> str:
    """What the started sampler actually got (a realtime request may have been refused)."""
    if wanted != "realtime":
        return wanted
    try:
        return "realtime" if os.sched_getscheduler(pid) == os.SCHED_FIFO else "normal"
    except (OSError, AttributeError):
        return "normal"


def _realtime_priority() -> None:
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(REALTIME_PRIORITY))
    except (OSError, AttributeError):  # no permission (or no such call here): stay at normal priority
        pass


def _lowest_priority() -> None:
    try:
        os.nice(19)
    except OSError:  # not allowed to change priority: sample at normal priority
        pass


_PRIORITY_SETTERS: dict[str, Callable[[], None] | None] = {
    "low": _lowest_priority,
    "normal": None,
    "realtime": _realtime_priority,
}


def _prepare_child(priority: str, ends_with_starter: bool) -> None:
    """py-spy between fork and exec: its priority and, when asked, death with the thread that started it. The
    in-run A/B stops py-spy with SIGSTOP between its blocks; a profiler killed then would leave it stopped for
    good. Not for a sampler whose starting thread ends first: the tree watcher's, stopped after its thread."""
    if ends_with_starter:
        kill_with_parent()
    setter = _PRIORITY_SETTERS[priority]
    if setter is not None:
        setter()
