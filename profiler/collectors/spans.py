"""The recording tracer: exact per-thread span, lock-wait and pause times the engine reports through engine.trace."""

from __future__ import annotations

import struct
import threading
import time
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from typing import Any

from infer_prof.profiler.collectors.base import Collector
from infer_prof.profiler.collectors.spill import SpillFile

Clock = Callable[[], int]
StepListener = Callable[[int, bool], None]  # (step index, begin?)
SpanHook = Callable[[str, bool], None]  # (span name, enter?)

STEP_SPAN = "step"
OUTSIDE = ""  # the parent name of a lock wait or pause that happened outside every span

_NULL = nullcontext()
# A thread's records are spilled to disk once it holds this many spans (~450 KB of them).
SPILL_RECORDS = 8192


class RecordLog:
    """Records of a few names (str) and numbers each, kept as a list of names and an 8-byte array of numbers.

    A record per span is kept for the whole run, so its size is the profiler's memory growth: as
    Python ints in a list a span's six numbers cost ~200 bytes (a 32-byte int object and an 8-byte
    slot each), in an array 48. In a 10,000-request soak that was ~3 KB a request of RSS growth.
    Arrays hold no objects, so they also add nothing to the garbage collector's work. Only the
    owning thread appends (names first, then numbers), so the two stay aligned without a lock.
    spill() moves the records held so far into a SpillFile (names as codes into `_name_table`), so
    a run of any length holds at most a chunk of them; records() reads the spilled chunks first.
    """

    __slots__ = ("_chunks", "_codes", "_name_table", "name_width", "names", "pack", "value_width", "values")

    def __init__(self, name_width: int, value_width: int, typecode: str = "q") -> None:
        self.name_width = name_width
        self.value_width = value_width
        self.names: list[str] = []
        self.values = array(typecode)
        # A record's numbers go in as bytes (values.frombytes(pack(...))): array.extend from a tuple converts
        # item by item, and cost ~0.4 us a span against ~0.1 us this way (struct's native layout is the array's).
        self.pack = struct.Struct(f"{value_width}{typecode}").pack
        self._codes: dict[str, int] = {}
        self._name_table: list[str] = []
        # Spilled chunks: (file, records, offset of the name codes, offset of the numbers).
        self._chunks: list[tuple[SpillFile, int, int, int]] = []

    def __len__(self) -> int:
        return sum(chunk[1] for chunk in self._chunks) + len(self.names) // self.name_width

    def spill(self, file: SpillFile) -> bool:
        """Move the records held in memory into `file` (owning thread only); False when the file refused them."""
        count = len(self.names) // self.name_width
        if not count:
            return True
        codes = self._codes
        for name in set(self.names):
            if name not in codes:
                codes[name] = len(self._name_table)
                self._name_table.append(name)
        name_codes = array("i", map(codes.__getitem__, self.names))
        names_at = file.append(name_codes)
        values_at = file.append(self.values) if names_at is not None else None
        if names_at is None or values_at is None:
            return False
        self._chunks.append((file, count, names_at, values_at))
        self.names = []
        del self.values[:]  # frees the buffer; the array object is kept
        return True

    def records(self) -> Iterator[tuple[Any, ...]]:
        """Each record as a tuple: its names, then its numbers (spilled ones first, in the order written)."""
        for file, count, names_at, values_at in self._chunks:
            table = self._name_table
            names = [table[code] for code in file.read_array("i", names_at, count * self.name_width)]
            values = file.read_array(self.values.typecode, values_at, count * self.value_width)
            yield from self._tuples(names, values)
        yield from self._tuples(self.names, self.values)

    def _tuples(self, names: list[str], values: array) -> Iterator[tuple[Any, ...]]:
        heads = zip(*([iter(names)] * self.name_width), strict=False)
        tails = zip(*([iter(values)] * self.value_width), strict=False)
        return (head + tail for head, tail in zip(heads, tails, strict=False))


