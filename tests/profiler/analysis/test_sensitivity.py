"""The slowdown estimator on synthetic blocks: serial, overlapped, partial, noisy, a curve, and blocks it cannot use."""

from __future__ import annotations

import math

import numpy as np
import pytest

from infer_prof.profiler.analysis.sensitivity import (
    DelayBlock,
    NotEnoughBlocks,
    estimate_sensitivity,
    predicted_gain,
)

STEP_MS = 40.0
COMPONENT_MS = 10.0  # the component's own time per step, which a level multiplies


def _blocks(
    respond,
    *,
    levels: tuple[float, ...] = (0.5, 1.0),
    rounds: int = 6,
    steps: int = 8,
    noise_ms: float = 0.0,
    seed: int = 0,
) -> list[DelayBlock]:
    """ABBA turns per level, each followed by an A/A turn: off, on, on, off, off, off, ...

    respond(level, added per step) -> the response added per step.
    """
    rng = np.random.default_rng(seed)
    pattern: list[float] = []
    for _ in range(rounds):
        for level in levels:
            pattern += [0.0, level, level, 0.0]
        pattern += [0.0, 0.0]  # the A/A
    blocks = []
    for index, level in enumerate(pattern):
        added = level * COMPONENT_MS * steps
        response = STEP_MS * steps + respond(level, added) + rng.normal(0.0, noise_ms * math.sqrt(steps))
        blocks.append(DelayBlock(index=index, level=level, added_ms=added, response_ms=response, units=steps))
    return blocks


def test_a_serial_component_has_sensitivity_one_and_its_interval_holds_one() -> None:
    found = estimate_sensitivity("sampler", _blocks(lambda level, added: added, noise_ms=0.5))
    assert found.component == "sampler"
    assert found.value == pytest.approx(1.0, abs=0.05)
    assert found.low is not None and found.high is not None
    assert found.low <= 1.0 <= found.high
    assert found.linear
    assert [level.level for level in found.per_level] == [0.5, 1.0]
    assert found.pairs == 24 and sum(level.pairs for level in found.per_level) == 24


def test_an_overlapped_component_has_sensitivity_near_zero() -> None:
    found = estimate_sensitivity("detokenizer", _blocks(lambda level, added: 0.0, noise_ms=0.5))
    assert abs(found.value) < 0.05
    assert found.low is not None and found.high is not None
    assert found.low <= 0.0 <= found.high and found.high < 0.2
    assert found.linear


def test_a_partly_overlapped_component_lands_between() -> None:
    found = estimate_sensitivity("scheduler", _blocks(lambda level, added: 0.4 * added, noise_ms=0.3))
    assert found.value == pytest.approx(0.4, abs=0.05)
    assert found.low is not None and found.high is not None and found.low < 0.4 < found.high
    assert found.high < 1.0 and found.low > 0.0


def test_noise_widens_the_interval_and_it_still_holds_the_truth() -> None:
    quiet = estimate_sensitivity("sampler", _blocks(lambda level, added: added, noise_ms=0.2))
    noisy = estimate_sensitivity("sampler", _blocks(lambda level, added: added, noise_ms=4.0, seed=3))
    assert quiet.low is not None and quiet.high is not None
    assert noisy.low is not None and noisy.high is not None
    assert noisy.high - noisy.low > 3 * (quiet.high - quiet.low)
    assert noisy.low <= 1.0 <= noisy.high


def test_levels_that_disagree_make_a_curve() -> None:
    # The first half-call's delay is hidden behind other work, the rest is not: 0.5 -> ~0, 1.0 -> ~0.5.
    def respond(level: float, added: float) -> float:
        return max(0.0, added - 0.5 * COMPONENT_MS * 8)

    found = estimate_sensitivity("scheduler", _blocks(respond, noise_ms=0.2))
    assert not found.linear
    half, full = found.per_level
    assert half.value == pytest.approx(0.0, abs=0.05)
    assert full.value == pytest.approx(0.5, abs=0.05)
    assert full.added_ms_per_unit == pytest.approx(COMPONENT_MS)
    assert full.response_ms_per_unit == pytest.approx(0.5 * COMPONENT_MS, abs=0.3)


