"""Length distributions: draws respect their clamps and match their moments; fractions resolve per context."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_prof.scenarios.lengths import LengthDist


def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


@pytest.mark.parametrize(
    ("dist", "expected_mean", "expected_std"),
    [
        (LengthDist("fixed", value=64), 64, 0),
        (LengthDist("uniform", low=10, high=30), 20, np.sqrt((21**2 - 1) / 12)),
        (LengthDist("normal", mean=100, std=10, max=1000), 100, 10),
        (LengthDist("lognormal", mean=200, std=80, max=100_000), 200, 80),
    ],
    ids=["fixed", "uniform", "normal", "lognormal"],
)
def test_draws_have_the_requested_moments(
    dist: LengthDist, expected_mean: float, expected_std: float
) -> None:
    draws = dist.sample(50_000, rng())
    assert draws.dtype == np.int64
    assert draws.mean() == pytest.approx(expected_mean, rel=0.02)
    assert draws.std() == pytest.approx(expected_std, rel=0.05, abs=0.01)


def test_clamps_bound_every_draw() -> None:
    dist = LengthDist("normal", mean=60, std=50, min=16, max=100)
    draws = dist.sample(10_000, rng())
    assert draws.min() == 16 and draws.max() == 100
    assert dist.bounds() == (16, 100)
    assert LengthDist("fixed", value=0).sample(3, rng()).tolist() == [1, 1, 1]  # a length is >= 1


@settings(max_examples=60, deadline=None)
@given(
    low=st.integers(1, 500),
    width=st.integers(0, 500),
    clamp_low=st.integers(1, 400),
    clamp_width=st.integers(0, 400),
)
def test_uniform_draws_stay_within_bounds(low: int, width: int, clamp_low: int, clamp_width: int) -> None:
    dist = LengthDist("uniform", low=low, high=low + width, min=clamp_low, max=clamp_low + clamp_width)
    lowest, highest = dist.bounds()
    draws = dist.sample(200, rng())
    assert lowest <= draws.min() and draws.max() <= highest


def test_fractions_resolve_against_the_context() -> None:
    dist = LengthDist("uniform", low=0.5, high=0.75, relative=frozenset({"low", "high"}))
    assert dist.resolve(1000) == LengthDist("uniform", low=500, high=750)
    with pytest.raises(ValueError, match="resolve"):
        dist.bounds()
    assert dist.to_dict() == {"dist": "uniform", "low_fraction": 0.5, "high_fraction": 0.75}
    assert "0.5×context" in dist.describe()


def test_relative_clamp_below_absolute_value_is_caught_at_resolve() -> None:
    dist = LengthDist("fixed", value=32, max=0.1, relative=frozenset({"max"}))
    assert dist.resolve(1000).bounds() == (32, 32)
    assert dist.resolve(100).bounds() == (10, 10)
    with pytest.raises(ValueError, match="max"):
        dist.resolve(5)  # 10% of 5 tokens leaves no length
