"""The tracer's span log: the C log and its Python twin write the same words; spills, errors and decoding."""

from __future__ import annotations

import gc
import os
import sys
import threading
import weakref
from array import array
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_prof.profiler.collectors import spans
from infer_prof.profiler.collectors.span_decode import ThreadRecords
from infer_prof.profiler.collectors.span_log import (
    COUNTER,
    LIBRARY_PATH_VARIABLE,
    LOCK_GOT,
    LOCK_RELEASED,
    PAUSE,
    SPAN_EXIT,
    STEP_MARK,
    SpanLogModule,
    SpanTable,
    ThreadSpanLog,
    bits_float,
    float_bits,
    implementation,
    native,
    python_twin,
)
from infer_prof.profiler.collectors.spans import RecordingTracer

NATIVE = native()
needs_c = pytest.mark.skipif(NATIVE is None, reason="the C span log is not built")


class Ticks:
    """A clock that moves `step` ns each time it is read."""

    def __init__(self, start: int = 1000, step: int = 7) -> None:
        self.now = start
        self.step = step

    def __call__(self) -> int:
        self.now += self.step
        return self.now


def words_of(data: bytes) -> list[int]:
    values = array("q")
    values.frombytes(data)
    return list(values)


def script(module: Any, cpu: bool) -> list[int]:
    """Nested spans, a lock use, pushed records and counters on one log of `module`; the words it wrote."""
    log = module.SpanLog(limit=1 << 20, cpu=cpu, clock=Ticks(), cpu_clock=Ticks(50, 3))
    local = threading.local()
    local.spans, local.log = {}, log
    codes = {"queue": 2, "batch": 3}
    table = module.Table(local, codes, lambda name: None, lambda lock, name: None, lambda name: None)
    step, model = log.span(0), log.span(1)
    local.spans["step"] = step
    lock = threading.Lock()
    local.spans["queue", lock] = log.lock_use(lock, 2)
    log.push(STEP_MARK, 5)
    with table.span("step"):
        with model, model:  # a span nested in one of its own name
            table.counter("batch", 2.5)
        with table.lock(lock, "queue"):
            assert lock.locked()
        assert not lock.locked()
        log.push(PAUSE, 4, 10, 20)
    return words_of(log.take())


@needs_c
@pytest.mark.parametrize("cpu", [False, True])
def test_the_c_log_and_its_python_twin_write_the_same_words(cpu: bool) -> None:
    got = script(NATIVE, cpu)
    assert got == script(python_twin, cpu)
    mark = 3 if cpu else 2
    tags = []
    at = 0
    while at < len(got):  # the words parse as the records span_log.py's docstring lists
        tag = got[at]
        tags.append(tag)
        at += {SPAN_EXIT: mark, STEP_MARK: 2, LOCK_GOT: 4, LOCK_RELEASED: 2, PAUSE: 4, COUNTER: 4}.get(
            tag, mark
        )
    assert at == len(got)
    assert tags == [
        STEP_MARK,
        0,
        1,
        1,
        COUNTER,
        SPAN_EXIT,
        SPAN_EXIT,
        LOCK_GOT,
        LOCK_RELEASED,
        PAUSE,
        SPAN_EXIT,
    ]
    counter_at = got.index(COUNTER)
    assert bits_float(got[counter_at + 3]) == 2.5 and got[counter_at + 1] == 3


@pytest.mark.parametrize(
    "module", [pytest.param(NATIVE, id="c", marks=needs_c), pytest.param(python_twin, id="py")]
)
def test_the_log_is_handed_over_after_an_outermost_exit_once_full(module: Any) -> None:
    calls: list[int] = []
    log = module.SpanLog(limit=8, on_full=lambda: calls.append(len(log)))
    outer, inner = log.span(0), log.span(1)
    with outer:
        for _ in range(4):
            with inner:
                pass
        assert calls == [] and log.open == 1  # 18 words held, but a span is open: not between spans
    assert calls == [20]
    log.take()
    with inner:
        pass
    assert calls == [20] and len(log) == 4  # under the limit


