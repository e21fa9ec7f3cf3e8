"""A bounded barrage of good and bad requests at `infer-prof serve -m synthetic:tiny` on 127.0.0.1: every request
gets an answer (0 lost), every bad one an OpenAI error with a 4xx, and the KV blocks in use come back to 0.

    python benchmarks/serve_barrage.py                  # starts the server itself (127.0.0.1, a free port)
    python benchmarks/serve_barrage.py --requests 300 --concurrency 32 --seconds 240

Prints sent / finished / refused / failed / lost and the KV blocks in use at the end; exits 1 if anything
was lost or failed, a bad request was not refused with a 4xx, or a block stayed in use.
"""

from __future__ import annotations

import argparse
import random
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import httpx
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
C = "/v1/completions"
CHAT = "/v1/chat/completions"
# (label, path, body: bytes as sent, or a dict sent as JSON)
BAD = [
    ("bad JSON", C, b"{not json"),
    ("empty body", C, b""),
    ("a list", C, b"[1, 2]"),
    ("NaN", C, b'{"prompt": "x", "temperature": NaN}'),
    ("lone surrogate", C, b'{"prompt": "\\ud800x"}'),
    ("lone surrogate in stop", C, b'{"prompt": "x", "stop": ["\\udfff"]}'),
    ("lone surrogate in chat", CHAT, b'{"messages": [{"role": "user", "content": "\\ud83dx"}]}'),
    ("200,000-deep array", C, b"[" * 200_000 + b"]" * 200_000),
    ("deep object", C, b'{"prompt": "x", "a": ' + b'{"b": ' * 5000 + b"1" + b"}" * 5000 + b"}"),
    ("invalid UTF-8", C, b'{"prompt": "\xff\xfe"}'),
    ("no prompt", C, {}),
    ("prompt a number", C, {"prompt": 42}),
    ("max_tokens 0", C, {"prompt": "x", "max_tokens": 0}),
    ("max_tokens huge", C, {"prompt": "x", "max_tokens": 10**12}),
    ("temperature -1", C, {"prompt": "x", "temperature": -1}),
    ("top_p 0", C, {"prompt": "x", "top_p": 0}),
    ("token id outside the vocabulary", C, {"prompt": [5, 1_000_000]}),
    ("over-long prompt", C, {"prompt": "hi " * 5000}),
    ("unknown model", C, {"prompt": "x", "model": "gpt-4"}),
    ("no messages", CHAT, {"messages": []}),
    ("unknown role", CHAT, {"messages": [{"role": "robot", "content": "x"}]}),
]


def good(rng: random.Random) -> tuple[str, str, dict]:
    stream = rng.random() < 0.5
    if rng.random() < 0.5:
        return (
            "good",
            C,
            {"prompt": "Hello " * rng.randint(1, 20), "max_tokens": rng.randint(1, 24), "stream": stream},
        )
    return (
        "good",
        CHAT,
        {
            "messages": [{"role": "user", "content": "Hi " * rng.randint(1, 20)}],
            "max_tokens": rng.randint(1, 24),
            "stream": stream,
        },
    )


def metric(url: str, name: str) -> float:
    for family in text_string_to_metric_families(httpx.get(f"{url}/metrics", timeout=10).text):
        for sample in family.samples:
            if sample.name == name:
                return sample.value
    return 0.0


def send(client: httpx.Client, url: str, label: str, path: str, body: bytes | dict, hang_up: bool) -> str:
    """One request: 'finished', 'refused' (a 4xx with OpenAI's error JSON), 'hung up' (we closed a stream
    early on purpose), 'failed' (a wrong answer) or 'lost' (no answer at all)."""
    kwargs = (
        {"content": body, "headers": {"content-type": "application/json"}}
        if isinstance(body, bytes)
        else {"json": body}
    )
    try:
        with client.stream("POST", url + path, timeout=120, **kwargs) as response:
            if label != "good":
                response.read()
                shaped = set(response.json().get("error", {})) == {"message", "type", "param", "code"}
                return (
                    "refused"
                    if 400 <= response.status_code < 500 and shaped
                    else f"failed ({response.status_code})"
                )
            if response.status_code != 200:
                return f"failed ({response.status_code})"
            if hang_up:
                for _chunk in response.iter_bytes():
                    break  # the client goes away mid-answer: the server must free what it held
                return "hung up"
            text = response.read().decode()
            complete = (
                "[DONE]" in text if isinstance(body, dict) and body.get("stream") else '"choices"' in text
            )
            return "finished" if complete else "failed (cut short)"
    except (httpx.TransportError, ValueError) as exc:
        return f"lost ({type(exc).__name__})"


def start_server() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "infer_prof.cli",
            "serve",
            "-m",
            "synthetic:tiny",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--max-pending",
            "64",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    for line in process.stdout:  # type: ignore[union-attr]
        found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
        if found:
            threading.Thread(target=process.stdout.read, daemon=True).start()  # type: ignore[union-attr]
            return process, found.group(1)
    raise SystemExit(f"the server did not start (exit {process.wait()})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=240, help="requests in all (good and bad)")
    parser.add_argument("--concurrency", type=int, default=24)
    parser.add_argument("--seconds", type=float, default=300.0, help="stop sending after this long")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    process, url = start_server()
    try:
        plan: list[tuple[str, str, Any, Any]] = []
        for number in range(args.requests):
            label, path, body = BAD[number % len(BAD)] if number % 3 == 0 else good(rng)
            body = cast(Any, body)
            plan.append((label, path, body, label == "good" and body.get("stream") and rng.random() < 0.15))
        deadline = time.monotonic() + args.seconds
        outcomes: Counter[str] = Counter()
        with (
            httpx.Client(limits=httpx.Limits(max_connections=args.concurrency)) as client,
            ThreadPoolExecutor(args.concurrency) as pool,
        ):
            futures = [
                pool.submit(
                    lambda item: send(client, url, *item) if time.monotonic() < deadline else "not sent", item
                )
                for item in plan
            ]
            for future in futures:
                outcomes[future.result().split(" (")[0]] += 1
        settle = time.monotonic() + 30
        while (blocks := metric(url, "infer_prof_kv_blocks_used")) != 0 and time.monotonic() < settle:
            time.sleep(0.2)
        sent = args.requests - outcomes["not sent"]
        print(
            f"sent {sent}, finished {outcomes['finished']}, refused {outcomes['refused']} (bad, 4xx), hung up "
            f"{outcomes['hung up']} (on purpose), failed {outcomes['failed']}, lost {outcomes['lost']}; "
            f"KV blocks in use at the end: {blocks:.0f}; health {httpx.get(url + '/health', timeout=10).status_code}"
        )
        return 1 if outcomes["failed"] or outcomes["lost"] or blocks != 0 else 0
    finally:
        process.terminate()
        process.wait(60)


if __name__ == "__main__":
    sys.exit(main())
