"""A fake multi-process OpenAI-compatible server for the process-tree and launch-mode tests (no model, no network).

The parent serves /v1/models and streaming /v1/completions and /v1/chat/completions; it starts one child
titled like vLLM's engine process that does busy Python work, and optionally a second, late child after
some requests. Children leave when their parent does. Flags make it fail the ways a real server can.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ENGINE_TITLE = "VLLM::EngineCore"
LATE_TITLE = "VLLM::Worker"


def set_title(title: str) -> None:
    """Name this process the way setproctitle does on Linux (its comm; vLLM's titles read the same there)."""
    try:
        ctypes.CDLL(None).prctl(15, title.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


def busy_child(title: str) -> None:
    """Burn CPU in Python most of the time, sleep a little, and leave as soon as the parent is gone. Busy
    three quarters of the time: a 2.4 s run sampled at 3 Hz then misses its work with odds ~1 in 10^4
    (busy a third, as it was, missed it ~1 run in 20 on a loaded machine)."""
    set_title(title)
    parent = os.getppid()
    while os.getppid() == parent:
        deadline = time.perf_counter() + 0.012
        while time.perf_counter() < deadline:
            sum(index * index for index in range(200))
        time.sleep(0.004)


def spawn_child(title: str, engine_loop: bool = False) -> subprocess.Popen[bytes]:
    extra = ["--engine-loop"] if engine_loop else []
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", title, *extra])


class Handler(BaseHTTPRequestHandler):
    server: FakeServer

    def log_message(self, format: str, *args: object) -> None:
        print("request:", format % args, flush=True)

    def do_GET(self) -> None:
        if self.path.rstrip("/") != "/v1/models":
            self.send_error(404)
            return
        body = json.dumps(
            {"object": "list", "data": [{"id": "fake", "object": "model", "owned_by": "fake"}]}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        if self.path not in ("/v1/completions", "/v1/chat/completions"):
            self.send_error(404)
            return
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        chat = self.path.endswith("chat/completions")
        tokens = max(1, min(int(request.get("max_tokens") or 8), 16))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for index in range(tokens):
            time.sleep(0.002)
            choice = {"index": 0, "finish_reason": "length" if index == tokens - 1 else None}
            choice.update({"delta": {"content": "x"}} if chat else {"text": "x"})
            self.wfile.write(f"data: {json.dumps({'choices': [choice]})}\n\n".encode())
            self.wfile.flush()
        usage = {"prompt_tokens": 4, "completion_tokens": tokens, "total_tokens": 4 + tokens}
        self.wfile.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\ndata: [DONE]\n\n".encode())
        self.server.request_done()


class FakeServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, late_child_after: int | None) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.late_child_after, self.done, self.lock = late_child_after, 0, threading.Lock()
        self.children: list[subprocess.Popen[bytes]] = []

    def request_done(self) -> None:
        with self.lock:
            self.done += 1
            if self.late_child_after is not None and self.done == self.late_child_after:
                self.children.append(spawn_child(LATE_TITLE))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--no-child", action="store_true", help="serve from one process only")
    parser.add_argument(
        "--engine-loop",
        action="store_true",
        help="the engine child steps fake_engine_loop.Loop (named functions for the probe)",
    )
    parser.add_argument(
        "--api-work",
        action="store_true",
        help="a thread of the API process runs fake_api_work.OutputLoop beside the engine child's steps",
    )
    parser.add_argument("--late-child-after", type=int, help="start a second child after this many requests")
    parser.add_argument("--ready-after", type=float, default=0.0, help="seconds before it listens")
    parser.add_argument(
        "--exit-after", type=float, help="exit with status 3 after this many seconds, never serving"
    )
    parser.add_argument("--spam", type=int, default=0, help="write this many bytes to stdout first")
    args = parser.parse_args()
    if args.child:
        if args.engine_loop:
            set_title(args.child)
            import fake_engine_loop  # imported, not defined here: the probe patches modules as they are imported

            fake_engine_loop.run_until_orphaned()
        else:
            busy_child(args.child)
        return
    set_title("VLLM::APIServer")
    if args.spam:
        sys.stdout.write("log line\n" * (args.spam // 9 + 1))
        sys.stdout.flush()
    if args.exit_after is not None:
        time.sleep(args.exit_after)
        print("fake server: giving up", flush=True)
        sys.exit(3)
    time.sleep(args.ready_after)
    server = FakeServer(args.port, args.late_child_after)
    if args.api_work:
        import fake_api_work  # imported, not defined here: the probe patches modules as they are imported

        fake_api_work.start()
    if not args.no_child:
        server.children.append(spawn_child(ENGINE_TITLE, args.engine_loop))
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        for child in server.children:
            child.terminate()


if __name__ == "__main__":
    main()
