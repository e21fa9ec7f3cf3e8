"""--verify's switched sampler runs: a run too noisy to judge its prediction is followed by more, pooled."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from infer_prof.profiler.checks.inrun_gain import inrun_gain, label_steps
from infer_prof.profiler.checks.verify import AGREEMENT_BAND, MAX_SWITCHED_RUNS, TURNS_FILE, _switched_run
from infer_prof.profiler.session.options import EngineOptions


def _noisy_run(seed: int, steps: int = 240) -> tuple[pd.DataFrame, list[tuple[int, int, bool]]]:
    """ABBA blocks of one step; the C twin saves 6 ms of the sampler's 10, the model's 20 ms wander by 6."""
    rng = np.random.default_rng(seed)
    rows, calls, now = [], [], 0
    for block in range(steps):
        native = block % 4 in (0, 3)
        sampler = 4.0 if native else 10.0
        model = 20.0 + rng.normal(0.0, 6.0)
        length = int((sampler + model) * 1e6)
        rows.append((now, now + length, 8, 0, sampler, model))
        calls.append((now + length // 2, block, native))
        now += length + 5
    columns = ["start_ns", "end_ns", "batch_size", "prefill_tokens", "sampler_ms", "model_ms"]
    return pd.DataFrame(rows, columns=columns).assign(step=lambda frame: range(len(frame))), calls


def _half_width(runs: list[tuple[pd.DataFrame, list[tuple[int, int, bool]]]]) -> float:
    frames = []
    for steps, calls in runs:
        labelled = label_steps(calls, steps)
        offset = 0 if not frames else (int(frames[-1]["block"].max()) // 8 + 1) * 8
        frames.append(labelled.assign(block=labelled["block"] + offset))
    gain = inrun_gain(pd.concat(frames, ignore_index=True), own="sampler", unit_blocks=8)
    assert gain is not None and gain.mix_low is not None and gain.mix_high is not None
    return (gain.mix_high - gain.mix_low) / 2


class _Runs:
    """run_again for _switched_run: hands out prepared runs, as if each had been driven with the switch."""

    def __init__(self, runs: list[tuple[pd.DataFrame, list[tuple[int, int, bool]]]], interrupt_at: int = -1):
        self.runs, self.labels, self.interrupt_at = list(runs), [], interrupt_at

    def __call__(self, native: frozenset[str], run_dir: Path, label: str, switch: Any) -> Any:
        steps, calls = self.runs[len(self.labels)]
        interrupted = len(self.labels) == self.interrupt_at
        self.labels.append(label)
        switch.sampler = SimpleNamespace(calls=calls, switch_ns=[0] * len(calls), switches=len(calls) - 1)
        run_dir.mkdir(parents=True)
        return SimpleNamespace(
            run_dir=run_dir, result=SimpleNamespace(metrics={}), steps=steps, interrupted=interrupted
        )


def _verify(tmp_path: Path, predicted: float, runs: _Runs) -> dict[str, Any] | str:
    outcome = SimpleNamespace(run_dir=tmp_path, result=SimpleNamespace(metrics={}))
    prediction = {
        "predicted_gain": np.float64(predicted),  # as a verdict gives it: numpy bools compared
        "share": 0.3,
        "native_speedup": 2.5,
        "speedup_source": "replay",
    }
    return _switched_run(outcome, EngineOptions(model="synthetic:tiny"), prediction, runs)  # type: ignore[arg-type]


def test_a_switched_run_too_noisy_to_judge_is_followed_by_more_until_one_resolves(tmp_path: Path) -> None:
    runs = [_noisy_run(seed) for seed in range(MAX_SWITCHED_RUNS)]
    one, two, three = (_half_width(runs[:count]) for count in (1, 2, 3))
    assert three < two < one  # pooled runs narrow the interval
    # A prediction whose band lies between what one run and two runs resolve: two runs, pooled.
    entry = _verify(tmp_path / "a", (one + two) / 2 / AGREEMENT_BAND, fed := _Runs(runs))
    assert isinstance(entry, dict) and entry["resolves"] is True
    assert entry["run_dirs"] == ["verify/switched-sampler", "verify/switched-sampler-2"]
    assert entry["steps"] == 2 * 240 and entry["half_width"] == pytest.approx(two)
    assert all((tmp_path / "a" / run_dir / TURNS_FILE).exists() for run_dir in entry["run_dirs"])
    assert fed.labels[1].endswith(", run 2 of up to 3")
    # A band one run resolves: no second run.
    entry = _verify(tmp_path / "b", 2 * one / AGREEMENT_BAND, fed := _Runs(runs))
    assert (
        isinstance(entry, dict) and entry["run_dirs"] == ["verify/switched-sampler"] and len(fed.labels) == 1
    )
    # A band no number of runs resolves: MAX_SWITCHED_RUNS, then the entry says it does not resolve.
    entry = _verify(tmp_path / "c", three / 2 / AGREEMENT_BAND, _Runs(runs))
    assert (
        isinstance(entry, dict) and len(entry["run_dirs"]) == MAX_SWITCHED_RUNS and entry["resolves"] is False
    )


def test_an_interrupted_later_run_leaves_the_runs_before_it_standing(tmp_path: Path) -> None:
    runs = [_noisy_run(seed) for seed in range(MAX_SWITCHED_RUNS)]
    entry = _verify(tmp_path, 0.001, _Runs(runs, interrupt_at=1))
    assert (
        isinstance(entry, dict) and entry["run_dirs"] == ["verify/switched-sampler"] and entry["steps"] == 240
    )
    # An interrupted first run gives no entry, only why.
    assert "interrupted" in str(_verify(tmp_path / "first", 0.001, _Runs(runs, interrupt_at=0)))
