"""Clock offsets from round trips: the midpoint rule, half the round trip as the bound, the shortest round chosen, and rounds whose bounds do not overlap flagged."""

from __future__ import annotations

import pytest

from infer_prof.profiler.analysis.clock_offsets import ClockRound, estimate_offset


def test_the_offset_is_the_other_clock_minus_the_round_midpoint_bounded_by_half_the_round() -> None:
    offset = estimate_offset([ClockRound(sent_ns=1_000, remote_ns=50_600, received_ns=2_000)])
    assert offset.offset_ns == 50_600 - 1_500
    assert offset.uncertainty_ns == 500
    assert offset.rounds == 1 and offset.consistent
    assert offset.to_driver_ns(50_600) == 1_500  # the other clock's reading, on ours: the round's midpoint


def test_the_shortest_round_gives_the_offset_and_every_round_bounds_the_truth() -> None:
    true_offset = 7_000_000  # the other clock is 7 ms ahead
    # (send, when the other clock was read on ours, receive): asymmetric legs, long and short rounds
    legs = [(0, 900, 1_000), (10_000, 10_050, 10_200), (20_000, 20_100, 25_000)]
    rounds = [ClockRound(sent, read + true_offset, received) for sent, read, received in legs]
    offset = estimate_offset(rounds)
    assert offset.uncertainty_ns == 100  # the 200 ns round
    assert offset.offset_ns == pytest.approx(true_offset - 50)  # read 50 ns before its midpoint
    assert abs(offset.offset_ns - true_offset) <= offset.uncertainty_ns
    assert offset.consistent and offset.rounds == 3


def test_rounds_whose_bounds_do_not_overlap_say_a_clock_moved() -> None:
    steady = ClockRound(0, 5_000 + 50, 100)
    stepped = ClockRound(1_000, 1_050 + 9_000, 1_100)  # the other clock jumped 4 us between the rounds
    assert not estimate_offset([steady, stepped]).consistent


def test_no_round_or_a_backwards_round_is_refused() -> None:
    with pytest.raises(ValueError, match="no clock round"):
        estimate_offset([])
    with pytest.raises(ValueError, match="ends before it starts"):
        estimate_offset([ClockRound(2_000, 0, 1_000)])
