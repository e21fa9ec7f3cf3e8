"""Batch-1 decode TPOT with 0, 1 and 2 busy-loop hogs, per OpenMP wait policy and thread count, in one run.

Usage: python benchmarks/bench_contention.py [--models smollm2-135m synthetic:small] [--rounds 3] [--steps 12]
       [--configs shipped passive engine] [--dtype float32|int8|q4_1]

libgomp reads its wait policy once, when torch loads it, so every configuration is measured in a fresh
child process with its environment set before `import torch`. Each child loads the model once, then for
0, 1 and 2 hogs (`python -c 'while 1: pass'`, started by the child, always killed) times `--steps`
batch-1 decode steps after 2 warm-up steps and WARMUP_S seconds. Configurations take turns inside every round, so noise from
other processes hits them alike; the summary gives each configuration's median TPOT over rounds, and its
ratio to the shipped one per round (median, min-max). The 1-minute load average is printed with every
measurement: on a shared machine "0 hogs" is not quiet.

Configurations: shipped = libgomp's default (OMP_WAIT_POLICY unset, so a waiting thread spins ~300,000
iterations before it sleeps) with torch's thread count; shipped-1 = the same on one thread; passive =
OMP_WAIT_POLICY=PASSIVE (sleep at once); passive-1 = passive and one torch thread; spin-N =
GOMP_SPINCOUNT=N (spin briefly, then sleep); active = OMP_WAIT_POLICY=ACTIVE; engine = what the engine
chooses by itself (engine/threads.py), with its thread governor ticking before every step as the engine's
loop does (engine/thread_governor.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOG = "while 1: pass"
WARMUP_S = (
    1.5  # untimed decode after the hogs start: long enough for the engine's governor to look (0.5 s windows)
)


def config_env(name: str) -> tuple[dict[str, str], int | None]:
    """The environment and thread count (None = torch's choice) a configuration name stands for."""
    env = {
        key: value for key, value in os.environ.items() if key not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
    }
    # The engine sets its own policy when the variable is unset; the shipped baseline must not get it.
    env["INFER_PROF_OMP_POLICY"] = "off"
    threads = None
    if name == "shipped":
        pass
    elif name == "shipped-1":
        threads = 1
    elif name in ("passive", "passive-1"):
        env["OMP_WAIT_POLICY"] = "PASSIVE"
        threads = 1 if name == "passive-1" else None
    elif name == "active":
        env["OMP_WAIT_POLICY"] = "ACTIVE"
    elif name.startswith("spin-"):
        env["GOMP_SPINCOUNT"] = name[len("spin-") :]
    elif name == "engine":  # what the engine chooses by itself: engine/threads.py, engine/thread_governor.py
        env.pop("INFER_PROF_OMP_POLICY")
    else:
        raise SystemExit(f"unknown configuration {name!r}")
    return env, threads


def load_average() -> float:
    return os.getloadavg()[0]


def child(model_name: str, threads: int | None, steps: int, hog_levels: list[int], dtype: str) -> None:
    """Runs in the measured process: load once, then TPOT at each hog level; one JSON line per level."""
    sys.path.insert(0, str(ROOT))
    # The engine first: it sets the wait policy (unless told not to) before torch loads libgomp.
    import infer_prof.engine  # noqa: F401, I001
    import torch

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_model import decode_ms_per_step, load

    from infer_prof.engine.thread_governor import default_governor, read_cpu

    if threads:
        torch.set_num_threads(threads)
    loaded = load(model_name, dtype)
    # This thread decodes, so it is the one the engine's governor would watch (None unless the engine chose).
    governor = default_governor()
    for hogs in hog_levels:
        procs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(hogs)]
        try:
            time.sleep(0.3 if hogs else 0.0)  # let the hogs reach the run queue
            before, cpu_before = load_average(), read_cpu()
            tpot = decode_ms_per_step(
                loaded, 1, steps, warmup=2, warmup_s=WARMUP_S, on_step=governor.tick if governor else None
            )
            cpu = read_cpu()
            # What the governor reads, over this level's decode: our threads' run-queue wait and the rest of
            # the machine's CPU use (all but this, the decoding thread), in cores.
            wall = max(1, cpu.wall_ns - cpu_before.wall_ns)
            signals = {
                "own_wait_cores": (cpu.own_wait_ns - cpu_before.own_wait_ns) / wall,
                "others_cores": (
                    (cpu.machine_busy_ns - cpu_before.machine_busy_ns)
                    - (cpu.engine_cpu_ns - cpu_before.engine_cpu_ns)
                )
                / wall,
                # ... and other processes' alone (all but this process's threads): the second lowering signal.
                "outside_cores": (
                    (cpu.machine_busy_ns - cpu_before.machine_busy_ns)
                    - (cpu.process_cpu_ns - cpu_before.process_cpu_ns)
                )
                / wall,
            }
            record = {
                "hogs": hogs,
                "tpot_ms": tpot,
                "governor": governor.record() if governor else None,
                "load_before": before,
                "load_after": load_average(),
                **signals,
                "threads": torch.get_num_threads(),
                "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
                "gomp_spincount": os.environ.get("GOMP_SPINCOUNT"),
            }
            print(json.dumps(record), flush=True)
        finally:
            for proc in procs:
                proc.kill()
            for proc in procs:
                proc.wait()


