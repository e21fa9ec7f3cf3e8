"""The instrumentation seam: components report phases and lock waits to a tracer; the default one does nothing."""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager, nullcontext
from typing import Protocol, runtime_checkable

# The names the engine and its components use for spans: each is the name of the component it times (the
# breakdown's), except "step", the loop itself.
SPAN_NAMES = (
    "step",
    "queue",
    "scheduler",
    "kv_alloc",
    "prepare",
    "model",
    "d2h",
    "sampler",
    "detokenizer",
    "tokenizer",
)


@runtime_checkable
class Tracer(Protocol):
    """What the engine calls; the profiler injects a recording implementation."""

    def span(self, name: str) -> AbstractContextManager[None]:
        """Time a phase of the current thread (nests)."""
        ...

    def lock(
        self, lock: threading.Lock | threading.RLock | threading.Condition, name: str
    ) -> AbstractContextManager[None]:
        """Acquire `lock` (timing the wait) and release it on exit."""
        ...

    def counter(self, name: str, value: float) -> None:
        """Record a sampled value (batch size, KV utilization...)."""
        ...


_NULL = nullcontext()


class NullTracer:
    """The default: spans cost one method call returning a shared no-op context manager."""

    __slots__ = ()

    def span(self, name: str) -> AbstractContextManager[None]:
        return _NULL

    def lock(self, lock, name: str):
        return lock  # a Lock/Condition is its own context manager: no wrapper, no timing

    def counter(self, name: str, value: float) -> None:
        return None


NULL_TRACER = NullTracer()
