"""The Llama forward: SmolLM2's greedy answer, and the paged forward against a dense reference written here."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from infer_prof.engine.llama import LlamaModel
from infer_prof.engine.loader import synthetic_weights
from infer_prof.engine.model_runner import build_model_input
from infer_prof.engine.types import Model, ModelConfig

# llama.cpp's greedy answer to the chat-templated "What is the capital of France?":
# "The capital of France is Paris.<|im_end|>"
LLAMA_CPP_FRANCE_ANSWER = [504, 3575, 282, 4649, 314, 7042, 30, 2]

CONFIG = ModelConfig(
    "test", vocab_size=300, dim=64, n_layers=3, n_heads=8, n_kv_heads=2, hidden_dim=96, context_length=512
)
BLOCK = 4


@pytest.fixture(scope="module")
def model() -> LlamaModel:
    return LlamaModel(CONFIG, synthetic_weights(CONFIG, seed=3))


# ------------------------------------------------------------------ an independent dense reference


def unpermute(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's Q/K row permutation so that rotate-half rope applies (the HF layout)."""
    out, inp = w.shape
    hd = out // n_heads
    return w.reshape(n_heads, hd // 2, 2, inp).swapaxes(1, 2).reshape(out, inp)


def dense_reference(model: LlamaModel, ids: list[int]) -> torch.Tensor:
    """float64 logits for every position of one sequence: HF-style rotate-half rope, no cache."""
    c = model.config
    hd, n = c.head_dim, len(ids)
    f64 = torch.float64

    def norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + c.norm_eps) * w.to(f64)

    inv_freq = 1.0 / (c.rope_theta ** (torch.arange(0, hd, 2, dtype=f64) / hd))
    angles = torch.arange(n, dtype=f64)[:, None] * inv_freq
    cos, sin = torch.cat([angles.cos()] * 2, -1)[:, None], torch.cat([angles.sin()] * 2, -1)[:, None]

    def rope(x: torch.Tensor) -> torch.Tensor:
        half = torch.cat([-x[..., hd // 2 :], x[..., : hd // 2]], -1)
        return x * cos + half * sin

    x = model.embedding.to(f64)[torch.tensor(ids)]
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    for layer in model.layers:
        wq, wk, wv = layer.qkv.to(f64).split([c.n_heads * hd, c.n_kv_heads * hd, c.n_kv_heads * hd])
        h = norm(x, layer.attn_norm)
        q = rope((h @ unpermute(wq, c.n_heads).T).view(n, c.n_heads, hd))
        k = rope((h @ unpermute(wk, c.n_kv_heads).T).view(n, c.n_kv_heads, hd))
        v = (h @ wv.T).view(n, c.n_kv_heads, hd)
        group = c.n_heads // c.n_kv_heads
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        scores = torch.einsum("qhd,khd->hqk", q, k) / hd**0.5
        weights = scores.masked_fill(~causal, float("-inf")).softmax(-1)
        x = x + torch.einsum("hqk,khd->qhd", weights, v).reshape(n, -1) @ layer.attn_out.to(f64).T
        h = norm(x, layer.ffn_norm)
        gate, up = (h @ layer.gate_up.to(f64).T).split(c.hidden_dim, -1)
        x = x + (F.silu(gate) * up) @ layer.down.to(f64).T
    return norm(x, model.output_norm) @ model.head.to(f64).T


# ------------------------------------------------------------------ helpers driving the paged model


def scattered_tables(lengths: list[int], num_blocks: int, seed: int = 0) -> np.ndarray:
    """Block tables with blocks drawn at random from the pool (not contiguous), padded with -1."""
    needed = [-(-n // BLOCK) for n in lengths]
    blocks = np.random.default_rng(seed).permutation(num_blocks)[: sum(needed)]
    tables = np.full((len(lengths), max(needed)), -1, dtype=np.int32)
    start = 0
    for i, k in enumerate(needed):
        tables[i, :k] = blocks[start : start + k]
        start += k
    return tables


def random_prompts(lengths: list[int], seed: int = 0) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, CONFIG.vocab_size, n).tolist() for n in lengths]


def greedy(
    model: LlamaModel, prompt: list[int], max_new: int, stop: frozenset[int] = frozenset()
) -> list[int]:
    """The simplest engine: one sequence, a contiguous block table, argmax each step."""
    blocks = -(-(len(prompt) + max_new) // 16)
    model.allocate_kv_cache(blocks, 16)
    table = np.arange(blocks, dtype=np.int32)[None]
    out: list[int] = []
    step, position = prompt, 0
    while len(out) < max_new:
        logits = model.forward(build_model_input([step], [position], [True], table, 16))
        position += len(step)
        token = int(logits[0].argmax())
        out.append(token)
        if token in stop:
            break
        step = [token]
    return out


# ------------------------------------------------------------------ tests


@pytest.mark.slow
def test_smollm2_greedy_answer_equals_llama_cpp(smollm2) -> None:  # type: ignore[no-untyped-def]
    prompt = smollm2.tokenizer.encode_chat("What is the capital of France?")
    answer = greedy(smollm2.model, prompt, max_new=12, stop=smollm2.tokenizer.stop_token_ids)
    assert answer == LLAMA_CPP_FRANCE_ANSWER
    assert smollm2.tokenizer.decode(answer) == "The capital of France is Paris."


def test_is_an_engine_model(model: LlamaModel) -> None:
    assert isinstance(model, Model)
    model.allocate_kv_cache(10, BLOCK)
    assert model.k_cache(0).shape == (10, BLOCK, CONFIG.n_kv_heads, CONFIG.head_dim)
    assert model.v_cache(CONFIG.n_layers - 1).shape == (10, BLOCK, CONFIG.n_kv_heads, CONFIG.head_dim)
    assert (
        model.kv_bytes_per_block(BLOCK)
        == 2 * CONFIG.n_layers * BLOCK * CONFIG.n_kv_heads * CONFIG.head_dim * 4
    )
    assert sum(p.numel() * p.element_size() for p in model.kv_pools) == 10 * model.kv_bytes_per_block(BLOCK)


def test_mixed_paged_batches_equal_the_dense_reference(model: LlamaModel) -> None:
    """Step 1 prefills four sequences of different lengths together; step 2 mixes decodes with a
    chunked prefill (cached prefix + several new tokens) and a sequence that is not sampled."""
    lengths = [7, 1, 13, 4]
    prompts = random_prompts(lengths)
    extra = [[5], [6], [7, 8, 9, 10, 11], [12]]
    tables = scattered_tables([n + len(e) for n, e in zip(lengths, extra)], num_blocks=40)
    model.allocate_kv_cache(40, BLOCK)

    first = model.forward(build_model_input(prompts, [0] * 4, [True] * 4, tables, BLOCK))
    second = model.forward(build_model_input(extra, lengths, [True, False, True, True], tables, BLOCK))

    assert first.shape == (4, CONFIG.vocab_size) and second.shape == (3, CONFIG.vocab_size)
    assert first.dtype == torch.float32
    for i, prompt in enumerate(prompts):
        torch.testing.assert_close(
            first[i].double(), dense_reference(model, prompt)[-1], atol=2e-4, rtol=1e-4
        )
    for row, i in enumerate([0, 2, 3]):
        expected = dense_reference(model, prompts[i] + extra[i])[-1]
        torch.testing.assert_close(second[row].double(), expected, atol=2e-4, rtol=1e-4)


def test_prefill_then_decode_equals_one_long_prefill(model: LlamaModel) -> None:
    prompt = random_prompts([9], seed=4)[0]
    continuation = greedy(model, prompt, max_new=12)
    full = prompt + continuation
    model.allocate_kv_cache(8, BLOCK)
    table = scattered_tables([len(full)], num_blocks=8, seed=5)
    everything = model.forward(build_model_input([full], [0], [True], table, BLOCK))
    decoded = greedy(model, full, max_new=1)
    assert int(everything[0].argmax()) == decoded[0]
    # Logits of every decode step equal the one-shot prefill's logits at those positions.
    reference = dense_reference(model, full)
    assert reference[len(prompt) - 1 : -1].argmax(-1).tolist() == continuation
    torch.testing.assert_close(everything[0].double(), reference[-1], atol=2e-4, rtol=1e-4)


def test_a_batch_equals_each_sequence_alone(model: LlamaModel) -> None:
    lengths = [3, 11, 1, 6, 8]
    prompts = random_prompts(lengths, seed=7)
    alone = [greedy(model, p, max_new=6) for p in prompts]

    steps = 6
    tables = scattered_tables([n + steps for n in lengths], num_blocks=64, seed=8)
    model.allocate_kv_cache(64, BLOCK)
    outputs: list[list[int]] = [[] for _ in prompts]
    chunks, positions = prompts, [0] * len(prompts)
    for _ in range(steps):
        logits = model.forward(build_model_input(chunks, positions, [True] * len(prompts), tables, BLOCK))
        positions = [p + len(c) for p, c in zip(positions, chunks)]
        chunks = [[int(t)] for t in logits.argmax(-1)]
        for out, chunk in zip(outputs, chunks):
            out.extend(chunk)
    assert outputs == alone


def test_only_sampled_rows_get_logits(model: LlamaModel) -> None:
    prompts = random_prompts([5, 3], seed=9)
    tables = scattered_tables([5, 3], num_blocks=8)
    model.allocate_kv_cache(8, BLOCK)
    logits = model.forward(build_model_input(prompts, [0, 0], [False, True], tables, BLOCK))
    assert logits.shape == (1, CONFIG.vocab_size)
    torch.testing.assert_close(
        logits[0].double(), dense_reference(model, prompts[1])[-1], atol=2e-4, rtol=1e-4
    )


def test_bfloat16_model_tracks_float32() -> None:
    weights = synthetic_weights(CONFIG, seed=3)
    exact, half = LlamaModel(CONFIG, weights), LlamaModel(CONFIG, weights, dtype="bfloat16")
    assert half.kv_bytes_per_block(BLOCK) * 2 == exact.kv_bytes_per_block(BLOCK)
    prompt = random_prompts([10], seed=11)[0]
    table = np.arange(4, dtype=np.int32)[None]
    outputs = []
    for m in (exact, half):
        m.allocate_kv_cache(4, BLOCK)
        outputs.append(m.forward(build_model_input([prompt], [0], [True], table, BLOCK))[0])
    assert outputs[1].dtype == torch.float32
    assert torch.corrcoef(torch.stack(outputs))[0, 1] > 0.99


# ------------------------------------------------------------------ model_runner addressing


def test_build_model_input_addresses_every_token() -> None:
    tables = np.array([[3, -1, -1], [0, 1, -1], [5, 6, 2]], dtype=np.int32)
    chunks, starts = [[11, 12, 13], [14], [15, 16]], [0, 7, 9]
    inp = build_model_input(chunks, starts, [True, True, False], tables, 4)
    expected_slots = []
    for table, chunk, start in zip(tables, chunks, starts):
        for position in range(start, start + len(chunk)):
            expected_slots.append(int(table[position // 4]) * 4 + position % 4)
    assert inp.token_ids.tolist() == [11, 12, 13, 14, 15, 16]
    assert inp.positions.tolist() == [0, 1, 2, 7, 9, 10]
    assert inp.slot_mapping.tolist() == expected_slots
    assert inp.query_lens == [3, 1, 2] and inp.context_lens == [3, 8, 11]
    assert inp.sample_indices.tolist() == [2, 3]
    assert inp.block_tables.dtype == torch.int32 and inp.token_ids.dtype == torch.int64
    tables[0, 0] = 9  # the input holds its own copy of the tables
    assert inp.block_tables[0, 0] == 3


def test_build_model_input_refuses_tokens_without_a_block() -> None:
    with pytest.raises(ValueError, match="padding"):
        build_model_input([[1]], [4], [True], np.array([[3, -1]], dtype=np.int32), 4)
    with pytest.raises(ValueError, match="past"):
        build_model_input([[1]], [8], [True], np.array([[3, 4]], dtype=np.int32), 4)
    with pytest.raises(ValueError, match="mismatch"):
        build_model_input([[1], [2]], [0], [True], np.array([[3]], dtype=np.int32), 4)


def test_padded_rows_are_exact_for_decode_batches_and_bounded_above() -> None:
    from infer_prof.engine.llama import EXACT_ROWS, padded_rows, row_buckets

    assert [padded_rows(rows) for rows in (1, EXACT_ROWS, EXACT_ROWS + 1, 30, 65)] == [
        1,
        EXACT_ROWS,
        18,
        30,
        72,
    ]
    for rows in range(1, 5000):
        padded = padded_rows(rows)
        assert rows <= padded <= max(rows, rows * 1.125 + 1), rows
    # The point: few shapes for oneDNN's per-shape caches, however varied the step's token counts.
    assert (
        row_buckets(512) == sorted({padded_rows(rows) for rows in range(1, 513)})
        and len(row_buckets(512)) == 56
    )
    assert len({padded_rows(rows) for rows in range(1, 2**20 + 1)}) == 144


def test_the_linear_gives_each_row_the_same_result_padded_or_not() -> None:
    from infer_prof.engine.llama import _select_linear

    linear = _select_linear()
    torch.manual_seed(0)
    w = torch.randn(96, 64)
    for rows in (1, 65, 73, 200):  # exact, and padded to 72, 80 and 208 rows
        x = torch.randn(rows, 64)
        out = linear(x, w)
        assert out.shape == (rows, 96)
        torch.testing.assert_close(out, x @ w.t(), rtol=1e-4, atol=1e-4)
