"""One thread's span log: clock readings appended as 64-bit words, in C when built, else by the Python twin here.

The recording tracer's hot path is a span's enter and exit. Each appends only its code (or SPAN_EXIT)
and a clock reading to the thread's log; self times, depths, parents and steps are worked out after
the run by span_decode.py. In C (csrc/span_log.c, built with the package) a span costs about what the
no-op tracer's does; the Python twin below writes the same words and is what runs without a compiler.

Words, by record (the first word says which; cpu is there only when the log records CPU time):
    code (>= 0), wall [, cpu]          a span entered
    SPAN_EXIT, wall [, cpu]            the innermost open span exited
    STEP_MARK, step                    the next span entered is step number `step`
    LOCK_GOT, code, asked, got         a lock use acquired its lock (entered)
    LOCK_RELEASED, released            the innermost lock use released its lock (exited)
    PAUSE, code, start, end            a pause of the thread (GC) that is not its span's own work
    COUNTER, code, time, bits          a sampled value (the float64's bits)
"""

from __future__ import annotations

import operator
import os
import struct
import sys
import time
import types
from array import array
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeAlias, cast

from ...native_paths.loader import import_extension

if TYPE_CHECKING:
    import threading

SPAN_EXIT = -1
STEP_MARK = -2
LOCK_GOT = -3
LOCK_RELEASED = -4
PAUSE = -5
COUNTER = -6

# Set to 1 to record spans with the Python twin even where the C log is built (to compare the two).
PYTHON_SPANS_VARIABLE = "INFER_PROF_PYTHON_SPANS"
# Point this at another build of the C log (the sanitizer build of .ci/sanitize).
LIBRARY_PATH_VARIABLE = "INFER_PROF_SPAN_LOG_PATH"
MODULE_NAME = "infer_prof.profiler.collectors._span_log"

_FLOAT_BITS = struct.Struct("=d")
_WORD = struct.Struct("=q")


# What a lock use takes: the engine's locks (engine.trace.Tracer.lock). A string, since threading.Lock is a
# factory function at run time and cannot be joined with `|` there.
EngineLock: TypeAlias = "threading.Lock | threading.RLock | threading.Condition"
# What a span or a lock use is to its caller: entered and exited with `with`, binding nothing.
SpanUse: TypeAlias = AbstractContextManager[None]


class ThreadSpanLog(Protocol):
    """One thread's span log, as the C SpanLog and PySpanLog both are: words appended, taken as bytes."""

    def __len__(self) -> int: ...

    def push(self, *words: int) -> None: ...

    def take(self) -> bytes: ...

    def span(self, code: int) -> SpanUse: ...

    def lock_use(self, lock: EngineLock, code: int) -> SpanUse: ...


class SpanLogFactory(Protocol):
    """The SpanLog constructor of either twin."""

    def __call__(
        self,
        limit: int = ...,
        cpu: bool = ...,
        clock: Callable[[], int] | None = ...,
        cpu_clock: Callable[[], int] | None = ...,
        on_full: Callable[[], object] | None = ...,
    ) -> ThreadSpanLog: ...


class SpanTable(Protocol):
    """The calling thread's spans, lock uses and counters by name, as the C Table and PyTable both are."""

    def span(self, name: str) -> SpanUse: ...

    def lock(self, lock: EngineLock, name: str) -> SpanUse: ...

    def counter(self, name: str, value: float) -> None: ...


class SpanTableFactory(Protocol):
    """The Table constructor of either twin: a miss (a name or lock the thread has not used yet) calls back."""

    def __call__(
        self,
        local: threading.local,
        codes: dict[str, int],
        miss_span: Callable[[str], SpanUse],
        miss_lock: Callable[[EngineLock, str], SpanUse],
        miss_code: Callable[[str], object],
    ) -> SpanTable: ...


class SpanLogModule(Protocol):
    """What implementation() gives: the C module `_span_log` or the Python twin, each with SpanLog and Table."""

    @property
    def SpanLog(self) -> SpanLogFactory: ...  # named as the C module names its class

    @property
    def Table(self) -> SpanTableFactory: ...  # named as the C module names its class


def float_bits(value: float) -> int:
    """A float64's bits as a signed 64-bit word (how a counter's value is logged)."""
    return _WORD.unpack(_FLOAT_BITS.pack(value))[0]


def bits_float(word: int) -> float:
    """The float64 whose bits `float_bits` gave."""
    return _FLOAT_BITS.unpack(_WORD.pack(word))[0]


