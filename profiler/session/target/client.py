"""Send a scenario's requests to an OpenAI-compatible server from one asyncio loop (httpx), streaming, timing every chunk.

Timestamps are the client's (time.perf_counter_ns): a request arrives when the client sends it, its
first token is the first chunk with non-empty text (as vLLM's benchmark_serving counts it, so that a
role-only or empty first chunk does not count), each later non-empty chunk is a token time for ITL,
and it finishes at its [DONE] (or when a stream without one ends). Token counts come from the server's usage block
(requested with stream_options.include_usage), else from the chunks.
"""

from __future__ import annotations

import asyncio
import json
import re
import resource
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from ....errors import TargetError, parse_json
from ....scenarios.loadgen import RequestSpec
from ...rundir.schema import HttpOutcome

_MAX_PAUSE_S = 0.1  # the dispatcher notices a stop within this time
READ_TIMEOUT_S = 600.0  # a long generation on a loaded CPU server can take minutes; a hung one ends here
DRAIN_S = 1.0  # how long the end of a body after its [DONE] is waited for (it is a few bytes already sent)


@dataclass(slots=True)
class HttpRecord:
    """What happened to one request over HTTP, in the client's perf_counter_ns."""

    request: RequestSpec
    scheduled_ns: int | None = None  # when the schedule wanted it sent (closed loop: when a client took it)
    send_ns: int | None = None
    first_token_ns: int | None = None
    token_ns: list[int] = field(default_factory=list)
    finish_ns: int | None = None
    status: int | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None  # the server's usage counts
    completion_tokens: int | None = None
    chunks: int = 0
    error: str | None = None
    usage_ignored: bool = (
        False  # the reply's usage block was of another shape: tokens counted from the chunks
    )

    @property
    def ok(self) -> bool:
        return self.error is None and self.status == 200 and self.finish_reason in ("stop", "length")


@dataclass(slots=True)
class HttpLoad:
    """The records (request order) and how the load and the client itself went."""

    records: list[HttpRecord]
    start_ns: int
    end_ns: int
    warmup_ns: int
    stopped_early: bool
    peak_in_flight: int
    client_cpu_s: float  # this process's user+system CPU during the measured load
    loop_cpu_s: float  # the event loop thread's own CPU during it
    threads: int  # Python threads alive in this process during the load
    dropped_fields: dict[str, str] = field(
        default_factory=dict
    )  # request field -> the server's words refusing it


# The JSON body of one request we send to /v1/completions or /v1/chat/completions: its fields vary with the
# scenario's sampling, and some are dropped when a server refuses them, so it stays a plain dict.
CompletionBody = dict[str, object]

# vLLM's extras a body carries only when the scenario moves them off the value that turns them off.
SamplingExtra = Literal[
    "top_k", "min_p", "repetition_penalty", "frequency_penalty", "presence_penalty", "ignore_eos"
]
_EXTRAS_OFF: tuple[tuple[SamplingExtra, float | bool], ...] = (
    ("top_k", 0),
    ("min_p", 0.0),
    ("repetition_penalty", 1.0),
    ("frequency_penalty", 0.0),
    ("presence_penalty", 0.0),
    ("ignore_eos", False),
)


