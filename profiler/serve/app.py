"""The FastAPI application: OpenAI's /v1 endpoints over the engine, /health, /metrics, and the profile-window endpoints.

Every request is checked before it reaches the engine (parse, model, sampling values, capacity,
prompt fit) and refused with OpenAI's error JSON otherwise. The API layer's own work (parsing,
validation, encoding, the hand-off) runs inside `api` spans, tokenization inside `tokenize`; no span
holds across an await, since every coroutine of the loop shares the one thread's span stack.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TypedDict

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from fastapi.sse import EventSourceResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ...errors import EngineShutdownError, HTTPRequestError, PromptTooLongError, RequestError
from .handoff import API_SPAN, Handoff, RequestStream
from .protocol import (
    COMPLETION_DEFAULT_MAX_TOKENS,
    MAX_BODY_BYTES,
    ChatCompletionRequest,
    CompletionRequest,
    error_body,
    parse_body,
)
from .responses import Reply, error_event
from .state import InfoPage, ServeState

if TYPE_CHECKING:
    from ...engine.sequence import RequestHandle
    from ...engine.types import SamplingParams

CLIENT_CLOSED_REQUEST = 499  # nginx's status for a client that left; nobody reads it

# How FastAPI serializes the dict replies below: as a plain JSON object, every key kept as the handler
# gave it (a TypedDict as the response model would validate the reply and drop the keys it does not name).
JsonObject = dict[str, object]

ServeRequest = CompletionRequest | ChatCompletionRequest


class ModelCard(TypedDict):
    """One entry of GET /v1/models, in OpenAI's shape (plus vLLM's max_model_len)."""

    id: str
    object: str
    created: int
    owned_by: str
    max_model_len: int


class ModelList(TypedDict):
    """GET /v1/models."""

    object: str
    data: list[ModelCard]


class InfoReply(InfoPage, total=False):
    """GET /infer-prof/info: the server's InfoPage, and whether a profile window is open now."""

    profile_window_open: bool


class ProfileStarted(TypedDict):
    """POST /infer-prof/profile/start."""

    started: bool


