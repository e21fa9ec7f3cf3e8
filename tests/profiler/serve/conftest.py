"""A real uvicorn server on an ephemeral 127.0.0.1 port, in a thread, over an engine with the fast fake model."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import pytest
import uvicorn
from prometheus_client.parser import text_string_to_metric_families

from infer_prof.engine.config import EngineConfig, python_components
from infer_prof.engine.engine import Engine
from infer_prof.profiler.serve.app import create_app
from infer_prof.profiler.serve.profiling import API_THREAD_NAME
from infer_prof.profiler.serve.server import bind
from infer_prof.profiler.serve.state import ServeState
from tests.engine.fakes import FakeModel, FakeTokenizer

MODEL = "fake-model"


@dataclass
class Running:
    url: str
    state: ServeState
    model: FakeModel

    def metric(self, name: str, **labels: str) -> float:
        """One sample of /metrics (0 when absent), parsed with prometheus-client's own parser."""
        text = httpx.get(f"{self.url}/metrics", timeout=10).text
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    return sample.value
        return 0.0

    def wait_for(self, name: str, value: float, timeout_s: float = 20.0, **labels: str) -> float:
        deadline = time.monotonic() + timeout_s
        while (seen := self.metric(name, **labels)) != value and time.monotonic() < deadline:
            time.sleep(0.05)
        return seen


@contextmanager
def running_server(
    *, delay_s: float = 0.0, max_pending: int = 64, kv_blocks: int = 64, context_length: int = 512
) -> Iterator[Running]:
    model = FakeModel(delay_s=delay_s, context_length=context_length)
    config = EngineConfig(block_size=4, kv_blocks=kv_blocks, max_batch=8)
    scheduler, kv_alloc, sampler = python_components(config, model)
    engine = Engine(
        model, FakeTokenizer(), scheduler=scheduler, kv_alloc=kv_alloc, sampler=sampler, config=config
    )
    state = ServeState(engine=engine, tokenizer=engine.tokenizer, model_name=MODEL, max_pending=max_pending)
    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(create_app(state), log_level="warning", lifespan="on"))
    state.start_engine()
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=API_THREAD_NAME, daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.started, "uvicorn did not start"
    try:
        yield Running(f"http://127.0.0.1:{sock.getsockname()[1]}", state, model)
    finally:
        server.should_exit = True
        thread.join(30)
        engine.shutdown(abort=True, timeout=10)
        sock.close()


@pytest.fixture(scope="module")
def served() -> Iterator[Running]:
    with running_server() as running:
        yield running
