"""The summary tables every face prints: signs, notes and figures that mean what they say."""

from __future__ import annotations

import copy

from infer_prof.profiler.rundir.results import read_run
from infer_prof.reports.run import summary


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


def _in_run_entry(**fields: object) -> dict[str, object]:
    """A --verify entry of a twin measured in-run over 16 pairs of blocks, with the given figures."""
    return {"method": "in-run", "pairs": 16, **fields}


def test_an_in_run_gain_too_wide_to_judge_its_prediction_says_what_would(run_dir):
    result = copy.deepcopy(read_run(run_dir).result)
    entry = _in_run_entry(
        predicted_gain=0.021, measured_gain=0.034, half_width=0.016, band=0.0042, resolves=False
    )
    result.verdict["verify"] = {"python_runs": 1, "python_spread": None, "components": {"sampler": entry}}
    note = summary.noise_warning(result)
    assert (
        "(16 pairs of blocks of steps)" in note and "interval over the pairs" in note
    )  # a result from before units
    assert "sampler: its interval (±1.6 points) is wider than ±20%" in note
    entry.update(block_steps=1, unit_blocks=8, switches=15)
    note = summary.noise_warning(result)
    assert (
        "(16 pairs of blocks of 1 step, 15 switches)" in note
        and "interval over units of 8 neighbouring steps" in note
    )
    assert "cannot say whether the end-to-end prediction holds; more measured requests (-r) narrow it" in note
    assert "own span" not in note  # no own-phase figures in this entry
    assert "taking turns in one run" in note and "so this run cannot say" in note
    entry.update(
        run_dirs=["verify/switched-sampler", "verify/switched-sampler-2", "verify/switched-sampler-3"]
    )
    note = summary.noise_warning(result)
    assert "in 3 runs, pooled because fewer could not judge the prediction" in note
    assert "so these 3 runs cannot say" in note
    del entry["run_dirs"]
    entry.update(own_gain=0.0206, own_low=0.0201, own_high=0.0210, own_agreement=0.99)
    assert "its own span saved +2.1 points [2.0, 2.1] (0.99x its prediction)" in summary.noise_warning(result)
    entry.update(resolves=True)
    assert "wider" not in summary.noise_warning(result)


def test_tiles_show_slo_breaches_and_goodput(run_dir):
    import pandas as pd

    from infer_prof.reports.slo import check_slos

    run = read_run(run_dir)
    requests = run.requests.copy()
    measured = requests.index[requests["ok"].astype(bool) & ~requests["warmup"].astype(bool)]
    requests.loc[measured, ["ttft_ms", "tpot_ms"]] = [100.0, 10.0]  # every request within both targets
    requests.loc[measured[:3], "ttft_ms"] = 5000.0  # three over the 2,000 ms TTFT target
    requests.loc[measured[2:4], "tpot_ms"] = 80.0  # two over the 50 ms TPOT target, one of them also late
    requests.loc[measured[4], "tpot_ms"] = pd.NA  # a one-token request: TPOT 0 for the check
    requests.loc[requests["warmup"].astype(bool), "ttft_ms"] = 9000.0  # warm-up requests do not count
    check = check_slos(requests, {"ttft_ms": 2000.0, "tpot_ms": 50.0})
    assert (check.requests, check.breaches, check.met_all) == (
        len(measured),
        {"ttft_ms": 3, "tpot_ms": 2},
        len(measured) - 4,
    )
    tiles = {figure.label: figure for figure in summary.key_figures(run.result, check)}
    ttft = tiles["TTFT p50 / p99"]
    assert (
        ttft.alarm
        and ttft.detail == f"SLO: {check.breaches['ttft_ms']:,} of {check.requests:,} over 2,000 ms"
    )
    goodput = tiles["Goodput"]
    assert goodput.alarm and goodput.detail.startswith(f"{check.met_all / check.requests:.1%}")


def test_no_slo_means_no_goodput_tile_and_no_alarm(run_dir):
    from infer_prof.reports.slo import check_slos

    run = read_run(run_dir)
    tiles = {figure.label: figure for figure in summary.key_figures(run.result, check_slos(run.requests, {}))}
    assert (
        "Goodput" not in tiles
        and tiles["TTFT p50 / p99"].detail is None
        and not tiles["TTFT p50 / p99"].alarm
    )


def test_two_samples_print_no_disagreement_and_the_evidence_is_shown(run_dir):
    result = copy.deepcopy(read_run(run_dir).result)
    methods = result.breakdown["methods"]
    methods["samples"]["samples"] = 2
    methods["spans"]["spans"], methods["spans"]["steps"] = 5210, 400
    interpreter = methods["spans"]["categories"]["interpreter"]
    methods["samples"]["categories"]["interpreter"] = interpreter + 0.367
    result.breakdown["disagreement"] = {"interpreter": 36.7}
    result.breakdown["beyond_noise"] = []  # what breakdown records for 2 samples (test_breakdown)
    table = summary.time_split_table(result)
    assert _row(table, "interpreter")[3] == summary.WITHIN_NOISE
    assert "36.7" not in " ".join(" ".join(row) for row in table.rows)
    assert _row(table, "evidence")[1:3] == ["5,210 spans, 400 steps", "2 samples"]
    assert "2 engine-thread samples" in (table.note or "")
    result.breakdown["beyond_noise"] = ["interpreter"]  # with enough samples the gap is printed
    assert _row(summary.time_split_table(result), "interpreter")[3] == "+36.7 pp"


def test_an_assumed_kernel_share_is_printed_as_assumed_and_a_measured_one_is_not(run_dir):
    result = copy.deepcopy(read_run(run_dir).result)
    spans = result.breakdown["methods"]["spans"]
    spans["kernel_source"] = "profiler windows"
    table = summary.time_split_table(result)
    assert "(assumed)" not in _row(table, "kernel")[1]
    assert _row(table, "kernel share from")[1] == "profiler windows"
    spans["kernel_source"] = "assumed"
    table = summary.time_split_table(result)
    for name in ("interpreter", "kernel", "model_glue", "model_kernels"):
        assert _row(table, name)[1].endswith("(assumed)")
    assert (
        not _row(table, "lock")[1].endswith("(assumed)") and _row(table, "kernel share from")[1] == "assumed"
    )


def test_a_too_wide_in_run_prediction_is_said_beside_the_whole_runs_noise(run_dir):
    # --verify of every twin: the sampler in-run, the others as whole runs. The sampler's note used to be
    # dropped whenever any twin ran as whole runs.
    result = copy.deepcopy(read_run(run_dir).result)
    sampler = _in_run_entry(
        predicted_gain=0.135,
        predicted_half_width=0.093,
        prediction_resolves=False,
        measured_gain=0.174,
        half_width=0.025,
        band=0.027,
        resolves=True,
        native_speedup=1.34,
    )
    scheduler = {"method": "runs", "predicted_gain": 0.005, "measured_gain": 0.03}
    result.verdict["verify"] = {
        "python_runs": 4,
        "python_spread": 0.13,
        "components": {"sampler": sampler, "scheduler": scheduler},
    }
    note = summary.noise_warning(result)
    assert "Python runs differ by 13" in note
    assert "sampler: its prediction's own interval (±9.3 points) is wider than ±20% of it" in note
    result.verdict["verify"]["python_spread"] = None
    assert "its prediction's own interval" in summary.noise_warning(result)
    sampler.update(prediction_resolves=True)
    assert "prediction's own interval" not in summary.noise_warning(result)
