"""The HTTP client's failures, loud: error bodies of any shape, refused fields dropped and retried once, a run
where most requests failed leading with it, and a server whose /v1/models is empty (no server process needed)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from infer_prof.errors import TargetError
from infer_prof.profiler.session.target.client import (
    CUT_SHORT,
    HttpRecord,
    _stream_one,
    error_message,
    http_outcome,
    request_body,
)
from infer_prof.profiler.session.target.probe import probe
from infer_prof.scenarios.loadgen import RequestSpec


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b'{"detail": "Model not found"}', "Model not found"),
        (
            b'{"detail": [{"type": "extra_forbidden", "loc": ["body", "ignore_eos"], "msg": "Extra inputs are not permitted"}]}',
            "ignore_eos: Extra inputs are not permitted",
        ),
        (b'{"error": {"message": "bad top_k", "type": "invalid_request_error"}}', "bad top_k"),
        (b'{"error": "overloaded"}', "overloaded"),
        (b'{"message": "nope"}', "nope"),
        (b"Internal Server Error\n", "Internal Server Error"),
        (b"", "(empty body)"),
    ],
)
def test_error_bodies_of_every_shape_are_shown(body: bytes, words: str) -> None:
    message, _detail = error_message(body)
    assert words in message and message != "None"


def _request(**sampling: Any) -> RequestSpec:
    return RequestSpec(
        index=0,
        arrival_s=0.0,
        prompt_tokens=4,
        prompt_text=None,
        max_tokens=2,
        chat=False,
        sampling={"max_tokens": 2, "temperature": 0.0, **sampling},
    )


STREAM = (
    'data: {"choices": [{"text": "a", "finish_reason": null}]}\n\n'
    'data: {"choices": [{"text": "b", "finish_reason": "length"}]}\n\ndata: [DONE]\n\n'
)


def _transport(
    bodies: list[dict[str, Any]], refuse: str | None, shape: str = "pydantic"
) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        if refuse and refuse in body:
            if shape == "pydantic":
                detail = [
                    {
                        "type": "extra_forbidden",
                        "loc": ["body", refuse],
                        "msg": "Extra inputs are not permitted",
                    }
                ]
                return httpx.Response(422, json={"detail": detail})
            if shape == "transformers":  # transformers serve 5.x's _validate_request
                return httpx.Response(
                    422, json={"detail": f"Unexpected fields in the request: {{'{refuse}'}}"}
                )
            return httpx.Response(400, json={"error": {"message": f"unsupported parameter {refuse}"}})
        return httpx.Response(200, text=STREAM, headers={"content-type": "text/event-stream"})

    return httpx.MockTransport(handle)


def _send(transport: httpx.MockTransport, request: RequestSpec, dropped: dict[str, str]) -> HttpRecord:
    async def go() -> HttpRecord:
        record = HttpRecord(request)
        async with httpx.AsyncClient(transport=transport) as client:
            await _stream_one(client, "http://server", record, request_body(request, "hi", "m"), dropped)
        return record

    return asyncio.run(go())


@pytest.mark.parametrize("shape", ["pydantic", "transformers", "openai"])
def test_a_refused_field_is_dropped_with_a_note_and_the_request_sent_once_more(shape: str) -> None:
    bodies: list[dict[str, Any]] = []
    dropped: dict[str, str] = {}
    transport = _transport(bodies, "ignore_eos", shape)
    first = _send(transport, _request(ignore_eos=True), dropped)
    assert first.ok and len(first.token_ns) == 2
    assert [("ignore_eos" in body) for body in bodies] == [True, False]
    assert "ignore_eos" in dropped and ("422" in dropped["ignore_eos"] or "400" in dropped["ignore_eos"])
    # Later requests leave the field out from the start: one request each.
    second = _send(transport, _request(ignore_eos=True), dropped)
    assert second.ok and len(bodies) == 3 and "ignore_eos" not in bodies[-1]
    notes = http_outcome([first, second], dropped=dropped)["notes"]
    assert len(notes) == 1 and "ignore_eos" in notes[0] and "end-of-sequence" in notes[0]


def test_a_refusal_naming_no_optional_field_is_not_retried() -> None:
    bodies: list[dict[str, Any]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(422, json={"detail": [{"loc": ["body", "prompt"], "msg": "field required"}]})

    record = _send(httpx.MockTransport(handle), _request(ignore_eos=True), {})
    assert len(bodies) == 1 and not record.ok
    assert record.error == "HTTP 422: prompt: field required"


def _records(ok: int, cut: int) -> list[HttpRecord]:
    records = []
    for index in range(ok + cut):
        record = HttpRecord(_request(), send_ns=index, finish_ns=index + 10, status=200)
        if index < ok:
            record.finish_reason = "stop"
        else:
            record.error = CUT_SHORT
        records.append(record)
    return records


def test_a_run_where_most_requests_failed_leads_with_it() -> None:
    outcome = http_outcome(_records(1, 23))
    assert outcome["failed"] == 23 and outcome["failed_share"] == pytest.approx(23 / 24)
    assert outcome["headline"].startswith("Most requests failed: 23 of 24")
    assert "--interrupt_requests False" in outcome["headline"]
    assert "from the 1 request that completed" in outcome["latency_warning"]
    some = http_outcome(_records(20, 4))
    assert some["headline"].startswith("Some requests failed: 4 of 24") and some["latency_warning"]
    clean = http_outcome(_records(5, 0))
    assert clean["headline"] is None and clean["latency_warning"] is None and clean["failed_share"] == 0.0


class _Models(BaseHTTPRequestHandler):
    models: ClassVar[list[dict[str, Any]]] = []

    def do_GET(self) -> None:
        body = (
            json.dumps({"object": "list", "data": self.models}).encode()
            if self.path == "/v1/models"
            else b"{}"
        )
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def empty_models() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Models)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_an_empty_model_list_is_accepted_with_target_model(empty_models: str) -> None:
    info = probe(empty_models, "local/smollm2")
    assert info.model == "local/smollm2" and not info.ours
    with pytest.raises(TargetError, match="--target-model"):
        probe(empty_models)


FAKE_SERVER = Path(__file__).parents[2] / "fixtures" / "fake_engine_server.py"
# 48 requests keep the fake engine busy for about 9 s, some 30 of py-spy's 3 Hz samples. With 12 (2 s), a run
# beside a busy loop got 2 samples, neither of them in the kernel, and the verdict had no kernel time to show.
FAKE_SCENARIO = """
description = "closed loop, short"
seed = 0
num_requests = 48
warmup_requests = 0
prompt_tokens = { dist = "fixed", value = 8 }
output_tokens = { dist = "fixed", value = 24 }
[load]
mode = "closed-loop"
clients = 2
"""


@pytest.mark.slow
def test_a_pid_run_against_another_engine_gets_roles_and_a_verdict_in_the_default_profile(
    tmp_path: Path,
) -> None:
    from infer_prof.engine.loader import _local_smollm2
    from infer_prof.profiler.rundir.results import read_run
    from infer_prof.profiler.session.target.target_plan import plan_target, prompt_tokenizer
    from infer_prof.profiler.session.target.target_session import run_target_session
    from infer_prof.scenarios.spec import load_scenario

    if _local_smollm2() is None:
        pytest.skip("run --target sizes prompts with SmolLM2's tokenizer")
    server = subprocess.Popen([sys.executable, str(FAKE_SERVER)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        url = f"http://127.0.0.1:{server.stdout.readline().strip()}"
        scenario = tmp_path / "s.toml"
        scenario.write_text(FAKE_SCENARIO)
        info = probe(url)
        run_target_session(
            plan_target(info, server.pid, "default"),
            load_scenario(str(scenario)),
            tmp_path / "run",
            tokenizer=prompt_tokenizer("synthetic:tiny"),
            profile="default",
        )
    finally:
        server.kill()
        server.wait()
    result = read_run(tmp_path / "run").result
    assert result.target["failed_share"] == 0 and result.target["headline"] is None
    processes = result.breakdown["processes"]
    assert processes[0]["pid"] == server.pid and processes[0]["resolution"] == "native"
    generator = [row for row in result.target["threads"].values() if row["name"] == "generator"]
    assert generator and processes[0]["engine_thread"] == generator[0]["thread_id"]
    assert result.verdict["rule"] is not None and result.verdict["foreign"]["loop"]["kernel"] > 0


def test_a_body_carries_the_vllm_extras_only_when_moved_off_their_off_value() -> None:
    request = _request(
        seed=7, top_k=5, min_p=0.0, repetition_penalty=1.1, ignore_eos=True, stop=("\n",), top_p=0.9
    )
    body = request_body(request, "hi", "m")
    assert body == {
        "model": "m",
        "max_tokens": 2,
        "temperature": 0.0,
        "top_p": 0.9,
        "stream": True,
        "stream_options": {"include_usage": True},
        "seed": 7,
        "top_k": 5,
        "repetition_penalty": 1.1,
        "ignore_eos": True,
        "stop": ["\n"],
        "prompt": "hi",
    }
    assert list(body)[-5:] == ["top_k", "repetition_penalty", "ignore_eos", "stop", "prompt"]
    assert list(request_body(_request(), "hi", "m")) == [
        "model",
        "max_tokens",
        "temperature",
        "top_p",
        "stream",
        "stream_options",
        "prompt",
    ]