def test_the_a_a_pairs_give_a_null_near_zero() -> None:
    found = estimate_sensitivity("sampler", _blocks(lambda level, added: added, noise_ms=0.5))
    assert found.null is not None
    assert found.null.pairs > 0
    assert found.null.low is not None and found.null.high is not None
    assert found.null.low <= 0.0 <= found.null.high


def test_a_linear_drift_cancels_between_both_neighbours() -> None:
    blocks = _blocks(lambda level, added: added)
    drifting = [
        DelayBlock(b.index, b.level, b.added_ms, b.response_ms + 3.0 * b.index * b.units, b.units)
        for b in blocks
    ]
    found = estimate_sensitivity("sampler", drifting)
    assert found.value == pytest.approx(1.0, abs=0.02)


def test_a_serial_gain_is_share_times_the_saved_fraction() -> None:
    found = estimate_sensitivity("sampler", _blocks(lambda level, added: added, noise_ms=0.5))
    gain = predicted_gain(found, component_share=0.25, speedup=5.0)
    assert gain.method == "slowdown" and gain.speedup == 5.0
    assert gain.gain == pytest.approx(0.25 * 0.8, rel=0.05)
    assert gain.low is not None and gain.high is not None and gain.low <= gain.gain <= gain.high
    overlapped = estimate_sensitivity("detokenizer", _blocks(lambda level, added: 0.0, noise_ms=0.5))
    assert abs(predicted_gain(overlapped, 0.25, 5.0).gain) < 0.02  # Amdahl would promise 20%


def test_a_gain_rejects_a_share_or_speedup_that_cannot_be() -> None:
    found = estimate_sensitivity("sampler", _blocks(lambda level, added: added))
    with pytest.raises(ValueError, match="speedup"):
        predicted_gain(found, 0.2, 0.0)
    with pytest.raises(ValueError, match="share"):
        predicted_gain(found, 1.5, 2.0)


def test_blocks_without_a_delay_on_block_raise_a_clear_error() -> None:
    off_only = [DelayBlock(index, 0.0, 0.0, 320.0, 8) for index in range(6)]
    with pytest.raises(NotEnoughBlocks, match="no delay-on block"):
        estimate_sensitivity("sampler", off_only)
    with pytest.raises(NotEnoughBlocks, match="no delay-on block"):
        estimate_sensitivity("sampler", [])
    on_only = [DelayBlock(index, 1.0, 80.0, 400.0, 8) for index in range(4)]
    with pytest.raises(NotEnoughBlocks, match="no delay-on block"):
        estimate_sensitivity("sampler", on_only)


def test_a_delay_that_added_nothing_raises_rather_than_divides_by_zero() -> None:
    blocks = [DelayBlock(index, 1.0 if index % 2 else 0.0, 0.0, 320.0, 8) for index in range(6)]
    with pytest.raises(NotEnoughBlocks, match="added no time"):
        estimate_sensitivity("kv_alloc", blocks)


def test_one_pair_gives_a_value_without_an_interval() -> None:
    blocks = [DelayBlock(0, 0.0, 0.0, 320.0, 8), DelayBlock(1, 1.0, 80.0, 400.0, 8)]
    found = estimate_sensitivity("sampler", blocks)
    assert found.value == pytest.approx(1.0)
    assert found.low is None and found.high is None and found.pairs == 1
    assert predicted_gain(found, 0.2, 2.0).low is None


def test_empty_blocks_are_skipped_and_order_comes_from_the_index() -> None:
    blocks = _blocks(lambda level, added: added)
    shuffled = list(reversed(blocks)) + [DelayBlock(999, 1.0, 0.0, 0.0, 0)]
    assert estimate_sensitivity("sampler", shuffled).value == pytest.approx(1.0)


