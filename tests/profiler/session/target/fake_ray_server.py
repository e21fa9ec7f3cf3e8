"""A fake OpenAI-compatible server whose tokens come from Ray actors, one model worker pinned to each node it is given (no model).

It joins the cluster as a Ray driver (as vLLM's engine core does), so its workers are children of each node's raylet,
never of this process: the tree under its listener holds this process alone. Each token is one step on every worker
(tensor-parallel fashion). Started with the in-process probe's environment (`run --launch CMD --probe`), it hands that
environment to its workers through the job's runtime_env (env_vars), as a real deployment would, so the probe loads in
every worker on every node; the workers then import this folder's fake_ray_engine by name (not sent by value), so the
probe's import hook times RayWorkerWrapper.execute_model.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import fake_ray_engine  # beside this file, which Python puts first on the path
import ray
from ray import cloudpickle
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

WORKERS: list[Any] = []
STEP_LOCK = threading.Lock()  # one step at a time, as an engine loop runs them
PROBE_DIR_ENV = "INFER_PROF_PROBE_DIR"  # inject.PROBE_DIR_ENV


def probe_runtime_env(environ: dict[str, str]) -> dict[str, Any] | None:
    """The job's runtime_env that gives every worker the probe this process was started with (None without one):
    its folder and our PYTHONPATH (the probe's folder first), with this file's folder for fake_ray_engine."""
    folder = environ.get(PROBE_DIR_ENV)
    if not folder:
        return None
    here = str(Path(__file__).resolve().parent)
    path = os.pathsep.join(filter(None, [environ.get("PYTHONPATH", ""), here]))
    return {"env_vars": {"PYTHONPATH": path, PROBE_DIR_ENV: folder}}


def engine_step() -> str:
    with STEP_LOCK:
        return "".join(ray.get([worker.execute_model.remote() for worker in WORKERS]))[:1]


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body = json.dumps({"object": "list", "data": [{"id": "fake-ray", "object": "model"}]}).encode()
        self.send_response(200 if self.path.rstrip("/") == "/v1/models" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        chat = self.path.endswith("chat/completions")
        tokens = max(1, min(int(request.get("max_tokens") or 8), 16))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for index in range(tokens):
            text = engine_step()
            choice: dict[str, Any] = {"index": 0, "finish_reason": "length" if index == tokens - 1 else None}
            choice.update({"delta": {"content": text}} if chat else {"text": text})
            self.wfile.write(f"data: {json.dumps({'choices': [choice]})}\n\n".encode())
            self.wfile.flush()
        usage = {"prompt_tokens": 4, "completion_tokens": tokens, "total_tokens": 4 + tokens}
        self.wfile.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\ndata: [DONE]\n\n".encode())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ray-address", required=True)
    parser.add_argument(
        "--nodes", required=True, help="comma-separated Ray node ids: one worker pinned to each"
    )
    args = parser.parse_args()
    runtime_env = probe_runtime_env(dict(os.environ))
    ray.init(
        address=args.ray_address,
        log_to_driver=False,
        include_dashboard=False,
        configure_logging=False,
        runtime_env=runtime_env,
    )
    if runtime_env is None:
        cloudpickle.register_pickle_by_value(fake_ray_engine)  # the nodes' workers need not import it
    worker_class = ray.remote(num_cpus=0)(fake_ray_engine.RayWorkerWrapper)
    for rank, node in enumerate(args.nodes.split(",")):
        strategy = NodeAffinitySchedulingStrategy(node, soft=False)
        WORKERS.append(worker_class.options(scheduling_strategy=strategy).remote(rank))
    ray.get([worker.where.remote() for worker in WORKERS])  # every worker up before the server listens
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
