"""The terminal summary: verdict first, every table's content, readable without colour."""

from __future__ import annotations

import copy
import io
import re

from rich.console import Console

from infer_prof.profiler.rundir.results import CATEGORIES, COMPONENTS, read_run
from infer_prof.reports.run import summary
from infer_prof.reports.run.terminal import render_summary

ANSI = re.compile(r"\x1b\[")


def _render(source, verbose: bool = False, **console_options) -> str:
    console = Console(file=io.StringIO(), width=80, **console_options)
    render_summary(source, console, verbose=verbose)
    return console.file.getvalue()


def test_verbose_plain_output_has_no_escape_codes_and_all_content(run_dir):
    text = _render(run_dir, verbose=True, no_color=True, force_terminal=False)
    assert not ANSI.search(text)
    result = read_run(run_dir).result
    assert text.startswith(result.verdict["rule"].capitalize()), "the verdict comes first"
    for name in (
        *CATEGORIES,
        *COMPONENTS,
        "TTFT",
        "TPOT",
        "ITL",
        "E2E",
        "spans",
        "samples",
        "samples - spans",
    ):
        assert name in text, name
    assert f"{result.engine['steps']:,}" in text or str(result.engine["steps"]) in text
    assert f"{result.metrics['ttft_ms']['p99']:.2f} ms" in text
    # A CPU machine's skipped GPU collector is one line of what does not apply, never a collector that did not run.
    assert "nvml skipped" not in text and text.count("No GPU on this machine") == 1
    assert "measured" in text and "predicted" in text
    flowing = " ".join(text.split())  # Rich wraps long lines; compare words, not line breaks
    for reason in result.verdict["reasons"]:
        assert " ".join(reason.split()) in flowing


def test_colour_terminal_does_use_styles(run_dir):
    # Guards the test above: the plain run is free of escapes because of the options, not by accident.
    assert ANSI.search(_render(run_dir, force_terminal=True, color_system="standard"))


def test_no_breakdown_says_not_measured_and_why(bare_run_dir):
    for verbose in (False, True):
        text = _render(bare_run_dir, verbose=verbose, no_color=True, force_terminal=False)
        assert text.startswith("No verdict")
        assert "not measured (profiling was off: --profile off)" in text
        assert "TTFT" in text


def test_accepts_result_rundata_and_path(run_dir):
    run = read_run(run_dir)
    outputs = {
        _render(source, verbose=True, no_color=True) for source in (run, run.result, run_dir, str(run_dir))
    }
    assert len(outputs) == 1
    # The short summary needs the requests table to count SLO breaches: a path and RunData print the same.
    assert len({_render(source, no_color=True) for source in (run, run_dir, str(run_dir))}) == 1


def _after_verdict(text: str, result) -> list[str]:  # type: ignore[no-untyped-def]
    verdict_words = len(summary.headline(result).split())
    words = 0
    lines = text.splitlines()
    for index, line in enumerate(lines):
        words += len(line.split())
        if words >= verdict_words:
            return lines[index + 1 :]
    return []


def test_the_default_summary_fits_a_screen_and_says_what_matters(run_dir):
    result = read_run(run_dir).result
    text = _render(run_dir, no_color=True, force_terminal=False)
    assert text.startswith(result.verdict["rule"].capitalize())
    rest = _after_verdict(text, result)
    assert 8 <= len(rest) <= 25, "\n".join(rest)
    for name in ("interpreter", "kernel", "sampler", "model_kernels", "spans", "samples"):
        assert name in text, name
    assert "kernel share from" not in text and "Collectors that did not run" not in text
    assert text.count("No GPU on this machine") == 1 and "nvml" not in text
    flat = "".join(text.split())
    assert str(run_dir / "report.html") in flat or "Noreportfiles:`infer-profreport" in flat, (
        "where the report is"
    )
    console = Console(file=io.StringIO(), width=200, no_color=True)
    render_summary(run_dir, console, report=True)
    assert f"Report: {run_dir / 'report.html'}; every table: --verbose" in console.file.getvalue()
    console = Console(file=io.StringIO(), width=200, no_color=True)
    render_summary(run_dir, console, report=False)
    assert f"No report files: `infer-prof report {run_dir}` writes them" in console.file.getvalue()
    # Every prediction of this run is worth a line (each path is over 0.1% of the step), biggest gain first.
    lines = [line.strip() for line in rest]
    order = [line.split(":")[0] for line in lines if line.split(":")[0] in result.verdict["predictions"]]
    gains = result.verdict["predictions"]
    assert order == sorted(gains, key=lambda name: -gains[name]["predicted_gain"])
    verbose = _render(run_dir, verbose=True, no_color=True, force_terminal=False)
    assert len(verbose.splitlines()) > len(text.splitlines()) + 30


def test_predictions_too_small_to_pay_fold_into_one_line(run_dir):
    result = copy.deepcopy(read_run(run_dir).result)
    for name in ("scheduler", "kv_alloc"):
        result.verdict["predictions"][name]["share"] = 0.0004
    lines = summary.prediction_lines(result)
    assert sum("scheduler" in line for line in lines) == 1 and sum("kv_alloc" in line for line in lines) == 1
    folded = next(line for line in lines if "scheduler" in line)
    assert "kv_alloc" in folded and "under 0.1%" in folded
    assert any(line.strip().startswith("sampler: ") for line in lines)


