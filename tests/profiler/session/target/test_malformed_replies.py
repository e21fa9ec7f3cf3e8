"""A server's streamed reply of the wrong shape: a malformed usage block is ignored (the chunks are counted), a chunk
that is not OpenAI's (a list, text choices, nested past the limit, not JSON) fails its request with a message; never
a traceback."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from infer_prof.profiler.session.target.client import (
    HttpRecord,
    _stream_one,
    error_message,
    http_outcome,
    request_body,
)
from infer_prof.scenarios.loadgen import RequestSpec

TEXT = {"choices": [{"text": "a", "finish_reason": None}]}
LAST = {"choices": [{"text": "b", "finish_reason": "length"}]}


def _request() -> RequestSpec:
    return RequestSpec(
        index=0,
        arrival_s=0.0,
        prompt_tokens=4,
        prompt_text=None,
        max_tokens=2,
        chat=False,
        sampling={"max_tokens": 2, "temperature": 0.0},
    )


def _stream(*chunks: str) -> HttpRecord:
    text = "".join(f"data: {chunk}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
    transport = httpx.MockTransport(
        lambda request: httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})
    )

    async def go() -> HttpRecord:
        record = HttpRecord(_request())
        async with httpx.AsyncClient(transport=transport) as client:
            await _stream_one(client, "http://server", record, request_body(_request(), "hi", "m"))
        return record

    return asyncio.run(go())


@pytest.mark.parametrize(
    "usage",
    ["lots", [1, 2], {"prompt_tokens": "x", "completion_tokens": [1]}, {"completion_tokens": -3}, 7],
)
def test_a_malformed_usage_is_ignored_and_the_chunks_counted(usage: object) -> None:
    record = _stream(json.dumps(TEXT), json.dumps({**LAST, "usage": usage}))
    assert record.ok and len(record.token_ns) == 2
    assert record.prompt_tokens is None and record.completion_tokens is None
    notes = http_outcome([record])["notes"]
    assert len(notes) == 1 and "usage block was not OpenAI's" in notes[0] and "1 of 1" in notes[0]


def test_a_usage_of_the_right_shape_is_taken() -> None:
    usage = {"prompt_tokens": 4, "completion_tokens": 2}
    record = _stream(json.dumps(TEXT), json.dumps({**LAST, "usage": usage}))
    assert (record.prompt_tokens, record.completion_tokens) == (4, 2)
    assert http_outcome([record])["notes"] == []


@pytest.mark.parametrize(
    ("chunk", "words"),
    [
        (json.dumps([1, 2]), "not an object"),
        (json.dumps({"choices": "abc"}), "choices are not a list of objects"),
        (json.dumps({"choices": [1]}), "choices are not a list of objects"),
        ("[" * 5000 + "]" * 5000, "nested more than"),
        ("{not json", "not valid JSON"),
    ],
)
def test_a_chunk_not_of_openais_shape_fails_its_request_with_a_message(chunk: str, words: str) -> None:
    record = _stream(json.dumps(TEXT), chunk)
    assert not record.ok and words in (record.error or "")
    assert words in (http_outcome([record])["headline"] or "")


def test_an_error_body_nested_past_the_limit_is_shown_as_text() -> None:
    message, detail = error_message(b'{"error": ' + b"[" * 5000 + b"]" * 5000 + b"}")
    assert message.startswith('{"error": [[[') and detail is None


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"[" * 5000 + b"]" * 5000, "nested more than"),
        (b"[1, 2]", "not an object"),
        (b"<html>", "not valid JSON"),
    ],
)
def test_a_profile_window_of_the_wrong_shape_is_a_note(
    monkeypatch: pytest.MonkeyPatch, body: bytes, words: str
) -> None:
    from infer_prof.profiler.session.target import remote

    def post(url: str, timeout: float) -> httpx.Response:
        return httpx.Response(200, content=body, request=httpx.Request("POST", url))

    monkeypatch.setattr(remote.httpx, "post", post)
    window = remote.RemoteWindow("http://server")
    assert window.stop() is None and words in (window.error or "")