def test_the_expected_response_of_a_blocks_kind_is_taken_out_before_pairing() -> None:
    rng = np.random.default_rng(4)
    plain, adjusted = [], []
    for block in _blocks(lambda level, added: added):
        kind_ms = float(rng.choice([0.0, 60.0]))  # a block of long prefills, or not, whatever its level
        plain.append(
            DelayBlock(block.index, block.level, block.added_ms, block.response_ms + kind_ms, block.units)
        )
        adjusted.append(
            DelayBlock(
                block.index, block.level, block.added_ms, block.response_ms + kind_ms, block.units, kind_ms
            )
        )
    noisy = estimate_sensitivity("sampler", plain)
    clean = estimate_sensitivity("sampler", adjusted)
    assert clean.value == pytest.approx(1.0, abs=1e-9)
    assert noisy.low is not None and noisy.high is not None and noisy.high - noisy.low > 0.5


def _sum_ratio(blocks: list[DelayBlock]) -> float:
    """The pooled estimate this module used before: the pairs' summed response over their summed added time."""
    response = added = 0.0
    for position, block in enumerate(blocks):
        if block.level <= 0:
            continue
        neighbours = [blocks[position - 1], blocks[position + 1]]
        neighbours = [other for other in neighbours if other.level <= 0]
        off = sum(other.response_ms for other in neighbours) / sum(other.units for other in neighbours)
        response += block.response_ms - off * block.units
        added += block.added_ms
    return response / added


def test_the_pooled_value_weights_a_level_by_its_signal_over_the_steps_noise() -> None:
    """With the same step noise at every level, a level of a larger delay carries more signal: the pooled slope
    through 0 lands nearer the truth, run after run, than the pairs' summed response over their summed delay, which
    lets the low level's noise in. Both see the same blocks (one pattern whose every on turn has an off neighbour
    on each side). At levels 0.1 and 1 the slope's variance is 1/1.01 of a level-1 pair's, the sum's 2/1.21: its
    error is sqrt(0.61) = 0.78 of the sum's; 0.9 leaves room for 150 seeded trials' own spread (0.73 read)."""
    slope_errors, sum_errors = [], []
    for seed in range(150):
        blocks = _blocks(lambda level, added: added, levels=(0.1, 1.0), rounds=3, noise_ms=3.0, seed=seed)
        slope_errors.append(estimate_sensitivity("sampler", blocks, resamples=20).value - 1.0)
        sum_errors.append(_sum_ratio(blocks) - 1.0)
    assert np.sqrt(np.mean(np.square(slope_errors))) < 0.9 * np.sqrt(np.mean(np.square(sum_errors)))


def test_blocks_pair_only_within_their_own_run() -> None:
    """Two runs of one experiment: the first ends on a delayed turn, the second starts off at another pace. The first
    run's last turn pairs with its own off turn alone, never with the other run's, and no A/A crosses runs."""
    first = [
        DelayBlock(0, 0.0, 0.0, 400.0, 10),
        DelayBlock(1, 1.0, 100.0, 500.0, 10),
        DelayBlock(2, 0.0, 0.0, 400.0, 10),
        DelayBlock(3, 1.0, 100.0, 500.0, 10),
    ]
    second = [
        DelayBlock(0, 0.0, 0.0, 900.0, 10, run=1),  # a different pace: pairing across runs would read it
        DelayBlock(1, 1.0, 100.0, 1000.0, 10, run=1),
        DelayBlock(2, 0.0, 0.0, 900.0, 10, run=1),
    ]
    found = estimate_sensitivity("sampler", [*second, *first])
    assert found.pairs == 3
    assert found.value == pytest.approx(1.0)
    assert found.null is None  # off turns meet only across the runs' seam, which is no A/A
