"""Run the app on uvicorn over a started engine: bind first (a taken port is a one-line error), shut down gracefully.

SIGTERM or SIGINT: /health turns 503, new requests get 503, requests in flight get `shutdown_timeout_s`
to finish; then the engine aborts the rest, whose streams end with finish_reason "abort" and [DONE]
(uvicorn cancels what still hangs a few seconds later); every KV block is back, and the process exits
0. A second SIGINT quits at once.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING

import uvicorn

from ...engine.engine import ENGINE_THREAD_NAME
from ...errors import OptionError
from ..session.heap import HeapTrimmer
from .access_log import AccessLog
from .app import create_app
from .profiling import API_THREAD_NAME
from .state import InfoPage, ServeState

if TYPE_CHECKING:
    from ..session.builder import BuiltEngine
    from ..session.options import EngineOptions

CANCEL_GRACE_S = 5.0  # after the engine aborted what was left, how long streams get to send their last chunk


MAX_PENDING = 1_000_000
MAX_SHUTDOWN_S = 3600.0


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """How the HTTP face listens and admits requests (the engine's own options are EngineOptions)."""

    host: str = "127.0.0.1"
    port: int = 8000
    max_pending: int = 256
    shutdown_timeout_s: float = 10.0
    served_model_name: str | None = None
    log_level: str = "warning"
    access_log: bool = True  # one line per request on stderr (--quiet turns it off)

    def __post_init__(self) -> None:
        if not self.host.strip():
            # An empty host would listen on every interface: exposing the engine must be asked for by name.
            raise OptionError(
                "--host='': give an address: 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)"
            )
        if not (isinstance(self.port, int) and 0 <= self.port <= 65535):
            raise OptionError(f"--port={self.port}: use 0 (any free port) to 65535")
        # Each pending request holds its prompt and a stream; past these the value is a typo, not a plan.
        if not 1 <= self.max_pending <= MAX_PENDING:
            raise OptionError(f"--max-pending={self.max_pending}: use 1 to {MAX_PENDING:,}")
        if not math.isfinite(self.shutdown_timeout_s) or not 0 <= self.shutdown_timeout_s <= MAX_SHUTDOWN_S:
            raise OptionError(
                f"--shutdown-timeout={self.shutdown_timeout_s}: use 0 to {MAX_SHUTDOWN_S:g} seconds"
            )
        name = self.served_model_name
        if name is not None and (len(name) > 256 or not name.isprintable()):
            raise OptionError("--served-model-name: give one line of at most 256 printable characters")


class GracefulServer(uvicorn.Server):
    """uvicorn's server, except that a signal drains and exits 0 instead of re-raising the signal afterwards."""

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_exit = on_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._on_exit()
        super().handle_exit(sig, frame)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket (port 0: any free one); OptionError names the flag when it cannot be had."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OptionError(
            f"--host {host} --port {port}: cannot listen there ({exc.strerror}); "
            "choose another port (0 picks a free one) or stop what holds it"
        ) from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def server_info(state: ServeState, built: BuiltEngine, options: EngineOptions, version: str) -> InfoPage:
    """GET /infer-prof/info: who this server is, for `run --target` (its pid lets py-spy attach)."""
    return {
        "name": "infer-prof",
        "version": version,
        "pid": os.getpid(),
        "model": state.model_name,
        "model_source": state.info.get("model_source"),
        "python": sys.version.split()[0],
        "native": sorted(built.native_active),
        "engine": built.engine_config_dict(),
        "options": options.to_dict(),
        "engine_thread_name": ENGINE_THREAD_NAME,
        "api_thread_name": API_THREAD_NAME,
        "started_at": time.time(),
    }


