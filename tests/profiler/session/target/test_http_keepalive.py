"""The load client keeps its connections, as a client's pool does: requests one after another go over one connection
(a body read to its end after [DONE]), and a stream a server holds open after [DONE] is given up after DRAIN_S."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from infer_prof.profiler.session.target import client as client_module
from infer_prof.profiler.session.target.client import HttpRecord, _stream_one
from infer_prof.scenarios.loadgen import RequestSpec

EVENTS = (
    b'data: {"choices": [{"text": "a", "finish_reason": null}]}\n\n'
    b'data: {"choices": [{"text": "b", "finish_reason": "length"}]}\n\ndata: [DONE]\n\n'
)


class StreamServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, hold_s: float) -> None:
        super().__init__(("127.0.0.1", 0), StreamHandler)
        self.hold_s = hold_s  # how long the stream stays open after [DONE] before its last chunk
        self.connections: set[int] = set()  # the client ports requests came from


class StreamHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: StreamServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.connections.add(self.client_address[1])
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header(
            "Transfer-Encoding", "chunked"
        )  # as an SSE server streams: the body ends with 0\r\n\r\n
        self.end_headers()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(EVENTS), EVENTS))
        self.wfile.flush()
        time.sleep(self.server.hold_s)
        self.wfile.write(b"0\r\n\r\n")


@pytest.fixture
def serve() -> Iterator[type[StreamServer]]:
    started: list[StreamServer] = []

    class Started(StreamServer):
        def __init__(self, hold_s: float) -> None:
            super().__init__(hold_s)
            started.append(self)
            threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()

    yield Started
    for server in started:
        server.shutdown()
        server.server_close()


def _records(count: int) -> list[HttpRecord]:
    return [
        HttpRecord(RequestSpec(index, 0.0, 4, None, 2, False, {"max_tokens": 2})) for index in range(count)
    ]


async def _send_in_turn(url: str, records: list[HttpRecord]) -> None:
    async with httpx.AsyncClient(timeout=10.0) as client:
        for record in records:
            await _stream_one(client, url, record, {"prompt": "hi", "max_tokens": 2, "stream": True})


def test_requests_one_after_another_share_one_connection(serve: type[StreamServer]) -> None:
    server = serve(0.0)
    records = _records(4)
    asyncio.run(_send_in_turn(f"http://127.0.0.1:{server.server_address[1]}", records))
    assert all(record.error is None and record.chunks == 2 for record in records)
    assert len(server.connections) == 1  # before the body was read to its end: one connection a request


def test_a_stream_held_open_after_done_is_given_up_after_the_drain_and_finishes_at_done(
    serve: type[StreamServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client_module, "DRAIN_S", 0.2)
    drains: list[int] = []  # when each drain began, on the client's clock
    read_to_end = client_module._read_to_end

    async def timed(lines: AsyncIterator[str]) -> None:
        drains.append(time.perf_counter_ns())
        await read_to_end(lines)

    monkeypatch.setattr(client_module, "_read_to_end", timed)
    server = serve(30.0)  # a server that holds each stream open long past the drain
    records = _records(2)
    asyncio.run(_send_in_turn(f"http://127.0.0.1:{server.server_address[1]}", records))
    assert all(record.error is None and record.chunks == 2 for record in records)
    # Had the drain waited for the body's end, the second request would have reused the first one's connection.
    assert len(server.connections) == 2
    for record, drain in zip(
        records, drains, strict=True
    ):  # the request's end is its [DONE], before the drain
        assert record.finish_ns is not None and record.finish_ns <= drain
