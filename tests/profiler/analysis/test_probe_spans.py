"""The probe's spans read back: exclusive time under nesting, per-step shares with intervals, the A/B of its own cost
with an A/A beside it, and agreement with the samples' interval, on records built by hand."""

from __future__ import annotations

import numpy as np
import pytest

from infer_prof.profiler.analysis.probe_spans import (
    analyse_probe,
    exclusive_ns,
    probe_bounds,
    probe_sentences,
)

PROBES = [
    {"component": "step"},
    {"component": "scheduler"},
    {"component": "model"},
    {"component": "detokenizer"},
]
MS = 1_000_000


def test_a_spans_own_time_leaves_out_what_is_nested_inside_it_on_its_thread() -> None:
    records = np.array(
        [
            [1, 0, 0, 10 * MS, 1],  # a step: 10 ms holding 2 ms and 5 ms
            [1, 1, 1 * MS, 3 * MS, 1],
            [1, 2, 4 * MS, 9 * MS, 1],
            [1, 1, 5 * MS, 6 * MS, 1],  # nested in the model span, not directly in the step
            [2, 1, 2 * MS, 4 * MS, 1],  # another thread: nests in nothing
        ],
        dtype=np.int64,
    )
    assert exclusive_ns(records).tolist() == [3 * MS, 2 * MS, 4 * MS, 1 * MS, 2 * MS]


