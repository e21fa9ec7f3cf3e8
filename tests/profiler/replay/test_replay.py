"""The replay of a run's own work: recorded as the engine asked it, reproduced exactly, timed in turns."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from infer_prof.engine.types import SamplingParams
from infer_prof.profiler.analysis.diagnose import diagnose
from infer_prof.profiler.replay import recorder
from infer_prof.profiler.replay.recorder import CAPTURE_EVERY, WorkloadLog, captured_call
from infer_prof.profiler.replay.replay import (
    CacheEvictor,
    PoolShape,
    SamplerCase,
    _replay_sampler,
    interleaved,
    replay_speedups,
    sampler_cases,
    speedup_of,
    time_sampler_case,
)


def _needs_twins() -> None:
    from infer_prof.native_paths.loader import available

    if available().get("sampler") is not True:
        pytest.skip("the C twins are not built (python native_paths/build.py)")


def _run(tmp_path: Path, requests: int = 10, **overrides):  # type: ignore[no-untyped-def]
    from infer_prof.profiler.session.builder import load_for_options
    from infer_prof.profiler.session.options import EngineOptions
    from infer_prof.profiler.session.session import run_session
    from infer_prof.scenarios.spec import load_scenario

    options = EngineOptions(model="synthetic:tiny")
    spec = load_scenario("concurrency-30").with_overrides(num_requests=requests)
    return run_session(options, spec, tmp_path / "run", loaded=load_for_options(options), **overrides)


class _Echo:
    """A sampler that draws the first logit of each row: a capture's rows name the call they came from."""

    def sample(self, logits: torch.Tensor, seq_ids: list[int]) -> list[int]:
        return [int(v) for v in logits[:, 0]]


class _EchoTwin(_Echo):
    """_Echo as a twin the replay can make and register sequences with."""

    def add(self, seq_id: int, params: SamplingParams, history: list[int]) -> None:
        pass


def _log_and_shape(outcome):  # type: ignore[no-untyped-def]
    built = outcome.extras["built"]
    config = built.config
    shape = PoolShape(
        built.engine.num_blocks, config.block_size, config.max_batch, config.max_batched_tokens, config.policy
    )
    return built.engine.scheduler._log, shape


def test_a_run_replays_its_own_work_through_both_twins_and_predicts_with_it(tmp_path: Path) -> None:
    _needs_twins()
    outcome = _run(tmp_path)
    data = json.loads((tmp_path / "run" / "result.json").read_text())
    replay = data["replay"]
    # Every step of the run was recorded, and the Python twins fed the recording reproduced the run.
    assert replay["steps_recorded"] == replay["steps_in_run"] == data["engine"]["steps"] > 0
    assert replay["skipped"] == {}
    assert set(replay["components"]) == {"scheduler", "kv_alloc", "prepare", "sampler"}
    for name, entry in replay["components"].items():
        assert entry["twins_agree"] is True, name  # same plans, tables, model inputs and tokens
        assert entry["low"] <= entry["speedup"] <= entry["high"], name
        prediction = data["verdict"]["predictions"][name]
        assert prediction["speedup_source"] == "replay"
        assert prediction["native_speedup"] == entry["speedup"]
        assert (
            prediction["predicted_gain_low"]
            <= prediction["predicted_gain"]
            <= prediction["predicted_gain_high"]
        )
    # The sampler replays the run's own draws: as many rows as the chosen calls had sequences.
    assert 0 < replay["components"]["sampler"]["rows"] <= outcome.result.engine["tokens_generated"]
    assert replay["components"]["scheduler"]["steps"] == replay["steps_recorded"]
    assert any("replaying" in reason and "sampler" in reason for reason in data["verdict"]["reasons"])
    # The engine's sampler was the Python twin on the host: the run's own timing of it prices that side.
    assert _log_and_shape(outcome)[0].python_sampler is True
    assert replay["components"]["sampler"]["python_priced"] == "run"
    assert any("time a row as the run measured it" in reason for reason in data["verdict"]["reasons"])
    # ... and the C twin's side is its CPU time on the run's clock: over the share of a core the engine thread got.
    assert replay["components"]["sampler"]["native_clock"] == "thread cpu"
    assert replay["components"]["sampler"]["core_share"] == data["health"]["engine_thread"]["core_share"]
    # What the reader sees: each speedup with its interval, and where the speedups came from.
    from infer_prof.reports.run.summary import predictions_table

    table = predictions_table(outcome.result)
    sampler_row = next(row for row in table.rows if row[0] == "sampler")
    sampler = replay["components"]["sampler"]
    assert sampler_row[2] == f"{sampler['speedup']:.1f}x [{sampler['low']:.1f}, {sampler['high']:.1f}]"
    assert "replaying this run's own work" in (table.note or "")


