"""A q4_1 decode step's layers in one C call against their Python twin, engine.llama's run_layers op by op on
the same C linears and attention: the same logits and KV writes over random models and steps; a sequence's
bits independent of its step's other rows and of the thread count; bad steps refused before any write."""

from __future__ import annotations

import dataclasses

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

BLOCK_SIZE = 4


def kernels(one_call: bool) -> ModelKernels:
    from infer_prof.native_paths import block_linear, decode_attention, decode_layers

    return ModelKernels(
        block_linear=block_linear.kernel(),
        decode_attention=decode_attention.kernel(),
        decode_layers=decode_layers.kernel() if one_call else None,
    )


def config_of(n_heads: int, n_kv: int, head_dim: int, hidden: int, n_layers: int = 2) -> ModelConfig:
    return ModelConfig(
        "t",
        vocab_size=97,
        dim=n_heads * head_dim,
        n_layers=n_layers,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        hidden_dim=hidden,
        context_length=512,
    )


def decode(model: LlamaModel, prompts: list[list[int]], steps: list[list[int]], blocks: int) -> torch.Tensor:
    """Logits of a prefill of `prompts`, then of each step feeding the given token per sequence; the
    sequences' blocks interleaved in the pool (sequence i owns blocks i, i + B, ...)."""
    batch = len(prompts)
    model.allocate_kv_cache(batch * blocks, BLOCK_SIZE)
    table = np.ascontiguousarray(np.arange(batch * blocks, dtype=np.int32).reshape(blocks, batch).T)
    rows = [model.forward(build_model_input(prompts, [0] * batch, [True] * batch, table, BLOCK_SIZE))]
    positions = [len(p) for p in prompts]
    for ids in steps:
        rows.append(
            model.forward(build_model_input([[i] for i in ids], positions, [True] * batch, table, BLOCK_SIZE))
        )
        positions = [p + 1 for p in positions]
    return torch.stack(rows)