class PySpanLog:
    """The Python twin of the C SpanLog: the same constructor, methods and words."""

    __slots__ = ("_cpu_clock", "_wall", "cpu", "limit", "on_full", "open", "words")

    def __init__(
        self,
        limit: int = 1 << 16,
        cpu: bool = False,
        clock: Callable[[], int] | None = None,
        cpu_clock: Callable[[], int] | None = None,
        on_full: Callable[[], object] | None = None,
    ) -> None:
        if limit < 1:
            raise ValueError("SpanLog: limit must be at least 1 word")
        self.words: list[int] = []
        self.limit = limit
        self.open = 0
        self.cpu = bool(cpu)
        self._wall = clock or time.perf_counter_ns
        self._cpu_clock = cpu_clock or time.thread_time_ns
        self.on_full = on_full

    def __len__(self) -> int:
        return len(self.words)

    def push(self, *words: int) -> None:
        for word in words:  # refused as the C log refuses them, before any is appended
            if not -(2**63) <= operator.index(word) < 2**63:
                raise OverflowError(f"SpanLog.push: {word} does not fit in 64 bits")
        self.words.extend(words)

    def take(self) -> bytes:
        """The words held, as native int64 bytes; the log is left empty."""
        count = len(self.words)  # the owning thread may append meanwhile: those words stay
        taken = array("q", self.words[:count]).tobytes()
        del self.words[:count]
        return taken

    def span(self, code: int) -> PySpan:
        if code < 0:
            raise ValueError("SpanLog.span: a span's code must be >= 0")
        return PySpan(self, code)

    def lock_use(self, lock: EngineLock, code: int) -> PyLockUse:
        return PyLockUse(self, lock, code)

    def mark(self, code: int) -> None:
        """Append `code`, the wall clock and (when recorded) the CPU clock, as one record."""
        if self.cpu:
            self.words.extend((code, self._wall(), self._cpu_clock()))
        else:
            self.words.extend((code, self._wall()))

    def now(self) -> int:
        return self._wall()

    def after_exit(self) -> None:
        self.open -= 1
        if self.open > 0 or len(self.words) < self.limit or self.on_full is None:
            return
        try:
            self.on_full()
        except Exception as error:  # as the C log: reported, never raised into the engine
            sys.unraisablehook(
                types.SimpleNamespace(
                    exc_type=type(error),
                    exc_value=error,
                    exc_traceback=error.__traceback__,
                    err_msg=None,
                    object=self.on_full,
                )
            )


class PySpan:
    """The Python twin of the C Span: one span name on one thread's log, reused for every use."""

    __slots__ = ("code", "log")

    def __init__(self, log: PySpanLog, code: int) -> None:
        self.log = log
        self.code = code

    def __enter__(self) -> None:
        self.log.mark(self.code)
        self.log.open += 1

    def __exit__(self, *exc: object) -> None:
        log = self.log
        log.mark(SPAN_EXIT)
        log.after_exit()


class PyLockUse:
    """The Python twin of the C LockUse: acquires the lock, timing the wait."""

    __slots__ = ("acquire", "code", "log", "release")

    def __init__(self, log: PySpanLog, lock: EngineLock, code: int) -> None:
        self.log = log
        self.code = code
        self.acquire, self.release = lock.acquire, lock.release  # bound once, as the C log binds them

    def __enter__(self) -> None:
        log = self.log
        asked = log.now()
        self.acquire()
        log.words.extend((LOCK_GOT, self.code, asked, log.now()))
        log.open += 1

    def __exit__(self, *exc: object) -> None:
        log = self.log
        try:
            released = log.now()
        finally:
            self.release()  # whatever happened to the record: a lock held forever would hang the engine
        log.words.extend((LOCK_RELEASED, released))
        log.after_exit()


class PyTable:
    """The Python twin of the C Table: the calling thread's spans, lock uses and counters, through a threading.local."""

    __slots__ = ("codes", "local", "miss_code", "miss_lock", "miss_span")

    def __init__(
        self,
        local: threading.local,
        codes: dict[str, int],
        miss_span: Callable[[str], SpanUse],
        miss_lock: Callable[[EngineLock, str], SpanUse],
        miss_code: Callable[[str], object],
    ) -> None:
        self.local = local
        self.codes = codes
        self.miss_span = miss_span
        self.miss_lock = miss_lock
        self.miss_code = miss_code

    def span(self, name: str) -> SpanUse:
        try:
            return self.local.spans[name]
        except (AttributeError, KeyError):
            return self.miss_span(name)

    def lock(self, lock: EngineLock, name: str) -> SpanUse:
        try:
            return self.local.spans[name, lock]
        except (AttributeError, KeyError):
            return self.miss_lock(lock, name)

    def counter(self, name: str, value: float) -> None:
        bits = float_bits(float(value))
        try:
            log, code = self.local.log, self.codes[name]
        except (AttributeError, KeyError):
            self.miss_code(name)
            log, code = self.local.log, self.codes[name]
        log.words.extend((COUNTER, code, log.now(), bits))


@dataclass(frozen=True)
class PythonTwin:
    """The Python twin in the C module's shape (a SpanLogModule)."""

    SpanLog: SpanLogFactory
    Table: SpanTableFactory


python_twin = PythonTwin(SpanLog=PySpanLog, Table=PyTable)


def native() -> SpanLogModule | None:
    """The C module (`_span_log`, or the build INFER_PROF_SPAN_LOG_PATH names), or None when it is not built."""
    try:
        module = import_extension(MODULE_NAME, LIBRARY_PATH_VARIABLE)
    except ImportError:
        return None
    # The C extension ships no stubs: csrc/span_log.c implements SpanLogModule, and the twins' tests
    # (tests/profiler/collectors/test_span_log.py) run one script through both and compare the words.
    return cast(SpanLogModule, module)


def implementation(use_native: bool | None = None) -> tuple[SpanLogModule, str]:
    """(module with SpanLog and Table, "c" or "python"): by default C when built and INFER_PROF_PYTHON_SPANS is
    unset; use_native=True insists on C, False on the twin."""
    if use_native is None:
        use_native = None if os.environ.get(PYTHON_SPANS_VARIABLE, "") in ("", "0") else False
    module = native() if use_native is not False else None
    if module is None:
        if use_native:
            raise ImportError("the C span log (profiler/collectors/_span_log) is not built")
        return python_twin, "python"
    return module, "c"