def test_recording_stops_at_its_cap_and_the_replay_says_how_much_it_covered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _needs_twins()
    monkeypatch.setattr(recorder, "MAX_STEPS", 12)
    _run(tmp_path, requests=12)
    replay = json.loads((tmp_path / "run" / "result.json").read_text())["replay"]
    assert replay["steps_recorded"] == 12 < replay["steps_in_run"]
    assert replay["components"]["scheduler"]["steps"] == 12 and replay["skipped"] == {}


def test_a_recording_the_python_twins_do_not_reproduce_is_not_replayed(tmp_path: Path) -> None:
    from infer_prof.engine.kv_alloc import PythonKVAllocator
    from infer_prof.engine.scheduler import PythonScheduler

    _needs_twins()
    outcome = _run(tmp_path, requests=4, write=False)
    log, shape = _log_and_shape(outcome)
    config = outcome.extras["built"].config

    def refuses() -> None:
        raise ValueError("planted refusal")

    # A twin that fails its replay costs that component its figure, not the run or the other components.
    scheduler = (
        lambda: PythonScheduler(config.block_size, config.max_batch, config.max_batched_tokens),
        refuses,
    )
    kv_alloc = (lambda: PythonKVAllocator(shape.num_blocks, shape.block_size),) * 2
    section = replay_speedups(
        log, shape, names=("scheduler", "kv_alloc"), twins={"scheduler": scheduler, "kv_alloc": kv_alloc}
    )
    assert section["skipped"] == {"scheduler": "its replay failed: ValueError: planted refusal"}
    assert section["components"]["kv_alloc"]["twins_agree"] is True
    arrivals, finished, free = log.schedules[3]
    log.schedules[3] = (arrivals, finished, free - 1)  # the run's engine "had" one block fewer at step 3
    section = replay_speedups(log, shape)
    assert section["components"] == {}
    assert all("did not reproduce the run (step 3:" in why for why in section["skipped"].values())


def test_each_replayed_sampler_call_plays_at_the_thread_count_the_engine_had_at_it(tmp_path: Path) -> None:
    from infer_prof.engine.sampler import PythonSampler

    _needs_twins()
    log, shape = _log_and_shape(_run(tmp_path, requests=4, write=False))
    assert len(log.capture_threads) == len(log.logits_rows) > 0  # one count per capture
    seen: list[int] = []

    class Counting(PythonSampler):
        def sample(self, logits: torch.Tensor, seq_ids: list[int]) -> list[int]:  # type: ignore[override]
            seen.append(torch.get_num_threads())
            return super().sample(logits, seq_ids)

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for count in (1, 2):
            log.capture_threads = [count] * len(log.logits_rows)  # as if the governor had held `count`
            seen.clear()
            section = replay_speedups(log, shape, names=("sampler",), twins={"sampler": (Counting, Counting)})
            sampler = section["components"]["sampler"]
            assert set(seen) == {count} and sampler["torch_threads"] == {str(count): len(sampler_cases(log))}
            assert torch.get_num_threads() == 2  # torch's own count given back after each call
    finally:
        torch.set_num_threads(before)


def test_the_sampler_replay_gives_each_sequence_what_it_had_drawn_before_the_call() -> None:
    params = SamplingParams(temperature=0.7, seed=5)
    log = WorkloadLog(sequences={1: (params, [10, 11]), 2: (params, [20])})
    calls = [([1, 2], [100, 200]), ([1, 2], [101, 201]), ([2], [202])]
    # The recorder captures every CAPTURE_EVERY-th call: these three calls are captures 0, 1 and 2.
    log.samples = [(0, [1], [7])] * (2 * CAPTURE_EVERY + 1)
    for capture, (seq_ids, tokens) in enumerate(calls):
        log.samples[captured_call(log, capture)] = (capture, seq_ids, tokens)
    log.logits_rows = [torch.zeros(2, 6), torch.ones(1, 6), torch.full((2, 6), 2.0)]
    cases = sampler_cases(log, limit=3)
    assert [case.seq_ids for case in cases] == [[1, 2], [1, 2], [2]]
    assert cases[0].registrations == [(1, params, [10, 11]), (2, params, [20])]
    between = [7] * (CAPTURE_EVERY - 1)  # what sequence 1 drew in the uncaptured calls
    assert cases[1].registrations[0] == (1, params, [10, 11, 100, *between])
    assert cases[2].registrations == [(2, params, [20, 200, 201])]
    # Each call replays the rows captured at it, one per sequence: a one-row capture serves a batch of two.
    assert [case.logits.tolist() for case in cases[:2]] == [[[0.0] * 6] * 2, [[1.0] * 6] * 2]
    assert cases[2].logits.tolist() == [[2.0] * 6]


