"""--verify's in-run A/B: the sampler slot changes twins between steps without losing a sequence, and the gains come from units of blocks."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from infer_prof.profiler.checks.inrun_gain import inrun_gain, label_steps
from infer_prof.profiler.checks.twin_switch import SamplerSwitch, SwitchingSampler


class _Twin:
    """Records what it is asked; draws token 100 + its own id so the serving twin shows in the tokens."""

    def __init__(self, ident: int) -> None:
        self.ident = ident
        self.live: dict[int, list[int]] = {}
        self.pending: list[tuple[str, int, list[int]]] = []

    def add(self, seq_id: int, params: Any, prompt: list[int]) -> None:
        self.pending.append(("add", seq_id, list(prompt)))

    def remove(self, seq_id: int) -> None:
        self.pending.append(("remove", seq_id, []))

    def _apply(self) -> None:
        for kind, seq_id, prompt in self.pending:
            if kind == "add":
                self.live[seq_id] = prompt
            else:
                self.live.pop(seq_id, None)
        self.pending.clear()

    def sample(self, logits: Any, seq_ids: list[int]) -> list[int]:
        self._apply()
        assert all(seq_id in self.live for seq_id in seq_ids), (seq_ids, self.live)
        return [100 + self.ident] * len(seq_ids)

    def __len__(self) -> int:  # as both real twins do: what is pending is applied first
        self._apply()
        return len(self.live)


def test_the_twin_taking_over_gets_every_live_sequence_with_its_history() -> None:
    python, native = _Twin(0), _Twin(1)
    sampler = SwitchingSampler(python, native, block_steps=2)
    sampler.add(1, None, [5, 6])
    sampler.add(2, None, [7])
    assert sampler.sample(None, [1, 2]) == [100, 100]  # before start(): the Python twin, unlabelled
    assert sampler.calls == []
    sampler.remove(2)
    sampler.start()
    sampler.add(3, None, [9])  # registered with the twin serving, then carried over
    assert sampler.sample(None, [1, 3]) == [101, 101]  # block 0 is the C twin's (ABBA: C, Py, Py, C)
    assert native.live == {1: [5, 6, 100], 3: [9]}  # prompt + the token drawn before the switch
    assert sampler.switch_ns[0] > 0  # the switch, registrations applied, timed apart from the call
    assert python.pending[-2:] == [("remove", 1, []), ("remove", 3, [])]  # forgotten when it serves again
    assert sampler.sample(None, [1]) == [101]
    assert sampler.sample(None, [1]) == [100]  # block 1: Python
    assert python.live == {
        1: [5, 6, 100, 101, 101],
        3: [9, 101],
    }  # its stale entries removed before the new ones
    assert native.pending == [("remove", 1, []), ("remove", 3, [])]
    for expected in (100, 100, 100, 101, 101, 101):  # the rest of block 1, block 2 (Python), blocks 3-4 (C)
        assert sampler.sample(None, [3]) == [expected]
    assert [(block, served) for _, block, served in sampler.calls] == [
        (0, True),
        (0, True),
        (1, False),
        (1, False),
        (2, False),
        (2, False),
        (3, True),
        (3, True),
        (4, True),
    ]
    assert sampler.switches == 3  # blocks 3 and 4 are both the C twin's: no switch between them
    switched = [i for i, taken in enumerate(sampler.switch_ns) if taken > 0]
    assert len(sampler.switch_ns) == len(sampler.calls) and switched == [0, 2, 6]
    with pytest.raises(ValueError, match="block_steps=0"):
        SwitchingSampler(python, native, block_steps=0)


def _steps(rows: list[tuple[int, ...]]) -> pd.DataFrame:
    columns = ["start_ns", "end_ns", "batch_size", "prefill_tokens", "sampler_ms", "model_ms"][: len(rows[0])]
    return pd.DataFrame(rows, columns=columns).assign(step=lambda frame: range(len(frame)))


def test_the_gains_come_from_block_pairs_and_the_same_steps_gain_holds_the_kinds_of_step_fixed() -> None:
    # ABBA blocks of 8 steps: C, Python, Python, C. A step costs its kind's level (batch 8: 100 ms, batch 4:
    # 60 ms) plus 0.5 ms per prefill token, and the C twin saves 8 ms a step; its blocks run at batch 4
    # more often (a faster engine in an open loop), which makes busy time per token dearer.
    rows, calls, now = [], [], 0
    ms = 1_000_000
    for block, native in enumerate([True, False, False, True]):
        kinds = (
            [(8, 0)] * 2 + [(4, 0)] * 5 + [(8, 40)] if native else [(8, 0)] * 5 + [(4, 0)] * 2 + [(8, 120)]
        )
        for batch, prefill in kinds:
            length = ((100 if batch == 8 else 60) + 0.5 * prefill - (8 if native else 0)) * ms
            sampler = 2.0 if native else 10.0  # the 8 ms are the sampler's; the model's time is the same
            rows.append((now, now + int(length), batch, prefill, sampler, length / ms - sampler))
            calls.append((now + int(length) // 2, block, native))  # the sampler call inside the step
            now += int(length) + 5
    rows.append((now, now + 50 * ms, 8, 0, 0.0, 50.0))  # a step that made no sampler call: not labelled
    gain = inrun_gain(label_steps(calls, _steps(rows)), resamples=200)
    assert gain is not None and gain.pairs == 2 and gain.steps == 32
    python_mean_ms = (5 * 100 + 2 * 60 + 160) / 8
    assert gain.mix_gain == pytest.approx(8 / python_mean_ms)  # 8 ms a step over the Python steps' mean
    assert gain.mix_coverage == 1.0
    # Where it came from: all of it the sampler's phase, none the model's.
    assert gain.parts["sampler"] == pytest.approx(8 / python_mean_ms) and gain.parts[
        "model"
    ] == pytest.approx(0.0, abs=1e-9)
    native_ms_per_token = (2 * 92 + 5 * 52 + 112) / (2 * 8 + 5 * 4 + 8)
    python_ms_per_token = (5 * 100 + 2 * 60 + 160) / (5 * 8 + 2 * 4 + 8)
    assert gain.gain == pytest.approx(
        1 - native_ms_per_token / python_ms_per_token, rel=1e-6
    )  # the mixes differ
    assert gain.low <= gain.gain <= gain.high and gain.mix_low <= gain.mix_gain <= gain.mix_high
    assert gain.batch_native == pytest.approx(44 / 8) and gain.batch_python == pytest.approx(56 / 8)
    # A pair whose blocks did not both make steps is left out; without any complete pair there is no answer.
    one_pair = inrun_gain(
        label_steps(calls[:16], _steps(rows)), resamples=200
    )  # a gain, but nothing to resample
    assert one_pair is not None and one_pair.pairs == 1 and one_pair.low is None and one_pair.mix_high is None
    assert inrun_gain(label_steps(calls[:8], _steps(rows))) is None
    assert inrun_gain(label_steps([], _steps(rows))) is None
    assert label_steps(calls, _steps(rows))["native"].tolist() == [call[2] for call in calls]


def test_a_switchs_own_time_is_taken_out_of_its_step_before_the_gain() -> None:
    # Blocks of one step, C, Python, Python, C...: every Python step that follows a switch pays 3 ms for
    # it and every C one 1 ms, on top of the 8 ms a step the C twin saves. Taken out, the gain is the 8 ms.
    ms, rows, calls, switch_ns, now = 1_000_000, [], [], [], 0
    for block in range(16):
        native = block % 4 in (0, 3)
        switched = block == 0 or native != ((block - 1) % 4 in (0, 3))
        taken = (1.0 if native else 3.0) if switched else 0.0
        sampler = (2.0 if native else 10.0) + taken
        length = 90.0 + sampler
        rows.append((now, now + int(length * ms), 8, 0, sampler, 90.0))
        calls.append((now + 1000, block, native))
        switch_ns.append(int(taken * ms))
        now += int(length * ms) + 5
    steps = _steps(rows).assign(duration_ms=lambda frame: (frame.end_ns - frame.start_ns) / ms)
    with_switches = inrun_gain(label_steps(calls, steps), resamples=200)
    labelled = label_steps(calls, steps, switch_ns)
    without = inrun_gain(labelled, resamples=200)
    assert with_switches is not None and without is not None
    assert without.parts["sampler"] == pytest.approx(8 / 100) and without.mix_gain == pytest.approx(8 / 100)
    assert with_switches.parts["sampler"] > without.parts["sampler"]  # the Python twin's dearer switch
    assert "switch" not in without.parts  # the time taken out is not a phase of the step
    assert labelled["switch_ms"].tolist() == [taken / ms for taken in switch_ns]


def test_the_twins_own_phase_gets_an_interval_the_other_phases_noise_does_not_widen() -> None:
    # 40 ABBA pairs of 8-step blocks at one batch size: the model span wanders (noise of 8% of a step, slow
    # and step to step, the same for both twins) while the sampler costs 9 +- 0.2 ms in Python and 2 +- 0.2
    # ms in C. The whole gain's interval carries the model's noise; the sampler's part carries only its own.
    rng = np.random.default_rng(5)
    rows, calls, now, ms = [], [], 0, 1_000_000
    drift = 0.0
    for block in range(80):
        native = block % 4 in (0, 3)
        for _ in range(8):
            drift = 0.7 * drift + rng.normal(0.0, 6.0)
            model = 100.0 + drift + rng.normal(0.0, 4.0)
            sampler = (2.0 if native else 9.0) + rng.normal(0.0, 0.2)
            length = int((model + sampler) * ms)
            rows.append((now, now + length, 30, 0, sampler, model))
            calls.append((now + length // 2, block, native))
            now += length + 5
    labelled = label_steps(calls, _steps(rows))
    gain = inrun_gain(labelled, own="sampler", resamples=400)
    assert gain is not None and gain.pairs == 40
    python_mean_ms = (labelled["end_ns"] - labelled["start_ns"])[~labelled["native"]].mean() / ms
    # 7 ms saved over the Python steps' mean; the sampler's own noise moves its part by ~0.02 points.
    assert gain.parts["sampler"] == pytest.approx(7.0 / python_mean_ms, abs=0.001)
    assert gain.own_low <= gain.parts["sampler"] <= gain.own_high
    own_width, whole_width = gain.own_high - gain.own_low, gain.mix_high - gain.mix_low
    assert own_width < whole_width / 5
    # Without `own` no part gets an interval, and a phase the steps do not have gets none either.
    assert inrun_gain(labelled, resamples=50).own_low is None
    assert inrun_gain(labelled, own="scheduler", resamples=50).own_high is None


def _drifting_run(block_steps: int, steps: int = 1600, seed: int = 0) -> tuple[pd.DataFrame, float]:
    """Steps at one batch size whose model span drifts slowly (as this machine's does: lag-1 correlation
    ~0.9) around 100 ms, the same noise whatever the labels; the sampler costs 9 ms in Python and 2 in C.
    Labelled in ABBA blocks of `block_steps`; returns the labelled steps and the true gain."""
    rng = np.random.default_rng(seed)
    rows, calls, now, ms, drift = [], [], 0, 1_000_000, 0.0
    for index in range(steps):
        drift = 0.9 * drift + rng.normal(0.0, 3.0)
        block = index // block_steps
        native = block % 4 in (0, 3)
        model, sampler = 100.0 + drift + rng.normal(0.0, 2.0), 2.0 if native else 9.0
        length = int((model + sampler) * ms)
        rows.append((now, now + length, 30, 0, sampler, model))
        calls.append((now + length // 2, block, native))
        now += length + 5
    return label_steps(calls, _steps(rows)), 7.0 / 109.0


def test_blocks_of_one_step_resampled_in_units_of_eight_narrow_the_interval_of_a_slowly_drifting_run() -> (
    None
):
    # The same drift, labelled two ways: blocks of 8 steps resampled by pairs (16 steps), and blocks of
    # 1 step resampled by units of 8 blocks (8 steps). The drift is shared by neighbouring steps, so the
    # more often the twins change, the more of it cancels (over seeds 0-19 the width was 0.23-0.31x, and the
    # narrow interval held the truth in all 20). Both must hold it here.
    eights, truth = _drifting_run(8)
    ones, _ = _drifting_run(1)
    wide = inrun_gain(eights, unit_blocks=2, resamples=400)
    narrow = inrun_gain(ones, unit_blocks=SamplerSwitch(block_steps=1).unit_blocks, resamples=400)
    assert wide is not None and narrow is not None
    assert (wide.pairs, wide.units) == (100, 100) and (narrow.pairs, narrow.units) == (800, 200)
    assert wide.mix_low <= truth <= wide.mix_high and narrow.mix_low <= truth <= narrow.mix_high
    assert narrow.mix_high - narrow.mix_low < 0.5 * (wide.mix_high - wide.mix_low)
    with pytest.raises(ValueError, match="unit_blocks=3"):
        inrun_gain(ones, unit_blocks=3)
    # A unit is UNIT_STEPS (8) steps' worth of blocks, even, and at least one pair.
    assert [SamplerSwitch(block_steps=size).unit_blocks for size in (1, 2, 3, 8, 16)] == [8, 4, 2, 2, 2]


def test_a_switched_greedy_run_draws_the_tokens_of_an_unswitched_one(tmp_path: Path) -> None:
    """Greedy draws need no RNG or history, so both twins taking turns must give the Python twin's tokens."""
    from infer_prof.native_paths.loader import available
    from infer_prof.profiler.replay.recorder import install_recorder
    from infer_prof.profiler.session.builder import load_for_options
    from infer_prof.profiler.session.options import EngineOptions
    from infer_prof.profiler.session.session import SessionHooks, run_session
    from infer_prof.scenarios.sampling import SamplingSettings
    from infer_prof.scenarios.spec import load_scenario

    if available().get("sampler") is not True:
        pytest.skip("the C twins are not built (python native_paths/build.py)")
    options = EngineOptions(model="synthetic:tiny", seed=0)
    loaded = load_for_options(options)
    spec = dataclasses.replace(
        load_scenario("concurrency-30").with_overrides(num_requests=24),
        sampling=SamplingSettings(temperature=0.0),
        sampling_mix=(),
    )
    logs = {}

    def recorded(name: str, switch: SamplerSwitch | None = None):  # type: ignore[no-untyped-def]
        def on_engine(engine: Any) -> None:
            if switch is not None:
                switch.install(engine)
            logs[name] = install_recorder(engine)  # in front of whichever sampler the engine has

        return on_engine

    plain = run_session(
        options,
        spec,
        tmp_path / "plain",
        loaded=loaded,
        replay=False,
        hooks=SessionHooks(on_engine=recorded("plain")),
    )
    switch = SamplerSwitch(block_steps=2)
    switched = run_session(
        options,
        spec,
        tmp_path / "switched",
        loaded=loaded,
        replay=False,
        hooks=SessionHooks(on_engine=recorded("switched", switch), on_collectors=switch.start),
    )
    assert switch.switches >= 2 and {native for _, _, native in switch.calls} == {True, False}
    assert switched.result.metrics["completed"] == plain.result.metrics["completed"] == 24

    def drawn(log: Any) -> list[tuple[int, ...]]:  # each sequence's tokens; ids may differ between runs
        by_seq: dict[int, list[int]] = {}
        for _step, seq_ids, tokens in log.samples:
            for seq_id, token in zip(seq_ids, tokens):
                by_seq.setdefault(seq_id, []).append(token)
        return sorted(tuple(tokens) for tokens in by_seq.values())

    assert drawn(logs["switched"]) == drawn(logs["plain"]) and len(drawn(logs["plain"])) >= 24
    gain = inrun_gain(label_steps(switch.calls, switched.steps), resamples=200)
    assert gain is not None and gain.pairs >= 1 and np.isfinite(gain.gain)
