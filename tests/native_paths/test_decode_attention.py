"""The C decode attention against its Python twin, engine.llama's gather and SDPA: the same outputs over
random paged pools, block tables and lengths; bad tables refused; a model's decode steps the same either way."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_prof.engine.llama import LlamaModel
from infer_prof.engine.loader import synthetic_weights
from infer_prof.engine.model_runner import build_model_input
from infer_prof.engine.types import ModelConfig, ModelKernels
from tests.native_paths.support import FUZZ_EXAMPLES, requires_native

pytestmark = requires_native


def native(simd: int = 1):
    from infer_prof.native_paths.decode_attention import kernel

    return kernel(simd)


def model_with_pool(n_heads, n_kv, head_dim, num_blocks, block_size, seed):
    """A float32 model of that shape (no kernels) whose layer-0 pool holds random keys and values."""
    config = ModelConfig(
        "t",
        vocab_size=64,
        dim=n_heads * head_dim,
        n_layers=1,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        hidden_dim=32,
        context_length=4096,
    )
    model = LlamaModel(config, synthetic_weights(config, seed=seed))
    model.allocate_kv_cache(num_blocks, block_size)
    model.kv_pools[0].copy_(
        torch.randn(model.kv_pools[0].shape, generator=torch.Generator().manual_seed(seed))
    )
    return model


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(
    heads=st.sampled_from(
        [(1, 1), (4, 2), (9, 3), (8, 8), (16, 1), (17, 1)]
    ),  # 17 per KV head: the portable loop
    head_dim=st.sampled_from([2, 8, 64]),
    block_size=st.sampled_from([1, 4, 16]),
    lens=st.lists(st.integers(1, 200), min_size=1, max_size=6),  # chunks of 64 positions, and a part
    threads=st.integers(1, 3),
    simd=st.sampled_from([0, 1]),
    seed=st.integers(0, 2**31),
)
def test_the_c_attention_gives_the_twins_output(
    heads, head_dim, block_size, lens, threads, simd, seed
) -> None:
    n_heads, n_kv = heads
    width = -(-max(lens) // block_size)
    num_blocks = width * len(lens) + 3
    model = model_with_pool(n_heads, n_kv, head_dim, num_blocks, block_size, seed % 1000)
    g = torch.Generator().manual_seed(seed)
    # Each sequence's blocks anywhere in the pool; past its length, any valid id (the plan pads with 0).
    tables = torch.randperm(num_blocks, generator=g)[: width * len(lens)].view(len(lens), width)
    lengths = torch.tensor(lens)
    q = torch.randn(len(lens), n_heads * head_dim, generator=g)
    plan = model.decode_plan(lengths - 1, lengths - 1, tables, lengths)
    want = model._decode_attention(q, model.kv_pools[0], plan)
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        got = native(simd)(q, model.kv_pools[0], tables, lengths, n_kv)
    finally:
        torch.set_num_threads(previous)
    assert torch.allclose(got, want, rtol=1e-4, atol=1e-5)


def test_threads_change_no_bit() -> None:
    model = model_with_pool(9, 3, 64, 40, 16, seed=1)
    tables = torch.arange(40).view(5, 8)
    lengths, q = torch.tensor([1, 17, 128, 64, 90]), torch.randn(5, 9 * 64)
    previous, outputs = torch.get_num_threads(), []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            outputs.append(native()(q, model.kv_pools[0], tables, lengths, 3))
    finally:
        torch.set_num_threads(previous)
    assert torch.equal(outputs[0], outputs[1])


@pytest.mark.parametrize(
    "tables, lengths",
    [
        ([[0, 1]], [33]),  # longer than its table holds (2 blocks of 16)
        ([[0, 7]], [20]),  # a used block past the pool's 4
        ([[-1, 0]], [5]),  # a negative block id
        ([[0, 1]], [0]),  # nothing to attend to
    ],
)
def test_bad_tables_are_refused(tables, lengths) -> None:
    from infer_prof.native_paths.loader import require

    model = model_with_pool(4, 2, 8, 4, 16, seed=2)
    before = require()[1].np_live_allocations()
    with pytest.raises(ValueError, match="refused"):
        native()(torch.randn(1, 32), model.kv_pools[0], torch.tensor(tables), torch.tensor(lengths), 2)
    assert require()[1].np_live_allocations() == before


def test_a_model_decodes_the_same_on_the_c_attention() -> None:
    from tests.engine.test_quantize import CONFIG

    weights = synthetic_weights(CONFIG, seed=5)
    twin, c = (
        LlamaModel(CONFIG, weights),
        LlamaModel(CONFIG, weights, kernels=ModelKernels(decode_attention=native())),
    )
    prompts, steps = [[5, 17, 42, 8, 99, 23], [7, 3]], 20
    logits = {}
    for name, model in (("twin", twin), ("c", c)):
        model.allocate_kv_cache(16, 4)
        table = np.ascontiguousarray(np.arange(16, dtype=np.int32).reshape(8, 2).T)  # even blocks, odd blocks
        out = model.forward(build_model_input(prompts, [0, 0], [True, True], table, 4))
        ids, positions, rows = out.argmax(-1).tolist(), [len(p) for p in prompts], [out]
        for _ in range(steps - 1):  # both decode together, their blocks interleaved in the pool
            out = model.forward(build_model_input([[i] for i in ids], positions, [True, True], table, 4))
            ids, positions = out.argmax(-1).tolist(), [p + 1 for p in positions]
            rows.append(out)
        logits[name] = torch.stack(rows)
    assert torch.allclose(logits["c"], logits["twin"], rtol=1e-4, atol=1e-4)
    assert torch.equal(logits["c"].argmax(-1), logits["twin"].argmax(-1))
