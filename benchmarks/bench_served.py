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

CLI = [sys.executable, "-m", "infer_prof.cli"]


def run_in_process(args: argparse.Namespace, out: Path) -> object:
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


def run_served(args: argparse.Namespace, out: Path) -> object:
    server = subprocess.Popen(
        [*CLI, "serve", "--model", args.model, "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None  # stdout=PIPE
        line = server.stdout.readline()
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


def at(result: object, path: str) -> object:
    """The value at a dotted `path` in a result.json as read back; None where a part is missing."""
    node = result
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def ratio(served: object, local: object, path: str) -> str:
    a, b = at(served, path), at(local, path)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a and b:
        return f"{a:.4g} / {b:.4g} = {a / b:.3f}"
    return f"{a} / {b}"


def describe(served: object, local: object) -> None:
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
    for method in ("spans", "samples"):
        split = f"breakdown.methods.{method}"
        print(
            f"  served {method}: api {at(served, f'{split}.components.api')}, "
            f"categories {at(served, f'{split}.categories')}"
        )
    print(f"  in-process spans: categories {at(local, 'breakdown.methods.spans.categories')}")
    threads = at(served, "target.threads")
    for name, row in threads.items() if isinstance(threads, dict) else ():
        print(
            f"  thread {name}: {row['samples']} samples, {row['categories']}, {row['components']}, gil {row['gil_wait']}"
        )
    print(f"  gil: {json.dumps(at(served, 'target.gil'))}")
    print(f"  client: {at(served, 'target.client.note')}")


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
