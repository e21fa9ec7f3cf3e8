"""A server's reply read whole within one deadline and a size cap (a server that drips its body byte by byte
never trips a per-read timeout), then parsed by the one JSON reader, errors.parse_json."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from ...errors import TargetError, parse_json

# A model list or an info page is a few KiB; a reply past this is not one.
MAX_REPLY_BYTES = 8 << 20


def read_reply(
    client: httpx.Client,
    url: str,
    *,
    source: str,
    deadline_s: float,
    limit: int = MAX_REPLY_BYTES,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[httpx.Response, bytes]:
    """GET `url`: the response and its whole body, or TargetError naming `source` when the body is still
    arriving `deadline_s` after the request went out, or is larger than `limit`. httpx.HTTPError passes
    through (the caller says the server cannot be reached)."""
    end = clock() + deadline_s
    body = bytearray()
    with client.stream("GET", url) as response:
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > limit:
                raise TargetError(
                    f"{source}: the reply is larger than {limit >> 20} MiB, which no such reply is; "
                    "is the URL the server's root?"
                )
            if clock() > end:
                raise TargetError(
                    f"{source}: the reply was still arriving after {deadline_s:g} s ({len(body):,} bytes so "
                    "far): the server sends too slowly to be profiled; check that it is healthy"
                )
    return response, bytes(body)


def reply_json(body: bytes, source: str) -> object:
    """The reply's JSON value, or TargetError naming `source` (not JSON, not UTF-8, nested too deep)."""
    return parse_json(body, source, TargetError, limit=MAX_REPLY_BYTES)
