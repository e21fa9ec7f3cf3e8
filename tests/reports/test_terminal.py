"""The terminal summary: verdict first, every table's content, readable without colour."""

from __future__ import annotations

import io
import re

from rich.console import Console

from profiler.rundir.results import CATEGORIES, COMPONENTS, read_run
from reports.run.terminal import render_summary

ANSI = re.compile(r"\x1b\[")


def _render(source, **console_options) -> str:
    console = Console(file=io.StringIO(), width=80, **console_options)
    render_summary(source, console)
    return console.file.getvalue()


def test_plain_output_has_no_escape_codes_and_all_content(run_dir):
    text = _render(run_dir, no_color=True, force_terminal=False)
    assert not ANSI.search(text)
    result = read_run(run_dir).result
    assert text.startswith(result.verdict["rule"].capitalize()), "the verdict comes first"
    for name in (*CATEGORIES, *COMPONENTS, "TTFT", "TPOT", "ITL", "E2E", "spans", "samples", "samples - spans"):
        assert name in text, name
    assert f"{result.engine['steps']:,}" in text or str(result.engine["steps"]) in text
    assert f"{result.metrics['ttft_ms']['p99']:.2f} ms" in text
    assert "nvml skipped: no NVIDIA GPU found" in text
    assert "measured" in text and "predicted" in text
    flowing = " ".join(text.split())  # Rich wraps long lines; compare words, not line breaks
    for reason in result.verdict["reasons"]:
        assert " ".join(reason.split()) in flowing


def test_colour_terminal_does_use_styles(run_dir):
    # Guards the test above: the plain run is free of escapes because of the options, not by accident.
    assert ANSI.search(_render(run_dir, force_terminal=True, color_system="standard"))


def test_no_breakdown_says_not_measured_and_why(bare_run_dir):
    text = _render(bare_run_dir, no_color=True, force_terminal=False)
    assert text.startswith("No verdict")
    assert "not measured (profiling was off: --profile off)" in text
    assert "TTFT" in text


def test_accepts_result_rundata_and_path(run_dir):
    run = read_run(run_dir)
    outputs = {_render(source, no_color=True) for source in (run, run.result, run_dir, str(run_dir))}
    assert len(outputs) == 1