# The GGUF keys (llama.cpp's general.sampling.*) a model file may carry its makers' sampling settings in.
GGUF_SAMPLING_KEYS = {
    "temperature": "general.sampling.temp",
    "top_k": "general.sampling.top_k",
    "top_p": "general.sampling.top_p",
    "min_p": "general.sampling.min_p",
    "repetition_penalty": "general.sampling.penalty_repeat",
}
API_DEFAULT_TEMPERATURE = 1.0  # OpenAI's, what profiler/serve/protocol.py applies to a request without one
SMALL_MODEL_PARAMETERS = 3e9  # under this, sampling at temperature 1.0 wanders off topic within a sentence


def gguf_sampling(path: str | os.PathLike[str] | None) -> dict[str, float]:
    """The sampling settings a GGUF ships (general.sampling.*), by SamplingParams name; {} when none or no file."""
    if path is None:
        return {}
    from ...engine.gguf_loader import field_value, open_gguf

    reader = open_gguf(path)
    found = {name: field_value(reader, key) for name, key in GGUF_SAMPLING_KEYS.items()}
    return {name: value for name, value in found.items() if isinstance(value, (int, float))}


def sampling_lines(shipped: dict[str, float], parameters: int | None) -> list[str]:
    """`serve`'s start-up lines on sampling: the model's own settings where its file ships them, else the
    API's default temperature, with a note when the model is small enough to ramble at it."""
    if shipped:
        settings = ", ".join(f"{name} {value:g}" for name, value in shipped.items())
        return [
            (
                f"sampling: the model's own settings (from its GGUF): {settings}; a request that leaves them out "
                f"gets the API's defaults (temperature {API_DEFAULT_TEMPERATURE:g}): send them with each request"
            )
        ]
    lines = [
        (
            f"sampling: the model ships no settings; a request without `temperature` gets the API's default, "
            f"{API_DEFAULT_TEMPERATURE:g}"
        )
    ]
    if parameters is not None and parameters < SMALL_MODEL_PARAMETERS:
        lines.append(
            f"note: a small model ({parameters / 1e6:,.0f}M parameters) at temperature "
            f"{API_DEFAULT_TEMPERATURE:g} rambles; send temperature 0.2-0.7 (or the model's own "
            "recommendation) for coherent replies"
        )
    return lines


def _drain(state: ServeState, timeout_s: float) -> None:
    """Refuse new requests now; abort those still running after `timeout_s` (once, on the first signal)."""
    if state.draining:
        return
    state.draining = True
    timer = threading.Timer(timeout_s, lambda: state.engine.shutdown(abort=True))
    timer.daemon = True
    timer.start()


def run_server(
    state: ServeState, serve: ServeOptions, sock: socket.socket, on_listening: Callable[[str], None]
) -> int:
    """Serve until a signal; returns the exit code (0 after a graceful shutdown)."""
    app = create_app(state)
    config = uvicorn.Config(
        AccessLog(app) if serve.access_log else app,
        log_level=serve.log_level,
        access_log=False,
        server_header=False,
        # uvicorn annotates this int but hands it to asyncio.timeout, which takes seconds as a float.
        timeout_graceful_shutdown=serve.shutdown_timeout_s + CANCEL_GRACE_S,  # type: ignore[arg-type]
        lifespan="on",
        headers=[("server", f"infer-prof/{state.info.get('version', '?')}")],
    )
    server = GracefulServer(config, on_exit=lambda: _drain(state, serve.shutdown_timeout_s))
    # py-spy and the spans name threads by their Python name: the event loop's is the API layer's.
    threading.current_thread().name = API_THREAD_NAME
    state.start_engine()
    trimmer = HeapTrimmer().start()  # a server runs for days: freed memory goes back to the system
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    original = server.startup

    async def startup(sockets: list[socket.socket] | None = None) -> None:
        await original(sockets)
        if server.started:
            on_listening(f"http://{shown}:{port}")

    server.startup = startup  # type: ignore[method-assign]
    try:
        server.run(sockets=[sock])
    finally:
        state.draining = True
        state.tracing.stop()
        state.engine.shutdown(abort=True, timeout=serve.shutdown_timeout_s)
        trimmer.stop()
        sock.close()
    return 0