@settings(max_examples=max(FUZZ_EXAMPLES // 8, 10), deadline=None)
@given(
    shape=st.sampled_from([(4, 2, 16, 96), (9, 3, 8, 40), (2, 2, 32, 64), (6, 1, 10, 33)]),
    prompt_lens=st.lists(st.integers(1, 9), min_size=1, max_size=4),
    n_steps=st.integers(1, 6),
    seed=st.integers(0, 2**31),
)
def test_one_call_decodes_as_the_ops_do(shape, prompt_lens, n_steps, seed) -> None:
    config = config_of(*shape)
    weights = synthetic_weights(config, seed=seed % 1000)
    ops = LlamaModel(config, weights, dtype="q4_1", kernels=kernels(one_call=False))
    one = LlamaModel(config, weights, dtype="q4_1", kernels=kernels(one_call=True))
    tokens = torch.randint(
        0, config.vocab_size, (64,), generator=torch.Generator().manual_seed(seed)
    ).tolist()
    prompts = [tokens[i : i + n] for i, n in enumerate(prompt_lens)]
    steps = [tokens[40 + s : 40 + s + len(prompts)] for s in range(n_steps)]
    blocks = -(-(max(prompt_lens) + n_steps) // BLOCK_SIZE)
    want, got = decode(ops, prompts, steps, blocks), decode(one, prompts, steps, blocks)
    if min(prompt_lens) > 1:  # a prefill runs op by op in both (a one-token prompt is a decode step)
        assert torch.equal(got[0], want[0])
    # C's norm, rotary and SiLU round differently from torch's; a last-bit difference can move an activation
    # across an 8-bit step in the next linear, so the two agree closely rather than exactly.
    assert float((got - want).abs().max()) < 0.05 * float(want.abs().max())
    for pool_got, pool_want in zip(one.kv_pools, ops.kv_pools):
        assert float((pool_got - pool_want).abs().max()) < 0.05 * float(pool_want.abs().max()) + 1e-6
    assert float((got.argmax(-1) == want.argmax(-1)).float().mean()) >= 0.75


def bound_layers(config: ModelConfig, num_blocks: int, seed: int = 0):
    """A q4_1 model on the one-call kernel, its pools random, and its layers bound: (model, run)."""
    model = LlamaModel(config, synthetic_weights(config, seed=seed), dtype="q4_1", kernels=kernels(True))
    model.allocate_kv_cache(num_blocks, BLOCK_SIZE)
    generator = torch.Generator().manual_seed(seed)
    for pool in model.kv_pools:
        pool.copy_(torch.randn(pool.shape, generator=generator))
    plan = model.decode_plan(
        torch.zeros(1, dtype=torch.int64),
        torch.zeros(1, dtype=torch.int64),
        torch.zeros(1, 1, dtype=torch.int64),
        torch.ones(1, dtype=torch.int64),
    )
    run = model._native_layers(plan)
    assert run is not None
    return model, run


def rope_of(model: LlamaModel, positions: list[int]) -> torch.Tensor:
    return torch.view_as_real(model._rope_table(torch.tensor(positions)))


SMALL = config_of(4, 2, 16, 96)


def step(model, run, rows: list[int], x_all, positions, slots, tables, lens):
    """Runs the layers over the chosen rows of a step; their new x."""
    pick = torch.tensor(rows)
    x = x_all[pick].clone()
    run(x, rope_of(model, [positions[r] for r in rows]).contiguous(), slots[pick], tables[pick], lens[pick])
    return x


def test_a_sequence_gets_the_same_bits_whatever_else_is_in_its_step() -> None:
    """So a request's tokens do not depend on which others the scheduler batched it with."""
    x_all = torch.randn(3, SMALL.dim, generator=torch.Generator().manual_seed(1))
    positions, lens = [20, 5, 33], torch.tensor([21, 6, 34])
    tables = torch.arange(30).view(3, 10)
    slots = torch.tensor(
        [tables[b, p // BLOCK_SIZE] * BLOCK_SIZE + p % BLOCK_SIZE for b, p in enumerate(positions)]
    )
    model, run = bound_layers(SMALL, 30)
    together = step(model, run, [0, 1, 2], x_all, positions, slots, tables, lens)
    model, run = bound_layers(SMALL, 30)  # fresh pools: the same random contents
    alone = step(model, run, [1], x_all, positions, slots, tables, lens)
    assert torch.equal(together[1], alone[0])


def test_threads_change_no_bit() -> None:
    x_all = torch.randn(2, SMALL.dim, generator=torch.Generator().manual_seed(2))
    positions, lens, tables = [9, 30], torch.tensor([10, 31]), torch.arange(20).view(2, 10)
    slots = torch.tensor([2 * BLOCK_SIZE + 1, 17 * BLOCK_SIZE + 2])
    previous, outputs, pools = torch.get_num_threads(), [], []
    try:
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            model, run = bound_layers(SMALL, 20)
            outputs.append(step(model, run, [0, 1], x_all, positions, slots, tables, lens))
            pools.append(torch.stack(model.kv_pools))
    finally:
        torch.set_num_threads(previous)
    assert torch.equal(outputs[0], outputs[1]) and torch.equal(outputs[0], outputs[2])
    assert torch.equal(pools[0], pools[1]) and torch.equal(pools[0], pools[2])


@pytest.mark.parametrize(
    "slot, table, length",
    [
        (80, [0, 1], 5),  # a slot past the pool's 20 blocks of 4
        (-1, [0, 1], 5),  # a negative slot
        (4, [0, 1], 9),  # longer than its table holds (2 blocks of 4)
        (4, [0, 20], 6),  # a used block past the pool
        (4, [-1, 1], 5),  # a negative block id
        (4, [0, 1], 0),  # nothing to attend to
    ],
)
def test_bad_steps_are_refused_before_any_write(slot, table, length) -> None:
    from infer_prof.native_paths.loader import require

    model, run = bound_layers(SMALL, 20)
    pools_before = torch.stack(model.kv_pools).clone()
    x = torch.randn(1, SMALL.dim)
    x_before, live = x.clone(), require()[1].np_live_allocations()
    with pytest.raises(ValueError, match="refused"):
        run(x, rope_of(model, [4]), torch.tensor([slot]), torch.tensor([table]), torch.tensor([length]))
    assert torch.equal(x, x_before) and torch.equal(torch.stack(model.kv_pools), pools_before)
    assert require()[1].np_live_allocations() == live


def test_binding_checks_the_layers_and_each_call_checks_its_buffers() -> None:
    from infer_prof.native_paths.decode_layers import kernel

    model, run = bound_layers(SMALL, 8)
    packed = model.packed_layers()
    with pytest.raises(ValueError, match="all 2 layers"):
        kernel()(SMALL, packed[:1])
    packed[1] = dataclasses.replace(packed[1], pool=packed[1].pool[:4].contiguous())
    with pytest.raises(ValueError, match="of one shape"):
        kernel()(SMALL, packed)
    with pytest.raises(ValueError, match="contiguous float32"):
        run(
            torch.randn(1, SMALL.dim).double(),
            rope_of(model, [0]),
            torch.tensor([0]),
            torch.tensor([[0]]),
            torch.tensor([1]),
        )
    with pytest.raises(ValueError, match="slots, lengths and table rows"):
        run(
            torch.randn(1, SMALL.dim),
            rope_of(model, [0]),
            torch.tensor([0, 1]),
            torch.tensor([[0]]),
            torch.tensor([1]),
        )


def test_mixed_steps_run_op_by_op_and_decode_steps_in_one_call() -> None:
    """Only a step in which every sequence decodes runs natively; a prefill beside a decode takes the ops."""
    from infer_prof.native_paths.decode_layers import OP_NAME

    model = LlamaModel(SMALL, synthetic_weights(SMALL, seed=3), dtype="q4_1", kernels=kernels(True))
    model.allocate_kv_cache(8, BLOCK_SIZE)
    table = np.arange(8, dtype=np.int32).reshape(2, 4)
    names = []
    for prompts, starts in (([[1, 2, 3]], [0]), ([[4], [5, 6]], [3, 0]), ([[7], [8]], [4, 2])):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
            model.forward(build_model_input(prompts, starts, [True] * len(prompts), table[: len(prompts)], 4))
        names.append([event.name for event in profile.events()])
    assert [n.count(OP_NAME) for n in names] == [0, 0, 1]
    assert "infer_prof::block_linear" in names[1] and "infer_prof::decode_attention" not in names[2]


def test_generate_decodes_a_q4_model_in_one_call_a_step() -> None:
    """The CLI's path: the engine's model binds the layers after it sizes its KV cache, and decodes."""
    from infer_prof.engine.loader import load_model
    from infer_prof.native_paths.kernels import model_kernels

    loaded = load_model("synthetic:tiny", dtype="q4_1", kernels=model_kernels("q4_1"))
    assert loaded.model.weight_format == "q4_1"
    ids = loaded.tokenizer.encode("hello")
    logits = decode(loaded.model, [ids], [[3], [4], [5]], -(-(len(ids) + 3) // BLOCK_SIZE))
    assert loaded.model._decode_layers is not None and bool(torch.isfinite(logits).all())
