"""A fake router in front of fake replica servers, for the replica tests and benchmark (no model, no network).

A replica is one OpenAI-compatible process whose engine loop thread takes requests from a queue and spends
TOKEN_S of busy Python per token (engine_step), so its busy share follows the requests it gets. The router
forwards each POST to one replica in a weighted round robin (`--weights 3,1`: three to the first for one to
the second), over one kept-alive connection per handler thread and replica, as a pooled client does.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import os
import queue
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

TOKEN_S = 0.004  # busy Python per token in a replica's engine loop
# The engine table the replica tests give infer-prof (INFER_PROF_ENGINE_TABLES), as TOML: the replica's step is
# its engine loop's (control) work, and the loop waiting on its queue waits for work.
TABLE = """
name = "fake-replicas"
detect = ["fake_replicas\\\\.py$"]
components = [["scheduler", "fake_replicas\\\\.py$", "engine_step"]]
roles = [["engine loop", "fake_replicas\\\\.py$", "engine_step|engine_loop"]]
waits = [["idle", "fake_replicas\\\\.py$", "engine_loop"]]
"""

MODELS = json.dumps({"object": "list", "data": [{"id": "fake", "object": "model", "owned_by": "fake"}]})


def engine_step() -> str:
    deadline = time.perf_counter() + TOKEN_S
    while time.perf_counter() < deadline:
        sum(index * index for index in range(200))
    return "x"


def engine_loop(jobs: queue.Queue[tuple[int, queue.Queue[str | None]]]) -> None:
    """One request at a time, a token a step, each handed to the request's own queue (None: done)."""
    while True:
        tokens, out = jobs.get()
        for _ in range(tokens):
            out.put(engine_step())
        out.put(None)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so the router's connections to a replica persist
    server: Replica | Router

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.rstrip("/") != "/v1/models":
            self._send(404, b"{}")
            return
        self._send(200, MODELS.encode())

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path not in ("/v1/completions", "/v1/chat/completions"):
            self._send(404, b"{}")
            return
        self.server.answer(self, body)


class Replica(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.jobs: queue.Queue[tuple[int, queue.Queue[str | None]]] = queue.Queue()
        threading.Thread(target=engine_loop, args=(self.jobs,), name="engine-loop", daemon=True).start()

    def answer(self, handler: Handler, body: bytes) -> None:
        request = json.loads(body or b"{}")
        chat = handler.path.endswith("chat/completions")
        tokens = max(1, min(int(request.get("max_tokens") or 8), 16))
        out: queue.Queue[str | None] = queue.Queue()
        self.jobs.put((tokens, out))
        chunks = []
        index = 0
        while (token := out.get()) is not None:
            choice = {"index": 0, "finish_reason": "length" if index == tokens - 1 else None}
            choice.update({"delta": {"content": token}} if chat else {"text": token})
            chunks.append(f"data: {json.dumps({'choices': [choice]})}\n\n")
            index += 1
        usage = {"prompt_tokens": 4, "completion_tokens": tokens, "total_tokens": 4 + tokens}
        chunks.append(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\ndata: [DONE]\n\n")
        handler._send(200, "".join(chunks).encode(), "text/event-stream")


class Router(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, backends: list[str], weights: list[int]) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        turns = [index for index, weight in enumerate(weights) for _ in range(weight)]
        self.backends, self.turns, self.lock = backends, itertools.cycle(turns), threading.Lock()
        self.local = threading.local()

    def connection(self, index: int) -> http.client.HTTPConnection:
        pool = self.local.__dict__.setdefault("pool", {})
        if index not in pool:
            parts = urlsplit(self.backends[index])
            pool[index] = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
        return pool[index]

    def answer(self, handler: Handler, body: bytes) -> None:
        with self.lock:
            index = next(self.turns)
        connection = self.connection(index)
        connection.request("POST", handler.path, body, {"Content-Type": "application/json"})
        reply = connection.getresponse()
        handler._send(reply.status, reply.read(), reply.getheader("Content-Type") or "application/json")


def spawn_replica() -> str:
    """A replica started as this process's child (in its process group: it goes when the group is killed); its URL."""
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    return child.stdout.readline().split("listening on ")[1].strip()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--backends", help="the router's replicas: URL,URL (without it: serve as a replica)")
    parser.add_argument(
        "--weights", default="", help="requests in a round per replica, e.g. 3,1 (default 1 each)"
    )
    parser.add_argument(
        "--spawn", type=int, default=0, help="start this many replicas as children, as backends"
    )
    args = parser.parse_args()
    server: Replica | Router
    if args.spawn:
        args.backends = ",".join(spawn_replica() for _ in range(args.spawn))
    if args.backends:
        backends = args.backends.split(",")
        weights = [int(weight) for weight in args.weights.split(",")] if args.weights else [1] * len(backends)
        server = Router(args.port, backends, weights)
    else:
        server = Replica(args.port)
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
