"""np_sampler_draw_rows against its Python twin (engine/sampler_rows.py): the same token for every row of another engine's batch, and draws that follow the truncated softmax."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from infer_prof.engine.sampler_rows import draw_rows
from infer_prof.profiler.checks.sampler_distribution import chi_square, truncated_softmax
from tests.native_paths.spec_reference import seed_for
from tests.native_paths.support import requires_native, twin_params


def python_twin(logits, top_k, top_p, seeds):  # type: ignore[no-untyped-def]
    return draw_rows(
        logits,
        None if top_k is None else top_k.tolist(),
        None if top_p is None else top_p.tolist(),
        seeds.tolist(),
    )


def native_twin(logits, top_k, top_p, seeds):  # type: ignore[no-untyped-def]
    from infer_prof.native_paths.sampler_rows import NativeRowSampler

    return NativeRowSampler().draw(logits, top_k, top_p, seeds).tolist()


def signed(seed: int) -> int:
    """A uint64 seed as the int64 a tensor holds (the same 64 bits)."""
    return seed - 2**64 if seed >= 2**63 else seed


parametrize_twin = pytest.mark.parametrize("draw", twin_params(python_twin, native_twin))


@requires_native
@pytest.mark.parametrize("vocab", [7, 128, 300, 2_000])
def test_the_twins_draw_the_same_tokens_for_mixed_rows(vocab: int) -> None:
    generator = torch.Generator().manual_seed(vocab)
    rows = 24
    logits = torch.randn(rows, vocab, generator=generator) * 3
    # vLLM's columns: "no top-k" is the vocabulary size, "no top-p" is 1
    top_k = torch.tensor([[0, 1, 5, vocab, 50][i % 5] for i in range(rows)], dtype=torch.int32)
    top_p = torch.tensor([[1.0, 0.9, 0.5, 0.999, 0.1, 1.0][i % 6] for i in range(rows)], dtype=torch.float32)
    seeds = torch.randint(0, 2**31, (rows,), generator=generator, dtype=torch.long)
    for k, p in ((top_k, top_p), (None, top_p), (top_k, None)):
        assert native_twin(logits, k, p, seeds) == python_twin(logits, k, p, seeds)


@parametrize_twin
def test_a_row_draws_at_its_seed_position_zero(draw) -> None:  # type: ignore[no-untyped-def]
    # p = 1/2, 1/4, 1/4 (top-k 3 drops the -inf token): u = 0.6 lands on token 1, u = 0.8 on token 2
    logits = torch.tensor([[0.0, -0.6931471805599453, -0.6931471805599453, -1.0]] * 2).float()
    logits[:, 3] = float("-inf")
    seeds = torch.tensor([signed(seed_for(0.6)), signed(seed_for(0.8))], dtype=torch.int64)
    assert draw(logits, None, None, seeds) == [1, 2]
    assert draw(logits, None, torch.tensor([0.5, 0.5]), seeds) == [0, 0]  # top-p 0.5 keeps token 0 alone


@requires_native
def test_c_refuses_a_bad_row_before_drawing_and_a_nan_row() -> None:
    from infer_prof.native_paths.sampler_rows import NativeRowSampler

    sampler = NativeRowSampler()
    seeds = torch.zeros(2, dtype=torch.int64)
    with pytest.raises(ValueError, match="top_p outside"):
        sampler.draw(torch.zeros(2, 8), None, torch.tensor([0.5, 0.0]), seeds)
    with pytest.raises(ValueError, match="negative top_k"):
        sampler.draw(torch.zeros(2, 8), torch.tensor([3, -1], dtype=torch.int32), None, seeds)
    with pytest.raises(ValueError, match="row 1 has NaN"):
        sampler.draw(torch.tensor([[0.0, 1.0], [float("nan"), 0.0]]), None, None, seeds)
    with pytest.raises(ValueError, match="contiguous"):
        sampler.draw(torch.zeros(8, 2).t(), None, None, seeds)


@parametrize_twin
def test_draws_follow_the_truncated_renormalised_softmax(draw) -> None:  # type: ignore[no-untyped-def]
    # one fixed row, drawn under many seeds: counts against the exact probabilities (seeded, so never flaky)
    row = torch.tensor(np.linspace(3.0, -3.0, 40) + np.sin(np.arange(40)), dtype=torch.float32)
    draws = 1_500
    logits = row.repeat(draws, 1).contiguous()
    seeds = torch.arange(draws, dtype=torch.int64) * 7919 + 11
    for k, p in ((10, 1.0), (0, 0.8), (12, 0.7)):
        tokens = draw(logits, torch.full((draws,), k, dtype=torch.int32), torch.full((draws,), p), seeds)
        exact = truncated_softmax(row.double().numpy(), k, float(torch.tensor(p, dtype=torch.float32)))
        test = chi_square(np.asarray(tokens), exact)
        assert test.outside == 0
        assert test.p_value > 1e-3, (k, p, test)
    # and the test can fail: the untruncated softmax is not what a top-k 10 row draws from
    tokens = draw(logits, torch.full((draws,), 10, dtype=torch.int32), None, seeds)
    assert chi_square(np.asarray(tokens), truncated_softmax(row.double().numpy(), 0, 1.0)).p_value < 1e-6
