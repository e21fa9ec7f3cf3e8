"""`serve`'s access log: one line per HTTP request on stderr (method, path, status, tokens, milliseconds)."""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from .state import ACCESS_RECORD, AccessRecord

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def stderr_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class AccessLog:
    """ASGI middleware around the app: when a request's response has been sent (a stream: to its end), one
    line; the token counts come from the request's stream (ServeState.on_finished), the status from the
    response's start."""

    def __init__(
        self,
        app: Any,
        emit: Callable[[str], None] = stderr_line,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.app, self.emit, self.clock = app, emit, clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        record: AccessRecord = {}
        started = self.clock()

        async def sending(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                record["status"] = message["status"]
            await send(message)

        token = ACCESS_RECORD.set(record)
        try:
            await self.app(scope, receive, sending)
        finally:
            ACCESS_RECORD.reset(token)
            # No response started: the app raised (uvicorn answers 500) or the client left first.
            status = record.get("status", 500)
            self.emit(
                access_line(
                    scope["method"], scope["path"], status, record.get("tokens"), self.clock() - started
                )
            )


def access_line(method: str, path: str, status: int, tokens: tuple[int, int] | None, seconds: float) -> str:
    """`POST /v1/chat/completions -> 200 in 512 ms, 12 prompt + 34 output tokens`."""
    ms = seconds * 1000
    text = (
        f"{method} {path} -> {status} in {ms:.1f} ms"
        if ms < 10
        else f"{method} {path} -> {status} in {ms:.0f} ms"
    )
    if tokens is not None:
        text += f", {tokens[0]} prompt + {tokens[1]} output tokens"
    return text