def measure(model_name: str, config: str, steps: int, hog_levels: list[int], dtype: str) -> list[dict]:
    env, threads = config_env(config)
    command = [
        sys.executable,
        __file__,
        "--child",
        model_name,
        "--steps",
        str(steps),
        "--dtype",
        dtype,
        "--hogs",
        *map(str, hog_levels),
    ] + (["--threads", str(threads)] if threads else [])
    done = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"{config} on {model_name} failed:\n{done.stderr[-2000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["smollm2-135m", "synthetic:small"])
    parser.add_argument("--configs", nargs="+", default=["shipped", "passive", "engine"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--hogs", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--dtype", default="float32", help="the model's weights: float32, int8 or q4_1")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.threads, args.steps, args.hogs, args.dtype)
        return

    print(
        f"cores: {os.cpu_count()}; {args.steps} timed batch-1 decode steps per measurement after 2 warm-up steps"
    )
    results: dict[tuple[str, str, int], list[float]] = {}
    for round_no in range(1, args.rounds + 1):
        for model_name in args.models:
            for config in args.configs:
                for rec in measure(model_name, config, args.steps, args.hogs, args.dtype):
                    results.setdefault((model_name, config, rec["hogs"]), []).append(rec["tpot_ms"])
                    print(
                        f"round {round_no} {model_name:16} {config:10} hogs {rec['hogs']}: "
                        f"TPOT {rec['tpot_ms']:8.1f} ms  ({rec['threads']} threads; load average "
                        f"{rec['load_before']:.1f} -> {rec['load_after']:.1f}; run-queue wait "
                        f"{rec['own_wait_cores']:.2f} cores, rest of the machine {rec['others_cores']:.2f}, "
                        f"other processes {rec['outside_cores']:.2f})",
                        flush=True,
                    )

    print("\nsummary: median TPOT over rounds, and the ratio to shipped per round (median, min-max)")
    for model_name in args.models:
        for hogs in args.hogs:
            base = results.get((model_name, "shipped", hogs))
            for config in args.configs:
                times = results[(model_name, config, hogs)]
                line = f"  {model_name:16} hogs {hogs} {config:10} TPOT {statistics.median(times):8.1f} ms"
                if base and config != "shipped":
                    ratios = [t / b for t, b in zip(times, base)]
                    line += (
                        f"   x{statistics.median(ratios):.3f} of shipped "
                        f"(min {min(ratios):.3f}, max {max(ratios):.3f})"
                    )
                print(line)


if __name__ == "__main__":
    main()
