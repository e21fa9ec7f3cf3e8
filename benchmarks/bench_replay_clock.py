"""The replay's C sampler timed by the wall clock and by its thread's CPU clock, on one run's recorded work, alone and beside busy neighbours.

    python benchmarks/bench_replay_clock.py [--model synthetic:tiny] [--scenario FILE] [-r 32] [--rounds 2] [--hogs 2]

One `infer-prof run` records its control workload (profiler.replay.recorder); its sampler calls are then
replayed again and again from that one recording, the C twin timed once by perf_counter and once by its
thread's CPU time, with no hog and with --hogs busy loops beside the replay (the run's own conditions do not
change: only the replay's). A row per (round, hogs, clock): the C twin's time a step at the run's rows, the
speedup over the run's Python time a row, and the replay's own Python time over the run's. The clock the
replay should use is the one whose C time does not move with the neighbours.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from run_beside import HOG

from infer_prof.profiler.rundir.schema import ReplayComponent

ROOT = Path(__file__).resolve().parents[1]


def record(model: str, scenario: str, requests: int, out: Path, *more: str) -> tuple[Any, Any, float | None]:
    """Run the CLI in this process (`more`: further `run` options): the (workload log, pool shape) its replay was
    given, and the share of a core its engine thread got (result.json's health)."""
    import infer_prof.profiler.replay.replay as replay
    from infer_prof.cli.main import main

    kept: list[tuple[Any, Any]] = []
    original = replay.replay_speedups

    def keeping(log: Any, shape: Any, **kwargs: Any) -> Any:
        kept.append((log, shape))
        return original(log, shape, **kwargs)

    replay.replay_speedups = keeping
    argv = sys.argv
    sys.argv = [
        "infer-prof",
        "run",
        "-m",
        model,
        "-s",
        scenario,
        "-r",
        str(requests),
        "--no-report",
        "-o",
        str(out),
        *more,
    ]
    try:
        main()
    except SystemExit as exit_:
        if exit_.code not in (0, None):
            raise
    finally:
        sys.argv, replay.replay_speedups = argv, original
    if not kept:
        raise SystemExit("the run made no replay (was the Python sampler the run's?)")
    health = json.loads((out / "result.json").read_text()).get("health") or {}
    return (*kept[-1], (health.get("engine_thread") or {}).get("core_share"))


def replay_once(log: Any, shape: Any, clock_name: str, core_share: float | None) -> ReplayComponent:
    """The sampler's replay entry with the C twin on `clock_name`'s clock (CPU time over the run's core share),
    every call at one torch thread."""
    import infer_prof.profiler.replay.replay as replay

    cases = replay.sampler_cases

    def one_thread(log: Any, limit: int = replay.SAMPLER_STEPS) -> list[Any]:
        chosen = cases(log, limit)
        for case in chosen:
            case.threads = 1
        return chosen

    replay.sampler_cases = one_thread
    native = time.thread_time_ns if clock_name == "cpu" else None
    try:
        section = replay.replay_speedups(
            log, shape, names=("sampler",), native_clock=native, core_share=core_share
        )
    finally:
        replay.sampler_cases = cases
    return section["components"]["sampler"]


def replay_parser(description: str, *, requests: int, rounds: int) -> argparse.ArgumentParser:
    """The options a replay bench shares: the model and scenario recorded, its requests, and the rounds replayed."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", default="synthetic:tiny")
    parser.add_argument(
        "--scenario", default=str(ROOT / "benchmarks" / "scenarios" / "sampler-heavy-wide.toml")
    )
    parser.add_argument("-r", "--requests", type=int, default=requests)
    parser.add_argument("--rounds", type=int, default=rounds)
    return parser


def main() -> None:
    parser = replay_parser(__doc__.splitlines()[0], requests=32, rounds=2)
    parser.add_argument("--hogs", type=int, default=2, help="busy loops beside the replay in its second half")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        log, shape, core_share = record(args.model, args.scenario, args.requests, Path(folder) / "run")
    print(
        f"the run's engine thread got {core_share:.0%} of a core while runnable"
        if core_share
        else "no core share"
    )
    print("| round | hogs | C clock | C time a step | speedup | replayed Python / run's |")
    print("|---|---|---|---|---|---|")
    for round_ in range(1, args.rounds + 1):
        for hogs in (0, args.hogs):
            procs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(hogs)]
            try:
                time.sleep(0.5 if hogs else 0)
                for clock_name in ("wall", "cpu"):
                    entry = replay_once(log, shape, clock_name, core_share)
                    native_us, speedup = entry.get("native_us_per_step"), entry.get("speedup")
                    replayed = entry.get("replayed_python_over_run")
                    print(
                        f"| {round_} | {hogs} | {clock_name} | {(native_us or 0) / 1e3:.1f} ms | "
                        f"{speedup or 0:.2f} | {replayed or 0:.2f} |",
                        flush=True,
                    )
            finally:
                for proc in procs:
                    proc.kill()
                    proc.wait()


if __name__ == "__main__":
    main()
