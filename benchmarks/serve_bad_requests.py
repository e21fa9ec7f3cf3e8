"""Send 20 malformed requests to a running `infer-prof serve` and check it refuses each and keeps serving.

    infer-prof serve --port 8000 &   python benchmarks/serve_bad_requests.py http://127.0.0.1:8000

Each request must get OpenAI's error JSON with a 4xx status; afterwards a good request must succeed and
/metrics' KV block count must come back to its idle value (no block leaked), and the engine must not
have seen one of them (its prompt-token counter unchanged by the 20).
"""

from __future__ import annotations

import sys
import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

BAD = [
    ("bad JSON", "/v1/completions", b"{not json"),
    ("not an object", "/v1/completions", b"[1, 2, 3]"),
    ("NaN is not JSON", "/v1/completions", b'{"prompt": "x", "temperature": NaN}'),
    ("empty body", "/v1/completions", b""),
    ("no prompt", "/v1/completions", {}),
    ("prompt of the wrong type", "/v1/completions", {"prompt": 42}),
    ("max_tokens as a string", "/v1/completions", {"prompt": "x", "max_tokens": "16"}),
    ("stream as a string", "/v1/completions", {"prompt": "x", "stream": "yes"}),
    ("negative temperature", "/v1/completions", {"prompt": "x", "temperature": -1}),
    ("top_p 0", "/v1/completions", {"prompt": "x", "top_p": 0}),
    ("top_k -5", "/v1/completions", {"prompt": "x", "top_k": -5}),
    ("min_p 1.5", "/v1/completions", {"prompt": "x", "min_p": 1.5}),
    ("repetition_penalty 0", "/v1/completions", {"prompt": "x", "repetition_penalty": 0}),
    ("max_tokens 0", "/v1/completions", {"prompt": "x", "max_tokens": 0}),
    ("n 3", "/v1/completions", {"prompt": "x", "n": 3}),
    ("over-long prompt", "/v1/completions", {"prompt": "hello world " * 3000}),
    ("token id outside the vocabulary", "/v1/completions", {"prompt": [5, 6, 1_000_000]}),
    ("unknown model", "/v1/completions", {"prompt": "x", "model": "gpt-4"}),
    ("unknown chat role", "/v1/chat/completions", {"messages": [{"role": "robot", "content": "hi"}]}),
    ("no messages", "/v1/chat/completions", {"messages": []}),
]


def metric(url: str, name: str) -> float:
    for family in text_string_to_metric_families(httpx.get(f"{url}/metrics", timeout=10).text):
        for sample in family.samples:
            if sample.name == name:
                return sample.value
    return 0.0


def main(url: str) -> int:
    idle_blocks, prompt_tokens = (
        metric(url, "infer_prof_kv_blocks_used"),
        metric(url, "infer_prof_prompt_tokens_total"),
    )
    failures = 0
    for label, path, payload in BAD:
        kwargs = {"content": payload} if isinstance(payload, bytes) else {"json": payload}
        response = httpx.post(url + path, timeout=60, **kwargs)
        try:
            error = response.json()["error"]
            shaped = set(error) == {"message", "type", "param", "code"}
        except (ValueError, KeyError, TypeError):
            error, shaped = {"message": response.text[:80]}, False
        ok = 400 <= response.status_code < 500 and shaped
        failures += not ok
        print(
            f"{'ok ' if ok else 'BAD'} {response.status_code} {label:32} param={error.get('param')!s:20} {error.get('message', '')[:90]}"
        )
    good = httpx.post(f"{url}/v1/completions", json={"prompt": "Hello", "max_tokens": 8}, timeout=120)
    print(
        f"a good request afterwards: {good.status_code}, health {httpx.get(f'{url}/health', timeout=10).status_code}"
    )
    deadline = time.monotonic() + 30
    while (blocks := metric(url, "infer_prof_kv_blocks_used")) != idle_blocks and time.monotonic() < deadline:
        time.sleep(0.1)
    tokens_from_good = len(good.json()["usage"]) and good.json()["usage"]["prompt_tokens"]
    seen = metric(url, "infer_prof_prompt_tokens_total") - prompt_tokens
    print(
        f"KV blocks used: idle {idle_blocks:.0f}, after {blocks:.0f}; prompt tokens the engine saw: {seen:.0f} "
        f"(the good request's {tokens_from_good})"
    )
    leaked = blocks != idle_blocks or seen != tokens_from_good or good.status_code != 200
    print(
        f"{20 - failures}/20 refused as OpenAI errors; "
        + ("a block leaked or a bad request reached the engine" if leaked else "nothing leaked")
    )
    return 1 if failures or leaked else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1].rstrip("/") if len(sys.argv) > 1 else "http://127.0.0.1:8000"))
