"""What a second OpenMP pool costs the engine thread: a batch-1 linear timed on a worker thread, with and without a pool left on the main thread.

Run: python benchmarks/bench_openmp_pools.py [--rounds 3] [--calls 3000]
Each case runs in a fresh process (pools live as long as their thread), interleaved over rounds:
  clean:     the main thread runs no parallel op; the worker thread times the linear;
  main-pool: the main thread first runs one parallel op (a 4M-element add), as loading a model on it did;
  set-up:    that add runs through engine.setup_thread.run_on_setup_thread instead (what load_model does).
It prints the median microseconds per call of each case and the ratios to `clean`, for the model's linear
(oneDNN's _linear_pointwise, what engine.llama uses when it can) and for F.linear.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES = ("clean", "main-pool", "set-up")

_CHILD = """
import json, sys, threading, time
import torch
torch.set_num_threads(2)
from infer_prof.engine.llama import _select_linear
from infer_prof.engine.setup_thread import run_on_setup_thread
case, calls = sys.argv[1], int(sys.argv[2])
x, w = torch.randn(1, 576), torch.randn(1536, 576)
kinds = {"model linear": _select_linear(), "F.linear": torch.nn.functional.linear}

def parallel_op():
    big = torch.randn(4_000_000)
    (big + big).sum()

if case == "main-pool":
    parallel_op()
elif case == "set-up":
    run_on_setup_thread(parallel_op)
times = {}

def worker():
    for name, linear in kinds.items():
        for _ in range(200):
            linear(x, w)
        start = time.perf_counter()
        for _ in range(calls):
            linear(x, w)
        times[name] = (time.perf_counter() - start) / calls * 1e6

thread = threading.Thread(target=worker)
thread.start()
thread.join()
print(json.dumps(times))
"""


def one(case: str, calls: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, case, str(calls)], cwd=REPO, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=3000)
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {case: [] for case in CASES}
    for _ in range(args.rounds):
        for case in CASES:
            results[case].append(one(case, args.calls))
    for kind in results["clean"][0]:
        medians = {case: statistics.median(run[kind] for run in results[case]) for case in CASES}
        ratios = ", ".join(f"{case} x{medians[case] / medians['clean']:.2f}" for case in CASES[1:])
        cells = ", ".join(f"{case} {medians[case]:.1f} us" for case in CASES)
        print(f"{kind:13s}: {cells} per call; against clean: {ratios}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
