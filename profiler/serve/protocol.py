"""The OpenAI request bodies `infer-prof serve` accepts, validated into engine SamplingParams before the engine sees them."""

from __future__ import annotations

import json
from typing import Literal, TypedDict, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...engine.types import SamplingParams
from ...errors import HTTPRequestError, InferProfError, InvalidSamplingParams, check_nesting

MAX_BODY_BYTES = 1 << 20  # a 2,048-token prompt is a few KB of text; a bigger body is a mistake or an attack
MAX_STOP_STRINGS = 4  # OpenAI's limit
COMPLETION_DEFAULT_MAX_TOKENS = 16  # OpenAI's default for /v1/completions (chat runs to the context)


class StreamOptions(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")

    include_usage: bool = False


class _Sampling(BaseModel):
    """Fields both endpoints share: OpenAI's, plus vLLM's extras (top_k, min_p, repetition_penalty, ignore_eos)."""

    # Strict: "16" is not 16 and true is not 1; unknown fields are ignored, as vLLM and OpenAI do.
    model_config = ConfigDict(strict=True, extra="ignore")

    model: str | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None  # the chat API's newer name for max_tokens
    temperature: float = 1.0  # OpenAI's default
    top_p: float = 1.0
    top_k: int = 0  # vLLM uses -1 for "off"; both are accepted
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    seed: int | None = None
    stop: str | list[str] | None = None
    ignore_eos: bool = False
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = 1
    logprobs: bool | int | None = None
    user: str | None = None

    def sampling_params(self, default_max_tokens: int) -> SamplingParams:
        """The engine's SamplingParams; an impossible value raises HTTPRequestError naming the field."""
        if self.n != 1:
            raise HTTPRequestError(
                f"n={self.n} is not supported: this server returns one choice per request (n=1)", param="n"
            )
        if self.logprobs not in (None, False, 0):
            raise HTTPRequestError(
                "logprobs are not supported by this server: leave logprobs unset", param="logprobs"
            )
        stops = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        if len(stops) > MAX_STOP_STRINGS:
            raise HTTPRequestError(
                f"stop has {len(stops)} strings: give at most {MAX_STOP_STRINGS}", param="stop"
            )
        max_tokens = self.max_tokens if self.max_tokens is not None else self.max_completion_tokens
        try:
            return SamplingParams(
                temperature=self.temperature,
                top_k=0 if self.top_k == -1 else self.top_k,
                top_p=self.top_p,
                min_p=self.min_p,
                repetition_penalty=self.repetition_penalty,
                frequency_penalty=self.frequency_penalty,
                presence_penalty=self.presence_penalty,
                seed=self.seed,
                max_tokens=default_max_tokens if max_tokens is None else max_tokens,
                stop=tuple(stops),
                ignore_eos=self.ignore_eos,
            )
        except InvalidSamplingParams as exc:
            # The engine's message starts "sampling parameter NAME=VALUE": NAME is the request field.
            param = str(exc).removeprefix("sampling parameter ").partition("=")[0] or None
            raise HTTPRequestError(str(exc), param=param) from None

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)

    def check_supported(self) -> None:
        """HTTPRequestError for a field this server does not support: none of the shared ones (CompletionRequest
        refuses some of its own)."""
        return None


class CompletionRequest(_Sampling):
    """POST /v1/completions: one prompt, as text or as token ids."""

    prompt: str | list[int]
    echo: bool = False
    suffix: str | None = None
    best_of: int | None = None

    def check_supported(self) -> None:
        if self.echo:
            raise HTTPRequestError("echo=true is not supported by this server: leave it unset", param="echo")
        if self.suffix:
            raise HTTPRequestError("suffix is not supported by this server: leave it unset", param="suffix")
        if self.best_of not in (None, 1):
            raise HTTPRequestError(
                "best_of is not supported by this server: leave it unset or 1", param="best_of"
            )


class TextPart(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")

    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")

    role: Literal["system", "user", "assistant"]
    content: str | list[TextPart]

    def as_template_message(self) -> dict[str, str]:
        text = self.content if isinstance(self.content, str) else "".join(part.text for part in self.content)
        return {"role": self.role, "content": text}


class ChatCompletionRequest(_Sampling):
    """POST /v1/chat/completions: a conversation rendered with the model's chat template."""

    messages: list[ChatMessage] = Field(min_length=1)


Body = TypeVar("Body", bound=_Sampling)


def parse_body(raw: bytes, schema: type[Body]) -> Body:
    """The validated request; bad JSON is a 400, a wrong type or shape a 422, each naming the field."""
    if len(raw) > MAX_BODY_BYTES:
        raise HTTPRequestError(
            f"the request body has {len(raw)} bytes; the limit is {MAX_BODY_BYTES}", status=413
        )
    try:
        text = raw.decode("utf-8")
        # json recurses once per nested array: 200,000 of them in under 1 MiB would be a RecursionError (a 500).
        check_nesting(text, "the request body", _InvalidJSON)
        payload = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError, RecursionError, _InvalidJSON) as exc:
        raise HTTPRequestError(
            f"the request body is not valid JSON ({exc}): send a JSON object", code="invalid_json"
        ) from None
    _check_text(payload, "")
    if not isinstance(payload, dict):
        raise HTTPRequestError(
            f"the request body is a JSON {type(payload).__name__}: send a JSON object", status=422
        )
    try:
        request = schema.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"] if not _union_tag(part))
        raise HTTPRequestError(
            f"{field or 'body'}: {first['msg']} ({exc.error_count()} problem(s) in the request)",
            status=422,
            param=field or None,
            code="invalid_type",
        ) from None
    request.check_supported()
    return request


class _InvalidJSON(InferProfError):
    """A body the JSON parser cannot take (too deeply nested)."""


def _check_text(value: object, where: str) -> None:
    """Every string in the body is text UTF-8 can carry: JSON's \\ud800 escapes decode to lone surrogates, which
    the tokenizer cannot take (it raised TypeError, a 500)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise HTTPRequestError(
                f"{where or 'body'}: a lone UTF-16 surrogate ({value[exc.start]!r}) at character "
                f"{exc.start} is not text; send valid Unicode",
                param=where or None,
                code="invalid_text",
            ) from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_text(key, where)
            _check_text(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_text(item, f"{where}.{index}" if where else str(index))


def _union_tag(part: object) -> bool:
    """pydantic names the member of a Union it tried ("str", "list[int]") in an error's location."""
    return isinstance(part, str) and (part in ("str", "int", "float", "bool", "none") or "[" in part)


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


class ErrorDetail(TypedDict):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorBody(TypedDict):
    """OpenAI's error object."""

    error: ErrorDetail


def error_body(exc: HTTPRequestError) -> ErrorBody:
    """OpenAI's error object: {"error": {message, type, param, code}}."""
    kind = {404: "NotFoundError", 413: "invalid_request_error", 503: "service_unavailable"}.get(
        exc.status, "invalid_request_error"
    )
    return {"error": {"message": str(exc), "type": kind, "param": exc.param, "code": exc.code}}
