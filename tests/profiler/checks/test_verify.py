"""--verify: the measured-gain unit matches the Amdahl prediction's, and a verify pass rewrites result.json."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from infer_prof.profiler.analysis.diagnose import amdahl_gain
from infer_prof.profiler.checks.verify import (
    busy_ns_per_token,
    compare_component,
    component_ns_per_token,
    python_spread,
)


def fake_result(wall_s: float, idle: float, sampler: float, tokens: int) -> Any:
    """Just what verify reads from a RunResult: the spans split (fractions of wall) and tokens generated."""
    spans = {"categories": {"idle": idle}, "components": {"sampler": sampler}}
    return SimpleNamespace(
        breakdown={"wall_s": wall_s, "methods": {"spans": spans}}, engine={"tokens_generated": tokens}
    )


def test_busy_time_per_token_leaves_idle_out() -> None:
    # 2 s of wall, half of it waiting for work, 1,000 tokens: 1 ms of busy time per token.
    result = fake_result(2.0, 0.5, 0.25, 1000)
    assert busy_ns_per_token(result) == pytest.approx(1e6)
    assert component_ns_per_token(result, "sampler") == pytest.approx(0.5e6)
    assert busy_ns_per_token(fake_result(2.0, 0.5, 0.25, 0)) is None


def test_measured_and_predicted_gain_share_one_unit() -> None:
    python = fake_result(2.0, 0.5, 0.25, 1000)  # busy 1 ms/token, sampler 0.5 ms/token: share 50%
    native = fake_result(1.5, 0.6, 0.05, 1000)  # busy 0.6 ms/token, sampler 0.075 ms/token
    entry = compare_component([python], native, "sampler", share=0.5, given_speedup=None)
    assert entry["span_speedup"] == pytest.approx(0.5 / 0.075)
    assert entry["speedup_source"] == "verify-run spans"
    assert entry["predicted_gain"] == pytest.approx(amdahl_gain(0.5, 0.5 / 0.075)) == pytest.approx(0.425)
    assert entry["measured_gain"] == pytest.approx(1 - 0.6 / 1.0)
    assert entry["agreement"] == pytest.approx(0.4 / 0.425)


def test_a_microbenchmark_speedup_takes_precedence_and_python_runs_average() -> None:
    first, second = (
        fake_result(2.0, 0.0, 0.5, 1000),
        fake_result(2.4, 0.0, 0.5, 1000),
    )  # busy 2.0 and 2.4 ms/token
    native = fake_result(1.1, 0.0, 0.1, 1000)
    entry = compare_component([first, second], native, "sampler", share=0.5, given_speedup=4.0)
    assert entry["native_speedup"] == 4.0 and entry["speedup_source"] == "microbenchmark"
    assert entry["predicted_gain"] == pytest.approx(0.5 * 0.75)
    assert entry["python_busy_us_per_token"] == pytest.approx(2200.0)
    assert entry["measured_gain"] == pytest.approx(1 - 1.1 / 2.2)
    assert python_spread([first, second]) == pytest.approx(0.2)
    assert python_spread([first]) is None


@pytest.mark.parametrize("void", [False, True])
def test_verify_rewrites_result_json_with_both_gains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, void: bool
) -> None:
    from infer_prof.native_paths.loader import available
    from infer_prof.profiler.checks.verify import MAX_SWITCHED_RUNS, verify_predictions
    from infer_prof.profiler.session.builder import load_for_options
    from infer_prof.profiler.session.options import EngineOptions
    from infer_prof.profiler.session.session import SessionHooks, run_session
    from infer_prof.scenarios.spec import load_scenario

    if available().get("sampler") is not True:
        pytest.skip("the C twins are not built (python native_paths/build.py)")
    # kv is already native in the main run: verify must skip it and run the sampler, scheduler and prepare.
    options = EngineOptions(model="synthetic:tiny", native=frozenset({"kv_alloc"}))
    loaded = load_for_options(options)
    spec = load_scenario("concurrency-30").with_overrides(num_requests=8)
    calls: list[tuple[frozenset[str], bool]] = []

    def run_again(native: frozenset[str], out: Path, label: str, switch):  # type: ignore[no-untyped-def]
        calls.append((native, switch is not None))
        hooks = SessionHooks(on_engine=switch.install, on_collectors=switch.start) if switch else None
        return run_session(dataclasses.replace(options, native=native), spec, out, loaded=loaded, hooks=hooks)

    # The sampler's twins take turns in blocks short enough for this short run.
    monkeypatch.setattr("infer_prof.profiler.checks.twin_switch.BLOCK_STEPS", 2)

    # The drift guard's answer is fixed here (its arithmetic is tested in test_yardstick.py): short runs on a
    # shared machine move the yardstick either way, and this test is about the plumbing of both paths.
    reason = "void: the machine changed (planted)" if void else None
    monkeypatch.setattr("infer_prof.profiler.checks.verify.drift_void", lambda *args, **kwargs: reason)
    main = run_session(options, spec, tmp_path / "run", loaded=loaded)
    interval = dict(main.result.verdict["interpreter_interval"])
    section = verify_predictions(
        main, options, stop_event=threading.Event(), native_speedups=None, run_again=run_again
    )

    # Interleaved: every C-twin run is followed by a Python run, so each has a Python run on either side;
    # the sampler's twins take turns within runs of the main run's configuration, one after another: a run too
    # noisy to judge the prediction is followed by another, so how many depends on this machine's noise.
    python = frozenset({"kv_alloc"})
    switched = [index for index, (_, has_switch) in enumerate(calls) if has_switch]
    assert 1 <= len(switched) <= MAX_SWITCHED_RUNS and switched == list(range(2, 2 + len(switched)))
    assert [call for call in calls if not call[1]] == [
        (frozenset({"kv_alloc", "scheduler"}), False),
        (python, False),
        (frozenset({"kv_alloc", "prepare"}), False),
        (python, False),
    ]
    assert all(native == python for native, has_switch in calls if has_switch)
    data = json.loads((tmp_path / "run" / "result.json").read_text())
    assert data["config"]["verify"] is True
    # The verdict made again with the measured gains keeps the run's interval (the spans' alone here).
    assert data["verdict"]["interpreter_interval"] == interval
    sampler = data["verdict"]["predictions"]["sampler"]
    scheduler = data["verdict"]["predictions"]["scheduler"]
    if void:
        # A void run's gain is not the twin's: it is kept in the details with the reason, never in the verdict.
        # The in-run sampler has no whole-run drift to guard against: its pairs of blocks cancel it.
        details = data["verdict"]["verify"]["components"]
        assert scheduler.get("measured_gain") is None and details["scheduler"]["void"] == reason
        assert (
            details["sampler"]["void"] is None
            and sampler["measured_gain"] == details["sampler"]["measured_gain"]
        )
        assert any(reason in spot for spot in data["verdict"]["blind_spots"])
        return
    assert isinstance(sampler["predicted_gain"], float) and isinstance(sampler["measured_gain"], float)
    assert sampler["native_speedup"] > 0
    details = data["verdict"]["verify"]
    assert (
        set(details["components"]) == {"sampler", "scheduler", "prepare"} and "kv_alloc" in details["skipped"]
    )
    assert (
        details["components"]["sampler"]["measured_gain"] == sampler["measured_gain"]
    )  # in-run: at the same steps
    assert (
        details["components"]["scheduler"]["measured_gain"]
        == data["verdict"]["predictions"]["scheduler"]["measured_gain"]
    )
    assert (tmp_path / "run" / details["components"]["sampler"]["run_dir"] / "result.json").exists()
    assert len(details["components"]["sampler"]["run_dirs"]) == len(switched)  # every switched run pooled
    assert details["python_runs"] == 3  # the main run and one after each whole-run C-twin run
    # The prepare twin ran after the scheduler's: its neighbours are the Python runs after each of them.
    assert details["components"]["prepare"]["python_neighbours"] == [
        "verify/python-after-scheduler",
        "verify/python-after-prepare",
    ]
    assert details["components"]["scheduler"]["python_neighbours"] == [".", "verify/python-after-scheduler"]
    entry = details["components"]["sampler"]
    assert entry["method"] == "in-run" and entry["pairs"] >= 1 and entry["switches"] >= 2
    # Which twin served each step, kept with each switched run; a noisy first run is followed by more, pooled.
    assert entry["turns_files"][0] == entry["turns"] and len(entry["turns_files"]) == len(entry["run_dirs"])
    turns = pd.concat([pd.read_csv(tmp_path / "run" / name) for name in entry["turns_files"]])
    assert set(turns["native"]) == {True, False} and len(turns) >= entry["steps"]
    assert entry["measured_low"] <= entry["measured_gain"] <= entry["measured_high"] or entry["pairs"] == 1
    assert 0.0 < entry["mix_coverage"] <= 1.0 and isinstance(entry["busy_gain"], float)
    assert entry["batch_size_mean"]["python"] > 0 and entry["batch_size_mean"]["native"] > 0
    prepare = details["components"]["prepare"]
    assert 0.0 < prepare["mix_coverage"] <= 1.0 and prepare["batch_size_mean"]["native"] > 0
    assert section == details
    # The noise floor is in result.json next to the whole-run gains, not only on the terminal.
    assert scheduler["within_noise"] == (abs(scheduler["measured_gain"]) < details["python_spread"])
    assert any(
        "noise" in spot and f"{details['python_spread']:.1%}" in spot
        for spot in data["verdict"]["blind_spots"]
    )


def _steps(rows: list[tuple[int, int, float]]) -> pd.DataFrame:
    """Step rows (batch size, prefill tokens, duration ms) as a steps table has them."""
    return pd.DataFrame(rows, columns=["batch_size", "prefill_tokens", "duration_ms"])


def test_the_mix_matched_gain_weighs_each_kind_of_step_as_the_python_runs_had_it() -> None:
    from infer_prof.profiler.checks.verify import mix_matched_gain

    # The native run makes every kind of step 10% faster but runs smaller batches (as an open loop does
    # when the engine is faster): per step kind it is 10% faster, whatever its own mix.
    python = _steps([(8, 0, 100.0)] * 6 + [(8, 50, 200.0)] * 2 + [(4, 0, 60.0)] * 2)
    native = _steps([(8, 0, 90.0)] + [(8, 50, 180.0)] + [(4, 0, 54.0)] * 8 + [(2, 0, 30.0)] * 5)
    gain, coverage = mix_matched_gain([python], native)
    assert gain == pytest.approx(0.10)
    assert coverage == 1.0
    # A kind of step the native run never made is left out, and the coverage says how much was.
    gain, coverage = mix_matched_gain([python, _steps([(16, 0, 300.0)] * 10)], native)
    assert gain == pytest.approx(0.10) and coverage == pytest.approx(0.5)
    assert mix_matched_gain([python], _steps([(32, 0, 1.0)])) == (None, 0.0)
    assert mix_matched_gain([], native) == (None, 0.0)


def test_the_verify_table_shows_an_in_run_gain_with_its_interval_and_where_it_came_from() -> None:
    import io

    from rich.console import Console

    from infer_prof.profiler.checks.inrun_gain import InRunGain
    from infer_prof.profiler.checks.verify import inrun_entry
    from infer_prof.reports.run.verify_table import render_verify

    gain = InRunGain(
        0.10,
        -0.07,
        0.29,
        0.0501,
        0.02,
        0.0825,
        0.83,
        25,
        393,
        20.4,
        20.6,
        parts={"sampler": 0.0265, "model": 0.0224, "queue": 0.0001},
        own_low=0.0241,
        own_high=0.0290,
        units=13,
    )
    prediction = {
        "share": 0.0318,
        "native_speedup": 9.5,
        "speedup_source": "replay",
        "predicted_gain": 0.0285,
    }
    entry = inrun_entry(prediction, gain, 26, own="sampler", block_steps=1, unit_blocks=8)
    assert (
        entry["measured_gain"] == 0.0501 and entry["busy_gain"] == 0.10
    )  # the same-steps gain is the measured one
    assert entry["predicted_within"] is True and entry["agreement"] == pytest.approx(0.0501 / 0.0285)
    # The sampler's own span: its part with its interval, judged against the same prediction.
    assert (entry["own_gain"], entry["own_low"], entry["own_high"]) == (0.0265, 0.0241, 0.0290)
    assert entry["own_agreement"] == pytest.approx(0.0265 / 0.0285) and entry["own_within"] is True
    assert inrun_entry(prediction, gain, 26)["own_gain"] is None  # no own phase named: no own figure
    out = io.StringIO()
    render_verify({"components": {"sampler": entry}, "skipped": {}}, Console(file=out, width=200))
    text = out.getvalue()
    assert "5.0% [2.0%, 8.2%] (1.76x)" in text and "in-run" in text
    assert "(25 pairs of blocks of 1 step, 26 switches)" in text
    assert "[low, high]: 95% interval over units of 8 neighbouring steps" in text  # not eaten as a style tag
    assert (entry["units"], entry["unit_blocks"], entry["block_steps"]) == (13, 8, 1)
    # Parts under 0.05 points are left out; the twin's own part carries its interval.
    assert "sampler +2.6 [2.4, 2.9] (0.93x its prediction), model +2.2" in text and "queue" not in text
    # +-3.1 points of interval against a band of +-0.57 (20% of 2.85%): too wide to judge the prediction
    assert entry["resolves"] is False and entry["half_width"] == pytest.approx(0.03125)
    assert entry["band"] == pytest.approx(0.2 * 0.0285)
    assert "wider than ±20% of its prediction (±0.6)" in text and "(-r)" in text
    assert "its own span saved +2.6 points [2.4, 2.9] (0.93x its prediction)" in text


def test_an_interval_judges_a_prediction_only_when_it_is_narrower_than_the_band() -> None:
    from infer_prof.profiler.checks.verify import resolution
    from infer_prof.reports.run.summary import unresolved_note

    narrow = resolution(0.02, 0.017, 0.0235)  # +-0.325 points against +-0.4
    assert (
        narrow["resolves"] is True and unresolved_note("sampler", {"predicted_gain": 0.02, **narrow}) is None
    )
    wide = resolution(0.02, 0.0, 0.041)  # +-2.05 points
    assert wide["resolves"] is False and wide["half_width"] == pytest.approx(0.0205)
    loss = resolution(-0.02, -0.0242, -0.0158)  # a predicted loss is judged by its size alike: +-0.42 > +-0.4
    assert loss["resolves"] is False and loss["band"] == pytest.approx(0.004)
    assert "±2.1 points" in unresolved_note("sampler", {"predicted_gain": 0.02, **wide})
    assert (
        resolution(0.02, None, None)["resolves"] is None and resolution(None, 0.0, 0.04)["resolves"] is None
    )


def test_a_prediction_wider_than_the_band_is_void_at_that_precision_whatever_the_measurement() -> None:
    from infer_prof.profiler.checks.inrun_gain import InRunGain
    from infer_prof.profiler.checks.verify import inrun_entry
    from infer_prof.reports.run.summary import unresolved_note

    gain = InRunGain(0.17, 0.14, 0.19, 0.169, 0.146, 0.193, 1.0, 400, 800, 8.9, 8.9, units=100)
    prediction = {"share": 0.502, "native_speedup": 1.36, "speedup_source": "replay", "predicted_gain": 0.132}
    # +-12.2 points of prediction against a band of +-2.6 (20% of 13.2%): no measurement can check it.
    wide = inrun_entry({**prediction, "predicted_gain_low": 0.072, "predicted_gain_high": 0.195}, gain, 800)
    assert wide["resolves"] is True and wide["prediction_resolves"] is False
    assert wide["predicted_half_width"] == pytest.approx(0.0615)
    note = unresolved_note("sampler", wide)
    assert note is not None and "prediction's own interval (±6.2 points) is wider than ±20% of it" in note
    assert "only 1.36x faster" in note and "void at that precision" in note
    # A prediction inside the band is judged as before: no note once the measurement resolves.
    narrow = inrun_entry({**prediction, "predicted_gain_low": 0.125, "predicted_gain_high": 0.139}, gain, 800)
    assert narrow["prediction_resolves"] is True and unresolved_note("sampler", narrow) is None
    # Without the prediction's interval (a microbenchmark's speedup) there is nothing to judge it by.
    assert inrun_entry(prediction, gain, 800)["prediction_resolves"] is None


def test_when_both_intervals_are_too_wide_the_note_gives_both_reasons() -> None:
    from infer_prof.profiler.checks.inrun_gain import InRunGain
    from infer_prof.profiler.checks.verify import inrun_entry
    from infer_prof.reports.run.summary import unresolved_note

    wide_gain = InRunGain(0.17, 0.14, 0.19, 0.169, 0.099, 0.239, 1.0, 400, 800, 8.9, 8.9, units=100)
    prediction = {"share": 0.502, "native_speedup": 1.36, "speedup_source": "replay", "predicted_gain": 0.132}
    entry = inrun_entry(
        {**prediction, "predicted_gain_low": 0.072, "predicted_gain_high": 0.195}, wide_gain, 800
    )
    assert entry["resolves"] is False and entry["prediction_resolves"] is False
    note = unresolved_note("sampler", entry)
    assert note is not None and note.startswith("sampler: its prediction's own interval (±6.2 points)")
    assert (
        "void at that precision" in note and "Its measured interval too (±7.0 points) is wider than" in note
    )