def request_body(request: RequestSpec, prompt: str, model: str) -> CompletionBody:
    """OpenAI fields for the scenario's sampling, plus vLLM's extras when they are not at their defaults."""
    sampling = request.sampling
    body: CompletionBody = {
        "model": model,
        "max_tokens": sampling["max_tokens"],
        "temperature": sampling.get("temperature", 0.0),
        "top_p": sampling.get("top_p", 1.0),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if sampling.get("seed") is not None:
        body["seed"] = sampling["seed"]
    for name, off in _EXTRAS_OFF:
        if sampling.get(name, off) != off:
            body[name] = sampling[name]
    if sampling.get("stop"):
        body["stop"] = list(sampling["stop"])
    if request.chat:
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return body


# Fields the server may refuse without the request losing its meaning: dropped (with a note) and the
# request sent again once. model, the prompt or messages, max_tokens and stream are never dropped.
DROPPABLE = (
    "ignore_eos",
    "top_k",
    "min_p",
    "repetition_penalty",
    "frequency_penalty",
    "presence_penalty",
    "seed",
    "stop",
    "stream_options",
    "top_p",
    "temperature",
)
REFUSED_STATUS = (400, 422)
CUT_SHORT = (
    "the stream ended without a finish_reason: the server cut the request short (llama-cpp-python's server "
    "does when another request arrives, unless started with --interrupt_requests False)"
)


def refused_fields(body: CompletionBody, message: str, detail: Any = None) -> list[str]:
    """The droppable fields of `body` a server's refusal names (pydantic's `loc`, or the field's name in its text)."""
    named: list[str] = []
    for entry in detail if isinstance(detail, list) else []:
        location = entry.get("loc") if isinstance(entry, dict) else None
        if isinstance(location, list) and location and location[-1] in body and location[-1] in DROPPABLE:
            named.append(str(location[-1]))
    for name in DROPPABLE:
        if (
            name in body
            and name not in named
            and re.search(rf"(?<![A-Za-z_]){re.escape(name)}(?![A-Za-z_])", message)
        ):
            named.append(name)
    return named


async def _stream_one(
    client: httpx.AsyncClient,
    base: str,
    record: HttpRecord,
    body: CompletionBody,
    dropped: dict[str, str] | None = None,
) -> None:
    """Send one request and time its stream; a 400/422 naming a droppable field drops it (into `dropped`,
    for every later request too) and sends the request once more."""
    path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
    clock = time.perf_counter_ns
    dropped = {} if dropped is None else dropped
    body = {key: value for key, value in body.items() if key not in dropped}
    record.send_ns = clock()
    try:
        for attempt in range(2):
            async with client.stream("POST", base + path, json=body) as response:
                record.status = response.status_code
                if response.status_code != 200:
                    message, detail = error_message(await response.aread())
                    refused = (
                        refused_fields(body, message, detail)
                        if response.status_code in REFUSED_STATUS
                        else []
                    )
                    if refused and attempt == 0:
                        for name in refused:
                            dropped.setdefault(name, f"HTTP {response.status_code}: {message}")
                        body = {key: value for key, value in body.items() if key not in refused}
                        record.send_ns = clock()  # the request that counts is the one sent again
                        continue
                    record.error = f"HTTP {response.status_code}: {message}"
                    return
                lines = response.aiter_lines()
                async for line in lines:
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        record.finish_ns = clock()
                        await _read_to_end(lines)
                        break
                    _take_chunk(record, parse_json(data, "a streamed chunk", TargetError), clock())
                if record.error is None and record.finish_reason is None:
                    record.error = CUT_SHORT
                return
    except (httpx.HTTPError, ValueError) as exc:
        record.error = f"{type(exc).__name__}: {exc}"
    except TargetError as exc:  # a chunk that is not JSON, too deep or not UTF-8: this request failed
        record.error = str(exc)
    finally:
        if record.finish_ns is None:
            record.finish_ns = clock()


async def _read_to_end(lines: AsyncIterator[str]) -> None:
    """What a stream holds after its [DONE] (a chunked body's last chunk), read so that httpx keeps the
    connection for the next request, as a client's pool does; leaving the body unread makes httpx close it, and
    then every request would pay a new connection (and a router would open one to its replica per request).
    A server still holding the stream open after DRAIN_S has it closed instead."""

    async def rest() -> None:
        async for _ in lines:
            pass

    try:
        await asyncio.wait_for(rest(), DRAIN_S)
    except (TimeoutError, httpx.HTTPError):
        pass


def _take_chunk(record: HttpRecord, chunk: object, now: int) -> None:
    """One streamed chunk into `record`. A chunk not of OpenAI's shape (a list, choices that are not objects)
    fails this request with a message saying so; a malformed usage block is ignored (the chunks are counted)."""
    if not isinstance(chunk, dict):
        record.error = (
            f"a streamed chunk is {type(chunk).__name__}, not an object: not OpenAI's stream format"
        )
        return
    if "error" in chunk:
        error = chunk["error"]
        record.error = f"stream error: {error.get('message') if isinstance(error, dict) else error}"
        return
    usage = chunk.get("usage")
    if isinstance(usage, dict):
        record.prompt_tokens = _count(usage.get("prompt_tokens"), record.prompt_tokens, record)
        record.completion_tokens = _count(usage.get("completion_tokens"), record.completion_tokens, record)
    elif usage is not None:  # a usage of another shape is ignored: the chunks are counted instead
        record.usage_ignored = True
    choices = chunk.get("choices") or []
    if not isinstance(choices, list) or not all(isinstance(choice, dict) for choice in choices):
        record.error = "the reply's choices are not a list of objects: not OpenAI's stream format"
        return
    for choice in choices:
        record.chunks += 1
        text = choice.get("text")
        if text is None:
            delta = choice.get("delta")
            text = delta.get("content") if isinstance(delta, dict) else None
        if text:
            record.token_ns.append(now)
            if record.first_token_ns is None:
                record.first_token_ns = now
        if choice.get("finish_reason"):
            reason = choice["finish_reason"]
            record.finish_reason = reason if isinstance(reason, str) else str(reason)[:40]


def _count(value: object, previous: int | None, record: HttpRecord) -> int | None:
    """A usage count when it is one (a whole number >= 0, not a bool), else what was known before (and the
    record says its usage was ignored)."""
    if value is None:
        return previous
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    record.usage_ignored = True
    return previous


def error_message(raw: bytes) -> tuple[str, Any]:
    """(a one-line message, FastAPI's `detail` list or None) from an error body of any shape: OpenAI's
    {"error": {"message"}}, {"error": "text"}, FastAPI's {"detail": "text" | [{loc, msg}]}, {"message"}, text."""
    text = raw.decode("utf-8", "replace").strip()
    if not text:
        return "(empty body)", None
    try:
        data = parse_json(text, "an error reply", TargetError)
    except TargetError:
        return " ".join(text.split())[:300], None
    detail = None
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict):
            message = error.get("message") or error.get("detail") or json.dumps(error)
        elif error:
            message = error
        elif "detail" in data:
            detail = data["detail"]
            message = _detail_text(detail)
        else:
            message = data.get("message") or data.get("msg") or json.dumps(data)
    else:
        message = json.dumps(data)
    return " ".join(str(message).split())[:300], detail


