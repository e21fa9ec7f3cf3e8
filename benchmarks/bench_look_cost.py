"""A look at a server tree (`run --target/--launch --until resolved`): its py-spys restarted one after another against all at once.

    python benchmarks/bench_look_cost.py [--processes 4] [--rounds 3]

Starts N Python processes that import torch and step a small matmul (a native py-spy reads torch's symbols
when it attaches, as on a real engine's processes), samples each with a native py-spy at 15 Hz, then takes
looks in alternating order, each look restarting every py-spy and reading its samples: one after another (the
old way) and at once (profiler.session.target.watch.at_once). Prints each look's wall time and the ratio.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from infer_prof.profiler.collectors.sampling import SamplingCollector
from infer_prof.profiler.session.target.watch import at_once, look

CHILD = "import torch, time\nx = torch.ones(128, 128)\nwhile 1:\n    y = x @ x\n    time.sleep(0.002)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    children = [subprocess.Popen([sys.executable, "-c", CHILD]) for _ in range(args.processes)]
    samplers = [SamplingCollector(pid=child.pid, native_stacks=True, rate=15) for child in children]
    try:
        time.sleep(4)  # torch imported in every child
        for sampler in samplers:
            sampler.start()
        times: dict[str, list[float]] = {"one after another": [], "at once": []}
        for round_ in range(args.rounds):
            order = list(times) if round_ % 2 == 0 else list(reversed(times))
            for how in order:
                time.sleep(4)  # samples to read
                started = time.perf_counter()
                if how == "at once":
                    at_once(look, samplers)
                else:
                    for sampler in samplers:
                        look(sampler)
                times[how].append(time.perf_counter() - started)
                print(f"round {round_ + 1}, {how}: {times[how][-1]:.2f} s", flush=True)
        serial, parallel = (sum(values) for values in times.values())
        print(f"one after another / at once, summed over {args.rounds} rounds: {serial / parallel:.2f}")
    finally:
        for sampler in samplers:
            sampler.stop()
        for child in children:
            child.kill()
            child.wait()


if __name__ == "__main__":
    main()
