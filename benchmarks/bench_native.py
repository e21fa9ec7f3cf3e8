"""Python twin vs C twin for the sampler, KV allocator, scheduler and input preparation, and the fused core, with ratios and targets.

    python benchmarks/bench_native.py                      # batches 1, 32, 256; vocabulary 49,152
    python benchmarks/bench_native.py --repeats 15 --json runs/bench-native.json

Each number is a median over interleaved repeats of the same calls on both twins (native_paths/bench.py
says exactly what is timed). The memory floor is numpy summing the batch's float32 logits once: the
least time any sampler needs to read them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Literal

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infer_prof.native_paths.bench import SAMPLER_MIX_BATCH, run_native_bench
from infer_prof.native_paths.bench_rows import BenchRow

# The targets: (what, which rows it judges, the measure, the bound, at least or at most).
TARGETS: tuple[
    tuple[str, Callable[[BenchRow], bool], Literal["native_floor_ratio", "speedup"], float, str], ...
] = (
    (
        "C sampler within 2x of the memory floor on every mix (batch 32)",
        lambda r: r["component"] == "sampler" and r["batch"] == SAMPLER_MIX_BATCH,
        "native_floor_ratio",
        2.0,
        "max",
    ),
    (
        "C sampler >= 10x the Python twin on the mixed step (batch 32)",
        lambda r: r["component"] == "sampler" and r["batch"] == SAMPLER_MIX_BATCH and r["mix"] == "mixed",
        "speedup",
        10.0,
        "min",
    ),
    (
        "C allocator >= 30x per step (batch 256)",
        lambda r: r["component"] == "kv_alloc" and r["batch"] == 256,
        "speedup",
        30.0,
        "min",
    ),
    (
        "C scheduler >= 20x per step at 256 running sequences",
        lambda r: r["component"] == "scheduler" and r["batch"] == 256,
        "speedup",
        20.0,
        "min",
    ),
    (
        "C scheduler no slower than Python at batch 1",
        lambda r: r["component"] == "scheduler" and r["batch"] == 1,
        "speedup",
        1.0,
        "min",
    ),
    (
        "C input preparation >= 10x per step (batch 256)",
        lambda r: r["component"] == "prepare" and r["batch"] == 256,
        "speedup",
        10.0,
        "min",
    ),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,32,256", help="comma list of batch sizes (default 1,32,256)")
    parser.add_argument("--vocab", type=int, default=49152)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--components", default="sampler,kv_alloc,scheduler,prepare,core")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    rows = run_native_bench(
        batches=[int(b) for b in args.batches.split(",")],
        vocab=args.vocab,
        repeats=args.repeats,
        components=args.components.split(","),
    )
    print(
        f"{'component':10} {'batch':>5} {'mix':18} {'python us':>11} {'native us':>10} {'speedup':>8}  notes"
    )
    for r in rows:
        notes = []
        if "floor_us" in r:
            notes.append(f"floor {r['floor_us']:.0f} us, native/floor {r['native_floor_ratio']:.2f}")
        if "separate_us" in r:
            notes.append(
                f"three C calls {r['separate_us']:.1f} us, one call {r['one_call_gain']:.2f}x faster"
            )
        for check in ("tokens_match", "tables_match", "plans_match", "inputs_match"):
            if check in r:
                notes.append(f"{check.split('_')[0]} {'identical' if r[check] else 'DIFFER'}")
        print(
            f"{r['component']:10} {r['batch']:>5} {r['mix']:18} {r['python_us']:>11.1f} {r['native_us']:>10.1f} "
            f"{r['speedup']:>7.1f}x  {'; '.join(notes)}"
        )
    floor = [r for r in rows if r["component"] == "sampler" and r["batch"] == SAMPLER_MIX_BATCH]
    if floor:
        print(
            f"\nmemory floor: numpy reads {SAMPLER_MIX_BATCH} x {args.vocab:,} float32 once in "
            f"{floor[0]['floor_us']:.0f} us; C sampler / floor: "
            + ", ".join(f"{r['mix']} {r['native_floor_ratio']:.2f}x" for r in floor)
            + f" (fast softmax sum: the {floor[0]['pass_f']} build)"
        )
    print(f"\ntargets (on this machine: {os.cpu_count()} CPUs; other batches are in the table):")
    for what, judged, measure, bound, kind in TARGETS:
        picked = [r for r in rows if judged(r)]
        if picked:
            met = all(r[measure] <= bound if kind == "max" else r[measure] >= bound for r in picked)
            values = ", ".join(f"{r['mix']} {r[measure]:.2f}x" for r in picked)
            print(f"  {'met' if met else 'MISSED':6} {what}: {values}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        temporary = args.json.with_suffix(".tmp")
        temporary.write_text(json.dumps(rows, indent=2))
        temporary.replace(args.json)
    return (
        0
        if all(
            r.get(c, True)
            for r in rows
            for c in ("tokens_match", "tables_match", "plans_match", "inputs_match")
        )
        else 1
    )


if __name__ == "__main__":
    sys.exit(main())