def _detail_text(detail: Any) -> str:
    if isinstance(detail, list):
        parts = []
        for entry in detail:
            if isinstance(entry, dict):
                where = ".".join(str(part) for part in entry.get("loc") or [] if part != "body")
                parts.append(
                    f"{where}: {entry.get('msg') or entry.get('type') or entry}"
                    if where
                    else str(entry.get("msg") or entry)
                )
            else:
                parts.append(str(entry))
        return "; ".join(parts)
    return detail if isinstance(detail, str) else json.dumps(detail)


class _Driver:
    """One load: the shared client, stop flags and in-flight count."""

    def __init__(
        self,
        base: str,
        model: str,
        prompts: dict[int, str],
        stop_event: threading.Event,
        on_done: Callable[[HttpRecord], None] | None,
    ) -> None:
        self.base, self.model, self.prompts = base, model, prompts
        self.stop_event = stop_event
        self.on_done = on_done
        self.in_flight = 0
        self.peak_in_flight = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self.dropped: dict[
            str, str
        ] = {}  # request fields the server refused, left out of every later request
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(READ_TIMEOUT_S, connect=10.0), limits=limits)

    async def serve(self, record: HttpRecord) -> None:
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            await _stream_one(
                self.client,
                self.base,
                record,
                request_body(record.request, self.prompts[record.request.index], self.model),
                self.dropped,
            )
        except asyncio.CancelledError:
            record.error = record.error or "stopped: the load was interrupted"
            raise
        finally:
            self.in_flight -= 1
            if self.on_done is not None:
                self.on_done(record)

    def spawn(self, record: HttpRecord) -> None:
        task = asyncio.create_task(self.serve(record))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def closed_loop(self, records: list[HttpRecord], clients: int, deadline: int | None) -> None:
        pending = iter(records)

        async def client() -> None:
            while not self.stop_event.is_set() and (deadline is None or time.perf_counter_ns() < deadline):
                record = next(pending, None)
                if record is None:
                    return
                record.scheduled_ns = time.perf_counter_ns()
                await self.serve(record)

        workers = [asyncio.create_task(client()) for _ in range(min(clients, len(records)))]
        await self._await(workers)

    async def open_loop(self, records: list[HttpRecord], start: int, deadline: int | None) -> None:
        for record in records:
            record.scheduled_ns = start + round(record.request.arrival_s * 1e9)
            if deadline is not None and record.scheduled_ns >= deadline:
                break
            while (remaining := (record.scheduled_ns - time.perf_counter_ns()) / 1e9) > 0:
                if self.stop_event.is_set():
                    break
                await asyncio.sleep(min(remaining, _MAX_PAUSE_S))
            if self.stop_event.is_set():
                break
            self.spawn(record)
        await self._await(list(self.tasks))

    async def _await(self, tasks: list[asyncio.Task[None]]) -> None:
        """Wait for `tasks`; on a stop, cancel what is in flight (closing the connection cancels it server-side)."""
        while tasks and not all(task.done() for task in tasks):
            if self.stop_event.is_set():
                for task in [*tasks, *self.tasks]:
                    task.cancel()
            await asyncio.wait(tasks, timeout=_MAX_PAUSE_S)
        await asyncio.gather(*tasks, return_exceptions=True)