def _without_speedup(entry: dict) -> None:
    """A prediction entry as a run leaves it when no C speedup was measured for it."""
    entry.update(native_speedup=None, predicted_gain=None, predicted_gain_low=None, predicted_gain_high=None)


def test_twins_that_ran_get_one_line_and_no_prediction(run_dir):
    result = copy.deepcopy(read_run(run_dir).result)
    for name in ("sampler", "prepare"):
        _without_speedup(result.verdict["predictions"][name])
        result.verdict["predictions"][name]["twin_on"] = True
    lines = [line.strip() for line in summary.prediction_lines(result)]
    assert "sampler, prepare: C twin on in this run, nothing to predict." in lines
    assert not any(
        "speedup not measured" in line or line.startswith(("sampler:", "prepare:")) for line in lines
    )
    assert any(line.startswith("scheduler") for line in lines)  # a Python twin still gets its line


def test_a_stopped_run_says_why_its_speedups_were_not_measured(run_dir):
    result = copy.deepcopy(read_run(run_dir).result)
    for entry in result.verdict["predictions"].values():
        _without_speedup(entry)
    unmeasured = [line for line in summary.prediction_lines(result) if "not measured" in line]
    assert unmeasured and not any("stopped" in line for line in unmeasured)
    result.partial, result.partial_reason, result.replay = True, "stopped (Ctrl-C or SIGTERM)", None
    unmeasured = [line for line in summary.prediction_lines(result) if "not measured" in line]
    assert unmeasured and all("(a stopped run is not replayed)" in line for line in unmeasured)


def test_headline_warnings_come_right_after_the_verdict_in_rule_order(run_dir):
    result = copy.deepcopy(read_run(run_dir).result)
    result.partial, result.partial_reason = True, "stopped by SIGINT"
    result.verdict["interpreter_interval"] = {"low": 0.27, "high": 0.33, "share": 0.3, "samples": 400}
    result.verdict["straddles"] = [0.30]
    result.collectors["py-spy"] = {"status": "failed", "reason": "py-spy exited 1"}
    warnings = summary.headline_warnings(result)
    assert [line.level for line in warnings] == ["alarm", "warn", "warn"]
    assert "stopped by SIGINT" in warnings[0].text and "py-spy exited 1" in warnings[1].text
    assert "straddles the 30% threshold" in warnings[2].text
    text = _render(result, no_color=True)
    lines = _after_verdict(text, result)
    assert next(line for line in lines[: len(warnings) * 2] if line.strip()).startswith("Partial run")


def test_a_target_run_without_spans_prints_its_server_and_samples_split(tmp_path):
    from tests.reports.run_target import make_target_run_dir

    path = make_target_run_dir(tmp_path / "target", seed=5)
    text = _render(path, no_color=True)
    assert text.startswith("No verdict")
    assert "Target server: vllm 0.32.0 at http://127.0.0.1:8000" in text
    assert "samples" in text and "a Python line and the native code it calls" in text
    assert len(_after_verdict(text, read_run(path).result)) <= 25
    assert "Target server (metrics measured client-side" in _render(path, verbose=True, no_color=True)


def test_a_run_mostly_on_one_torch_thread_says_so_and_the_engine_table_counts_the_switches(run_dir):
    result = copy.deepcopy(read_run(run_dir).result)
    duration = result.metrics["duration_s"]
    result.engine["threads"] = {
        "threads": 2,
        "threads_at_end": 2,
        "switches": 2,
        "one_thread_s": 0.5 * duration,
        "watched_s": duration + 1.0,
    }
    line = summary.threads_lowered(result)
    assert line is not None and "torch ran on one thread" in line.text and "other work wanted" in line.text
    rows = dict(summary.engine_table(result).rows)
    assert rows["torch threads"].startswith("2, 1 for") and "in 2 switches" in rows["torch threads"]
    result.engine["threads"] = {"threads": 2, "threads_at_end": 2, "switches": 0, "one_thread_s": 0.0}
    assert (
        summary.threads_lowered(result) is None
        and dict(summary.engine_table(result).rows)["torch threads"] == "2"
    )


def test_the_short_summary_says_when_a_verify_prediction_cannot_be_checked(run_dir):
    # The full view has this note under the predictions table; the one screen says it after the predictions.
    result = copy.deepcopy(read_run(run_dir).result)
    sampler = {
        "method": "in-run",
        "pairs": 16,
        "predicted_gain": 0.135,
        "predicted_half_width": 0.093,
        "prediction_resolves": False,
        "measured_gain": 0.174,
        "half_width": 0.025,
        "band": 0.027,
        "resolves": True,
    }
    result.verdict["verify"] = {"python_runs": 4, "python_spread": 0.05, "components": {"sampler": sampler}}
    flowing = " ".join(_render(result, no_color=True, force_terminal=False).split())
    assert (
        "Not checkable: sampler: its prediction's own interval (±9.3 points) is wider than ±20% of it"
        in flowing
    )
    sampler["prediction_resolves"] = True
    assert "Not checkable" not in _render(result, no_color=True, force_terminal=False)
