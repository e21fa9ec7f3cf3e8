"""Where a batch-1 decode step's time goes: torch.profiler's op table, beside the machine's read bandwidth.

    python benchmarks/bench_decode_ops.py [--model smollm2-135m] [--dtype int8] [--steps 40] [--top 12]

Decodes one chat prompt greedily, times `--steps` steps without the profiler (the figure to trust), then
the same number under torch.profiler (CPU ops, self time), and prints the ops that take the most of a step
with their calls a step. Then it times a float32 sum over 1 GiB at the same thread count: the rate at which
this machine streams memory, which bounds a memory-bound decode from below (every weight is read once a
token), and prints what reading the model's linear weights at that rate would take.
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
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_model import BLOCK_SIZE, PROMPTS, load

from infer_prof.engine.model_runner import build_model_input
from infer_prof.engine.types import ModelConfig

SUM_BYTES = 2**30


def linear_weight_bytes(config: ModelConfig, dtype: str) -> int:
    """Bytes of every linear a decode step reads (qkv, attn_out, gate_up, down per layer, and the head)."""
    q, kv = config.n_heads * config.head_dim, config.n_kv_heads * config.head_dim
    d, hidden = config.dim, config.hidden_dim
    per_layer = (q + 2 * kv) * d + q * d + 2 * hidden * d + d * hidden
    layers, head = config.n_layers * per_layer, config.vocab_size * d
    if dtype == "q4_1":  # 80 bytes per 128 weights in the layers, 136 in the 8-bit head (engine.blockquant)
        return (layers * 80 + head * 136) // 128
    return (layers + head) * (1 if dtype == "int8" else torch.finfo(getattr(torch, dtype)).bits // 8)


def read_bandwidth(repeats: int = 7) -> float:
    """Bytes a second that a float32 sum over SUM_BYTES streams, median of `repeats`."""
    data = torch.ones(SUM_BYTES // 4, dtype=torch.float32)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        data.sum()
        times.append(time.perf_counter() - start)
    return SUM_BYTES / statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--dtype", default="int8")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    loaded = load(args.model, args.dtype)
    model = loaded.model
    prompt = loaded.tokenizer.encode_chat(PROMPTS[1])
    blocks = -(-(len(prompt) + 2 * args.steps + 32) // BLOCK_SIZE)
    model.allocate_kv_cache(blocks, BLOCK_SIZE)
    tables = np.arange(blocks, dtype=np.int32).reshape(1, blocks)
    position, token = len(prompt), model.forward(build_model_input([prompt], [0], [True], tables, BLOCK_SIZE))
    next_ids = token.argmax(-1).tolist()

    def step() -> None:
        nonlocal position, next_ids
        inp = build_model_input([next_ids], [position], [True], tables, BLOCK_SIZE)
        next_ids = model.forward(inp).argmax(-1).tolist()
        position += 1

    for _ in range(8):  # warm-up: oneDNN's primitives, the allocator
        step()
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    print(
        f"{args.model} {args.dtype}, batch 1, {args.threads} threads: {statistics.median(times) * 1e3:.2f} ms a step"
    )
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        for _ in range(args.steps):
            step()
    events = profile.key_averages()
    self_us = sum(event.self_cpu_time_total for event in events) / args.steps
    calls = sum(event.count for event in events) / args.steps
    print(
        f"under torch.profiler: {self_us / 1e3:.2f} ms of ops' self time a step, {calls:,.0f} op calls a step"
    )
    for event in sorted(events, key=lambda event: -event.self_cpu_time_total)[: args.top]:
        share = event.self_cpu_time_total / args.steps / self_us
        print(
            f"  {event.key[:50]:<50} {event.count / args.steps:5.0f} calls {event.self_cpu_time_total / args.steps / 1e3:7.3f} ms"
            f" ({share:5.1%})  {event.self_cpu_time_total / max(event.count, 1):6.1f} us a call"
        )
    bandwidth = read_bandwidth()
    weights = linear_weight_bytes(model.config, args.dtype)
    print(
        f"read bandwidth (float32 sum of 1 GiB): {bandwidth / 1e9:.1f} GB/s; the linears' {weights / 1e6:.0f} MB at that"
        f" rate: {weights / bandwidth * 1e3:.2f} ms a step"
    )


if __name__ == "__main__":
    main()