class _ThreadState:
    """One thread's open spans and finished events; only its own thread writes to it."""

    __slots__ = (
        "counters",
        "events",
        "ident",
        "locks",
        "native_id",
        "pauses",
        "spans",
        "spilling",
        "stack",
        "step",
        "thread",
    )

    def __init__(self) -> None:
        self.thread = threading.current_thread()
        self.ident = threading.get_ident()
        self.native_id = threading.get_native_id()
        # Open spans, innermost last: [name, start_ns, child_ns, cpu_start_ns].
        self.stack: list[list[Any]] = []
        # Finished spans: name; start_ns, end_ns, self_ns, cpu_ns, depth, step.
        self.events = RecordLog(1, 6)
        # Lock uses: lock name, parent span; step, asked_ns, got_ns, released_ns.
        self.locks = RecordLog(2, 4)
        # Pauses reported by other collectors (GC): kind, parent span; step, start_ns, end_ns.
        self.pauses = RecordLog(2, 3)
        # Sampled values: name; time_ns, value (as a float, exact for integers below 2**53).
        self.counters = RecordLog(1, 2, "d")
        self.step = -1
        # One context manager per span name, reused: it holds no per-use state (that is on `stack`), so a
        # span costs no object allocation, only the dict lookup that finds it.
        self.spans: dict[str, _Span] = {}
        self.spilling = True  # until the spill file refuses a chunk; then every record stays in memory

    def spill(self, file: SpillFile) -> None:
        """Move this thread's finished records into `file` (called on this thread only)."""
        if self.spilling:
            self.spilling = all(
                log.spill(file) for log in (self.events, self.locks, self.pauses, self.counters)
            )

    def add_to_parent(self, ns: int) -> str:
        """Count `ns` (a lock wait, a pause) against the innermost open span; return its name."""
        stack = self.stack
        if stack:
            stack[-1][2] += ns
            return stack[-1][0]
        return OUTSIDE


class _Span:
    """The context manager of one span name on one thread: slotted, made once and reused (see _ThreadState.spans)."""

    __slots__ = ("name", "state", "tracer")

    def __init__(self, tracer: RecordingTracer, state: _ThreadState, name: str) -> None:
        self.tracer = tracer
        self.state = state
        self.name = name

    def __enter__(self) -> None:
        tracer = self.tracer
        name = self.name
        state = self.state
        if name == STEP_SPAN:
            state.step = tracer._begin_step()
        if tracer._span_hook is not None:
            tracer._span_hook(name, True)
        cpu_clock = tracer._cpu_clock
        state.stack.append([name, tracer._clock(), 0, cpu_clock() if cpu_clock is not None else 0])

    def __exit__(self, *exc: object) -> None:
        tracer = self.tracer
        end = tracer._clock()
        cpu_clock = tracer._cpu_clock
        cpu_end = cpu_clock() if cpu_clock is not None else 0
        state = self.state
        stack = state.stack
        name, start, child_ns, cpu_start = stack.pop()
        duration = end - start
        if stack:
            stack[-1][2] += duration
        events = state.events
        events.names.append(name)
        events.values.frombytes(
            events.pack(start, end, duration - child_ns, cpu_end - cpu_start, len(stack), state.step)
        )
        if not stack and len(events.names) >= SPILL_RECORDS:
            state.spill(tracer.spill_file)  # between top-level spans: a chunk written every ~1,000 steps
        if tracer._span_hook is not None:
            tracer._span_hook(name, False)
        if name == STEP_SPAN:
            tracer._end_step(state.step)
            state.step = -1


class _LockUse:
    """Acquire a lock timing the wait; the wait counts as a child of the enclosing span (lock, not its self time)."""

    __slots__ = ("asked", "got", "lock", "name", "parent", "state", "tracer")

    def __init__(self, tracer: RecordingTracer, state: _ThreadState, lock: Any, name: str) -> None:
        self.tracer = tracer
        self.state = state
        self.lock = lock
        self.name = name

    def __enter__(self) -> None:
        clock = self.tracer._clock
        asked = clock()
        self.lock.acquire()
        got = clock()
        self.parent = self.state.add_to_parent(got - asked)
        self.asked = asked
        self.got = got

    def __exit__(self, *exc: object) -> None:
        released = self.tracer._clock()
        self.lock.release()
        state = self.state
        locks = state.locks
        locks.names.extend((self.name, self.parent))
        locks.values.frombytes(locks.pack(state.step, self.asked, self.got, released))


