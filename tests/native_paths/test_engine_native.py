"""The whole engine with any C twins switched on (separately or as the fused core) serves exactly what it serves with the Python twins."""

from __future__ import annotations

import random

import pytest

from infer_prof.engine.config import EngineConfig, python_components
from infer_prof.engine.engine import Engine
from infer_prof.engine.types import SamplingParams
from infer_prof.native_paths.toggles import every_combination, make_components, parse_native
from tests.engine.fakes import FakeModel, FakeTokenizer
from tests.native_paths.support import requires_native


def serve(
    native: str, prompts: list[list[int]], params: list[SamplingParams], policy: str
) -> tuple[list[list[int]], int]:
    model = FakeModel()
    config = EngineConfig(block_size=4, kv_blocks=40, max_batch=6, max_batched_tokens=48, policy=policy)
    scheduler, kv_alloc, sampler = python_components(config, model)
    prepare = None
    if native != "none":
        parts = make_components(
            native,
            num_blocks=kv_alloc.num_blocks,
            block_size=config.block_size,
            max_batch=config.max_batch,
            max_batched_tokens=config.max_batched_tokens,
            policy=policy,
        )
        assert parts.native == parse_native(native)
        scheduler, kv_alloc, sampler, prepare = parts.scheduler, parts.kv_alloc, parts.sampler, parts.prepare
    engine = Engine(
        model,
        FakeTokenizer(model.config.vocab_size),
        scheduler=scheduler,
        kv_alloc=kv_alloc,
        sampler=sampler,
        config=config,
        prepare=prepare,
    )
    # Submitted before the engine starts: every run sees the same batches, so preemptions match too.
    handles = [engine.submit(prompt, p) for prompt, p in zip(prompts, params)]
    with engine:
        outputs = [handle.result(timeout=60).token_ids for handle in handles]
    assert engine.kv_alloc.num_free_blocks == kv_alloc.num_blocks
    return outputs, sum(record.preemptions for record in engine.step_records)


def workload() -> tuple[list[list[int]], list[SamplingParams]]:
    rng = random.Random(5)
    prompts = [[rng.randrange(3, 256) for _ in range(rng.randrange(3, 30))] for _ in range(14)]
    params = [
        SamplingParams(
            temperature=rng.choice([0.0, 0.7, 1.0]),
            top_k=rng.choice([0, 20]),
            top_p=rng.choice([1.0, 0.9]),
            repetition_penalty=rng.choice([1.0, 1.3]),
            max_tokens=rng.randrange(4, 24),
            seed=i,
        )
        for i in range(14)
    ]
    return prompts, params


@requires_native
@pytest.mark.parametrize("policy", ["fcfs", "priority"])
@pytest.mark.parametrize("native", ["all", "core,sampler"])
def test_native_engine_serves_the_same_tokens(native: str, policy: str) -> None:
    prompts, params = workload()
    # A 40-block pool for up to 6 sequences of up to 53 tokens: preemption happens.
    native_run, python_run = serve(native, prompts, params, policy), serve("none", prompts, params, policy)
    assert native_run == python_run and python_run[1] > 0


@requires_native
def test_every_native_combination_serves_the_same_tokens() -> None:
    prompts, params = workload()
    python_run = serve("none", prompts, params, "fcfs")
    for combination in every_combination():
        assert serve(",".join(sorted(combination)), prompts, params, "fcfs") == python_run, sorted(
            combination
        )