def _loop(
    steps: int,
    *,
    scheduler_ms: float,
    model_ms: float,
    off_extra_ms: float = 0.0,
    switch_every: int = 0,
    seed: int = 0,
) -> np.ndarray:
    """A loop thread's records: each step holds a scheduler span then a model span; steps of an off turn
    (ABBA, `switch_every` steps each) record only the step, which is `off_extra_ms` longer or shorter."""
    rng = np.random.default_rng(seed)
    rows, t = [], 0
    for index in range(steps):
        on = 1 if not switch_every else (1, 0, 0, 1)[(index // switch_every) % 4]
        scheduler = int((scheduler_ms + rng.normal(0, 0.05)) * MS)
        model = int((model_ms + rng.normal(0, 0.2)) * MS)
        length = scheduler + model + int(0.5 * MS) + (0 if on else int(off_extra_ms * MS))
        rows.append([7, 0, t, t + length, on])
        if on:
            rows.append([7, 1, t + 100, t + 100 + scheduler, on])
            rows.append([7, 2, t + 200 + scheduler, t + 200 + scheduler + model, on])
        t += length + int(1 * MS)
    return np.array(rows, dtype=np.int64)


def test_per_step_shares_come_with_intervals_that_hold_the_truth() -> None:
    records = _loop(200, scheduler_ms=1.0, model_ms=8.0)
    end = int(records[:, 3].max()) + 1
    section = analyse_probe(PROBES, {11: {"records": records, "status": {"cost_ns": 500}}}, (0, end))
    steps = section["steps"]
    assert steps["pid"] == 11 and steps["with_probes_on"] == 200
    scheduler, model = steps["components"]["scheduler"], steps["components"]["model"]
    assert scheduler["ms_per_step"] == pytest.approx(1.0, abs=0.05) and model["ms_per_step"] == pytest.approx(
        8.0, abs=0.1
    )
    assert scheduler["low"] <= 1.0 / 9.5 <= scheduler["high"] and scheduler["high"] - scheduler["low"] < 0.01
    lines = probe_bounds(section, "fake")
    assert any(
        line.startswith("If fake's scheduler cost nothing, its step would be at most 10.5% shorter")
        for line in lines
    )
    assert not any(line.startswith("If ") for line in probe_sentences(section, "fake"))
    assert not any("fake's model cost nothing" in line for line in lines)  # the model is not a control path


def test_the_ab_finds_a_cost_the_probe_adds_and_the_aa_beside_it_does_not() -> None:
    # Steps with the probes on are 0.5 ms longer (10.0 vs 9.5 ms of work): a +5% cost.
    records = _loop(1600, scheduler_ms=1.0, model_ms=8.5, off_extra_ms=-0.5, switch_every=1)
    end = int(records[:, 3].max()) + 1
    section = analyse_probe(PROBES, {3: {"records": records, "status": {"cost_ns": 400}}}, (0, end))
    cost = section["cost"]
    ab, aa = cost["ab"], cost["aa"]
    assert ab["low"] > 0.03 and ab["high"] < 0.07
    assert aa["low"] < 0 < aa["high"]
    # Priced: the calls made while the probes were on, at 400 ns each, over the time they were on (about half).
    assert section["probes_on_s"] * 1e9 == pytest.approx(end / 2, rel=0.05)
    on_calls = int((records[:, 4] == 1).sum())
    assert cost["priced"] == pytest.approx(on_calls * 400 / (section["probes_on_s"] * 1e9), rel=1e-6)


def test_abba_turns_cancel_an_effect_of_a_steps_place_whatever_the_phase_the_window_opens_on() -> None:
    # No cost at all, but every other step is 10% longer (a loop that alternates two kinds of step), with
    # 1% noise; the window opens one step into the turns (0, 0, 1, 1, 0, ...).
    rng = np.random.default_rng(3)
    rows, t = [], 0
    for index in range(1, 801):
        length = int(10 * MS * (1.1 if index % 2 else 1.0) * (1 + rng.normal(0, 0.01)))
        rows.append([7, 0, t, t + length, (1, 0, 0, 1)[index % 4]])
        t += length + MS
    records = np.array(rows, dtype=np.int64)
    cost = analyse_probe(PROBES, {3: {"records": records, "status": {}}}, (0, t))["cost"]
    for arm in (cost["ab"], cost["aa"]):
        assert arm["low"] < 0 < arm["high"] and arm["high"] - arm["low"] < 0.01
    assert cost["ab"]["pairs"] == 399 and cost["ab"]["units"] == 199  # the first step pairs with nothing


def _batches(steps: int, *, cost: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A loop whose step time follows its batch (1 ms a sequence, 0.5% noise), the batch changing at most
    steps and one step in ten a prefill of a few hundred tokens; steps on the probes' turn (ABBA) take
    `cost` longer. Returns the step records and the sizes the probe would read, one within each step."""
    rng = np.random.default_rng(seed)
    rows, sizes, t, batch = [], [], 0, 16
    for index in range(steps):
        if rng.random() < 0.7:
            batch = int(np.clip(batch + rng.integers(-6, 7), 1, 48))
        size = batch + (int(rng.integers(100, 400)) if rng.random() < 0.1 else 0)
        on = (1, 0, 0, 1)[index % 4]
        length = int(size * MS * (1 + rng.normal(0, 0.005)) * (1 + cost * on))
        rows.append([7, 0, t, t + length, on])
        sizes.append([t + 1000, size])
        t += length + MS
    return np.array(rows, dtype=np.int64), np.array(sizes, dtype=np.int64)


def test_pairing_steps_of_like_size_resolves_a_cost_the_batchs_swings_hide() -> None:
    records, sizes = _batches(1200, cost=0.02, seed=5)
    window = (0, int(records[:, 3].max()) + 1)
    plain = analyse_probe(PROBES, {3: {"records": records, "status": {}}}, window)["cost"]
    matched = analyse_probe(PROBES, {3: {"records": records, "status": {}, "sizes": sizes}}, window)["cost"]
    assert matched["matched_by"] == "step sizes within 10%" and "matched_by" not in plain
    ab, aa = matched["ab"], matched["aa"]
    assert ab["low"] < 0.02 < ab["high"] and ab["high"] - ab["low"] < 0.01  # the +2% cost, resolved
    assert aa["low"] < 0 < aa["high"] and aa["high"] - aa["low"] < 0.01
    assert ab["pairs"] < plain["ab"]["pairs"]  # neighbours of unlike size are not paired
    assert plain["ab"]["low"] < 0 < plain["ab"]["high"]  # unpaired by size, the cost is lost in the swings


def test_too_few_steps_give_no_shares_and_say_why() -> None:
    records = _loop(5, scheduler_ms=1.0, model_ms=8.0)
    section = analyse_probe(
        PROBES, {3: {"records": records, "status": {}}}, (0, int(records[:, 3].max()) + 1)
    )
    assert section["steps"]["components"] == {} and "too few" in section["steps"]["note"]
    assert section["cost"]["ab"] is None


def test_a_probe_share_inside_or_outside_the_samples_interval() -> None:
    # The API thread spends 200 ms of a 1 s window in the detokenizer.
    records = np.array([[42, 3, i * 100 * MS, i * 100 * MS + 20 * MS, 1] for i in range(10)], dtype=np.int64)

    def sampled(share: float) -> dict:  # type: ignore[type-arg]
        return {
            5: {
                "split": {
                    "threads": {
                        "api": {
                            "thread_id": 42,
                            "name": "MainThread",
                            "samples": 100,
                            "components": {"detokenizer": share},
                        }
                    }
                }
            }
        }

    agree = analyse_probe(
        PROBES, {5: {"records": records, "status": {}}}, (0, 1000 * MS), sampled=sampled(0.22)
    )
    row = agree["agreement"][0]
    assert row["component"] == "detokenizer" and row["probe_share"] == pytest.approx(0.2) and row["agree"]
    disagree = analyse_probe(
        PROBES, {5: {"records": records, "status": {}}}, (0, 1000 * MS), sampled=sampled(0.6)
    )
    assert not disagree["agreement"][0]["agree"]
    assert "outside: detokenizer on MainThread (5)" in " ".join(probe_sentences(disagree, "x"))


def test_on_time_follows_the_steps_turns_inside_the_window() -> None:
    from infer_prof.profiler.analysis.probe_spans import on_time_ns

    assert on_time_ns([], (0, 500)) == 500
    assert on_time_ns([(100, 0), (300, 1)], (0, 500)) == 300
    assert on_time_ns([(-50, 0), (200, 1), (400, 0), (900, 1)], (0, 500)) == 200  # turns outside are clipped


def test_shares_of_wall_count_only_the_time_the_probes_were_on() -> None:
    # The API thread is in the detokenizer 20% of the time, but the loop's second step, at half time, turned the
    # probes off.
    records = np.array([[42, 3, i * 100 * MS, i * 100 * MS + 20 * MS, 1] for i in range(5)], dtype=np.int64)
    steps = np.array([[7, 0, 0, 400 * MS, 1], [7, 0, 500 * MS, 900 * MS, 0]], dtype=np.int64)
    section = analyse_probe(
        PROBES, {9: {"records": records, "status": {}}, 8: {"records": steps, "status": {}}}, (0, 1000 * MS)
    )
    process = next(entry for entry in section["processes"] if entry["pid"] == 9)
    assert process["components"]["detokenizer"]["share_of_wall"] == pytest.approx(0.2)
    assert section["probes_on_s"] == pytest.approx(0.5) and section["window_s"] == pytest.approx(1.0)
    assert section["switches"] == 1


def test_the_critical_path_reads_loop_work_then_the_wait_on_the_worker() -> None:
    from infer_prof.profiler.analysis.probe_spans import critical_path

    steps = {
        "mean_ms": 100.0,
        "components": {
            "worker": {"ms_per_step": 90.0, "share": 0.9, "where": "engine loop"},
            "model": {"ms_per_step": 60.0, "share": 0.6, "where": "other process"},
            "sampler": {"ms_per_step": 20.0, "share": 0.2, "where": "other process"},
            "scheduler": {"ms_per_step": 2.0, "share": 0.02, "where": "engine loop"},
            "detokenizer": {"ms_per_step": 1.0, "share": 0.01, "where": "other process"},
        },
    }
    line = critical_path(steps) or ""
    assert "the engine loop's own work 10.0 ms (10.0%)" in line
    assert "waiting on the model worker 90.0 ms (90.0%)" in line
    assert "model 60.0 ms, sampler 20.0 ms" in line and "detokenizer" not in line
    assert (
        critical_path({"mean_ms": 10.0, "components": {"scheduler": steps["components"]["scheduler"]}})
        is None
    )


def test_an_aa_too_wide_to_resolve_the_cost_sends_the_reader_to_the_priced_figure() -> None:
    def section(aa_low: float, aa_high: float) -> dict:  # type: ignore[type-arg]
        return {
            "cost": {
                "ab": {"point": -0.2, "low": -0.38, "high": -0.06},
                "aa": {"point": 0.2, "low": aa_low, "high": aa_high},
                "priced": 0.00002,
            }
        }

    wide = " ".join(probe_sentences(section(-0.29, 0.96), "vLLM"))
    assert "too much for the A/B to resolve" in wide and "priced from its calls: 0.002%" in wide
    narrow = " ".join(probe_sentences(section(-0.004, 0.006), "vLLM"))
    assert "resolve" not in narrow
