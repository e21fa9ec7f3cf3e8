"""py-spy's calibrated cost a sample on a server's tree, idle and then under a load of chat requests, and the rate the rule picks from each (profiler/session/target/sample_rate.py).

    python benchmarks/bench_sample_rate.py --launch "benchmarks/targets/transformers_serve.sh" --port 8103

The server command is started in its own session and killed with its whole group at the end. The load is
`--clients` threads each sending one chat request after another (`--max-tokens` each), `--settle-s` seconds
before the second calibration; the ratio of the two costs is what an idle calibration misses.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import threading
import time

import httpx

from infer_prof.profiler.session.target.sample_rate import SampleRate, decide_rate


def wait_for(url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise SystemExit(f"{url} did not answer within {timeout_s:.0f} s")


def show(label: str, choice: SampleRate) -> float | None:
    """Print the calibration and the rate; the cost a sample in ms (None: no calibration ran)."""
    calibration = choice.section().get("calibration") or {}
    print(f"{label}: {json.dumps(calibration)}; rate {choice.rate_hz} Hz ({choice.bound})", flush=True)
    return calibration.get("cost_ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launch", required=True, help="the server command (run by /bin/sh)")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", default=None, help="the model id to ask for (default: the first listed)")
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--settle-s", type=float, default=8.0)
    parser.add_argument("--start-timeout-s", type=float, default=300.0)
    args = parser.parse_args()
    url = f"http://127.0.0.1:{args.port}"
    server = subprocess.Popen(
        args.launch, shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    stop = threading.Event()
    done = [0]
    try:
        wait_for(url, args.start_timeout_s)
        model = args.model or httpx.get(f"{url}/v1/models", timeout=5).json()["data"][0]["id"]
        idle = show("idle", decide_rate(server.pid, foreign=True, profile="default"))

        def client() -> None:
            body = {
                "model": model,
                "messages": [{"role": "user", "content": "Tell me a story about a cat."}],
                "max_tokens": args.max_tokens,
            }
            while not stop.is_set():
                try:
                    httpx.post(f"{url}/v1/chat/completions", json=body, timeout=300)
                    done[0] += 1
                except httpx.HTTPError:
                    pass

        for _ in range(args.clients):
            threading.Thread(target=client, daemon=True).start()
        time.sleep(args.settle_s)
        loaded = show("under load", decide_rate(server.pid, foreign=True, profile="default"))
        print(f"requests completed meanwhile: {done[0]}")
        if idle and loaded:
            print(f"a sample under load / idle: {loaded / idle:.2f}x")
    finally:
        stop.set()
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


if __name__ == "__main__":
    main()
