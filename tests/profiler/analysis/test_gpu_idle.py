"""The GPU idle split: device intervals placed on the host clock, and idle time told apart by hand-computed timelines."""

from __future__ import annotations

import random

import pytest

from infer_prof.profiler.analysis.gpu_idle import (
    BETWEEN_STEPS,
    STEP_OTHER,
    device_intervals,
    gpu_idle_split,
    intersect,
    subtract,
    total,
    union,
)


def test_event_pairs_start_when_recorded_or_when_the_previous_work_ended() -> None:
    # The model's pair is recorded at 100 and runs 50; the sampler's is recorded at 120 (host launched it
    # while the model still ran), so it starts at 150; the next step's is recorded long after, at 400.
    assert device_intervals([(100, 50), (120, 30), (400, 10)]) == [(100, 150), (150, 180), (400, 410)]
    assert device_intervals([(5, -3)]) == [(5, 5)]  # a clock glitch never makes negative work


def test_interval_algebra_matches_a_brute_force_count_of_ticks() -> None:
    rng = random.Random(7)

    def random_intervals() -> list[tuple[int, int]]:
        starts = [rng.randrange(0, 200) for _ in range(rng.randrange(0, 12))]
        return [(s, s + rng.randrange(0, 30)) for s in starts]

    for _ in range(300):
        a, b = union(random_intervals()), union(random_intervals())
        ticks_a = {t for s, e in a for t in range(s, e)}
        ticks_b = {t for s, e in b for t in range(s, e)}
        assert total(intersect(a, b)) == len(ticks_a & ticks_b)
        assert total(subtract(a, b)) == len(ticks_a - ticks_b)
        assert {t for s, e in subtract(a, b) for t in range(s, e)} == ticks_a - ticks_b


def test_idle_time_is_split_into_host_bound_and_no_work_by_a_hand_computed_timeline() -> None:
    # Window 0..1000. Steps at 0..300 and 400..600; a request in flight 0..650, then nothing to do.
    # Device busy 50..250 (step 1's model) and 450..500 (step 2's model).
    # Step 1: idle 0..50 (scheduler 0..30, prepare 30..50) and 250..300 (sampler 250..290, 290..300 no span).
    # Between steps 300..400 with a request in flight: host-bound (the loop). Step 2: idle 400..450
    # (scheduler) and 500..600 (sampler 500..580, detokenize 580..600). 600..650 in flight, outside steps:
    # host. 650..1000: no work.
    split = gpu_idle_split(
        window=(0, 1000),
        device=[(50, 250), (450, 500)],
        steps=[(0, 300), (400, 600)],
        in_flight=[(0, 650)],
        spans={
            "scheduler": [(0, 30), (400, 450)],
            "prepare": [(30, 50)],
            "model": [(50, 250), (450, 500)],
            "sampler": [(250, 290), (500, 580)],
            "detokenizer": [(580, 600)],
        },
    )
    assert split["device_busy_ns"] == 250
    assert split["idle_no_work_ns"] == 350
    host = 50 + 50 + 100 + 50 + 100 + 50
    assert split["idle_host_ns"] == host == 400
    assert split["idle_host_share"] == pytest.approx(0.4) and split["busy_share"] == pytest.approx(0.25)
    assert split["idle_host_by_component"] == pytest.approx(
        {
            "scheduler": 80 / host,
            "prepare": 20 / host,
            "sampler": 120 / host,
            "detokenizer": 20 / host,
            STEP_OTHER: 10 / host,
            BETWEEN_STEPS: 150 / host,
        }
    )
    assert "model" not in split["idle_host_by_component"]  # the device was busy all through the model span


def test_a_device_busy_all_the_time_waits_for_nobody() -> None:
    split = gpu_idle_split(
        window=(0, 100), device=[(0, 100)], steps=[(0, 100)], in_flight=[(0, 100)], spans={}
    )
    assert split["idle_host_ns"] == split["idle_no_work_ns"] == 0 and split["idle_host_by_component"] == {}


def test_an_empty_window_has_no_shares() -> None:
    split = gpu_idle_split(window=(10, 10), device=[], steps=[], in_flight=[], spans={})
    assert split["busy_share"] is None and split["idle_host_share"] is None
