"""CUDA-graph decode buckets as pure logic, and their padded static computation run eagerly on the CPU against the eager forward."""

from __future__ import annotations

import pytest
import torch

from infer_prof.engine.config import EngineConfig, python_components
from infer_prof.engine.cuda_graphs import DecodeGraphs, batch_buckets, block_buckets, bucket_for
from infer_prof.engine.engine import Engine
from infer_prof.engine.llama import LlamaModel
from infer_prof.engine.loader import synthetic_weights
from infer_prof.engine.model_runner import build_model_input
from infer_prof.engine.tokenizer import Tokenizer
from infer_prof.engine.types import ModelConfig, SamplingParams

CONFIG = ModelConfig(
    "test", vocab_size=300, dim=64, n_layers=2, n_heads=8, n_kv_heads=2, hidden_dim=96, context_length=256
)
BLOCK = 4


def test_batch_buckets_follow_vllms_capture_sizes_and_cover_the_largest_batch() -> None:
    assert batch_buckets(32) == [1, 2, 4, 8, 16, 24, 32]
    assert batch_buckets(5) == [1, 2, 4, 5]
    assert batch_buckets(1) == [1]
    assert batch_buckets(20) == [1, 2, 4, 8, 16, 20]
    assert block_buckets(128) == [1, 2, 4, 8, 16, 32, 64, 128] and block_buckets(100)[-2:] == [64, 100]
    assert block_buckets(1) == [1]


@pytest.mark.parametrize(("value", "expected"), [(1, 1), (3, 4), (9, 16), (24, 24), (25, 32), (33, None)])
def test_a_value_takes_the_smallest_bucket_holding_it(value: int, expected: int | None) -> None:
    assert bucket_for(value, batch_buckets(32)) == expected


def _models() -> tuple[LlamaModel, LlamaModel]:
    weights = synthetic_weights(CONFIG, seed=5)
    eager, graphed = LlamaModel(CONFIG, weights), LlamaModel(CONFIG, weights)
    graphed.graphs = DecodeGraphs(
        graphed, max_batch=8, max_blocks=CONFIG.context_length // BLOCK, capture=False
    )
    for model in (eager, graphed):
        model.allocate_kv_cache(40, BLOCK)
    return eager, graphed


def test_padded_decode_steps_give_the_eager_logits_and_never_touch_a_real_block() -> None:
    eager, graphed = _models()
    assert graphed.num_blocks == 41  # the pool plus the scratch block the padding rows write into
    prompts = [[5, 6, 7, 8, 9], [10, 11, 12], [13, 14, 15, 16, 17, 18, 19]]
    tables = [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    prefill = build_model_input(prompts, [0, 0, 0], [True] * 3, tables, BLOCK)
    for model in (eager, graphed):
        model.forward(prefill)
    lengths = [len(p) for p in prompts]
    for step in range(6):  # three sequences pad to a batch of 4; contexts grow across a block boundary
        tokens = [[20 + step + i] for i in range(3)]
        decode = build_model_input(tokens, lengths, [True] * 3, tables, BLOCK)
        expected, got = eager.forward(decode), graphed.forward(decode)
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
        lengths = [n + 1 for n in lengths]
    for layer in range(CONFIG.n_layers):  # the real blocks hold the same K/V; only the scratch block differs
        torch.testing.assert_close(graphed.kv_pools[layer][:40], eager.kv_pools[layer])
    stats = graphed.graphs.stats
    assert stats.replayed_steps == 6 and stats.eager_steps == 1  # the prefill ran eagerly
    assert sorted(map(tuple, stats.buckets)) == [
        (4, 2),
        (4, 4),
    ]  # contexts 8 -> 13: 2 blocks of 4, then 3-4 (bucket 4)


def test_steps_past_the_largest_bucket_or_with_unsampled_rows_run_eagerly() -> None:
    _, graphed = _models()
    tables = [[i] for i in range(9)]
    graphed.forward(build_model_input([[1]] * 9, [0] * 9, [True] * 9, tables, BLOCK))  # 9 > max batch 8
    graphed.forward(build_model_input([[1], [2]], [0, 0], [True, False], tables[:2], BLOCK))
    assert graphed.graphs.stats.replayed_steps == 0 and graphed.graphs.stats.eager_steps == 2


def test_an_engine_on_graphs_gives_the_same_greedy_tokens() -> None:
    outputs = []
    for graphs in (False, True):
        model = LlamaModel(CONFIG, synthetic_weights(CONFIG, seed=9))
        if graphs:
            model.graphs = DecodeGraphs(
                model, max_batch=4, max_blocks=CONFIG.context_length // BLOCK, capture=False
            )
        config = EngineConfig(block_size=BLOCK, max_batch=4, max_batched_tokens=64, kv_blocks=64)
        scheduler, kv_alloc, sampler = python_components(config, model)
        engine = Engine(
            model,
            Tokenizer.byte_level(CONFIG.vocab_size),
            scheduler=scheduler,
            kv_alloc=kv_alloc,
            sampler=sampler,
            config=config,
        )
        params = SamplingParams(max_tokens=12, ignore_eos=True)
        with engine:
            handles = [engine.submit([3 + i, 4 + i, 5 + i, 6], params) for i in range(6)]
            outputs.append([handle.result(timeout=60).token_ids for handle in handles])
        if graphs:
            assert model.graphs.stats.replayed_steps > 0
    assert outputs[0] == outputs[1]


def test_the_device_copy_of_a_steps_input_changes_no_logit() -> None:
    """The GPU path's host-to-device copy (forced on here, a no-op move on the CPU) keeps every field."""
    weights = synthetic_weights(CONFIG, seed=5)
    plain, copying = LlamaModel(CONFIG, weights), LlamaModel(CONFIG, weights)
    copying._on_device = True
    for model in (plain, copying):
        model.allocate_kv_cache(16, BLOCK)
    mixed = build_model_input([[5, 6, 7], [8]], [0, 0], [True, True], [[0, 1], [2, 3]], BLOCK)
    torch.testing.assert_close(copying.forward(mixed), plain.forward(mixed))