def test_captured_call_names_the_call_each_capture_was_taken_at() -> None:
    log = WorkloadLog()
    sampler = recorder.RecordingSampler(_Echo(), log)
    before = torch.get_num_threads()
    try:
        for call in range(3 * CAPTURE_EVERY):
            torch.set_num_threads(1 if call < CAPTURE_EVERY else 2)  # a governor lowering, then raising
            log.schedules.append(([], [], 0))
            log.steps_seen += 1
            sampler.sample(torch.full((2, 3), float(call)), [1, 2])
    finally:
        torch.set_num_threads(before)
    assert len(log.logits_rows) == 3
    assert [rows[0, 0].item() for rows in log.logits_rows] == [captured_call(log, j) for j in range(3)]
    assert log.capture_threads == [1, 2, 2]  # the engine thread's count at each capture


def test_captures_thin_out_as_the_run_grows_and_still_name_their_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(recorder, "MAX_CAPTURES", 4)
    log = WorkloadLog()
    sampler = recorder.RecordingSampler(_Echo(), log)
    for call in range(20 * CAPTURE_EVERY + 1):
        log.schedules.append(([], [], 0))
        log.steps_seen += 1
        sampler.sample(torch.full((1, 3), float(call)), [1])
    # Four captures were held three times (at calls 3, 6 and 12 periods in), each time halved: the period
    # is now 8 times the first, and three captures are left, evenly spread.
    assert log.capture_every == 8 * CAPTURE_EVERY and len(log.logits_rows) == len(log.capture_threads) == 3
    assert [rows[0, 0].item() for rows in log.logits_rows] == [captured_call(log, j) for j in range(3)]
    assert [captured_call(log, j) for j in range(3)] == [0, 8 * CAPTURE_EVERY, 16 * CAPTURE_EVERY]


def test_the_recorder_times_the_engine_sampler_over_every_recorded_call_but_the_first() -> None:
    class Busy(_Echo):
        def sample(self, logits: torch.Tensor, seq_ids: list[int]) -> list[int]:
            torch.ones(1000).sum()  # some work for the clock to see
            return super().sample(logits, seq_ids)

    log = WorkloadLog()
    sampler = recorder.RecordingSampler(Busy(), log)
    for call in range(1 + recorder.CHUNK_CALLS + 2):
        rows = call % 3 + 1
        log.schedules.append(([], [], 0))
        log.steps_seen += 1
        sampler.sample(torch.full((rows, 3), float(call)), list(range(rows)))
    # The first call carries torch's one-off set-up; the others are summed in chunks of CHUNK_CALLS calls.
    chunks = log.sampler_chunks
    assert [chunk[2] for chunk in chunks] == [recorder.CHUNK_CALLS, 2] and all(
        chunk[0] > 0 for chunk in chunks
    )
    every_rows = [call % 3 + 1 for call in range(1 + recorder.CHUNK_CALLS + 2)][1:]
    assert [chunk[1] for chunk in chunks] == [sum(every_rows[: recorder.CHUNK_CALLS]), sum(every_rows[-2:])]
    log.steps_seen += 1  # a step whose schedule() was not recorded: its call is not counted
    sampler.sample(torch.zeros(2, 3), [0, 1])
    assert sum(chunk[2] for chunk in log.sampler_chunks) == recorder.CHUNK_CALLS + 2


def _ticking_clock(step: int = 10):  # type: ignore[no-untyped-def]
    """A clock that moves `step` at each read: every timed call takes exactly `step`."""
    now = [0]

    def clock() -> int:
        now[0] += step
        return now[0]

    return clock


