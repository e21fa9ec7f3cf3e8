"""What the HTTP handlers share: the engine, its tokenizer, the tracing, the metrics, the hand-off and the admission rules."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from ...engine.engine import ENGINE_THREAD_NAME, Engine
from ...errors import HTTPRequestError
from ..rundir.schema import EngineSizes
from ..session.options import EngineOptionsDict
from .handoff import Handoff
from .metrics import ServerMetrics
from .profiling import ServerTracing

if TYPE_CHECKING:
    from ...engine.sequence import RequestOutput
    from ...engine.tokenizer import Tokenizer


class AccessRecord(TypedDict, total=False):
    """What the access log learns of one request while it is served: the response's status, its tokens."""

    status: int
    tokens: tuple[int, int]  # prompt, output


# The access-log record of the request being handled (serve/access_log.py sets it around each request):
# its stream's callback, made in the request's context, fills in the token counts.
ACCESS_RECORD: contextvars.ContextVar[AccessRecord] = contextvars.ContextVar("infer_prof_access_record")

RETRY_AFTER_S = 1  # what a 503 tells the client to wait: a step takes milliseconds, a request seconds


class InfoPage(TypedDict, total=False):
    """GET /infer-prof/info: who this server is, for `run --target` (profiler/serve/server.py's server_info)."""

    name: str
    version: str
    pid: int
    model: str
    model_source: str | None
    python: str
    native: list[str]
    engine: EngineSizes  # profiler.session.builder.BuiltEngine.engine_config_dict()
    options: EngineOptionsDict  # profiler.session.options.EngineOptions.to_dict()
    engine_thread_name: str
    api_thread_name: str
    started_at: float


@dataclass
class ServeState:
    """One server: built once before uvicorn starts; `handoff` is made when the event loop runs."""

    engine: Engine
    tokenizer: Tokenizer
    model_name: str
    max_pending: int  # requests accepted and unfinished before a 503
    info: InfoPage = field(default_factory=lambda: InfoPage())
    tracing: ServerTracing = field(init=False)
    metrics: ServerMetrics = field(init=False)
    handoff: Handoff | None = None
    draining: bool = False
    engine_thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        self.tracing = ServerTracing(self.engine)
        self.metrics = ServerMetrics(self.engine, self.model_name)

    def on_finished(self, endpoint: str) -> Callable[[RequestOutput], None]:
        """What a request's stream calls (on the loop) when the request finishes: the metrics count it, and
        the access-log line of the request that made this callback gets its prompt and output tokens."""
        record = ACCESS_RECORD.get(None)

        def finished(output: RequestOutput) -> None:
            self.metrics.observe_finished(endpoint, output)
            if record is not None:
                record["tokens"] = (len(output.prompt_token_ids), len(output.token_ids))

        return finished

    def check_model(self, model: str | None) -> None:
        if model is not None and model != self.model_name:
            raise HTTPRequestError(
                f"model {model!r} is not served here: this server serves {self.model_name!r} "
                "(GET /v1/models)",
                status=404,
                param="model",
                code="model_not_found",
            )

    def check_capacity(self) -> None:
        """503 with Retry-After while shutting down or when `max_pending` requests are unfinished."""
        if self.draining or not self.engine_alive():
            raise HTTPRequestError(
                "the server is shutting down: send the request to another server",
                status=503,
                code="shutting_down",
            )
        pending = self.engine.num_unfinished
        if pending >= self.max_pending:
            raise HTTPRequestError(
                f"the queue is full ({pending} requests unfinished, limit {self.max_pending} set by --max-pending): "
                f"retry after {RETRY_AFTER_S} s",
                status=503,
                code="queue_full",
                retry_after_s=RETRY_AFTER_S,
            )

    def start_engine(self) -> None:
        """Start the engine thread and keep hold of it (GET /health reports whether it still runs)."""
        before = set(threading.enumerate())
        self.engine.start()
        self.engine_thread = next(
            (
                thread
                for thread in threading.enumerate()
                if thread not in before and thread.name == ENGINE_THREAD_NAME
            ),
            None,
        )

    def engine_alive(self) -> bool:
        return self.engine_thread is not None and self.engine_thread.is_alive()
