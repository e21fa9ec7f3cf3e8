"""`serve` speaks: an access-log line per request (method, path, status, tokens, ms), off with --quiet, and
start-up lines that name the model's default sampling."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import gguf
import httpx
import pytest
import uvicorn

from infer_prof.engine.config import EngineConfig, python_components
from infer_prof.engine.engine import Engine
from infer_prof.profiler.serve.access_log import AccessLog, access_line
from infer_prof.profiler.serve.app import create_app
from infer_prof.profiler.serve.server import bind, gguf_sampling, sampling_lines
from infer_prof.profiler.serve.state import ServeState
from tests.engine.fakes import FakeModel, FakeTokenizer

MODEL = "fake-model"


@contextmanager
def logged_server() -> Iterator[tuple[str, list[str]]]:
    """A real uvicorn server over the fake model, its app wrapped in the access log; yields (url, lines)."""
    model = FakeModel(context_length=512)
    config = EngineConfig(block_size=4, kv_blocks=64, max_batch=8)
    scheduler, kv_alloc, sampler = python_components(config, model)
    engine = Engine(
        model, FakeTokenizer(), scheduler=scheduler, kv_alloc=kv_alloc, sampler=sampler, config=config
    )
    state = ServeState(engine=engine, tokenizer=engine.tokenizer, model_name=MODEL, max_pending=8)
    lines: list[str] = []
    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(
        uvicorn.Config(AccessLog(create_app(state), emit=lines.append), log_level="warning", lifespan="on")
    )
    state.start_engine()
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.started
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", lines
    finally:
        server.should_exit = True
        thread.join(30)
        engine.shutdown(abort=True, timeout=10)
        sock.close()


def wait_for_lines(lines: list[str], count: int) -> list[str]:
    deadline = (
        time.monotonic() + 10
    )  # a line is written when the response has been sent, just after the client reads it
    while len(lines) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return lines


def test_one_line_per_request_with_status_tokens_and_time():
    with logged_server() as (url, lines):
        whole = httpx.post(
            f"{url}/v1/completions",
            json={"model": MODEL, "prompt": "hello there", "max_tokens": 5},
            timeout=30,
        ).json()
        with httpx.stream(
            "POST",
            f"{url}/v1/chat/completions",
            timeout=30,
            json={
                "model": MODEL,
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 4,
                "stream": True,
            },
        ) as streamed:
            assert streamed.status_code == 200
            "".join(streamed.iter_text())
        refused = httpx.post(f"{url}/v1/completions", json={"model": "other", "prompt": "x"}, timeout=30)
        assert refused.status_code == 404
        assert httpx.get(f"{url}/health", timeout=30).status_code == 200
        wait_for_lines(lines, 4)
    assert len(lines) == 4, lines
    usage = whole["usage"]
    assert lines[0].startswith("POST /v1/completions -> 200 in ")
    assert lines[0].endswith(
        f" ms, {usage['prompt_tokens']} prompt + {usage['completion_tokens']} output tokens"
    )
    assert lines[1].startswith("POST /v1/chat/completions -> 200 in ") and lines[1].endswith(
        " + 4 output tokens"
    )
    assert lines[2].startswith("POST /v1/completions -> 404 in ") and "tokens" not in lines[2]
    assert lines[3].startswith("GET /health -> 200 in ") and lines[3].endswith(" ms")


def test_access_line():
    assert access_line("GET", "/health", 200, None, 0.00042) == "GET /health -> 200 in 0.4 ms"
    assert access_line("POST", "/v1/completions", 200, (12, 34), 0.5123) == (
        "POST /v1/completions -> 200 in 512 ms, 12 prompt + 34 output tokens"
    )


def test_sampling_lines_name_the_models_own_settings_or_the_api_default():
    shipped = sampling_lines({"temperature": 0.6, "top_p": 0.95}, 135_000_000)
    assert len(shipped) == 1 and "temperature 0.6, top_p 0.95" in shipped[0] and "from its GGUF" in shipped[0]
    small = sampling_lines({}, 135_000_000)
    assert "default, 1" in small[0]
    assert "135M parameters" in small[1] and "rambles" in small[1] and "0.2-0.7" in small[1]
    assert len(sampling_lines({}, 70_000_000_000)) == 1, "a large model at 1.0 gets no warning"


def test_gguf_sampling_reads_general_sampling_keys(tmp_path):
    path = tmp_path / "with-sampling.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_float32("general.sampling.temp", 0.25)
    writer.add_int32("general.sampling.top_k", 40)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert gguf_sampling(path) == {"temperature": 0.25, "top_k": 40}
    assert gguf_sampling(None) == {}


@pytest.mark.parametrize("flags, access_log", [([], True), (["--quiet"], False)])
def test_quiet_turns_the_access_log_off(monkeypatch, flags, access_log):
    from typer.testing import CliRunner

    from infer_prof.cli.app import app
    from infer_prof.cli.main import main  # noqa: F401  (registers the commands)

    seen = {}
    monkeypatch.setattr(
        "infer_prof.cli.serve.serve_command", lambda options, **kwargs: seen.update(kwargs) or 0
    )
    result = CliRunner().invoke(app, ["serve", "-m", "synthetic:tiny", *flags])
    assert result.exit_code == 0, result.output
    assert seen["access_log"] is access_log


@pytest.mark.slow
def test_serve_says_its_sampling_at_start_and_logs_each_request(tmp_path):
    import re
    import signal
    import subprocess
    import sys

    errors = tmp_path / "stderr"
    with errors.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "infer_prof.cli", "serve", "-m", "synthetic:tiny", "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        try:
            line = process.stdout.readline()  # type: ignore[union-attr]
            url = re.search(r"listening on (\S+)", line).group(1)  # type: ignore[union-attr]
            reply = httpx.post(
                f"{url}/v1/completions", json={"prompt": "hello", "max_tokens": 3}, timeout=120
            )
            assert reply.status_code == 200
            time.sleep(0.5)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
    text = errors.read_text()
    assert "sampling: the model ships no settings" in text and "rambles" in text, text
    assert re.search(
        r"^POST /v1/completions -> 200 in \d+(\.\d)? ms, \d+ prompt \+ 3 output tokens$", text, re.MULTILINE
    ), text
