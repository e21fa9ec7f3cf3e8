"""A long run of every native component, for LeakSanitizer or valgrind: `python -m tests.native_paths.leak_run`.

Creates and drops many components while driving them through realistic steps, then checks the C
side's own allocation counter is back to zero. Exit status 0 means no native block outlived its
object; the sanitizer or valgrind report must, in addition, name no frame in native_paths/csrc.
"""

from __future__ import annotations

import argparse
import gc
import random
import sys

import numpy as np

from infer_prof.engine.kv_alloc import PythonKVAllocator
from infer_prof.engine.types import NewSequence, SamplingParams


def run(rounds: int, steps: int, vocab: int) -> int:
    from infer_prof.native_paths.core import NativeCore
    from infer_prof.native_paths.kv_alloc import NativeKVAllocator
    from infer_prof.native_paths.loader import require
    from infer_prof.native_paths.prepare import NativePrepare
    from infer_prof.native_paths.sampler import NativeSampler
    from infer_prof.native_paths.scheduler import NativeScheduler

    _, lib = require()
    rng = random.Random(0)
    logits_rng = np.random.default_rng(0)
    for round_index in range(rounds):
        scheduler = NativeScheduler(4, 16, 64, "priority" if round_index % 2 else "fcfs")
        allocator = NativeKVAllocator(64, 4)
        mirror = PythonKVAllocator(64, 4)  # the free-block count the scheduler plans against
        sampler = NativeSampler()
        prepare = NativePrepare(4)
        core = NativeCore(64, 4, 16, 64, "priority" if round_index % 2 else "fcfs")  # the same steps, fused
        finished: list[int] = []
        next_id = round_index * 10_000
        for _ in range(steps):
            arrivals = []
            for _ in range(rng.choice([0, 1, 2])):
                params = SamplingParams(
                    temperature=rng.choice([0.0, 0.8]),
                    top_k=rng.choice([0, 20]),
                    top_p=rng.choice([1.0, 0.9]),
                    repetition_penalty=rng.choice([1.0, 1.2]),
                    frequency_penalty=rng.choice([0.0, 0.3]),
                    seed=next_id,
                )
                prompt = [rng.randrange(vocab) for _ in range(rng.randint(1, 20))]
                arrivals.append(NewSequence(next_id, len(prompt), 8))
                sampler.add(next_id, params, prompt[:8])
                prepare.add(next_id, prompt)
                core.prepare.add(next_id, prompt)
                next_id += 1
            plan = scheduler.schedule(arrivals, finished, mirror.num_free_blocks)
            mirror.step(plan.frees, plan.grow_seq_ids, plan.grow_num_blocks, plan.seq_ids)
            tables = allocator.step(plan.frees, plan.grow_seq_ids, plan.grow_num_blocks, plan.seq_ids)
            core_plan = core.scheduler.schedule(arrivals, finished, 0)
            core_tables = core.kv_alloc.step(
                core_plan.frees, core_plan.grow_seq_ids, core_plan.grow_num_blocks, core_plan.seq_ids
            )
            if len(plan.seq_ids):
                prepare.prepare(plan, tables)
                core.prepare.prepare(core_plan, core_tables)
            sampling = plan.seq_ids[plan.samples].tolist()
            logits = logits_rng.standard_normal((len(sampling), vocab)).astype(np.float32)
            tokens = sampler.sample(logits, sampling)
            if tokens:
                prepare.append_sampled(tokens)
                core.prepare.append_sampled(tokens)
            finished = [seq_id for seq_id in sampling if rng.random() < 0.15]
            for seq_id in finished:
                sampler.remove(seq_id)
                prepare.remove(seq_id)
                core.prepare.remove(seq_id)
        del (
            scheduler,
            allocator,
            sampler,
            prepare,
            core,
        )  # dropped, not closed: weakref.finalize must free them
        gc.collect()
        if lib.np_live_allocations() != 0:
            print(
                f"round {round_index}: {lib.np_live_allocations()} native blocks still allocated",
                file=sys.stderr,
            )
            return 1
    print(f"{rounds} rounds of {steps} steps: every native allocation was freed")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--vocab", type=int, default=2000)
    args = parser.parse_args()
    return run(args.rounds, args.steps, args.vocab)


if __name__ == "__main__":
    sys.exit(main())
