"""The recording tracer: exact per-thread span, lock-wait and pause times the engine reports through engine.trace."""

from __future__ import annotations

import threading
import time
from array import array
from collections import defaultdict
from collections.abc import Callable
from contextlib import nullcontext
from typing import TypedDict, cast

from .base import Collector, CollectorResult
from .record_log import RecordLog
from .span_decode import OUTSIDE, STEP_SPAN, ThreadRecords
from .span_log import PAUSE, STEP_MARK, EngineLock, SpanUse, ThreadSpanLog, implementation
from .spill import SpillFile

__all__ = ["OUTSIDE", "STEP_SPAN", "RecordLog", "RecordingTracer", "SpanCollector"]

Clock = Callable[[], int]
StepListener = Callable[[int, bool], None]  # (step index, begin?)
SpanHook = Callable[[str, bool], None]  # (span name, enter?)

_NULL = nullcontext()
# A thread's log is moved to the spill file when an outermost span or lock use ends with this many words held
# (256 KB: ~8,000 spans, a chunk written every ~1,000 engine steps).
SPILL_WORDS = 1 << 15
# Lock uses a thread keeps ready, by (name, lock); past this many (a lock made per use) they are dropped and
# made again, so a thread holds no lock alive for long.
KEPT_LOCK_USES = 64
# Decoded records are moved to the spill file in chunks of this many (spans, lock uses, pauses, counters).
SPILL_RECORDS = 8192


class _ThreadState:
    """One thread's log (only its thread writes to it) and, once decoded, its records."""

    __slots__ = ("chunks", "ident", "lock_uses", "log", "native_id", "records", "spans", "step", "thread")

    def __init__(self, cpu: bool) -> None:
        self.thread = threading.current_thread()
        self.ident = threading.get_ident()
        self.native_id = threading.get_native_id()
        self.log: ThreadSpanLog  # set by the tracer right after: the log's on_full needs this state
        # One context manager per span name and per (name, lock), reused: a use holds no state of its own
        # (its clock readings go to the log), so it costs no object allocation, only the lookup that finds it.
        self.spans: dict[str | tuple[str, EngineLock], SpanUse] = {}
        self.lock_uses = 0
        self.step = -1
        # The log's words moved out so far, in order, not yet decoded: (spill file, offset, words) or bytes.
        self.chunks: list[tuple[SpillFile, int, int] | bytes] = []
        self.records = ThreadRecords(cpu)

    # What the summary reads, decoded (RecordingTracer.thread_states() decodes first).
    @property
    def events(self) -> RecordLog:
        return self.records.events

    @property
    def locks(self) -> RecordLog:
        return self.records.locks

    @property
    def pauses(self) -> RecordLog:
        return self.records.pauses

    @property
    def counters(self) -> RecordLog:
        return self.records.counters


class _StepSpan:
    """The "step" span: numbers the step and calls the step listeners and span hooks around the log's span."""

    __slots__ = ("inner", "state", "tracer")

    def __init__(self, tracer: RecordingTracer, state: _ThreadState, inner: SpanUse) -> None:
        self.tracer = tracer
        self.state = state
        self.inner = inner

    def __enter__(self) -> None:
        tracer = self.tracer
        step = self.state.step = tracer._begin_step()
        self.state.log.push(STEP_MARK, step)
        if tracer._span_hook is not None:
            tracer._span_hook(STEP_SPAN, True)
        self.inner.__enter__()

    def __exit__(self, *exc: object) -> None:
        self.inner.__exit__(None, None, None)
        tracer = self.tracer
        if tracer._span_hook is not None:
            tracer._span_hook(STEP_SPAN, False)
        tracer._end_step(self.state.step)
        self.state.step = -1


