"""The OpenAI-compatible server over a real socket: answers, streams, refusals, metrics, cancellation, profile windows."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from infer_prof.engine.engine import ENGINE_THREAD_NAME
from infer_prof.profiler.serve.profiling import API_THREAD_NAME
from tests.engine.fakes import FakeTokenizer
from tests.profiler.serve.conftest import MODEL, running_server

GREEDY = {"temperature": 0, "max_tokens": 9, "ignore_eos": True}


def sse_chunks(response: httpx.Response) -> list:
    """The JSON chunks of an SSE body, and "[DONE]" where it came."""
    events = []
    for line in response.iter_lines():
        if line.startswith("data: "):
            data = line[len("data: ") :]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


def test_completion_is_the_engines_greedy_output_with_usage(served) -> None:
    response = httpx.post(
        f"{served.url}/v1/completions", json={"model": MODEL, "prompt": "hello", **GREEDY}, timeout=30
    )
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/json")
    body = response.json()
    prompt_ids = FakeTokenizer().encode("hello", add_special_tokens=True)
    expected = FakeTokenizer().decode(served.model.greedy(prompt_ids, 9))
    assert body["object"] == "text_completion" and body["model"] == MODEL
    assert body["choices"][0]["text"] == expected and body["choices"][0]["finish_reason"] == "length"
    assert body["usage"] == {
        "prompt_tokens": len(prompt_ids),
        "completion_tokens": 9,
        "total_tokens": len(prompt_ids) + 9,
    }


def test_chat_stream_carries_the_same_text_as_the_whole_reply(served) -> None:
    request = {
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        ],
        **GREEDY,
    }
    whole = httpx.post(f"{served.url}/v1/chat/completions", json=request, timeout=30).json()
    assert whole["object"] == "chat.completion" and whole["choices"][0]["message"]["role"] == "assistant"
    with httpx.stream(
        "POST",
        f"{served.url}/v1/chat/completions",
        timeout=30,
        json={**request, "stream": True, "stream_options": {"include_usage": True}},
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        chunks = sse_chunks(response)
    assert chunks[-1] == "[DONE]"
    usage, final, tokens = chunks[-2], chunks[-3], chunks[:-3]
    assert len(tokens) == 9 and tokens[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks[:-1])
    assert (
        "".join(chunk["choices"][0]["delta"]["content"] for chunk in tokens)
        == whole["choices"][0]["message"]["content"]
    )
    assert final["choices"][0]["finish_reason"] == "length" and usage["choices"] == []
    assert usage["usage"] == whole["usage"]


def test_stop_strings_and_models_health_metrics(served) -> None:
    body = httpx.post(
        f"{served.url}/v1/completions", json={"prompt": "hello", **GREEDY, "max_tokens": 40}, timeout=30
    ).json()
    text = body["choices"][0]["text"]
    stop = text[3:5]
    cut = httpx.post(
        f"{served.url}/v1/completions",
        json={"prompt": "hello", **GREEDY, "max_tokens": 40, "stop": stop},
        timeout=30,
    ).json()
    assert (
        cut["choices"][0]["text"] == text[: text.index(stop)] and cut["choices"][0]["finish_reason"] == "stop"
    )
    models = httpx.get(f"{served.url}/v1/models", timeout=10).json()
    assert [entry["id"] for entry in models["data"]] == [MODEL]
    assert httpx.get(f"{served.url}/health", timeout=10).json() == {"status": "ok"}
    assert served.metric("infer_prof_generation_tokens_total") > 0
    assert served.metric("infer_prof_time_to_first_token_seconds_count") >= 2
    assert served.metric("infer_prof_kv_blocks_total") == served.state.engine.num_blocks


MALFORMED = [
    ("/v1/completions", b"{not json", 400, None),
    ("/v1/completions", b"[1, 2, 3]", 422, None),
    ("/v1/completions", b'{"prompt": "x", "temperature": NaN}', 400, None),
    ("/v1/completions", b"", 400, None),
    ("/v1/completions", {}, 422, "prompt"),
    ("/v1/completions", {"prompt": 42}, 422, "prompt"),
    ("/v1/completions", {"prompt": "x", "max_tokens": "16"}, 422, "max_tokens"),
    ("/v1/completions", {"prompt": "x", "stream": "yes"}, 422, "stream"),
    ("/v1/completions", {"prompt": "x", "temperature": -1}, 400, "temperature"),
    ("/v1/completions", {"prompt": "x", "top_p": 0}, 400, "top_p"),
    ("/v1/completions", {"prompt": "x", "top_k": -5}, 400, "top_k"),
    ("/v1/completions", {"prompt": "x", "min_p": 1.5}, 400, "min_p"),
    ("/v1/completions", {"prompt": "x", "repetition_penalty": 0}, 400, "repetition_penalty"),
    ("/v1/completions", {"prompt": "x", "max_tokens": 0}, 400, "max_tokens"),
    ("/v1/completions", {"prompt": "x", "n": 3}, 400, "n"),
    ("/v1/completions", {"prompt": "x" * 600}, 400, "prompt"),  # longer than the 512-token context
    ("/v1/completions", {"prompt": [5, 6, 100_000]}, 400, "prompt"),  # a token id outside the vocabulary
    ("/v1/completions", {"prompt": "x", "model": "gpt-4"}, 404, "model"),
    ("/v1/chat/completions", {"messages": [{"role": "robot", "content": "hi"}]}, 422, "messages.0.role"),
    ("/v1/chat/completions", {"messages": []}, 422, "messages"),
]


def test_twenty_malformed_requests_each_get_an_openai_error_and_never_reach_the_engine(served) -> None:
    assert len(MALFORMED) == 20
    engine = served.state.engine
    before = engine.stats()["requests_finished"], served.metric("infer_prof_prompt_tokens_total")
    for path, payload, status, param in MALFORMED:
        kwargs = {"content": payload} if isinstance(payload, bytes) else {"json": payload}
        response = httpx.post(served.url + path, timeout=10, **kwargs)
        assert response.status_code == status, (payload, response.text)
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"} and error["message"], payload
        assert error["param"] == param, (payload, error)
    assert (engine.stats()["requests_finished"], served.metric("infer_prof_prompt_tokens_total")) == before
    assert served.metric("infer_prof_requests_total", endpoint="/v1/completions", outcome="rejected") >= 18
    # Still serving, and not one KV block held.
    assert (
        httpx.post(f"{served.url}/v1/completions", json={"prompt": "ok", **GREEDY}, timeout=30).status_code
        == 200
    )
    assert served.wait_for("infer_prof_kv_blocks_used", 0.0) == 0.0
    unknown = httpx.get(f"{served.url}/v1/nothing", timeout=10)
    assert unknown.status_code == 404 and "error" in unknown.json()


def test_a_full_queue_answers_503_with_retry_after() -> None:
    with running_server(delay_s=0.01, max_pending=1) as running:
        with httpx.stream(
            "POST",
            f"{running.url}/v1/completions",
            timeout=30,
            json={"prompt": "a", "max_tokens": 200, "ignore_eos": True, "stream": True},
        ) as first:
            assert first.status_code == 200
            lines = first.iter_lines()  # kept: a dropped line iterator closes the response
            next(lines)  # the first request is running
            refused = httpx.post(f"{running.url}/v1/completions", json={"prompt": "b"}, timeout=10)
            assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
            assert refused.json()["error"]["code"] == "queue_full"


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "whole"])
def test_a_client_that_leaves_cancels_its_request_and_frees_its_blocks(stream: bool) -> None:
    with running_server(delay_s=0.005) as running:
        request = {"prompt": "leave", "max_tokens": 200, "ignore_eos": True, "stream": stream}
        if stream:
            with httpx.stream("POST", f"{running.url}/v1/completions", json=request, timeout=30) as response:
                assert response.status_code == 200
                next(response.iter_lines())
        else:
            with pytest.raises(httpx.ReadTimeout):
                httpx.post(f"{running.url}/v1/completions", json=request, timeout=httpx.Timeout(10, read=0.3))
        assert (
            running.wait_for("infer_prof_requests_total", 1.0, endpoint="/v1/completions", outcome="abort")
            == 1.0
        )
        assert running.wait_for("infer_prof_kv_blocks_used", 0.0) == 0.0
        assert running.state.engine.num_unfinished == 0


def test_a_profile_window_records_api_spans_on_both_threads(served) -> None:
    assert httpx.post(f"{served.url}/infer-prof/profile/stop", timeout=10).status_code == 409  # none open
    assert httpx.post(f"{served.url}/infer-prof/profile/start", timeout=10).json() == {"started": True}
    for _ in range(3):
        with httpx.stream(
            "POST",
            f"{served.url}/v1/completions",
            json={"prompt": "hey", **GREEDY, "stream": True},
            timeout=30,
        ) as response:
            assert sse_chunks(response)[-1] == "[DONE]"
    window = httpx.post(f"{served.url}/infer-prof/profile/stop", timeout=30).json()
    threads = window["collector_results"]["spans"]["threads"]
    assert {"api", "tokenizer"} <= set(threads[API_THREAD_NAME]["spans"])  # parse, validate, encode, tokenize
    assert threads[ENGINE_THREAD_NAME]["spans"]["api"]["count"] >= 3 * 9  # the hand-off of every token
    assert window["steps"] and all("model_ms" in row for row in window["steps"] if row["batch_size"])
    assert served.state.engine.tracer is served.state.tracing.tracer  # back to the no-op tracer
    assert type(served.state.engine.tracer).__name__ == "NullTracer"


def test_concurrent_streams_each_get_their_own_tokens(served) -> None:
    prompts = [f"p{index}" for index in range(6)]
    texts: dict[str, str] = {}

    def one(prompt: str) -> None:
        with httpx.stream(
            "POST",
            f"{served.url}/v1/completions",
            json={"prompt": prompt, **GREEDY, "stream": True},
            timeout=30,
        ) as response:
            texts[prompt] = "".join(chunk["choices"][0]["text"] for chunk in sse_chunks(response)[:-1])

    threads = [threading.Thread(target=one, args=(prompt,)) for prompt in prompts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    tokenizer = FakeTokenizer()
    for prompt in prompts:
        ids = tokenizer.encode(prompt, add_special_tokens=True)
        assert texts[prompt] == tokenizer.decode(served.model.greedy(ids, 9))
    time.sleep(0)  # every stream ended: nothing is left in flight
    assert served.state.engine.num_unfinished == 0
