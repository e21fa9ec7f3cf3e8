"""A server's reply read whole within one deadline and a size cap, then parsed by the one JSON reader."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from infer_prof.errors import TargetError
from infer_prof.profiler.inputs.replies import read_reply, reply_json


class _Clock:
    """A fake clock that moves `step` seconds each time it is read."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


class _Drip(httpx.SyncByteStream):
    def __init__(self, body: bytes) -> None:
        self.body = body

    def __iter__(self) -> Iterator[bytes]:
        for byte in self.body:
            yield bytes([byte])


def _client(body: bytes) -> httpx.Client:
    return httpx.Client(
        transport=httpx.MockTransport(lambda request: httpx.Response(200, stream=_Drip(body)))
    )


def test_a_reply_that_ends_in_time_is_read_whole() -> None:
    with _client(b'{"data": []}') as client:
        response, body = read_reply(
            client, "http://x/v1/models", source="GET /v1/models", deadline_s=10, clock=_Clock(0.01)
        )
    assert response.status_code == 200 and reply_json(body, "GET /v1/models") == {"data": []}


def test_a_dripping_reply_is_cut_at_the_deadline_however_short_each_pause() -> None:
    with _client(b'{"data": [{"id": "model"}]}') as client, pytest.raises(TargetError) as raised:
        read_reply(client, "http://x/v1/models", source="GET /v1/models", deadline_s=10, clock=_Clock(1.0))
    assert "still arriving after 10 s" in str(raised.value)


def test_a_reply_past_the_size_cap_is_refused() -> None:
    with _client(b"x" * 2048) as client, pytest.raises(TargetError, match="larger than"):
        read_reply(client, "http://x/", source="GET /", deadline_s=10, limit=1024, clock=_Clock(0.0))


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b'{"data": ' + b"[" * 5000 + b"]" * 5000 + b"}", "nested more than"),
        (b'{"id": "caf\xe9"}', "not UTF-8"),
        (b"<html>", "not valid JSON"),
    ],
)
def test_a_reply_that_is_not_json_is_one_target_error(body: bytes, words: str) -> None:
    with pytest.raises(TargetError, match=words):
        reply_json(body, "GET /v1/models")
