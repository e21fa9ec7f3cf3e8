"""--what-if on the built-in engine: the turns, the delay through the tracer's hooks, and a planted serial and overlapped component."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from infer_prof.errors import OptionError
from infer_prof.profiler.checks.slowdown import (
    MAX_LEVEL,
    SlowdownExperiment,
    analyse,
    call_accuracy,
    check_components,
    delay_blocks,
    label_steps,
    level_scale,
    turn_of,
)
from infer_prof.profiler.collectors.spans import RecordingTracer


class FakeClock:
    """Advances by `tick` ns each reading, so a busy loop on it ends; work moves it by hand."""

    def __init__(self, tick: int = 100) -> None:
        self.now = 0
        self.tick = tick

    def __call__(self) -> int:
        self.now += self.tick
        return self.now


class FakeEngine:
    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer


def test_turns_go_off_on_on_off_per_experiment_and_reverse_every_other_cycle() -> None:
    turns = [turn_of(block, ("sampler", "scheduler"), (0.5, 1.0)) for block in range(32)]
    first = [(turn.component, turn.level) for turn in turns[:16]]
    assert first[:8] == [
        (None, 0.0),
        ("sampler", 0.5),
        ("sampler", 0.5),
        (None, 0.0),
        (None, 0.0),
        ("sampler", 1.0),
        ("sampler", 1.0),
        (None, 0.0),
    ]
    assert first[13] == ("scheduler", 1.0)
    assert (turns[17].component, turns[17].level) == ("scheduler", 1.0)  # the next cycle starts from the end
    assert (turns[29].component, turns[29].level) == ("sampler", 0.5)
    assert sum(turn.level > 0 for turn in turns) == 16


def test_a_small_components_levels_are_scaled_until_its_delay_stands_out() -> None:
    # A quarter of the step at the top level: a 2.5% sampler's levels go to 5x and 10x; a 60% one keeps its own.
    assert level_scale(0.025, (0.5, 1.0)) == pytest.approx(10.0)
    assert level_scale(0.05, (0.5, 1.0)) == pytest.approx(5.0)
    assert level_scale(0.6, (0.5, 1.0)) == 1.0 and level_scale(None, (0.5, 1.0)) == 1.0
    assert level_scale(0.001, (0.5, 1.0)) == pytest.approx(MAX_LEVEL)  # never past the cap
    turns = [turn_of(block, ("sampler", "scheduler"), (0.5, 1.0), {"sampler": 5.0}) for block in range(16)]
    assert [(turn.component, turn.level) for turn in turns if turn.component] == [
        ("sampler", 2.5),
        ("sampler", 2.5),
        ("sampler", 5.0),
        ("sampler", 5.0),
        ("scheduler", 0.5),
        ("scheduler", 0.5),
        ("scheduler", 1.0),
        ("scheduler", 1.0),
    ]
    with pytest.raises(ValueError, match="no level past"):
        SlowdownExperiment(("sampler",), scales={"sampler": 2 * MAX_LEVEL})


def test_unknown_components_and_impossible_levels_are_refused_in_one_line() -> None:
    assert check_components(["sampler", " scheduler", "sampler", ""]) == ("sampler", "scheduler")
    with pytest.raises(OptionError, match="no such component; use scheduler, kv_alloc"):
        check_components(["sampler", "model_glue"])
    with pytest.raises(OptionError, match="at least one component"):
        check_components([" "])
    with pytest.raises(OptionError, match="levels"):
        check_components(["sampler"], (0.0, 1.0))


class RecordingSpinner:
    """A spinner that adds what it is asked, on the fake clock, and notes each call's released share."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.released: list[float] = []

    def calibrate(self) -> int:
        return 0

    def spin(self, start_ns: int, requested_ns: int, released: float = 0.0) -> int:
        self.released.append(released)
        self.clock.now = start_ns + requested_ns
        return requested_ns


def test_each_components_delay_releases_the_gil_for_its_own_share() -> None:
    clock = FakeClock()
    tracer = RecordingTracer(clock=clock, cpu_clock=None)
    spinner = RecordingSpinner(clock)
    experiment = SlowdownExperiment(
        ["sampler", "scheduler"], released={"sampler": 0.5}, block_steps=1, clock=clock, spinner=spinner
    )
    assert experiment.released == {"sampler": 0.5, "scheduler": 0.0}
    experiment.install(FakeEngine(tracer))
    experiment.start()
    for _ in range(16):
        with tracer.span("step"):
            for name in ("scheduler", "sampler"):
                with tracer.span(name):
                    clock.now += 1_000_000
    calls = {name: len(found) for name, found in experiment.calls.items()}
    assert calls["sampler"] > 0 and calls["scheduler"] > 0
    assert sorted(spinner.released) == [0.0] * calls["scheduler"] + [0.5] * calls["sampler"]
    with pytest.raises(ValueError, match="released"):
        SlowdownExperiment(["sampler"], released={"sampler": 1.5})