class RecordingTracer:
    """An engine.trace.Tracer that records spans, lock waits and counters with little cost per event.

    Each thread appends plain tuples to its own lists (no dict per event, no lock on the hot path);
    everything is summarized after the run by `summary()`. Exclusive ("self") time of a span is its
    duration minus its child spans, its lock waits and the pauses (GC) that other collectors report
    through `record_pause`, so self times, lock waits and pauses of one thread never overlap.

    clock: wall clock in ns (perf_counter_ns); cpu_clock: the thread's CPU clock in ns
    (thread_time_ns, a real system call of ~0.45 us here, so it can be switched off with None).
    Steps are numbered 0, 1, 2... in the order "step" spans are entered.
    """

    def __init__(
        self, *, clock: Clock = time.perf_counter_ns, cpu_clock: Clock | None = time.thread_time_ns
    ) -> None:
        self._clock = clock
        self._cpu_clock = cpu_clock
        self._local = threading.local()
        self._states: list[_ThreadState] = []
        self._states_lock = threading.Lock()
        self._recording = True
        self._paused = False
        self._next_step = 0
        self._step_listeners: list[StepListener] = []
        self._span_hook: SpanHook | None = None  # the hooks below as one callable; None when there are none
        self._span_hooks: list[SpanHook] = []
        self.first_ns: int | None = None  # set by enable(); the start of the recorded window
        self.spill_file = SpillFile()  # where finished records go once a thread holds SPILL_RECORDS spans
        self.last_ns: int | None = None  # set by disable()

    # -- engine.trace.Tracer ----------------------------------------------------------------------

    def span(self, name: str) -> Any:
        if not self._recording:
            if self._paused and name == STEP_SPAN:
                self._next_step += 1  # paused, steps keep their numbers (the engine's StepRecord.step)
            return _NULL
        try:
            state = self._local.state
        except AttributeError:
            state = self._new_state()
        try:
            return state.spans[name]
        except KeyError:
            span = state.spans[name] = _Span(self, state, name)
            return span

    def lock(self, lock: Any, name: str) -> Any:
        if not self._recording:
            return lock  # a Lock/Condition is its own context manager, as in NullTracer
        try:
            state = self._local.state
        except AttributeError:
            state = self._new_state()
        return _LockUse(self, state, lock, name)

    def counter(self, name: str, value: float) -> None:
        if self._recording:
            try:
                state = self._local.state
            except AttributeError:
                state = self._new_state()
            counters = state.counters
            counters.names.append(name)
            counters.values.frombytes(counters.pack(self._clock(), value))

    # -- control ----------------------------------------------------------------------------------

    def enable(self) -> None:
        self._recording = True
        self.first_ns = self._clock()

    def disable(self) -> None:
        self._recording = False
        self.last_ns = self._clock()

    def pause(self) -> None:
        """Record nothing until resume() (the in-run overhead A/B), but keep numbering steps."""
        self._paused = True
        self._recording = False

    def resume(self) -> None:
        self._paused = False
        self._recording = True

    @property
    def clock(self) -> Clock:
        return self._clock

    def add_step_listener(self, listener: StepListener) -> None:
        """Call `listener(step, begin)` on the engine thread when a "step" span begins and ends."""
        self._step_listeners.append(listener)

    def add_span_hook(self, hook: SpanHook) -> None:
        """Call `hook(name, enter)` on every span enter/exit (the kernel window marks spans for torch.profiler,
        the device timer records CUDA events around device work), until remove_span_hook(hook)."""
        self._span_hooks.append(hook)
        self._combine_hooks()

    def remove_span_hook(self, hook: SpanHook) -> None:
        if hook in self._span_hooks:
            self._span_hooks.remove(hook)
        self._combine_hooks()

    def _combine_hooks(self) -> None:
        hooks = tuple(self._span_hooks)
        if len(hooks) <= 1:  # the common case costs one call, as before there could be several
            self._span_hook = hooks[0] if hooks else None
            return

        def every(name: str, enter: bool) -> None:
            for hook in hooks:
                hook(name, enter)

        self._span_hook = every

    def record_pause(self, kind: str, start_ns: int, end_ns: int) -> None:
        """A pause of the calling thread (a GC collection) that is not its enclosing span's own work."""
        try:
            state = self._local.state
        except AttributeError:
            state = self._new_state()
        parent = state.add_to_parent(end_ns - start_ns)
        pauses = state.pauses
        pauses.names.extend((kind, parent))
        pauses.values.frombytes(pauses.pack(state.step, start_ns, end_ns))

    def current_step(self) -> int:
        """The step the calling thread is in (-1 outside every step)."""
        state = getattr(self._local, "state", None)
        return state.step if state is not None else -1

    # -- results ----------------------------------------------------------------------------------

    def thread_states(self) -> list[_ThreadState]:
        with self._states_lock:
            return list(self._states)

    def counters(self) -> list[tuple[str, int, float]]:
        """Every thread's sampled values as (name, time_ns, value), in time order."""
        rows = [
            (name, int(t), value)
            for state in self.thread_states()
            for name, t, value in state.counters.records()
        ]
        return sorted(rows, key=lambda row: row[1])

    def step_phase_table(self) -> dict[int, dict[str, int]]:
        """{step index: {span name: self ns}} (plus "lock_wait" and pause kinds) for steps.csv's phase columns."""
        return phase_table(self.thread_states())

    def summary(self) -> dict[str, Any]:
        """Per-thread totals, per-step rows and counters, JSON-ready (see SpanCollector for the shape)."""
        return {
            "threads": {name: data for name, data in _per_thread(self.thread_states()).items()},
            "steps": step_rows(self.thread_states()),
            "counters": _counter_summary(self.counters()),
            "window_ns": _window(self),
        }

    # -- internals --------------------------------------------------------------------------------

    def _new_state(self) -> _ThreadState:
        state = _ThreadState()
        self._local.state = state
        with self._states_lock:
            self._states.append(state)
        return state

    def _begin_step(self) -> int:
        step = self._next_step
        self._next_step = step + 1
        for listener in self._step_listeners:
            listener(step, True)
        return step

    def _end_step(self, step: int) -> None:
        for listener in self._step_listeners:
            listener(step, False)


