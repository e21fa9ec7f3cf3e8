"""report.html: one self-contained file with every chart inline and honest gaps."""

from __future__ import annotations

import json
import re

import pytest

from infer_prof.profiler.rundir.results import read_run
from infer_prof.reports.run.html import write_html_report
from tests.support.run_dirs import make_run_dir

# Anything that would make a browser fetch: scripts, stylesheets, fonts, remote images or frames.
# (SVG's own url(#id) and href="#id" point inside the document and are fine.)
FETCHES = re.compile(
    r"<script[^>]*\bsrc|<link|<iframe|@import|@font-face|url\((?!#)|src=\"(?!data:)|href=\"(?:https?:)?//|"
    r"fetch\(|XMLHttpRequest|import\(",
    re.IGNORECASE,
)
CHART_COUNT = 5


@pytest.fixture(scope="module")
def html(run_dir) -> str:
    return write_html_report(run_dir).read_text(encoding="utf-8")


def test_self_contained_with_inline_charts(html):
    assert not FETCHES.search(html)
    assert len(re.findall(r'<div class="chart"><svg\b', html)) == CHART_COUNT
    assert "default-src 'none'" in html  # the CSP makes any stray fetch a console error, not a silent load
    for href in ("steps.csv", "requests.csv"):
        assert f'<a href="{href}">' in html
    # Traces are not written yet: listed, not linked (a dead link is worse than none).
    assert '<a href="trace.json">' not in html and "trace.json" in html


def test_links_to_traces_after_generate_reports(reported_run):
    html = (reported_run / "report.html").read_text(encoding="utf-8")
    for href in ("trace.json", "speedscope.json", "steps.csv", "requests.csv", "result.json"):
        assert f'<a href="{href}">' in html


def test_headline_reasons_and_numbers(html, run_dir):
    result = read_run(run_dir).result
    for reason in result.verdict["reasons"]:
        assert reason in html
    assert f"{result.metrics['ttft_ms']['p50']:.2f} ms" in html
    assert "synthetic:tiny" in html and "chat-poisson" in html
    assert "git_revision" in html and "engine.block_size" in html


def test_links_only_to_files_that_exist(html, run_dir):
    for href in re.findall(r'<a href="([^"]+)"', html):
        assert "://" not in href and not href.startswith("/")
        assert (run_dir / href).exists(), href


def test_missing_sections_say_not_measured_and_why(bare_run_dir):
    html = write_html_report(bare_run_dir).read_text(encoding="utf-8")
    assert "Time split: not measured (profiling was off: --profile off)." in html
    assert "No verdict" in html
    assert (
        len(re.findall(r'<div class="chart"><svg\b', html)) == 3
    )  # step timeline, requests and latency still drawn
    assert "Flame graph: not available (profiling was off: --profile off)." in html


def test_run_text_is_escaped(tmp_path):
    path = make_run_dir(tmp_path / "run", seed=5, n_requests=20, n_steps=40)
    data = json.loads((path / "result.json").read_text())
    data["verdict"]["reasons"].append("<script>alert(1)</script>")
    (path / "result.json").write_text(json.dumps(data))
    html = write_html_report(path).read_text(encoding="utf-8")
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html


def test_verify_noise_is_a_warning_beside_the_gains(html):
    assert 'id="verify-noise"' in html and "differ by 2.0% in busy time per token" in html
    assert "(within noise)" in html


def test_the_only_script_is_inline_and_allowed_by_its_hash(html):
    import base64
    import hashlib

    scripts = re.findall(r"<script>(.*?)</script>", html, re.DOTALL)
    assert len(scripts) == 1 and len(re.findall(r"<script", html)) == 1
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode()).digest()).decode()
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html).group(1)
    assert (
        f"script-src 'sha256-{digest}'" in policy and "unsafe-inline';" not in policy.split("script-src")[1]
    )


def test_flame_graph_engine_thread_first_and_top_frames(html):
    tabs = re.findall(
        r'<button type="button" role="tab" data-thread="(\d+)" aria-selected="(\w+)">([^<]+)</button>', html
    )
    assert [selected for _, selected, _ in tabs] == ["true", "false", "false"]
    assert (
        tabs[0][2].startswith("infer-prof-engine (engine thread")
        and "loadgen-client-* (6 threads" in tabs[1][2]
    )
    assert len(re.findall(r'<div class="flame-pane" data-thread="\d+" hidden>', html)) == 2
    assert 'data-name="PythonSampler.top_p"' in html and '<h3 id="top-frames">Top frames</h3>' in html
    assert '<td class="text">PythonSampler.top_p</td><td class="text">engine/sampler.py:112</td>' in html


def test_flame_frames_take_their_components_colour_and_long_names_keep_their_end(html):
    from infer_prof.reports.run.flamegraph import COLOURS, _fit

    frames = re.findall(
        r'data-name="([^"]*)"[^>]*data-component="([^"]*)"[^>]*>(?:<title>[^<]*</title>)'
        r'<rect [^>]*fill="([^"]+)"/>(?:<text [^>]*>([^<]*)</text>)?',
        html,
    )
    assert frames
    assert {fill for _, component, fill, _ in frames if component == "sampler"} == {COLOURS["sampler"]}
    assert len({component for _, component, _, _ in frames}) >= 4, "one colour for every frame tells no story"
    shortened = [(name, label) for name, _, _, label in frames if label and label != name]
    assert shortened, "no label needed shortening in this run"
    for name, label in shortened:
        assert label.startswith("\u2026") and name.endswith(label[1:]), (name, label)
    assert _fit("LlamaModel.run_layers", 80) == "\u2026run_layers"
    # The full name is the hover text of every frame.
    assert all(f"<title>{name}" in html for name, _, _, _ in frames[:20])