def _fake_run(overlap: float, *, steps: int = 400, seed: int = 0) -> tuple[SlowdownExperiment, pd.DataFrame]:
    """Steps of a fixed base and a sampler of 1 ms, of which `overlap` runs beside the step (and so does its delay)."""
    clock = FakeClock()
    tracer = RecordingTracer(clock=clock, cpu_clock=None)
    experiment = SlowdownExperiment(["sampler"], block_steps=2, clock=clock)
    experiment.install(FakeEngine(tracer))
    experiment.start()
    rng = np.random.default_rng(seed)
    rows = []
    for step in range(steps):
        with tracer.span("step"):
            start = clock.now
            with tracer.span("scheduler"):
                clock.now += 2_000_000
            before = clock.now
            with tracer.span("sampler"):
                clock.now += 1_000_000
            beside = (
                clock.now - before
            ) * overlap  # the part of the sampler and its delay the step did not wait for
            clock.now += int(rng.normal(0.0, 50_000))
        rows.append({"step": step, "duration_ms": (clock.now - start - beside) / 1e6, "sampler_ms": 1.0})
    return experiment, pd.DataFrame(rows)


@pytest.mark.parametrize(("overlap", "expected"), [(0.0, 1.0), (1.0, 0.0), (0.6, 0.4)])
def test_the_tracers_hooks_delay_the_named_component_and_its_response_gives_the_sensitivity(
    overlap: float, expected: float
) -> None:
    experiment, steps = _fake_run(overlap)
    labelled = label_steps(experiment.labels(), steps)
    assert len(labelled) == 400
    delayed = labelled[labelled["what_if_level"] > 0]
    # Each delayed call added its level of the call's own 1 ms (give or take the fake clock's tick).
    assert np.allclose(delayed["what_if_added_ms"], delayed["what_if_level"] * 1.0, atol=0.01)
    assert (labelled.loc[labelled["what_if_level"] == 0, "what_if_added_ms"] == 0).all()
    (found,) = analyse(labelled, ["sampler"], resamples=400)
    assert found.void is None and found.sensitivity is not None
    sensitivity = found.sensitivity
    assert sensitivity.value == pytest.approx(expected, abs=0.05)
    assert sensitivity.low is not None and sensitivity.high is not None
    assert sensitivity.low <= expected <= sensitivity.high and sensitivity.high - sensitivity.low < 0.2
    assert sensitivity.linear and [level.level for level in sensitivity.per_level] == [0.5, 1.0]
    assert found.accuracy == pytest.approx(1.0, abs=0.02)
    assert len(experiment.calls["sampler"]) == int((labelled["what_if_calls"]).sum()) == len(delayed)
    median_error, within = call_accuracy(experiment.calls["sampler"])
    assert median_error is not None and median_error < 0.01 and within == 1.0
    assert (
        found.share_off == pytest.approx(1.0 / 3.0, abs=0.02) if overlap == 0 else found.share_off is not None
    )


def test_call_accuracy_is_per_call_not_summed() -> None:
    # One call preempted far past its deadline moves the sum's ratio, not the median call's.
    calls = [(1_000_000, 1_001_000)] * 9 + [(1_000_000, 5_000_000)]
    median_error, within = call_accuracy(calls)
    assert median_error == pytest.approx(0.001) and within == pytest.approx(0.9)
    assert call_accuracy([]) == (None, None) and call_accuracy([(0, 10)]) == (None, None)