@pytest.mark.parametrize(
    "module", [pytest.param(NATIVE, id="c", marks=needs_c), pytest.param(python_twin, id="py")]
)
def test_a_failing_hand_over_is_reported_not_raised_into_the_engine(module: Any, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    reported: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)

    def full() -> None:
        raise OSError("disk full")

    log = module.SpanLog(limit=1, on_full=full)
    with log.span(0):
        pass
    assert len(reported) == 1 and isinstance(reported[0].exc_value, OSError)
    assert len(log) == 4  # the words are kept


class FailingLock:
    def __init__(self) -> None:
        self.held = False

    def acquire(self) -> bool:
        raise TimeoutError("no")

    def release(self) -> None:
        raise AssertionError("never acquired")


@pytest.mark.parametrize(
    "module", [pytest.param(NATIVE, id="c", marks=needs_c), pytest.param(python_twin, id="py")]
)
def test_a_lock_that_fails_to_acquire_records_nothing_and_raises(module: Any) -> None:
    log = module.SpanLog()
    with pytest.raises(TimeoutError), log.lock_use(FailingLock(), 0):
        pass
    assert len(log) == 0 and log.open == 0


@pytest.mark.parametrize(
    "module", [pytest.param(NATIVE, id="c", marks=needs_c), pytest.param(python_twin, id="py")]
)
def test_a_clock_failing_inside_a_lock_use_still_releases_the_lock(module: Any) -> None:
    reads = 0

    def clock() -> int:
        nonlocal reads
        reads += 1
        if reads == 3:  # asked, got, then released: fails
            raise RuntimeError("clock broke")
        return reads

    lock = threading.Lock()
    log = module.SpanLog(clock=clock)
    with pytest.raises(RuntimeError, match="clock broke"), log.lock_use(lock, 0):
        assert lock.locked()
    assert not lock.locked()


@pytest.mark.parametrize(
    "module", [pytest.param(NATIVE, id="c", marks=needs_c), pytest.param(python_twin, id="py")]
)
def test_bad_words_and_codes_are_refused_before_anything_is_written(module: Any) -> None:
    log = module.SpanLog()
    with pytest.raises(OverflowError):
        log.push(1, 2**63)
    with pytest.raises(TypeError):
        log.push(1, "x")
    with pytest.raises(ValueError):
        log.span(-1)
    with pytest.raises(AttributeError):
        log.lock_use(object(), 0)
    with pytest.raises(ValueError):
        module.SpanLog(limit=0)
    assert len(log) == 0


