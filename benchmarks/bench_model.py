"""Measures SmolLM2 load time, batch-1 decode latency and 16-sequence decode throughput in one run.

Usage: python benchmarks/bench_model.py [--model smollm2-135m] [--rounds 3] [--steps 32] [--threads 2]

Batch 1 and batch 16 are measured in alternating rounds so that noise from other processes on the
machine hits both alike; each round prints its own ratio, and the summary gives medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.model_runner import build_model_input
from engine.models import LoadedModel, load_model

BLOCK_SIZE = 16
PROMPTS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Explain recursion to a child.",
    "List three prime numbers.",
]


def decode_ms_per_step(loaded: LoadedModel, batch: int, steps: int, warmup: int = 3) -> float:
    """Prefill `batch` chat prompts, then time `steps` decode steps of the whole batch (warm-up excluded)."""
    model, tokenizer = loaded.model, loaded.tokenizer
    prompts = [tokenizer.encode_chat(PROMPTS[i % len(PROMPTS)]) for i in range(batch)]
    blocks_per_seq = -(-(max(map(len, prompts)) + steps + warmup + 1) // BLOCK_SIZE)
    model.allocate_kv_cache(batch * blocks_per_seq, BLOCK_SIZE)
    tables = np.arange(batch * blocks_per_seq, dtype=np.int32).reshape(batch, blocks_per_seq)
    logits = model.forward(build_model_input(prompts, [0] * batch, [True] * batch, tables, BLOCK_SIZE))
    positions = [len(p) for p in prompts]
    next_ids = logits.argmax(-1).tolist()
    times = []
    for step in range(warmup + steps):
        start = time.perf_counter()
        inp = build_model_input([[t] for t in next_ids], positions, [True] * batch, tables, BLOCK_SIZE)
        next_ids = model.forward(inp).argmax(-1).tolist()
        elapsed = time.perf_counter() - start
        if step >= warmup:
            times.append(elapsed)
        positions = [p + 1 for p in positions]
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    start = time.perf_counter()
    loaded = load_model(args.model, dtype=args.dtype)
    load_s = time.perf_counter() - start
    print(f"model: {loaded.source}")
    print(f"load: {load_s:.2f} s wall (open GGUF, dequantize, fuse weights, build tokenizer)")
    print(f"torch threads: {torch.get_num_threads()}, dtype: {args.dtype}")

    single, batched, ratios = [], [], []
    for round_no in range(1, args.rounds + 1):
        ms1 = decode_ms_per_step(loaded, 1, args.steps)
        msb = decode_ms_per_step(loaded, args.batch, args.steps)
        ratio = (args.batch * 1e3 / msb) / (1e3 / ms1)
        single.append(ms1)
        batched.append(msb)
        ratios.append(ratio)
        print(
            f"round {round_no}: batch 1 {ms1:.1f} ms/token ({1e3 / ms1:.1f} tok/s); batch {args.batch} "
            f"{msb:.1f} ms/step ({args.batch * 1e3 / msb:.1f} tok/s aggregate); ratio {ratio:.2f}x"
        )
    print(
        f"median of {args.rounds} rounds, {args.steps} timed decode steps each after 3 warm-up steps "
        "(median step time; prompt prefill excluded):"
    )
    print(f"  batch-1 decode: {statistics.median(single):.1f} ms/token")
    print(
        f"  batch-{args.batch} decode: {statistics.median(batched):.1f} ms/step = "
        f"{args.batch * 1e3 / statistics.median(batched):.1f} tokens/s aggregate"
    )
    print(f"  aggregate throughput ratio batch-{args.batch} / batch-1: {statistics.median(ratios):.2f}x")
    print(
        f"best round (least disturbed by other processes): batch-1 {min(single):.1f} ms/token, "
        f"batch-{args.batch} {min(batched):.1f} ms/step"
    )


if __name__ == "__main__":
    main()
