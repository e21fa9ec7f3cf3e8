"""The q4_1 C kernel against torch's int8 linears over SmolLM2's 121 linears, at a few batch sizes, in one run.

Usage: python benchmarks/bench_block_linear.py [--rounds 3] [--rows 1 2 4 16] [--threads 2]

Random weights of SmolLM2-135M's shapes (30 layers of qkv 960x576, attn_out 576x576, gate_up 3072x576 and
down 576x1536, and the 49152x576 head) are packed both ways: engine.blockquant's (4-bit layers, 8-bit
head) and engine.quantize's Int8Linear. Each round times one pass over all 121 matrices of each, back to
back, at each row count, and prints the per-round ratio (int8 time / q4_1 time: above 1, q4_1 is faster)
and the rate at which the q4_1 pass read its weights. Together the matrices are far larger than the
caches, so a pass reads them from memory as a decode step does.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from infer_prof.engine.blockquant import BlockLinear
from infer_prof.engine.quantize import Int8Linear, preferred_engine
from infer_prof.native_paths.block_linear import describe, kernel

LAYER_SHAPES = ((960, 576), (576, 576), (3072, 576), (576, 1536))
LAYERS = 30
HEAD = (49152, 576)


def timed_pass(linears: list, inputs: dict[int, torch.Tensor]) -> float:
    start = time.perf_counter()
    for linear in linears:
        linear(inputs[linear.shape[1]])
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 2, 4, 16])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    engine, run = preferred_engine(), kernel()
    if engine is None:
        raise SystemExit("this torch build has no int8 engine to compare with")
    generator = torch.Generator().manual_seed(0)
    weights = [
        torch.randn(*shape, generator=generator) * 0.05 for _ in range(LAYERS) for shape in LAYER_SHAPES
    ]
    head = torch.randn(*HEAD, generator=generator) * 0.05
    int8 = [Int8Linear.from_float(w, engine) for w in [*weights, head]]
    blocks = [BlockLinear.from_float(w, 4, run) for w in weights] + [BlockLinear.from_float(head, 8, run)]
    q4_bytes = sum(linear.packed.numel() for linear in blocks)
    print(
        f"q4_1 kernel: {describe()}; int8 engine {engine!r}; {args.threads} threads; q4_1 weights {q4_bytes / 1e6:.1f} MB"
    )
    for rows in args.rows:
        inputs = {width: torch.randn(rows, width, generator=generator) for width in (576, 1536)}
        timed_pass(int8, inputs), timed_pass(blocks, inputs)  # warm-up
        ratios, q4_times = [], []
        for round_no in range(1, args.rounds + 1):
            int8_s, q4_s = timed_pass(int8, inputs), timed_pass(blocks, inputs)
            ratios.append(int8_s / q4_s)
            q4_times.append(q4_s)
            print(
                f"rows {rows:3} round {round_no}: int8 {int8_s * 1e3:6.2f} ms, q4_1 {q4_s * 1e3:6.2f} ms "
                f"({q4_bytes / q4_s / 1e9:4.1f} GB/s), int8 / q4_1 {int8_s / q4_s:.2f}x"
            )
        print(
            f"rows {rows:3}: int8 / q4_1 median {statistics.median(ratios):.2f}x (min {min(ratios):.2f}, "
            f"max {max(ratios):.2f}); q4_1 median {statistics.median(q4_times) * 1e3:.2f} ms"
        )


if __name__ == "__main__":
    main()
