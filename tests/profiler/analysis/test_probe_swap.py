"""A swap run's A/B from synthetic probe records whose effect is known: the steps with the C sampler are shorter by what its calls saved, and Amdahl's prediction from the run's own figures meets the measured ratio."""

from __future__ import annotations

import numpy as np

from infer_prof.profiler.analysis.probe_swap import SWAP_OFF, SWAP_ON, analyse_swap

PROBES = [{"component": "step"}, {"component": "sampler"}]
MS = 1_000_000


DELAYED = ord("a")  # a slowdown's first delayed turn, when one runs beside the swap
ABBA = [SWAP_OFF, SWAP_ON, SWAP_ON, SWAP_OFF]


def run(steps: int = 48, sizes: list[int] | None = None, cycle: list[int] = ABBA) -> tuple[dict, dict, dict]:  # type: ignore[type-arg]
    """Steps of 100 ms whose forward takes 30 ms without the swap, 75 ms whose forward takes 5 ms with it,
    each jittered a little; turns 1 S S 1 (or `cycle`: a delayed turn's step takes 60 ms more); 4 rows sampled
    a step; the sampler span holds the forward."""
    rng = np.random.default_rng(0)
    records, turns, calls, at_sizes = [], [], [], []
    clock = 1_000 * MS
    for index in range(steps):
        state = cycle[index % len(cycle)]
        on = state == SWAP_ON
        forward = (5 if on else 30) * MS + int(rng.integers(0, MS // 10))
        length = forward + 70 * MS + int(rng.integers(0, MS)) + (60 * MS if state >= DELAYED else 0)
        turns.append((clock - 10, state))
        records.append((1, 0, clock, clock + length, 1))
        records.append((1, 1, clock + 60 * MS, clock + 60 * MS + forward + MS // 2, 1))
        calls.append((clock + 60 * MS + MS // 4, clock + 60 * MS + MS // 4 + forward, 4, 0 if on else 1))
        at_sizes.append((clock + 1, 4 if sizes is None else sizes[index]))
        clock += length + MS
    found = {
        7: {
            "records": np.array(records, dtype=np.int64),
            "turns": np.array(turns, dtype=np.int64),
            "sizes": np.array(at_sizes, dtype=np.int64),
        }
    }
    statuses = {7: {"swapped": True, "version": "0.32.0", "rows": {"swapped": 96, "off turn": 96}}}
    return found, {7: np.array(calls, dtype=np.int64)}, statuses


def test_the_ab_finds_the_saved_time_and_the_prediction_meets_it() -> None:
    found, calls, statuses = run()
    result = analyse_swap(PROBES, found, calls, statuses)
    assert result.note is None and result.pairs == 24 and result.aa_pairs >= 8
    assert result.swapped_in == [7] and result.rows["swapped"] == 96
    assert result.forward_ms is not None and result.step_ms is not None and result.tokens_per_s is not None
    assert (
        abs(result.forward_ms.with_swap.point - 5.05) < 0.1
        and abs(result.forward_ms.without.point - 30.05) < 0.1
    )
    assert result.forward_speedup is not None and 5.5 < result.forward_speedup.point < 6.5
    step = result.step_ms.ratio
    assert step.low < 0.76 < step.high or abs(step.point - 0.75) < 0.01
    assert 1.3 < result.tokens_per_s.ratio.point < 1.36  # 1 / 0.75
    assert result.predicted_step_ratio is not None and abs(result.predicted_step_ratio - step.point) < 0.01
    assert result.aa_step_ratio is not None and result.aa_step_ratio.low < 1.0 < result.aa_step_ratio.high
    assert result.tpot_ms is not None  # every step is decode-only: 4 tokens scheduled, 4 rows sampled
    assert (
        result.sampler_ms is not None and result.sampler_ms.with_swap.point < result.sampler_ms.without.point
    )
    assert any("Amdahl predicts" in line for line in result.lines)


def test_steps_of_unlike_sizes_do_not_pair_and_a_short_run_says_so() -> None:
    found, calls, statuses = run(steps=12, sizes=[4, 40] * 6)
    result = analyse_swap(PROBES, found, calls, statuses)
    assert result.pairs == 0 and result.note is not None and "too few" in result.note
    assert result.step_ms is None


def test_no_turns_means_the_swap_never_switched() -> None:
    found, calls, statuses = run(steps=12)
    del found[7]["turns"]
    assert "never switched in" in (analyse_swap(PROBES, found, calls, statuses).note or "")


def test_a_slowdowns_delayed_turns_beside_the_swap_are_in_neither_arm() -> None:
    cycle = [SWAP_OFF, DELAYED, DELAYED, SWAP_OFF, *ABBA]
    found, calls, statuses = run(steps=96, cycle=cycle)
    result = analyse_swap(PROBES, found, calls, statuses)
    assert result.steps == 72 and result.note is None  # the 24 delayed steps are dropped
    assert result.step_ms is not None and abs(result.step_ms.ratio.point - 0.75) < 0.01
    assert result.step_ms.without.point is not None and result.step_ms.without.point < 101