async def drive_http(
    base: str,
    model: str,
    requests: Sequence[RequestSpec],
    prompts: dict[int, str],
    *,
    mode: str,
    clients: int | None,
    duration_s: float | None,
    stop_event: threading.Event,
    on_done: Callable[[HttpRecord], None] | None = None,
) -> HttpLoad:
    """Warm-up requests first (all at once), then the measured load, open or closed loop, like scenarios.loadgen."""
    driver = _Driver(base, model, prompts, stop_event, on_done)
    records = [HttpRecord(request) for request in requests]
    warmups = [record for record in records if record.request.warmup]
    measured = [record for record in records if not record.request.warmup]
    try:
        warmup_start = time.perf_counter_ns()
        if warmups:
            await driver.closed_loop(warmups, len(warmups), None)
        cpu_before, loop_before = _process_cpu_s(), time.thread_time()
        start = time.perf_counter_ns()
        deadline = start + round(duration_s * 1e9) if duration_s is not None else None
        if mode == "open-loop":
            await driver.open_loop(measured, start, deadline)
        else:
            await driver.closed_loop(measured, clients or 1, deadline)
        end = time.perf_counter_ns()
        cpu_s, loop_s = _process_cpu_s() - cpu_before, time.thread_time() - loop_before
    finally:
        await driver.client.aclose()
    return HttpLoad(
        records=records,
        start_ns=start,
        end_ns=end,
        warmup_ns=start - warmup_start,
        stopped_early=stop_event.is_set() and any(record.send_ns is None for record in measured),
        peak_in_flight=driver.peak_in_flight,
        client_cpu_s=cpu_s,
        loop_cpu_s=loop_s,
        threads=threading.active_count(),
        dropped_fields=dict(driver.dropped),
    )


def _process_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


MOST_FAILED = 0.5  # above this share of failed requests the run leads with its failures


def _error_key(record: HttpRecord) -> str:
    if record.status not in (None, 200):
        return f"HTTP {record.status}"
    return (record.error or "incomplete").split(":")[0]


def http_outcome(records: Sequence[HttpRecord], *, dropped: dict[str, str] | None = None) -> HttpOutcome:
    """How the measured requests fared: sent, failed, errors by kind (with one message of each), the failed share,
    a headline when any failed (the summary leads with it when most did), a warning that latencies come from
    the survivors, and the request fields the server refused (dropped, with its words)."""
    measured = [record for record in records if record.send_ns is not None and not record.request.warmup]
    failed = [record for record in measured if not record.ok]
    errors: dict[str, int] = {}
    examples: dict[str, str] = {}
    for record in failed:
        key = _error_key(record)
        errors[key] = errors.get(key, 0) + 1
        examples.setdefault(key, record.error or "the request did not finish")
    sent = len(measured)
    share = len(failed) / sent if sent else 0.0
    headline = warning = None
    if failed:
        top = max(errors, key=lambda key: errors[key])
        most = share > MOST_FAILED
        headline = (
            f"{'Most requests failed' if most else 'Some requests failed'}: {len(failed)} of {sent} "
            f"({share:.0%}); the commonest error ({errors[top]}x): {examples[top]}"
        )
        survivors = sent - len(failed)
        warning = (
            f"latencies and throughput come from the {survivors} request{'s' if survivors != 1 else ''} that "
            f"completed; the {len(failed)} that failed are not in them"
            + (": too few to describe the server" if most else "")
        )
    notes = [
        f"the server refused {name!r} ({reason}): it was left out of every request after the first refusal"
        + (
            "; outputs may now end at an end-of-sequence token, shorter than the scenario asks"
            if name == "ignore_eos"
            else ""
        )
        for name, reason in (dropped or {}).items()
    ]
    ignored = sum(record.usage_ignored for record in measured)
    if ignored:
        notes.append(
            f"the server's usage block was not OpenAI's (counts of tokens) in {ignored} of {sent} replies: "
            "their token counts come from the streamed chunks"
        )
    return {
        "sent": sent,
        "failed": len(failed),
        "failed_share": share,
        "errors": errors,
        "error_examples": examples,
        "headline": headline,
        "latency_warning": warning,
        "dropped_fields": dict(dropped or {}),
        "notes": notes,
    }
