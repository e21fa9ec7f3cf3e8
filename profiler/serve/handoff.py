"""The hand-off from the engine thread to the event loop: token deltas and finished outputs, one loop wake-up per batch."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable

from ...engine.sequence import RequestOutput
from ...engine.trace import Tracer

API_SPAN = "api"  # the span name of the API layer's own work, on the event loop and on the engine thread

# What the engine thread hands a request's stream: a text delta per token, then the finished output.
StreamItem = str | RequestOutput


class Handoff:
    """Collects what the engine thread produces and delivers it on the event loop.

    The engine calls on_token once per request per step; waking the loop for each would cost one
    self-pipe write (a system call) per token, so the engine thread appends to one shared queue and
    wakes the loop only when no wake-up is pending: one per step under load.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, tracer: Callable[[], Tracer]) -> None:
        self._loop = loop
        self._tracer = tracer
        self._pending: deque[tuple[RequestStream, StreamItem]] = deque()
        self._lock = threading.Lock()
        self._wake_pending = False

    def stream(self, on_output: Callable[[RequestOutput], None] | None = None) -> RequestStream:
        """A stream for one request; `on_output` runs on the loop when it finishes, read or not."""
        return RequestStream(self, on_output)

    def post(self, stream: RequestStream, item: StreamItem) -> None:
        """Engine thread: queue `item` (a text delta or the RequestOutput) for `stream`."""
        with self._tracer().span(API_SPAN):
            with self._lock:
                self._pending.append((stream, item))
                wake, self._wake_pending = not self._wake_pending, True
            if wake:
                self._loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        """Event loop: hand every pending item to its stream."""
        with self._lock:
            items, self._pending = self._pending, deque()
            self._wake_pending = False
        now = time.perf_counter_ns()
        for stream, item in items:
            stream.deliver(now, item)


class RequestStream:
    """One request's events on the event loop: (time_ns, delta) per token, then (time_ns, RequestOutput)."""

    __slots__ = ("_handoff", "_on_output", "_queue", "output")

    def __init__(self, handoff: Handoff, on_output: Callable[[RequestOutput], None] | None = None) -> None:
        self._handoff = handoff
        self._on_output = on_output
        self._queue: asyncio.Queue[tuple[int, StreamItem]] = asyncio.Queue()
        self.output: RequestOutput | None = None

    # Engine thread -----------------------------------------------------------------------------

    def on_token(self, delta: str) -> None:
        self._handoff.post(self, delta)

    def on_finish(self, output: RequestOutput) -> None:
        self._handoff.post(self, output)

    # Event loop --------------------------------------------------------------------------------

    def deliver(self, now_ns: int, item: StreamItem) -> None:
        if isinstance(item, RequestOutput):
            self.output = item
            if self._on_output is not None:
                self._on_output(item)
        self._queue.put_nowait((now_ns, item))

    async def events(self) -> AsyncIterator[tuple[int, StreamItem]]:
        """Every event until (and with) the finished output."""
        while True:
            event = await self._queue.get()
            yield event
            if isinstance(event[1], RequestOutput):
                return

    async def finished(self) -> RequestOutput:
        async for _now, item in self.events():
            if isinstance(item, RequestOutput):
                return item
        raise AssertionError("unreachable: events() ends with the output")