@pytest.mark.parametrize(
    "native_log", [pytest.param(True, id="c", marks=needs_c), pytest.param(False, id="py")]
)
def test_spans_on_threads_get_their_own_logs_and_decode_alike(native_log: bool) -> None:
    tracer = RecordingTracer(cpu_clock=None, native=native_log)
    lock = threading.Lock()

    def work(steps: int) -> None:
        for _ in range(steps):
            with tracer.span("tokenizer"), tracer.lock(lock, "submit"):
                tracer.counter("depth", 1)

    threads = [threading.Thread(target=work, args=(n,), name=f"client-{n}") for n in (3, 5, 7)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    summary = tracer.summary()["threads"]
    for n in (3, 5, 7):
        data = summary[f"client-{n}"]
        assert data["spans"]["tokenizer"]["count"] == n and data["locks"]["submit"]["count"] == n
        assert data["locks"]["submit"]["by_parent"].keys() == {"tokenizer"}
    assert tracer.summary()["counters"]["depth"]["count"] == 15


@pytest.mark.parametrize(
    "native_log", [pytest.param(True, id="c", marks=needs_c), pytest.param(False, id="py")]
)
def test_words_spilled_mid_run_decode_into_every_record(native_log: bool, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(spans, "SPILL_WORDS", 40)
    tracer = RecordingTracer(cpu_clock=None, native=native_log)
    lock = threading.Lock()
    for _ in range(30):
        with tracer.span("step"), tracer.span("sampler"), tracer.lock(lock, "queue"):
            pass
    state = tracer._local.state
    assert len(state.chunks) >= 5 and all(isinstance(chunk, tuple) for chunk in state.chunks)  # in the file
    assert len(state.log) < 40 + 14  # at most a chunk held
    decoded = tracer.thread_states()[0]
    assert [record[0] for record in decoded.events.records()] == ["sampler", "step"] * 30
    assert [record[-1] for record in decoded.events.records()][1::2] == list(range(30))
    assert [record[2] for record in decoded.locks.records()] == list(range(30))  # each in its step


def test_a_lock_made_per_use_is_not_kept_alive(recorder: str) -> None:
    tracer = RecordingTracer(cpu_clock=None)
    first = threading.Lock()
    kept = weakref.ref(first)
    with tracer.lock(first, "per_use"):
        pass
    del first
    for _ in range(spans.KEPT_LOCK_USES + 1):
        with tracer.lock(threading.Lock(), "per_use"):
            pass
    gc.collect()
    assert kept() is None
    assert tracer.summary()["threads"][threading.current_thread().name]["locks"]["per_use"]["count"] == 66


def test_a_dropped_tracer_is_collected_with_its_logs(recorder: str) -> None:
    tracer = RecordingTracer()
    with tracer.span("step"), tracer.span("model"):
        pass
    gone = weakref.ref(tracer)
    del tracer
    gc.collect()
    assert gone() is None


def test_the_decoder_refuses_words_it_does_not_know() -> None:
    records = ThreadRecords(cpu=False)
    with pytest.raises(ValueError, match="unknown record tag -9"):
        records.feed(array("q", [0, 10, -1, 20, -9, 0]), ["model"])
    assert [record[0] for record in records.events.records()] == ["model"]


def test_a_counters_value_round_trips_through_its_bits() -> None:
    for value in (0.0, -0.0, 2.5, 1e300, -3.25e-12, float("inf")):
        assert bits_float(float_bits(value)) == value


def test_implementation_insists_when_asked(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    assert implementation(False)[1] == "python"
    if NATIVE is None:
        with pytest.raises(ImportError):
            implementation(True)
    else:
        assert implementation(True)[1] == "c"
        built = os.environ.get(LIBRARY_PATH_VARIABLE)
        if built:  # .ci/sanitize's build: these tests ran on it
            assert NATIVE.__file__ == built
        monkeypatch.setenv("INFER_PROF_PYTHON_SPANS", "1")
        assert implementation()[1] == "python" and implementation(True)[1] == "c"


def test_a_pause_recorded_while_decoding_does_not_deadlock(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    tracer = RecordingTracer(cpu_clock=None)
    with tracer.span("model"):
        pass
    feed = ThreadRecords.feed

    def feed_and_pause(self: ThreadRecords, words: array, names: list[str]) -> None:
        tracer.record_pause("gc", 1, 2)  # as the GC collector's callback would, on the decoding thread
        feed(self, words, names)

    monkeypatch.setattr(ThreadRecords, "feed", feed_and_pause)
    seen: list[Any] = []
    reader = threading.Thread(target=lambda: seen.append(tracer.thread_states()), name="reader", daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert not reader.is_alive() and len(seen[0]) == 2  # the reader got a state of its own for the pause


@pytest.mark.parametrize(
    "module", [pytest.param(NATIVE, id="c", marks=needs_c), pytest.param(python_twin, id="py")]
)
def test_a_clock_that_appends_to_its_own_log_overruns_and_loses_nothing(module: Any) -> None:
    # As the GC collector's pause may land on the log while a clock or a lock runs Python code: the room
    # for a record is taken after those calls (under .ci/sanitize an overrun here is a report).
    log: Any = None

    def clock() -> int:
        if len(log) == 0:
            log.push(*([STEP_MARK, 7] * 512))  # 1,024 words: a full first buffer
        return 5

    log = module.SpanLog(clock=clock)
    with log.span(0):
        pass
    lock = threading.Lock()
    with log.lock_use(lock, 1):
        log.push(PAUSE, 2, 3, 4)
    words = words_of(log.take())
    assert words[:1024] == [STEP_MARK, 7] * 512
    assert words[1024:] == [0, 5, SPAN_EXIT, 5, LOCK_GOT, 1, 5, 5, PAUSE, 2, 3, 4, LOCK_RELEASED, 5]


# A script: ("pause",) records a pause; ("span" | "lock", code, children) runs its children inside a span or
# a lock use of that code.
SCRIPTS = st.recursive(
    st.just(("pause",)),
    lambda children: st.tuples(
        st.sampled_from(["span", "lock"]), st.integers(0, 3), st.lists(children, max_size=4)
    ),
    max_leaves=40,
)


def run_script(module: Any, node: Any, limit: int) -> tuple[list[int], int, int]:
    """Run `node` on a fresh log of `module`; (every word written, hand-overs, spans and lock uses run)."""
    taken: list[int] = []
    log = module.SpanLog(limit=limit, clock=Ticks(), on_full=lambda: taken.extend(words_of(log.take())))
    lock = threading.RLock()  # lock uses nest in the scripts
    counts = [0]

    def run(part: Any) -> None:
        if part[0] == "pause":
            log.push(PAUSE, 9, 1, 2)
            return
        kind, code, children = part
        counts[0] += 1
        with log.span(code) if kind == "span" else log.lock_use(lock, code):
            for child in children:
                run(child)

    run(node)
    handed = len(taken)
    return taken + words_of(log.take()), handed, counts[0]


@needs_c
@settings(max_examples=int(os.environ.get("INFER_PROF_FUZZ_EXAMPLES", "200")), deadline=None)
@given(script=SCRIPTS, limit=st.integers(1, 64))
def test_random_scripts_write_the_same_words_in_both_twins_and_decode(script: Any, limit: int) -> None:
    words, handed, uses = run_script(NATIVE, script, limit)
    assert (words, handed) == run_script(python_twin, script, limit)[:2]
    records = ThreadRecords(cpu=False)
    records.feed(array("q", words), ["a", "b", "c", "d", "gc"] * 2)
    assert len(records.events) + len(records.locks) == uses
    for _name, start, end, self_ns, _cpu, depth, step in records.events.records():
        assert start <= end and 0 <= self_ns <= end - start and depth >= 0 and step == -1


def test_the_collector_says_when_spans_ran_on_the_python_twin(recorder: str) -> None:
    collector = spans.SpanCollector()
    collector.start()
    collector.stop()
    entry = collector.status_entry()
    assert entry["status"] == "ok" and collector.result()["overhead"]["recorder"] == recorder
    if recorder == "c":
        assert entry["reason"] is None
    else:
        assert "Python twin" in entry["reason"] and "pip install -e ." in entry["reason"]


@pytest.mark.parametrize(
    "module", [pytest.param(NATIVE, id="c", marks=needs_c), pytest.param(python_twin, id="py")]
)
def test_both_twins_have_what_the_span_log_protocols_name(module: Any) -> None:
    """native() casts the C module to SpanLogModule (it has no stubs): each Protocol member is there, in both."""
    log = module.SpanLog(limit=64)
    table = module.Table(threading.local(), {}, lambda name: None, lambda lock, name: None, lambda name: None)
    for protocol, instance in ((ThreadSpanLog, log), (SpanTable, table)):
        members = [name for name in vars(protocol) if not name.startswith("_") or name == "__len__"]
        assert members, protocol
        missing = [name for name in members if not callable(getattr(instance, name, None))]
        assert missing == [], (protocol.__name__, missing)
    for name in vars(SpanLogModule):
        if not name.startswith("_"):
            assert callable(getattr(module, name)), name