def create_app(state: ServeState) -> FastAPI:
    """The ASGI app over `state` (whose engine the caller starts and stops)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state.handoff = Handoff(asyncio.get_running_loop(), state.tracing.current)
        yield
        state.draining = True

    app = FastAPI(
        title="infer-prof serve", lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None
    )
    app.state.serve = state
    _add_error_handlers(app, state)
    _add_openai_routes(app, state)
    _add_server_routes(app, state)
    _add_profile_routes(app, state)
    return app


def _add_error_handlers(app: FastAPI, state: ServeState) -> None:
    """Every refusal and failure as OpenAI's error JSON."""

    @app.exception_handler(HTTPRequestError)
    async def refused(request: Request, exc: HTTPRequestError) -> JSONResponse:
        state.metrics.observe_rejected(request.url.path)
        headers = {"Retry-After": str(exc.retry_after_s)} if exc.retry_after_s is not None else None
        return JSONResponse(error_body(exc), status_code=exc.status, headers=headers)

    @app.exception_handler(StarletteHTTPException)
    async def not_routed(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        error = HTTPRequestError(f"{request.method} {request.url.path}: {exc.detail}", status=exc.status_code)
        return JSONResponse(error_body(error), status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def failed(request: Request, exc: Exception) -> JSONResponse:
        # A bug of ours, not the client's: OpenAI's shape still, so that clients parse it.
        message = f"internal error: {type(exc).__name__}: {exc}"
        return JSONResponse(
            {"error": {"message": message, "type": "server_error", "param": None, "code": None}},
            status_code=500,
        )


def _add_openai_routes(app: FastAPI, state: ServeState) -> None:
    """OpenAI's /v1 endpoints: completions, chat completions and the model list."""

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await _generate(request, state, CompletionRequest, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await _generate(request, state, ChatCompletionRequest, chat=True)

    @app.get("/v1/models", response_model=JsonObject)
    async def models() -> ModelList:
        created = int(state.info.get("started_at", time.time()))
        return {
            "object": "list",
            "data": [
                {
                    "id": state.model_name,
                    "object": "model",
                    "created": created,
                    "owned_by": "infer-prof",
                    "max_model_len": state.engine.max_model_len,
                }
            ],
        }


def _add_server_routes(app: FastAPI, state: ServeState) -> None:
    """What an operator's tools read: /health and the Prometheus /metrics."""

    @app.get("/health")
    async def health() -> JSONResponse:
        if state.draining:
            return JSONResponse({"status": "shutting down"}, status_code=503)
        if not state.engine_alive():
            return JSONResponse({"status": "engine stopped"}, status_code=503)
        return JSONResponse({"status": "ok"})

    @app.get("/metrics")
    async def metrics() -> Response:
        body, content_type = state.metrics.exposition()
        return Response(body, media_type=content_type)


def _add_profile_routes(app: FastAPI, state: ServeState) -> None:
    """What `run --target` calls: the server's info page and the profile window's start and stop."""

    @app.get("/infer-prof/info", response_model=JsonObject)
    async def info() -> InfoReply:
        return {**state.info, "profile_window_open": state.tracing.open}

    @app.post("/infer-prof/profile/start", response_model=JsonObject)
    async def profile_start() -> ProfileStarted:
        state.tracing.start()
        return {"started": True}

    @app.post("/infer-prof/profile/stop")
    async def profile_stop() -> Response:
        window = state.tracing.stop()
        if window is None:
            raise HTTPRequestError(
                "no profile window is open: POST /infer-prof/profile/start first", status=409
            )
        return JSONResponse(window)


async def _read_body(request: Request) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise HTTPRequestError(
            f"the request body has {declared} bytes; the limit is {MAX_BODY_BYTES}", status=413
        )
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise HTTPRequestError(f"the request body exceeds {MAX_BODY_BYTES} bytes", status=413)
        chunks.append(chunk)
    return b"".join(chunks)


def _prompt_ids(body: ServeRequest, state: ServeState) -> list[int]:
    """The prompt's token ids, as the engine would make them (chat: the model's template)."""
    tokenizer = state.tokenizer
    if isinstance(body, ChatCompletionRequest):
        text = tokenizer.apply_chat_template([message.as_template_message() for message in body.messages])
        return list(tokenizer.encode(text, add_special_tokens=True))
    if isinstance(body.prompt, str):
        if not body.prompt:
            raise HTTPRequestError("prompt is empty: give at least one character or token id", param="prompt")
        return list(tokenizer.encode(body.prompt, add_special_tokens=True))
    return list(body.prompt)


def _submit(
    state: ServeState,
    body: ServeRequest,
    stream: RequestStream,
    prompt_ids: list[int],
    params: SamplingParams,
) -> RequestHandle:
    param = "messages" if isinstance(body, ChatCompletionRequest) else "prompt"
    try:
        return state.engine.submit(
            prompt_ids, params, on_token=stream.on_token if body.stream else None, on_finish=stream.on_finish
        )
    except PromptTooLongError as exc:
        raise HTTPRequestError(str(exc), param=param, code="context_length_exceeded") from None
    except EngineShutdownError as exc:
        raise HTTPRequestError(str(exc), status=503, code="shutting_down") from None
    except RequestError as exc:
        raise HTTPRequestError(str(exc), param=param) from None


async def _generate(
    request: Request,
    state: ServeState,
    schema: type[CompletionRequest] | type[ChatCompletionRequest],
    *,
    chat: bool,
) -> Response:
    raw = await _read_body(request)
    endpoint = request.url.path
    tracer = state.tracing.current()
    with tracer.span(API_SPAN):
        body = parse_body(raw, schema)
        state.check_model(body.model)
        params = body.sampling_params(state.engine.max_model_len if chat else COMPLETION_DEFAULT_MAX_TOKENS)
        state.check_capacity()
    with tracer.span("tokenizer"):
        try:
            prompt_ids = _prompt_ids(body, state)
        except RequestError as exc:  # a conversation the chat template cannot render
            raise HTTPRequestError(str(exc), param="messages") from None
    assert state.handoff is not None, "the app's lifespan makes the hand-off"
    with tracer.span(API_SPAN):
        stream = state.handoff.stream(state.on_finished(endpoint))
        handle = _submit(state, body, stream, prompt_ids, params)
        reply = Reply(chat=chat, model=state.model_name)
    if body.stream:
        return EventSourceResponse(
            _events(state, reply, stream, handle, body.include_usage), headers={"Cache-Control": "no-cache"}
        )
    return await _whole(request, state, reply, stream, handle)


async def _events(
    state: ServeState, reply: Reply, stream: RequestStream, handle: RequestHandle, include_usage: bool
) -> AsyncIterator[bytes]:
    """SSE: one chunk per token, then the finish chunk (and usage), then [DONE]; a vanished client's
    request is cancelled, which frees its KV blocks (Starlette cancels this generator on disconnect)."""
    try:
        async for _now, item in stream.events():
            with state.tracing.current().span(API_SPAN):
                if isinstance(item, str):
                    events = [reply.delta_event(item)]
                elif item.finish_reason == "error":
                    events = [
                        error_event(item.error or "the engine failed this request"),
                        reply.final_events(item, False)[-1],
                    ]
                else:
                    events = reply.final_events(item, include_usage)
            for event in events:
                yield event
    finally:
        if stream.output is None:
            handle.cancel()


async def _whole(
    request: Request, state: ServeState, reply: Reply, stream: RequestStream, handle: RequestHandle
) -> Response:
    """A non-streaming reply; the request is cancelled if the client leaves before it is done."""
    finished = asyncio.ensure_future(stream.finished())
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({finished, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not finished.done():
            handle.cancel()
            finished.cancel()
        gone.cancel()
    if not finished.done() or finished.cancelled():
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    output = finished.result()
    with state.tracing.current().span(API_SPAN):
        if output.finish_reason == "error":
            error = HTTPRequestError(output.error or "the engine failed this request", status=500)
            return JSONResponse(
                {"error": {**error_body(error)["error"], "type": "server_error"}}, status_code=500
            )
        return Response(reply.body(output), media_type="application/json")


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass
