"""The summary tables every face prints: signs, notes and figures that mean what they say."""

from __future__ import annotations

import copy

from profiler.rundir.results import read_run
from reports.run import summary


def _row(table, name):  # type: ignore[no-untyped-def]
    return next(row for row in table.rows if row[0] == name)


def test_disagreement_keeps_its_sign(run_dir):
    result = copy.deepcopy(read_run(run_dir).result)
    result.breakdown["disagreement"] = {"lock": -3.3, "idle": 2.04}
    result.breakdown["component_disagreement"] = {"sampler": -4.78, "queue": 0.01}
    table = summary.time_split_table(result)
    assert table.columns[3] == "samples - spans"
    assert _row(table, "lock")[3] == "-3.3 pp"
    assert _row(table, "idle")[3] == "+2.0 pp"
    assert _row(table, "sampler")[3] == "-4.8 pp"
    assert _row(table, "queue")[3] == "0.0 pp"


def test_unrecorded_gaps_are_computed_samples_minus_spans(run_dir):
    result = copy.deepcopy(read_run(run_dir).result)
    result.breakdown["disagreement"], result.breakdown["component_disagreement"] = {}, {}
    spans, samples = result.breakdown["methods"]["spans"], result.breakdown["methods"]["samples"]
    spans["components"]["scheduler"], samples["components"]["scheduler"] = 0.10, 0.067
    assert _row(summary.time_split_table(result), "scheduler")[3] == "-3.3 pp"


def test_measured_gains_inside_the_verify_noise_say_so(run_dir):
    result = copy.deepcopy(read_run(run_dir).result)
    result.verdict["verify"]["python_spread"] = 1.325
    table = summary.predictions_table(result)
    assert all(row[4].endswith("(within noise)") for row in table.rows)
    assert "differ by 132.5%" in table.note and "noise" in table.note
    result.verdict["verify"]["python_spread"] = 0.0001
    table = summary.predictions_table(result)
    assert not any("noise" in row[4] for row in table.rows)


def test_one_python_run_means_unknown_noise_and_no_verify_means_no_note(run_dir):
    result = copy.deepcopy(read_run(run_dir).result)
    result.verdict["verify"] = {"python_runs": 1, "python_spread": None}
    assert "unknown" in summary.noise_warning(result)
    del result.verdict["verify"]
    assert summary.noise_warning(result) is None and summary.predictions_table(result).note is None