def test_the_sampler_speedup_takes_the_python_side_from_the_run_where_the_run_timed_it() -> None:
    params = SamplingParams(temperature=0.7, seed=5)
    cases = [
        SamplerCase([1, 2][:rows], [(1, params, [3]), (2, params, [4])][:rows], torch.zeros(rows, 6), 1)
        for rows in (1, 2, 1)
    ]
    # Every replayed call took 10 for either twin: the C twin's 30 over 4 rows is 7.5 a row. The run's Python
    # twin took 600 over 20 rows in 8 calls (two chunks of 4): 30 a row, 4x the C twin's.
    run = [[240, 8, 4], [360, 12, 4]]  # (ns, rows, calls) per chunk, as the recorder keeps them
    entry = _replay_sampler((_EchoTwin, _EchoTwin), cases, 3, _ticking_clock(), "cpu", run)
    assert entry["python_priced"] == "run" and entry["run_calls"] == 8
    assert entry["speedup"] == pytest.approx(4.0) and entry["steps"] == 3 and entry["rows"] == 4
    assert entry["low"] <= entry["speedup"] <= entry["high"]
    assert entry["python_us_per_step"] == pytest.approx(600 / 8 / 1e3)
    assert entry["native_us_per_step"] == pytest.approx(7.5 * 20 / 8 / 1e3)  # the C twin at the run's rows
    assert entry["replayed_python_over_run"] == pytest.approx(7.5 / 30)
    # A run whose Python twin drifted between its chunks (the same 30 a row in all) gets a wider interval.
    drifting = [[100, 8, 4], [500, 12, 4]]
    wide = _replay_sampler((_EchoTwin, _EchoTwin), cases, 3, _ticking_clock(), "cpu", drifting)
    assert wide["speedup"] == pytest.approx(4.0)
    assert wide["high"] - wide["low"] > entry["high"] - entry["low"]
    # A run whose sampler was not the Python twin gave nothing to price it by: the replay prices both twins.
    entry = _replay_sampler((_EchoTwin, _EchoTwin), cases, 3, _ticking_clock(), "cpu", None)
    assert entry["python_priced"] == "replay" and entry["speedup"] == pytest.approx(1.0)
    assert "replayed_python_over_run" not in entry


def test_the_c_sampler_priced_by_the_run_is_timed_by_its_own_clock_and_put_on_the_run_s_core_share() -> None:
    params = SamplingParams(temperature=0.7, seed=5)
    cases = [
        SamplerCase([1, 2][:rows], [(1, params, [3]), (2, params, [4])][:rows], torch.zeros(rows, 6), 1)
        for rows in (1, 2, 1)
    ]
    run = [[240, 8, 4], [360, 12, 4]]  # the run's Python twin: 30 a row
    # The replay's wall clock says 40 a call (a neighbour slowed the replay); the C twin's own clock says 5. In
    # the run the engine thread got half a core: its C call would have taken 10, 7.5 a row over the 4 rows.
    entry = _replay_sampler(
        (_EchoTwin, _EchoTwin),
        cases,
        3,
        _ticking_clock(40),
        "cpu",
        run,
        native_clock=_ticking_clock(5),
        core_share=0.5,
    )
    assert entry["native_clock"] == "thread cpu" and entry["core_share"] == 0.5
    assert entry["speedup"] == pytest.approx(4.0)
    assert entry["native_us_per_step"] == pytest.approx(7.5 * 20 / 8 / 1e3)
    assert entry["replayed_python_over_run"] == pytest.approx(40 * 3 / 4 / 30)  # the replay's own conditions
    # No core share known: a whole core.
    whole = _replay_sampler(
        (_EchoTwin, _EchoTwin), cases, 3, _ticking_clock(40), "cpu", run, native_clock=_ticking_clock(5)
    )
    assert whole["speedup"] == pytest.approx(8.0) and whole["core_share"] is None
    # Priced by the replay (no run to price by), both twins are timed by the same wall clock.
    both = _replay_sampler(
        (_EchoTwin, _EchoTwin), cases, 3, _ticking_clock(40), "cpu", None, native_clock=_ticking_clock(5)
    )
    assert both["python_priced"] == "replay" and both["speedup"] == pytest.approx(1.0)