def _window(tracer: RecordingTracer) -> int | None:
    if tracer.first_ns is None:
        return None
    end = tracer.last_ns if tracer.last_ns is not None else tracer._clock()
    return end - tracer.first_ns


def _per_thread(states: list[_ThreadState]) -> dict[str, dict[str, Any]]:
    """Totals by thread name (threads of the same name are merged: a restarted engine is one engine)."""
    threads: dict[str, dict[str, Any]] = {}
    for state in states:
        name = state.thread.name
        data = threads.setdefault(
            name,
            {"native_ids": [], "spans": {}, "locks": {}, "pauses": {}, "covered_ns": 0, "spans_recorded": 0},
        )
        data["native_ids"].append(state.native_id)
        spans = data["spans"]
        for span_name, start, end, self_ns, cpu_ns, depth, _step in state.events.records():
            entry = spans.get(span_name)
            if entry is None:
                entry = spans[span_name] = {"count": 0, "total_ns": 0, "self_ns": 0, "cpu_ns": 0}
            entry["count"] += 1
            entry["total_ns"] += end - start
            entry["self_ns"] += self_ns
            entry["cpu_ns"] += cpu_ns
            if depth == 0:
                data["covered_ns"] += end - start
        data["spans_recorded"] += len(state.events) + len(state.locks)
        locks = data["locks"]
        for lock_name, parent, _step, asked, got, released in state.locks.records():
            entry = locks.get(lock_name)
            if entry is None:
                entry = locks[lock_name] = {
                    "count": 0,
                    "wait_ns": 0,
                    "hold_ns": 0,
                    "max_wait_ns": 0,
                    "by_parent": {},
                }
            wait = got - asked
            entry["count"] += 1
            entry["wait_ns"] += wait
            entry["hold_ns"] += released - got
            entry["max_wait_ns"] = max(entry["max_wait_ns"], wait)
            entry["by_parent"][parent] = entry["by_parent"].get(parent, 0) + wait
        pauses = data["pauses"]
        for kind, parent, _step, start, end in state.pauses.records():
            entry = pauses.get(kind)
            if entry is None:
                entry = pauses[kind] = {"count": 0, "total_ns": 0, "by_parent": {}}
            entry["count"] += 1
            entry["total_ns"] += end - start
            entry["by_parent"][parent] = entry["by_parent"].get(parent, 0) + (end - start)
    return threads


def phase_table(states: list[_ThreadState]) -> dict[int, dict[str, int]]:
    """{step index: {span name | "lock_wait" | pause kind: ns}}: exclusive times inside each step."""
    table: dict[int, dict[str, int]] = {}

    def add(step: int, key: str, ns: int) -> None:
        phases = table.setdefault(step, {})
        phases[key] = phases.get(key, 0) + ns

    for state in states:
        for name, _start, _end, self_ns, _cpu, _depth, step in state.events.records():
            if step >= 0:
                add(step, name, self_ns)
        for _lock, _parent, step, asked, got, _released in state.locks.records():
            if step >= 0:
                add(step, "lock_wait", got - asked)
        for kind, _parent, step, start, end in state.pauses.records():
            if step >= 0:
                add(step, kind, end - start)
    return table


