"""OpenAI response bodies and SSE chunks for /v1/completions and /v1/chat/completions, built from engine outputs."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from fastapi.sse import format_sse_event

from ...engine.sequence import RequestOutput

DONE_EVENT = format_sse_event(data_str="[DONE]")


def _dumps(payload: dict[str, Any]) -> str:
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

    def _head(self, streaming: bool) -> dict[str, Any]:
        kind = (
            ("chat.completion.chunk" if streaming else "chat.completion") if self.chat else "text_completion"
        )
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}

    # -- whole responses ----------------------------------------------------------------------------

    def body(self, output: RequestOutput) -> bytes:
        """The non-streaming response of a finished request."""
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
        return _dumps({**self._head(False), "choices": [choice], "usage": usage(output)}).encode()

    # -- streaming --------------------------------------------------------------------------------

    def delta_event(self, text: str) -> bytes:
        """One token's chunk (its text may be empty while a multi-byte character or a stop string is held back)."""
        return format_sse_event(data_str=_dumps({**self._head(True), "choices": [self._choice(text, None)]}))

    def final_events(self, output: RequestOutput, include_usage: bool) -> list[bytes]:
        """The chunk with the finish reason, the usage chunk when asked for, then [DONE]."""
        events = [
            format_sse_event(
                data_str=_dumps({**self._head(True), "choices": [self._choice("", output.finish_reason)]})
            )
        ]
        if include_usage:
            events.append(
                format_sse_event(data_str=_dumps({**self._head(True), "choices": [], "usage": usage(output)}))
            )
        return [*events, DONE_EVENT]

    def _choice(self, text: str, finish_reason: str | None) -> dict[str, Any]:
        if not self.chat:
            return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
        delta: dict[str, Any] = {} if finish_reason is not None else {"content": text}
        if not self.role_sent and finish_reason is None:
            delta = {"role": "assistant", **delta}  # the role rides on the first token's chunk
            self.role_sent = True
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}


def usage(output: RequestOutput) -> dict[str, int]:
    prompt, completion = len(output.prompt_token_ids), len(output.token_ids)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def error_event(message: str) -> bytes:
    """A failure in the middle of a stream, as vLLM sends it: an error object in a data line."""
    return format_sse_event(
        data_str=_dumps({"error": {"message": message, "type": "server_error", "param": None, "code": None}})
    )
