"""OpenAI response bodies and SSE chunks for /v1/completions and /v1/chat/completions, built from engine outputs."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypedDict

from fastapi.sse import format_sse_event

from ...engine.sequence import RequestOutput

DONE_EVENT = format_sse_event(data_str="[DONE]")


class Head(TypedDict):
    """What every body and chunk of one request starts with."""

    id: str
    object: str  # "chat.completion", "chat.completion.chunk" or "text_completion"
    created: int
    model: str


class Message(TypedDict):
    role: str
    content: str


class Delta(TypedDict, total=False):
    """A chat chunk's change: the role on the first token's chunk, the text while it streams, nothing at the end."""

    role: str
    content: str


class Choice(TypedDict, total=False):
    """One choice: `text` for a completion, `message` for a whole chat answer, `delta` for a chat chunk."""

    index: int
    text: str
    message: Message
    delta: Delta
    logprobs: None
    finish_reason: str | None


class Usage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class Body(Head, total=False):
    """A whole response or one streamed chunk."""

    choices: list[Choice]
    usage: Usage


def _dumps(payload: Mapping[str, object]) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


@dataclass(slots=True)
class Reply:
    """What every body of one request shares: its id, endpoint kind, model and creation time."""

    chat: bool
    model: str
    id: str = ""
    created: int = field(default_factory=lambda: int(time.time()))
    role_sent: bool = False

    def __post_init__(self) -> None:
        self.id = self.id or f"{'chatcmpl' if self.chat else 'cmpl'}-{uuid.uuid4().hex}"

    def _head(self, streaming: bool) -> Head:
        kind = (
            ("chat.completion.chunk" if streaming else "chat.completion") if self.chat else "text_completion"
        )
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}

    # -- whole responses ----------------------------------------------------------------------------

    def body(self, output: RequestOutput) -> bytes:
        """The non-streaming response of a finished request."""
        choice: Choice
        if self.chat:
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": output.text},
                "logprobs": None,
                "finish_reason": output.finish_reason,
            }
        else:
            choice = {
                "index": 0,
                "text": output.text,
                "logprobs": None,
                "finish_reason": output.finish_reason,
            }
        whole: Body = {**self._head(False), "choices": [choice], "usage": usage(output)}
        return _dumps(whole).encode()

    # -- streaming --------------------------------------------------------------------------------

    def delta_event(self, text: str) -> bytes:
        """One token's chunk (its text may be empty while a multi-byte character or a stop string is held back)."""
        chunk: Body = {**self._head(True), "choices": [self._choice(text, None)]}
        return format_sse_event(data_str=_dumps(chunk))

    def final_events(self, output: RequestOutput, include_usage: bool) -> list[bytes]:
        """The chunk with the finish reason, the usage chunk when asked for, then [DONE]."""
        last: Body = {**self._head(True), "choices": [self._choice("", output.finish_reason)]}
        events = [format_sse_event(data_str=_dumps(last))]
        if include_usage:
            counted: Body = {**self._head(True), "choices": [], "usage": usage(output)}
            events.append(format_sse_event(data_str=_dumps(counted)))
        return [*events, DONE_EVENT]

    def _choice(self, text: str, finish_reason: str | None) -> Choice:
        if not self.chat:
            return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
        delta: Delta = {} if finish_reason is not None else {"content": text}
        if not self.role_sent and finish_reason is None:
            delta = {"role": "assistant", **delta}  # the role rides on the first token's chunk
            self.role_sent = True
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}


def usage(output: RequestOutput) -> Usage:
    prompt, completion = len(output.prompt_token_ids), len(output.token_ids)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def error_event(message: str) -> bytes:
    """A failure in the middle of a stream, as vLLM sends it: an error object in a data line."""
    return format_sse_event(
        data_str=_dumps({"error": {"message": message, "type": "server_error", "param": None, "code": None}})
    )
