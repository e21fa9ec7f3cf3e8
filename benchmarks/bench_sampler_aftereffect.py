"""Does the sampler that ran before a model forward change that forward's time? Python vs C sampler, in one run.

    python benchmarks/bench_sampler_aftereffect.py [--model smollm2-135m] [--batch 30] [--steps 480]

A decode loop at `--batch` sequences (concurrency-30's sampling mix: greedy, top-k 50 + top-p 0.95,
min-p 0.05 with penalties) where blocks of 8 steps take turns, ABBA, between three arms: the Python
sampler, the C sampler, and the C sampler followed by writing 30 MB of fresh memory (about what the
Python sampler allocates at batch 30). Only the model forward after each sampler call is compared:
its median per arm and the ratios to the C arm. Printed beside them, so that two suspects can be ruled
in or out: the garbage collector's time inside forwards and the forward's minor page faults.

`--verify` measured the C sampler's end-to-end gain on concurrency-30 above its Amdahl prediction, the
excess in the model span; this isolates that effect from the engine, the load and the profiler.
"""

from __future__ import annotations

import argparse
import gc
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infer_prof.engine.loader import load_model
from infer_prof.engine.model_runner import build_model_input
from infer_prof.engine.sampler import PythonSampler
from infer_prof.engine.types import Sampler, SamplingParams

BLOCK_SIZE = 16
BLOCK_STEPS = 8
ARMS = ("python", "c", "c+touch")
TOUCH_BYTES = 30 * 2**20


def mix_params(index: int) -> SamplingParams:
    """concurrency-30's classes by weight (greedy 1, nucleus 2, min-p 1), one per sequence in turn."""
    kind = index % 4
    if kind == 0:
        return SamplingParams(temperature=0.0, seed=index)
    if kind in (1, 2):
        return SamplingParams(temperature=0.8, top_k=50, top_p=0.95, seed=index)
    return SamplingParams(
        temperature=1.0,
        min_p=0.05,
        repetition_penalty=1.1,
        frequency_penalty=0.2,
        presence_penalty=0.2,
        seed=index,
    )


class GcClock:
    """Milliseconds the garbage collector ran while `phase` was set, by phase."""

    def __init__(self) -> None:
        self.phase: str | None = None
        self.ms: dict[str, float] = {}
        self._start = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, event: str, _info: dict[str, int]) -> None:
        if event == "start":
            self._start = time.perf_counter()
        elif self.phase is not None:
            self.ms[self.phase] = self.ms.get(self.phase, 0.0) + (time.perf_counter() - self._start) * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--batch", type=int, default=30)
    parser.add_argument(
        "--steps", type=int, default=480, help="decode steps compared (whole ABBA rounds of 48)"
    )
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if args.batch < 1 or args.steps < 2 * BLOCK_STEPS * len(ARMS):
        parser.error(f"--batch must be >= 1 and --steps >= {2 * BLOCK_STEPS * len(ARMS)}")
    from infer_prof.native_paths.loader import require
    from infer_prof.native_paths.sampler import NativeSampler

    require()
    torch.set_num_threads(args.threads)
    loaded = load_model(args.model, dtype="float32")
    model, tokenizer = loaded.model, loaded.tokenizer
    prompts = [tokenizer.encode_chat(f"Tell me fact number {i} about the sea.") for i in range(args.batch)]
    blocks_per_seq = -(-(max(map(len, prompts)) + args.steps + BLOCK_STEPS + 1) // BLOCK_SIZE)
    model.allocate_kv_cache(args.batch * blocks_per_seq, BLOCK_SIZE)
    tables = np.arange(args.batch * blocks_per_seq, dtype=np.int32).reshape(args.batch, blocks_per_seq)
    samplers: dict[str, Sampler] = {"python": PythonSampler(), "c": NativeSampler()}
    for index, prompt in enumerate(prompts):
        for sampler in samplers.values():
            sampler.add(index, mix_params(index), prompt)
    ids = list(range(args.batch))
    rounds = max(1, args.steps // (2 * len(ARMS) * BLOCK_STEPS))
    # A warm-up block first (not counted), then whole ABBA rounds: every arm sits at the same mean
    # place in the run, so the forward's growth with the context cancels out.
    order = ["warm-up"] * BLOCK_STEPS + [
        arm for _ in range(rounds) for arm in (*ARMS, *ARMS[::-1]) for _ in range(BLOCK_STEPS)
    ]
    forward_s: dict[str, list[float]] = {arm: [] for arm in ARMS}
    faults: dict[str, list[int]] = {arm: [] for arm in ARMS}
    gc_clock = GcClock()
    logits = model.forward(
        build_model_input(prompts, [0] * args.batch, [True] * args.batch, tables, BLOCK_SIZE)
    )
    positions = [len(prompt) for prompt in prompts]
    for _step, arm in enumerate(order):
        counted = arm != "warm-up"
        next_ids = samplers["python" if arm == "python" else "c"].sample(logits, ids)
        if arm == "c+touch":
            fresh = torch.empty(TOUCH_BYTES // 4)
            fresh.fill_(1.0)
            del fresh
        inp = build_model_input(
            [[token] for token in next_ids], positions, [True] * args.batch, tables, BLOCK_SIZE
        )
        gc_clock.phase = arm if counted else None
        faults_before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        start = time.perf_counter()
        logits = model.forward(inp)
        elapsed = time.perf_counter() - start
        faults_after = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        gc_clock.phase = None
        positions = [position + 1 for position in positions]
        if counted:
            forward_s[arm].append(elapsed)
            faults[arm].append(faults_after - faults_before)
    base = statistics.median(forward_s["c"])
    print(
        f"{args.model}, batch {args.batch}, {len(order) - BLOCK_STEPS} decode steps in ABBA blocks of {BLOCK_STEPS}"
    )
    print(
        f"{'forward after':14} {'steps':>5} {'median ms':>10} {'/ after c':>10} {'gc ms/fwd':>10} {'faults/fwd':>11}"
    )
    for arm in ARMS:
        median = statistics.median(forward_s[arm])
        print(
            f"{arm:14} {len(forward_s[arm]):>5} {median * 1e3:>10.2f} {median / base:>10.3f} "
            f"{gc_clock.ms.get(arm, 0.0) / len(forward_s[arm]):>10.3f} {statistics.mean(faults[arm]):>11.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