def test_only_the_turns_of_the_component_and_the_off_turns_make_its_blocks() -> None:
    labels = pd.DataFrame(
        {
            "step": range(8),
            "block": [0, 1, 2, 3, 4, 5, 6, 7],
            "what_if_component": ["", "sampler", "sampler", "", "", "prepare", "prepare", ""],
            "what_if_level": [0.0, 0.5, 0.5, 0.0, 0.0, 0.5, 0.5, 0.0],
            "what_if_added_ms": [0.0, 1.0, 1.0, 0.0, 0.0, 2.0, 2.0, 0.0],
            "what_if_requested_ms": [0.0, 1.0, 1.0, 0.0, 0.0, 2.0, 2.0, 0.0],
            "what_if_calls": [0, 1, 1, 0, 0, 1, 1, 0],
        }
    )
    steps = pd.DataFrame({"step": range(8), "duration_ms": [10.0, 11, 11, 10, 10, 12, 12, 10]})
    labelled = label_steps(labels, steps)
    assert [block.index for block in delay_blocks(labelled, "sampler")] == [0, 1, 2, 3, 4, 7]
    sampler, prepare, detokenizer = analyse(labelled, ["sampler", "prepare", "detokenizer"], resamples=50)
    assert sampler.sensitivity is not None and sampler.sensitivity.value == pytest.approx(1.0)
    assert prepare.sensitivity is not None and prepare.sensitivity.value == pytest.approx(1.0)
    assert (
        detokenizer.sensitivity is None
        and detokenizer.void is not None
        and "no delay-on block" in detokenizer.void
    )
    assert detokenizer.accuracy is None


def test_steps_are_compared_net_of_what_their_kind_takes() -> None:
    """Prefill steps take far longer than decodes; taking each kind's time out narrows the interval around the truth."""
    rng = np.random.default_rng(2)
    rows = []
    for step in range(480):
        block = step // 2
        turn = turn_of(block, ("sampler",), (0.5, 1.0))
        prefill = int(rng.integers(64, 320)) if rng.random() < 0.3 else 0
        added = turn.level * 4.0
        duration = 20.0 + (15.0 + 0.1 * prefill if prefill else 0.0) + added + rng.normal(0.0, 0.2)
        rows.append(
            {
                "step": step,
                "block": block,
                "what_if_component": turn.component or "",
                "what_if_level": turn.level,
                "what_if_added_ms": added,
                "what_if_requested_ms": added,
                "what_if_calls": 1,
                "duration_ms": duration,
                "batch_size": 8,
                "prefill_tokens": prefill,
            }
        )
    labelled = pd.DataFrame(rows)
    (adjusted,) = analyse(labelled, ["sampler"], resamples=400)
    (plain,) = analyse(labelled.drop(columns=["batch_size", "prefill_tokens"]), ["sampler"], resamples=400)
    assert adjusted.sensitivity is not None and plain.sensitivity is not None
    assert adjusted.sensitivity.low is not None and adjusted.sensitivity.high is not None
    assert plain.sensitivity.low is not None and plain.sensitivity.high is not None
    assert adjusted.sensitivity.low <= 1.0 <= adjusted.sensitivity.high
    assert adjusted.sensitivity.high - adjusted.sensitivity.low < 0.2
    assert plain.sensitivity.high - plain.sensitivity.low > 3 * (
        adjusted.sensitivity.high - adjusted.sensitivity.low
    )


def test_a_run_without_a_recording_tracer_is_refused() -> None:
    with pytest.raises(RuntimeError, match="profiled"):
        SlowdownExperiment(["sampler"]).install(FakeEngine(object()))


@pytest.mark.slow  # a profiled session: tens of seconds on a busy two-core machine
def test_a_profiled_synthetic_run_delays_the_sampler_in_its_turns(tmp_path: Any) -> None:
    """The experiment in a real session: steps labelled by the tracer's numbers, delayed calls counted and timed."""
    from infer_prof.profiler.session.builder import load_for_options
    from infer_prof.profiler.session.options import EngineOptions
    from infer_prof.profiler.session.session import SessionHooks, run_session
    from infer_prof.scenarios.spec import load_scenario

    options = EngineOptions(model="synthetic:tiny", seed=0)
    spec = load_scenario("concurrency-30").with_overrides(num_requests=16)
    experiment = SlowdownExperiment(["sampler", "detokenizer"], block_steps=1)
    outcome = run_session(
        options,
        spec,
        tmp_path / "what-if",
        loaded=load_for_options(options),
        replay=False,
        write=False,
        hooks=SessionHooks(on_engine=experiment.install, on_collectors=experiment.start),
    )
    labelled = label_steps(experiment.labels(), outcome.steps)
    assert len(labelled) == len(experiment.rows) > 8
    assert set(labelled["what_if_component"]) >= {"", "sampler"}
    sampler, detokenizer = analyse(labelled, ["sampler", "detokenizer"], resamples=100)
    assert sampler.calls > 0 and sampler.added_ms > 0 and sampler.requested_ms > 0
    assert sampler.share_off is not None and 0 < sampler.share_off < 1
    # Timing is the machine's to decide; what the test holds is that each experiment came out as a figure or a reason.
    for found in (sampler, detokenizer):
        assert found.sensitivity is not None or found.void is not None
        assert found.void is not None or found.sensitivity is not None and found.sensitivity.high is not None