class _Hooked:
    """A span while span hooks are installed: calls `hook(name, enter)` around the thread's span."""

    __slots__ = ("hook", "inner", "name")

    def __init__(self, hook: SpanHook, name: str, inner: SpanUse) -> None:
        self.hook = hook
        self.name = name
        self.inner = inner

    def __enter__(self) -> None:
        self.hook(self.name, True)
        self.inner.__enter__()

    def __exit__(self, *exc: object) -> None:
        self.inner.__exit__(None, None, None)
        self.hook(self.name, False)


def _lock_itself(lock: EngineLock, name: str) -> EngineLock:
    return lock  # a Lock/Condition is its own context manager, as in NullTracer


# As the tracer's `lock`: a lock's __enter__ returns True where Tracer.lock's use binds nothing (None), which
# `with tracer.lock(...)` never reads. Cast once here rather than per call: this is the lock path while off.
_lock_off = cast("Callable[[EngineLock, str], SpanUse]", _lock_itself)


def _counter_off(name: str, value: float) -> None:
    return None


class RecordingTracer:
    """An engine.trace.Tracer that records spans, lock waits and counters with little cost per event.

    A span's enter and exit append a code and a clock reading to the thread's own log (span_log.py: C
    when built, else its Python twin), with no lock and no object made; everything else (self times,
    depths, parents, steps) is decoded after the run (span_decode.py) when `thread_states()` is read.
    Exclusive ("self") time of a span is its duration minus its child spans, its lock waits and the
    pauses (GC) that other collectors report through `record_pause`, so self times, lock waits and
    pauses of one thread never overlap.

    clock: wall clock in ns (perf_counter_ns); cpu_clock: the thread's CPU clock in ns
    (thread_time_ns, a real system call, so it can be switched off with None). Other clocks (tests'
    fake ones) are called through Python. native: True for the C log, False for the Python twin,
    None for C when built (see span_log.implementation). recording: False records nothing until
    enable(). Steps are numbered 0, 1, 2... in the order
    "step" spans are entered.

    `span`, `lock` and `counter` are attributes, not methods: while recording with no span hooks they
    are the C table's own functions, so the engine's call goes straight to C.
    """

    span: Callable[[str], SpanUse]
    lock: Callable[[EngineLock, str], SpanUse]
    counter: Callable[[str, float], None]

    def __init__(
        self,
        *,
        clock: Clock = time.perf_counter_ns,
        cpu_clock: Clock | None = time.thread_time_ns,
        native: bool | None = None,
        recording: bool = True,
    ) -> None:
        self._clock = clock
        self._cpu_clock = cpu_clock
        self._module, self.recorder = implementation(native)
        self._local = threading.local()
        self._states: list[_ThreadState] = []
        # Also held while decoding; reentrant, since a GC pause recorded while decoding may make a thread state.
        self._states_lock = threading.RLock()
        self._codes: dict[str, int] = {}
        self._names: list[str] = []
        self._table = self._module.Table(
            self._local, self._codes, self._miss_span, self._miss_lock, self._miss_code
        )
        self._recording = recording  # until enable() or disable()
        self._paused = False
        self._next_step = 0
        self._step_listeners: list[StepListener] = []
        self._span_hook: SpanHook | None = None  # the hooks below as one callable; None when there are none
        self._span_hooks: list[SpanHook] = []
        self.first_ns: int | None = None  # set by enable(); the start of the recorded window
        self.spill_file = SpillFile()  # where a thread's words go once it holds SPILL_WORDS of them
        self.last_ns: int | None = None  # set by disable()
        self._route()

    # -- engine.trace.Tracer: span, lock and counter are routed by _route() ------------------------

    def _route(self) -> None:
        """Point span/lock/counter at what the tracer's state calls for (the C table's when recording)."""
        if not self._recording:
            self.span, self.lock, self.counter = self._span_off, _lock_off, _counter_off
            return
        self.span = self._span_hooked if self._span_hook is not None else self._table.span
        self.lock = self._table.lock
        self.counter = self._table.counter

    def _span_off(self, name: str) -> SpanUse:
        if self._paused and name == STEP_SPAN:
            self._next_step += 1  # paused, steps keep their numbers (the engine's StepRecord.step)
        return _NULL

    def _span_hooked(self, name: str) -> SpanUse:
        span = self._table.span(name)
        hook = self._span_hook
        # The step span calls the hooks itself, after the step listeners.
        if hook is None or name == STEP_SPAN:
            return span
        return _Hooked(hook, name, span)

    def _miss_span(self, name: str) -> SpanUse:
        state = self._state()
        span: SpanUse = state.log.span(self._code(name))
        if name == STEP_SPAN:
            span = _StepSpan(self, state, span)
        state.spans[name] = span
        return span

    def _miss_lock(self, lock: EngineLock, name: str) -> SpanUse:
        state = self._state()
        if state.lock_uses >= KEPT_LOCK_USES:
            for key in [key for key in state.spans if isinstance(key, tuple)]:
                del state.spans[key]
            state.lock_uses = 0
        use = state.spans[name, lock] = state.log.lock_use(lock, self._code(name))
        state.lock_uses += 1
        return use

    def _miss_code(self, name: str) -> None:
        self._state()
        self._code(name)

    # -- control ----------------------------------------------------------------------------------

    def enable(self) -> None:
        self._recording = True
        self._route()
        self.first_ns = self._clock()

    def disable(self) -> None:
        self._recording = False
        self._route()
        self.last_ns = self._clock()

    def pause(self) -> None:
        """Record nothing until resume() (the in-run overhead A/B), but keep numbering steps."""
        self._paused = True
        self._recording = False
        self._route()

    def resume(self) -> None:
        self._paused = False
        self._recording = True
        self._route()

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
        else:

            def every(name: str, enter: bool) -> None:
                for hook in hooks:
                    hook(name, enter)

            self._span_hook = every
        self._route()

    def record_pause(self, kind: str, start_ns: int, end_ns: int) -> None:
        """A pause of the calling thread (a GC collection) that is not its enclosing span's own work."""
        state = self._state()
        state.log.push(PAUSE, self._code(kind), start_ns, end_ns)

    def current_step(self) -> int:
        """The step the calling thread is in (-1 outside every step)."""
        state = getattr(self._local, "state", None)
        return state.step if state is not None else -1

    # -- results ----------------------------------------------------------------------------------

    def thread_states(self) -> list[_ThreadState]:
        """Every thread's state, its words decoded into records so far."""
        with self._states_lock:
            for state in self._states:
                self._decode(state)
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

    def summary(self) -> TracerSummary:
        """Per-thread totals, per-step rows and counters, JSON-ready (see SpanCollector for the shape)."""
        states = self.thread_states()
        return {
            "threads": {name: data for name, data in _per_thread(states).items()},
            "steps": step_rows(states),
            "counters": _counter_summary(self.counters()),
            "window_ns": _window(self),
        }

    # -- internals --------------------------------------------------------------------------------

    def _state(self) -> _ThreadState:
        """The calling thread's state, made (with its log) on the thread's first record."""
        try:
            return self._local.state
        except AttributeError:
            pass
        cpu = self._cpu_clock is not None
        state = _ThreadState(cpu)
        state.log = self._module.SpanLog(
            limit=SPILL_WORDS,
            cpu=cpu,
            clock=None if self._clock is time.perf_counter_ns else self._clock,
            cpu_clock=None if self._cpu_clock in (None, time.thread_time_ns) else self._cpu_clock,
            on_full=lambda: self._spill(state),
        )
        local = self._local
        local.state, local.log, local.spans = state, state.log, state.spans
        with self._states_lock:
            self._states.append(state)
        return state

    def _code(self, name: str) -> int:
        code = self._codes.get(name)
        if code is None:
            with self._states_lock:
                code = self._codes.get(name)
                if code is None:
                    code = self._codes[name] = len(self._names)
                    self._names.append(name)
        return code

    def _spill(self, state: _ThreadState) -> None:
        """Move the thread's words to the spill file (on its own thread, between its outermost spans)."""
        with self._states_lock:  # a decode (another thread) never sees a chunk half moved
            words = state.log.take()
            offset = self.spill_file.append(words)  # None when the file cannot take them: kept in memory
            state.chunks.append(words if offset is None else (self.spill_file, offset, len(words) // 8))

    def _decode(self, state: _ThreadState) -> None:
        """Decode the thread's words moved out so far and those its log holds (under _states_lock)."""
        chunks, state.chunks = state.chunks, []
        chunks.append(state.log.take())
        for chunk in chunks:
            if isinstance(chunk, bytes):
                words = array("q")
                words.frombytes(chunk)
            else:
                file, offset, count = chunk
                words = file.read_array("q", offset, count)
            state.records.feed(words, self._names)
            _spill_records(state.records.logs(), self.spill_file)

    def _begin_step(self) -> int:
        step = self._next_step
        self._next_step = step + 1
        for listener in self._step_listeners:
            listener(step, True)
        return step

    def _end_step(self, step: int) -> None:
        for listener in self._step_listeners:
            listener(step, False)


def _spill_records(logs: tuple[RecordLog[tuple[object, ...]], ...], file: SpillFile) -> None:
    """Keep decoded records in the spill file once a chunk of them is held, so decoding holds memory bounded."""
    if sum(len(log.names) // log.name_width for log in logs) < SPILL_RECORDS:
        return
    for log in logs:
        log.spill(file)


class SpanTotals(TypedDict):
    count: int
    total_ns: int
    self_ns: int
    cpu_ns: int


class LockTotals(TypedDict):
    count: int
    wait_ns: int
    hold_ns: int
    max_wait_ns: int
    by_parent: dict[str, int]  # the span it was taken in -> wait ns


class PauseTotals(TypedDict):
    count: int
    total_ns: int
    by_parent: dict[str, int]  # the span it paused -> ns


class SpanThread(TypedDict):
    """One thread name's totals (threads of one name merged): spans, locks and pauses by name."""

    native_ids: list[int]
    spans: dict[str, SpanTotals]
    locks: dict[str, LockTotals]
    pauses: dict[str, PauseTotals]
    covered_ns: int  # time inside its outermost spans
    spans_recorded: int


class CounterStats(TypedDict):
    count: int
    mean: float
    min: float
    max: float
    last: float


# One step: {step, start_ns, end_ns, <span>_ms, lock_wait_ms, gc_ms} (step_rows). Not a TypedDict: its
# `<span>_ms` keys are the names of the spans the engine entered, known only at run time.
StepRow = dict[str, float | None]


class TracerSummary(TypedDict):
    """RecordingTracer.summary(): per-thread totals, per-step rows, counters and the recorded window."""

    threads: dict[str, SpanThread]
    steps: list[StepRow]
    counters: dict[str, CounterStats]
    window_ns: int | None


class SpanOverhead(TypedDict):
    """What the spans cost: one span's and one lock use's calibrated cost, times the spans recorded."""

    per_span_ns: float
    per_lock_ns: float
    cpu_time: bool
    recorder: str  # "c": the C span log; "python": its twin (not built)
    estimated_ns: float
    fraction: float | None


class SpanResult(CollectorResult, total=False):
    """SpanCollector.result(): the tracer's summary and what the spans cost."""

    threads: dict[str, SpanThread]
    steps: list[StepRow]
    counters: dict[str, CounterStats]
    window_ns: int | None
    overhead: SpanOverhead


def _window(tracer: RecordingTracer) -> int | None:
    if tracer.first_ns is None:
        return None
    end = tracer.last_ns if tracer.last_ns is not None else tracer._clock()
    return end - tracer.first_ns


def _per_thread(states: list[_ThreadState]) -> dict[str, SpanThread]:
    """Totals by thread name (threads of the same name are merged: a restarted engine is one engine)."""
    threads: dict[str, SpanThread] = {}
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
            lock_entry = locks.get(lock_name)
            if lock_entry is None:
                lock_entry = locks[lock_name] = {
                    "count": 0,
                    "wait_ns": 0,
                    "hold_ns": 0,
                    "max_wait_ns": 0,
                    "by_parent": {},
                }
            wait = got - asked
            lock_entry["count"] += 1
            lock_entry["wait_ns"] += wait
            lock_entry["hold_ns"] += released - got
            lock_entry["max_wait_ns"] = max(lock_entry["max_wait_ns"], wait)
            lock_entry["by_parent"][parent] = lock_entry["by_parent"].get(parent, 0) + wait
        pauses = data["pauses"]
        for kind, parent, _step, start, end in state.pauses.records():
            pause_entry = pauses.get(kind)
            if pause_entry is None:
                pause_entry = pauses[kind] = {"count": 0, "total_ns": 0, "by_parent": {}}
            pause_entry["count"] += 1
            pause_entry["total_ns"] += end - start
            pause_entry["by_parent"][parent] = pause_entry["by_parent"].get(parent, 0) + (end - start)
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


def step_rows(states: list[_ThreadState]) -> list[StepRow]:
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
        row: StepRow = {
            "step": step,
            "start_ns": start,
            "end_ns": end,
            "lock_wait_ms": 0.0,
            "gc_ms": 0.0,
        }
        row.update({f"{name}_ms": ns / 1e6 for name, ns in phases.items()})
        rows.append(row)
    return rows


def _counter_summary(counters: list[tuple[str, int, float]]) -> dict[str, CounterStats]:
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


class SpanCollector(Collector[SpanResult]):
    """Owns the RecordingTracer the session injects into the engine; its result is the tracer's summary.

    result() = {status, reason, threads: {thread name: {native_ids, spans: {name: {count, total_ns,
    self_ns, cpu_ns}}, locks: {name: {count, wait_ns, hold_ns, max_wait_ns, by_parent}}, pauses:
    {kind: {count, total_ns, by_parent}}, covered_ns, spans_recorded}}, steps: [row], counters,
    window_ns, overhead: {per_span_ns, per_lock_ns, cpu_time, recorder, estimated_ns, fraction}}
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
            # Records between start() and stop().
            self.tracer = RecordingTracer(clock=clock, cpu_clock=self._cpu_clock, recording=False)
        self._cost: dict[str, float] | None = None

    def _start(self) -> None:
        # Calibrate on a scratch tracer so the calibration spans never reach the results.
        self._cost = measure_span_cost(lambda: RecordingTracer(clock=self._clock, cpu_clock=self._cpu_clock))
        if (
            self.tracer.recorder != "c"
        ):  # it ran, at several times the cost per span: say so in the run's table
            self.reason = (
                "spans ran on the span log's Python twin (the C one is not built, or INFER_PROF_PYTHON_SPANS is "
                "set): a span costs several times more; `pip install -e .` with a C compiler builds it"
            )
        self.tracer.enable()

    def _stop(self) -> None:
        self.tracer.disable()

    def _can_pause(self) -> bool:
        return True

    def _pause(self) -> None:
        self.tracer.pause()

    def _resume(self) -> None:
        self.tracer.resume()

    def _result(self) -> SpanResult:
        summary = self.tracer.summary()
        cost = self._cost or {"per_span_ns": 0.0, "per_lock_ns": 0.0}
        recorded = sum(thread["spans_recorded"] for thread in summary["threads"].values())
        estimated = recorded * cost["per_span_ns"]
        window = summary["window_ns"] or 0
        return {
            **summary,
            "overhead": {
                "per_span_ns": cost["per_span_ns"],
                "per_lock_ns": cost["per_lock_ns"],
                "cpu_time": self._cpu_clock is not None,
                "recorder": self.tracer.recorder,  # "c": the C span log; "python": its twin (not built)
                "estimated_ns": estimated,
                # Spans of all threads share two cores here; the engine thread's share is what slows steps.
                "fraction": estimated / window if window else None,
            },
        }
