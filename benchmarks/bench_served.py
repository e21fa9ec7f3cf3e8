"""The cost of serving over HTTP: one scenario in-process, then through `infer-prof serve` + `run --target`, back to back.

    python benchmarks/bench_served.py --model smollm2-135m --scenario chat [--pairs 1] [--profile default|deep]

Each pair runs the in-process engine and the served one (a fresh server, py-spy attached to it
automatically) with the same scenario, model and profile, and prints the served/in-process ratio of
output throughput and latencies, then the served run's split: the api component by spans and by
samples, each server thread's split, and the GIL figures. Ratios are measured within one pair; on a
shared machine compare pairs, not absolute numbers.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

CLI = [sys.executable, "-m", "infer_prof.profiler.cli"]


def run_in_process(args: argparse.Namespace, out: Path) -> dict:
    subprocess.run(
        [
            *CLI,
            "run",
            "--model",
            args.model,
            "--scenario",
            args.scenario,
            "--profile",
            args.profile,
            "--out",
            str(out),
            "--no-report",
            *(["--requests", str(args.requests)] if args.requests else []),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return json.loads((out / "result.json").read_text())


def run_served(args: argparse.Namespace, out: Path) -> dict:
    server = subprocess.Popen(
        [*CLI, "serve", "--model", args.model, "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    try:
        line = server.stdout.readline()  # type: ignore[union-attr]
        url = line.split("listening on ")[1].split()[0]
        subprocess.run(
            [
                *CLI,
                "run",
                "--target",
                url,
                "--model",
                args.model,
                "--scenario",
                args.scenario,
                "--profile",
                args.profile,
                "--out",
                str(out),
                "--no-report",
                *(["--requests", str(args.requests)] if args.requests else []),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    finally:
        server.send_signal(signal.SIGTERM)
        print(f"  server exited {server.wait(timeout=120)}")
    return json.loads((out / "result.json").read_text())


def ratio(served: dict, local: dict, path: str) -> str:
    def get(result: dict) -> float | None:
        node = result
        for part in path.split("."):
            node = (node or {}).get(part)
        return node

    a, b = get(served), get(local)
    return f"{a:.4g} / {b:.4g} = {a / b:.3f}" if a and b else f"{a} / {b}"


def describe(served: dict, local: dict) -> None:
    for label, path in (
        ("output tok/s", "metrics.output_token_throughput"),
        ("requests/s", "metrics.request_throughput"),
        ("TTFT p50 ms", "metrics.ttft_ms.p50"),
        ("TPOT p50 ms", "metrics.tpot_ms.p50"),
        ("ITL p50 ms", "metrics.itl_ms.p50"),
        ("E2E p50 ms", "metrics.e2e_ms.p50"),
        ("engine busy s", "engine.busy_s"),
    ):
        print(f"  {label:14} served / in-process: {ratio(served, local, path)}")
    methods = (served.get("breakdown") or {}).get("methods") or {}
    for method in ("spans", "samples"):
        split = methods.get(method) or {}
        print(
            f"  served {method}: api {split.get('components', {}).get('api')}, categories {split.get('categories')}"
        )
    local_spans = ((local.get("breakdown") or {}).get("methods") or {}).get("spans") or {}
    print(f"  in-process spans: categories {local_spans.get('categories')}")
    target = served.get("target") or {}
    for name, row in (target.get("threads") or {}).items():
        print(
            f"  thread {name}: {row['samples']} samples, {row['categories']}, {row['components']}, gil {row['gil_wait']}"
        )
    print(f"  gil: {json.dumps(target.get('gil'))}")
    print(f"  client: {target.get('client', {}).get('note')}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--scenario", default="chat")
    parser.add_argument("--requests", type=int, default=None)
    parser.add_argument("--profile", default="default", choices=("default", "deep"))
    parser.add_argument("--pairs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    root = args.out or Path(tempfile.mkdtemp(prefix="bench-served-"))
    for pair in range(args.pairs):
        print(f"pair {pair + 1}: {args.scenario} on {args.model}, profile {args.profile} ({root})")
        local = run_in_process(args, root / f"{pair}-in-process")
        served = run_served(args, root / f"{pair}-served")
        describe(served, local)


if __name__ == "__main__":
    main()
