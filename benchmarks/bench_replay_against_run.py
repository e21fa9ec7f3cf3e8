"""The replay's C sampler against the C twin's own time in a run: the speedup k a prediction uses, beside the k a run with the twin on shows, at several sizes of the replay's cache eviction.

    python benchmarks/bench_replay_against_run.py [--model synthetic:tiny] [--scenario FILE] [-r 64] [--rounds 3]

Two `infer-prof run`s of one scenario: the first with the Python sampler (its recorded work is what the replay
plays), the second with `--native sampler` (its recorder times the C twin's calls in the run). The in-run k is the
first run's Python time a row over the second's C time a row; the replayed k is the first run's replay, played
again for each eviction size (CacheEvictor's bytes; 0: none), the sizes in alternating order each round. A
replayed k that differs from the in-run k by more than the rounds' spread is the replay's error, and the eviction
size that moves it (or does not) says whether the caches are the cause.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from bench_replay_clock import record, replay_parser

SIZES_MB = (64, 16, 0)


def per_row_us(log: Any) -> float:
    """The run's sampler time a row, from the recorder's (ns, rows, calls) chunks."""
    chunks = np.array(log.sampler_chunks, dtype=float).reshape(-1, 3)
    return float(chunks[:, 0].sum() / chunks[:, 1].sum() / 1e3)


def evicting(size_mb: int, make: Any) -> Callable[[], Callable[[Any], None]]:
    """A stand-in for CacheEvictor's constructor (`make`): one of size_mb (0: one that does nothing)."""
    return lambda: (lambda logits: None) if size_mb == 0 else make(size_mb * 2**20)


def main() -> None:
    args = replay_parser(__doc__.splitlines()[0], requests=64, rounds=3).parse_args()
    import infer_prof.profiler.replay.replay as replay

    with tempfile.TemporaryDirectory() as folder:
        log, shape, core_share = record(args.model, args.scenario, args.requests, Path(folder) / "py")
        native_log, _, _ = record(
            args.model, args.scenario, args.requests, Path(folder) / "c", "--native", "sampler"
        )
    python_us, native_us = per_row_us(log), per_row_us(native_log)
    print(
        f"in-run: the Python sampler {python_us:.1f} µs a row, the C twin {native_us:.1f} µs a row: "
        f"k {python_us / native_us:.2f} (the first run's engine thread got {core_share or 0:.0%} of a core)"
    )
    print("| round | eviction | replayed k [95%] | C µs a row, replayed | replayed k / in-run k |")
    print("|---|---|---|---|---|")
    make = replay.CacheEvictor
    try:
        for round_ in range(1, args.rounds + 1):
            for size in SIZES_MB if round_ % 2 else SIZES_MB[::-1]:
                replay.CacheEvictor = evicting(size, make)  # type: ignore[assignment,misc]
                section = replay.replay_speedups(log, shape, names=("sampler",), core_share=core_share)
                entry = section["components"]["sampler"]
                k = entry.get("speedup") or float("nan")
                print(
                    f"| {round_} | {size} MB | {k:.2f} [{entry.get('low') or 0:.2f}, {entry.get('high') or 0:.2f}] | "
                    f"{python_us / k:.1f} | {k / (python_us / native_us):.2f} |",
                    flush=True,
                )
    finally:
        replay.CacheEvictor = make  # type: ignore[misc]


if __name__ == "__main__":
    main()