def test_a_slow_drift_in_the_runs_sampler_time_widens_the_speedup_interval_more_than_scattered_noise() -> (
    None
):
    params = SamplingParams(temperature=0.7, seed=5)
    cases = [SamplerCase([1], [(1, params, [3])], torch.zeros(1, 6), 1) for _ in range(16)]
    # The same 64 chunks twice: in the run's order, the Python twin 20 a row for the first half and 40 for
    # the second (a machine that got busier); shuffled, the same times with no order to them.
    drifting = [[20 * 8, 8, 4]] * 32 + [[40 * 8, 8, 4]] * 32
    scattered = [drifting[i] for i in np.random.default_rng(1).permutation(64)]
    ordered = _replay_sampler((_EchoTwin, _EchoTwin), cases, 3, _ticking_clock(), "cpu", drifting)
    shuffled = _replay_sampler((_EchoTwin, _EchoTwin), cases, 3, _ticking_clock(), "cpu", scattered)
    assert ordered["speedup"] == pytest.approx(shuffled["speedup"]) == pytest.approx(3.0)
    assert ordered["high"] - ordered["low"] > 1.5 * (shuffled["high"] - shuffled["low"])


def test_sampler_cases_are_the_captured_calls_spread_over_the_run_and_share_no_row() -> None:
    params = SamplingParams(temperature=0.7, seed=5)
    log = WorkloadLog(sequences={1: (params, [10])})
    log.samples = [(step, [1], [7]) for step in range(10 * CAPTURE_EVERY)]
    log.logits_rows = [torch.full((1, 4), float(capture)) for capture in range(10)]  # ten captures
    cases = sampler_cases(log, limit=4)
    # Four of the ten, first and last included; each carries its own call's history and its own row.
    assert [len(case.registrations[0][2]) - 1 for case in cases] == [
        captured_call(log, c) for c in (0, 3, 6, 9)
    ]
    assert [case.logits[0, 0].item() for case in cases] == [0.0, 3.0, 6.0, 9.0]
    # A log without captures replays no sampler call (the section then says so).
    assert sampler_cases(WorkloadLog(sequences=log.sequences, samples=log.samples)) == []


def test_twins_take_turns_and_each_step_keeps_its_median_over_the_rounds() -> None:
    order: list[str] = []
    python_rounds = iter([[3, 3, 3], [3, 300, 3], [3, 3, 4]])  # round 2: another process took step 2's slice
    native_rounds = iter([[1, 1, 1], [1, 1, 1], [2, 1, 1]])

    def python() -> tuple[list[int], str]:
        order.append("P")
        return next(python_rounds), "same"

    def native() -> tuple[list[int], str]:
        order.append("N")
        return next(native_rounds), "same"

    (python_ns, native_ns), outputs = interleaved((python, native), repeats=3)
    assert "".join(order) == "PNNPPN"  # ABBA: steady drift hits both twins alike
    assert python_ns == [3, 3, 3] and native_ns == [1, 1, 1] and outputs == ["same", "same"]
    result = speedup_of(python_ns, native_ns, time_ordered=True)
    assert result["speedup"] == pytest.approx(3.0) and result["low"] == result["high"] == pytest.approx(3.0)


def test_the_speedup_is_total_python_time_over_total_native_time_with_an_interval_over_steps() -> None:
    # Cheap steps gain 2x, expensive ones 10x: Amdahl needs the ratio of totals (9x here), not a mean of ratios.
    python_ns = [2, 2, 100, 100] * 10
    native_ns = [1, 1, 10, 10] * 10
    result = speedup_of(python_ns, native_ns, time_ordered=False)
    assert result["speedup"] == pytest.approx(204 / 22)
    assert result["low"] < result["speedup"] < result["high"] and result["steps"] == 40


def test_a_replayed_speedup_takes_precedence_and_carries_its_interval_into_the_prediction() -> None:
    split = {
        "categories": {"interpreter": 0.6, "kernel": 0.4, "idle": 0.0},
        "components": {"sampler": 0.5, "model_kernels": 0.4},
    }
    breakdown = {"methods": {"spans": split}}
    replayed = {"sampler": {"speedup": 4.0, "low": 2.0, "high": 5.0, "steps": 24, "rows": 66}}
    verdict = diagnose(
        breakdown,
        native_speedups={"sampler": 50.0, "prepare": 3.0},
        measured_gains=None,
        collectors={},
        replayed=replayed,
    )
    sampler, prepare = verdict["predictions"]["sampler"], verdict["predictions"]["prepare"]
    assert sampler["speedup_source"] == "replay" and sampler["native_speedup"] == 4.0
    assert sampler["predicted_gain"] == pytest.approx(0.5 * 0.75)
    assert sampler["predicted_gain_low"] == pytest.approx(0.5 * 0.5)
    assert sampler["predicted_gain_high"] == pytest.approx(0.5 * 0.8)
    # Without a replay the caller's microbenchmark figure stands, and the reason says where it came from.
    assert prepare["speedup_source"] == "microbenchmark" and prepare["predicted_gain_low"] is None
    # The batch it was replayed at, since a C sampler's lead over Python's depends on it.
    assert any(
        "replaying 24 of this run's sampler steps of 2.8 sequences on average" in reason
        for reason in verdict["reasons"]
    )
    assert any("microbenchmark, not on this run's work" in reason for reason in verdict["reasons"])