def step_rows(states: list[_ThreadState]) -> list[dict[str, Any]]:
    """One row per step: {step, start_ns, end_ns, <span>_ms (self time), lock_wait_ms, gc_ms}.

    `<span>_ms` is exclusive time, so a row's phase columns, lock_wait_ms and gc_ms add up to the
    step's duration; `step_ms` is then the loop's own code between phases. Rows are keyed by the
    step index (0-based, in the order steps began), the engine's StepRecord.step.
    """
    bounds = {
        step: (start, end)
        for state in states
        for name, start, end, _s, _c, _d, step in state.events.records()
        if name == STEP_SPAN and step >= 0
    }
    rows = []
    for step, phases in sorted(phase_table(states).items()):
        start, end = bounds.get(step, (None, None))
        row: dict[str, Any] = {
            "step": step,
            "start_ns": start,
            "end_ns": end,
            "lock_wait_ms": 0.0,
            "gc_ms": 0.0,
        }
        row.update({f"{name}_ms": ns / 1e6 for name, ns in phases.items()})
        rows.append(row)
    return rows


def _counter_summary(counters: list[tuple[str, int, float]]) -> dict[str, dict[str, float]]:
    grouped: dict[str, list[float]] = defaultdict(list)
    for name, _t, value in counters:
        grouped[name].append(value)
    return {
        name: {
            "count": len(values),
            "mean": sum(values) / len(values),
            "min": min(values),
            "max": max(values),
            "last": values[-1],
        }
        for name, values in grouped.items()
    }


def measure_span_cost(tracer_factory: Callable[[], RecordingTracer], repeats: int = 2000) -> dict[str, float]:
    """Cost in ns of one unnested span and one lock use, net of the bare loop (timed on this thread)."""
    tracer = tracer_factory()
    lock = threading.Lock()
    clock = time.perf_counter_ns

    def loop_bare() -> int:
        start = clock()
        for _ in range(repeats):
            pass
        return clock() - start

    def loop_spans() -> int:
        start = clock()
        for _ in range(repeats):
            with tracer.span("calibrate"):
                pass
        return clock() - start

    def loop_locks() -> int:
        start = clock()
        for _ in range(repeats):
            with tracer.lock(lock, "calibrate"):
                pass
        return clock() - start

    bare = min(loop_bare() for _ in range(3))
    spans = min(loop_spans() for _ in range(3))
    locks = min(loop_locks() for _ in range(3))
    return {
        "per_span_ns": max(0.0, (spans - bare) / repeats),
        "per_lock_ns": max(0.0, (locks - bare) / repeats),
    }


class SpanCollector(Collector):
    """Owns the RecordingTracer the session injects into the engine; its result is the tracer's summary.

    result() = {status, reason, threads: {thread name: {native_ids, spans: {name: {count, total_ns,
    self_ns, cpu_ns}}, locks: {name: {count, wait_ns, hold_ns, max_wait_ns, by_parent}}, pauses:
    {kind: {count, total_ns, by_parent}}, covered_ns, spans_recorded}}, steps: [row], counters,
    window_ns, overhead: {per_span_ns, per_lock_ns, cpu_time, estimated_ns, fraction}}
    """

    name = "spans"

    def __init__(
        self,
        *,
        cpu_time: bool = True,
        clock: Clock = time.perf_counter_ns,
        cpu_clock: Clock | None = time.thread_time_ns,
        tracer: RecordingTracer | None = None,
    ) -> None:
        super().__init__()
        if tracer is not None:
            # The session made the tracer (and injected it) before the collectors: keep what it records.
            self.tracer = tracer
            self._clock, self._cpu_clock = tracer._clock, tracer._cpu_clock
        else:
            self._cpu_clock = cpu_clock if cpu_time else None
            self._clock = clock
            self.tracer = RecordingTracer(clock=clock, cpu_clock=self._cpu_clock)
            self.tracer._recording = False  # records between start() and stop()
        self._cost: dict[str, float] | None = None

    def _start(self) -> None:
        # Calibrate on a scratch tracer so the calibration spans never reach the results.
        self._cost = measure_span_cost(lambda: RecordingTracer(clock=self._clock, cpu_clock=self._cpu_clock))
        self.tracer.enable()

    def _stop(self) -> None:
        self.tracer.disable()

    def _can_pause(self) -> bool:
        return True

    def _pause(self) -> None:
        self.tracer.pause()

    def _resume(self) -> None:
        self.tracer.resume()

    def _result(self) -> dict[str, Any]:
        summary = self.tracer.summary()
        cost = self._cost or {"per_span_ns": 0.0, "per_lock_ns": 0.0}
        recorded = sum(thread["spans_recorded"] for thread in summary["threads"].values())
        estimated = recorded * cost["per_span_ns"]
        window = summary["window_ns"] or 0
        summary["overhead"] = {
            **cost,
            "cpu_time": self._cpu_clock is not None,
            "estimated_ns": estimated,
            # Spans of all threads share two cores here; the engine thread's share is what slows steps.
            "fraction": estimated / window if window else None,
        }
        return summary
