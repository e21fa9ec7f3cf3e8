"""`infer-prof serve`: the built-in engine behind an OpenAI-compatible HTTP API (FastAPI on uvicorn)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .app import app
from .options import dim_printer, engine_options

if TYPE_CHECKING:  # the CLI's help and usage errors load none of these (tests/cli/test_imports.py)
    from rich.console import Console

    from ..engine.loader import LoadedModel
    from ..profiler.serve.state import ServeState
    from ..profiler.session.builder import BuiltEngine
    from ..profiler.session.options import EngineOptions


@app.command()
@engine_options()
def serve(
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="Address to listen on (loopback by default; 0.0.0.0 exposes the server to the network).",
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", "-p", help="TCP port (0: any free port, printed on start).")
    ] = 8000,
    max_pending: Annotated[
        int,
        typer.Option(
            "--max-pending", help="Requests accepted and unfinished before new ones get 503 with Retry-After."
        ),
    ] = 256,
    shutdown_timeout: Annotated[
        float,
        typer.Option(
            "--shutdown-timeout",
            help="Seconds in-flight requests get to finish after SIGTERM/SIGINT before they are aborted.",
        ),
    ] = 10.0,
    served_model_name: Annotated[
        str | None,
        typer.Option(
            "--served-model-name", help="The model id clients send and /v1/models lists (default: --model)."
        ),
    ] = None,
    log_level: Annotated[
        str, typer.Option("--log-level", help="uvicorn's log level: critical, error, warning, info, debug.")
    ] = "warning",
    quiet: Annotated[bool, typer.Option("--quiet", help="No access-log line per request on stderr.")] = False,
    *,
    options: EngineOptions,
) -> None:
    """Serve the engine over HTTP: POST /v1/completions and /v1/chat/completions (streaming or not),
    GET /v1/models, /health and /metrics (Prometheus). `infer-prof run --target URL` profiles it."""
    raise typer.Exit(
        serve_command(
            options,
            host=host,
            port=port,
            max_pending=max_pending,
            shutdown_timeout_s=shutdown_timeout,
            served_model_name=served_model_name,
            log_level=log_level,
            access_log=not quiet,
        )
    )


def serve_command(
    options: EngineOptions,
    *,
    host: str,
    port: int,
    max_pending: int,
    shutdown_timeout_s: float,
    served_model_name: str | None,
    log_level: str,
    access_log: bool = True,
) -> int:
    """The flags checked, the port bound before the model loads, then the server until it stops: its exit code."""
    from rich.console import Console

    from ..profiler.serve.server import ServeOptions, bind, run_server
    from ..profiler.session.builder import build_engine, load_for_options

    _check_serve_flags(log_level, served_model_name)
    serve_options = ServeOptions(
        host=host,
        port=port,
        max_pending=max_pending,
        shutdown_timeout_s=shutdown_timeout_s,
        served_model_name=served_model_name,
        log_level=log_level,
        access_log=access_log,
    )
    console = Console(stderr=True)
    sock = bind(host, port)  # before the model loads: a taken port is known at once
    try:
        loaded = load_for_options(options, progress=dim_printer(console))
        built = build_engine(loaded, options)
    except BaseException:
        sock.close()
        raise
    state = _serve_state(loaded, built, options, console, served_model_name, max_pending)

    def listening(url: str) -> None:
        # stdout, one line, flushed: scripts and tests read the URL (the port, with --port 0) from it.
        print(
            f"infer-prof serve: listening on {url} (model {state.model_name}; Ctrl-C or SIGTERM stops)",
            flush=True,
        )

    return run_server(state, serve_options, sock, listening)


def _check_serve_flags(log_level: str, served_model_name: str | None) -> None:
    """The flags only serve takes, refused before the port is bound."""
    from ..errors import OptionError

    if log_level not in ("critical", "error", "warning", "info", "debug", "trace"):
        raise OptionError(f"--log-level={log_level!r}: use critical, error, warning, info or debug")
    if served_model_name is not None and not served_model_name.strip():
        raise OptionError("--served-model-name is empty: give the id clients should send, or leave it out")


def _serve_state(
    loaded: LoadedModel,
    built: BuiltEngine,
    options: EngineOptions,
    console: Console,
    served_model_name: str | None,
    max_pending: int,
) -> ServeState:
    """The loaded model's engine as the server's state, once the engine's warnings and the sampling are said."""
    from importlib.metadata import version

    from ..engine.catalog import parameter_count
    from ..profiler.serve.server import gguf_sampling, sampling_lines, server_info
    from ..profiler.serve.state import ServeState

    for warning in built.warnings:
        console.print(f"[yellow]{warning}[/yellow]")
    for line in sampling_lines(gguf_sampling(model_file(options.model)), parameter_count(loaded.config)):
        console.print(line, markup=False, highlight=False)
    state = ServeState(
        engine=built.engine,
        tokenizer=loaded.tokenizer,
        model_name=served_model_name or options.model,
        max_pending=max_pending,
    )
    state.info = {"model_source": loaded.source}
    state.info = server_info(state, built, options, version("infer-prof"))
    return state


def model_file(model: str) -> Path | None:
    """The GGUF file --model names (the default model's once it is on this machine), None for a synthetic one."""
    from ..engine.catalog import DEFAULT_MODEL, SYNTHETIC_PREFIX, local_gguf

    if model == DEFAULT_MODEL:
        return local_gguf()
    return None if model.startswith(SYNTHETIC_PREFIX) else Path(model).expanduser()