def test_the_reason_says_when_replayed_calls_ran_at_the_fewer_threads_the_engine_had() -> None:
    split = {"categories": {"interpreter": 0.6, "kernel": 0.4}, "components": {"sampler": 0.5}}
    breakdown = {"methods": {"spans": split}}

    def reason(threads: dict[str, int], own: int) -> str:
        replayed = {
            "sampler": {"speedup": 4.0, "low": 2.0, "high": 5.0, "steps": 24, "rows": 66}
            | {"torch_threads": threads, "torch_threads_own": own}
        }
        verdict = diagnose(
            breakdown, native_speedups=None, measured_gains=None, collectors={}, replayed=replayed
        )
        return next(r for r in verdict["reasons"] if "A native sampler" in r)

    assert "(18 at the fewer torch threads the engine had then)" in reason({"1": 18, "2": 6}, own=2)
    assert "(all at the fewer torch threads" in reason({"1": 24}, own=2)
    assert "torch threads" not in reason({"2": 24}, own=2)  # never lowered: nothing to say
    assert "torch threads" not in reason({"1": 24}, own=1)  # one thread is all torch had


def test_every_timed_sampler_call_comes_after_its_warm_up_and_the_caches_evicted() -> None:
    events: list[str] = []

    class Twin(_EchoTwin):
        def sample(self, logits: torch.Tensor, seq_ids: list[int]) -> list[int]:
            events.append("sample")
            return super().sample(logits, seq_ids)

    def clock() -> int:
        events.append("clock")
        return len(events)

    params = SamplingParams(temperature=0.7, seed=5)
    case = SamplerCase([1], [(1, params, [3])], torch.full((1, 6), 4.0), 1)
    _ns, tokens = time_sampler_case(Twin, case, clock, evict=lambda logits: events.append("evict"))
    assert events == ["sample", "evict", "clock", "sample", "clock"] and tokens == [4]
    # The replay evicts before every timed call of both twins: 2 twins x 3 rounds x 2 cases.
    evicted: list[object] = []
    _replay_sampler((Twin, _EchoTwin), [case, case], 3, _ticking_clock(), "cpu", None, evictor=evicted.append)
    assert len(evicted) == 12 and all(isinstance(rows, torch.Tensor) for rows in evicted)


def test_the_cache_evictor_reads_a_buffer_and_the_host_rows_and_leaves_the_rows_as_they_were() -> None:
    rows = torch.tensor([[1.0, -0.0, float("nan")]])
    before = rows.clone()
    evict = CacheEvictor(nbytes=1 << 16)
    evict(rows)
    evict([1, 2])  # rows that are not a tensor (never in the replay) are left alone, not an error
    assert torch.equal(rows.isnan(), before.isnan()) and torch.equal(rows[:, :2], before[:, :2])
    assert torch.signbit(rows[0, 1])  # read, never rewritten: -0.0 stays -0.0


def test_interleaved_refuses_zero_repeats() -> None:
    # Each pass must run once: its outputs are the twins' agreement.
    with pytest.raises(ValueError, match="at least once"):
        interleaved((lambda: ([1], "p"), lambda: ([1], "n")), repeats=0)


def test_default_twins_pair_each_component_with_its_own_twins() -> None:
    _needs_twins()
    from infer_prof.native_paths.toggles import make_twin
    from infer_prof.profiler.replay.replay import default_twins

    shape = PoolShape(num_blocks=64, block_size=16, max_batch=8, max_batched_tokens=256)
    twins = default_twins(shape, ("scheduler", "kv_alloc", "prepare", "sampler"))
    assert list(twins) == ["scheduler", "kv_alloc", "prepare", "sampler"]
    sizes = {"num_blocks": 64, "block_size": 16, "max_batch": 8, "max_batched_tokens": 256}
    for name, (make_python, make_native) in twins.items():
        assert type(make_python()) is type(make_twin(name, False, **sizes))
        assert type(make_native()) is type(make_twin(name, True, **sizes))
        assert type(make_python()) is not type(make_native())
    assert list(default_twins(shape, ("sampler", "scheduler"))) == ["sampler", "scheduler"]
