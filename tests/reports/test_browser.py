"""report.html as a person sees it: headless Chromium loads it with no errors, no fetches, every chart drawn."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from matplotlib.image import imread

from tests.reports.cdp import find_chromium, inspect_page

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium is not on PATH (CI installs Debian's `chromium`; apt-get install chromium)",
)


def _keep(screenshot: Path) -> None:
    # CI can keep the screenshot as an artifact for a person to look at.
    keep_dir = os.environ.get("INFER_PROF_SCREENSHOTS")
    if keep_dir:
        Path(keep_dir).mkdir(parents=True, exist_ok=True)
        shutil.copy(screenshot, Path(keep_dir) / screenshot.name)


def test_report_loads_clean_and_draws_every_chart(reported_run, tmp_path):
    page = reported_run / "report.html"
    screenshot = tmp_path / "report.png"
    seen = inspect_page(CHROMIUM, page.as_uri(), tmp_path / "profile", screenshot)
    _keep(screenshot)
    assert seen["errors"] == []
    assert seen["requests"] == [page.as_uri()], "the page fetched something besides itself"
    assert len(seen["charts"]) == 5
    for chart in seen["charts"]:
        assert chart["tag"] == "svg" and chart["width"] > 600 and chart["height"] > 150, chart
        assert chart["shapes"] > 50, f"{chart['label']} drew almost nothing"
    pixels = imread(screenshot)
    assert pixels.shape[1] == 1280 and pixels.shape[0] > 2000
    assert pixels[..., :3].std() > 0.05, "the screenshot is a blank page"


def test_probe_sees_errors_and_fetches(tmp_path):
    # The check above could pass by seeing nothing; this page has an error and a fetch, and must be caught.
    page = tmp_path / "broken.html"
    page.write_text(
        '<!DOCTYPE html><html><body><div class="chart"></div>'
        '<img src="http://127.0.0.1:9/missing.png"><script>console.error("boom")</script></body></html>'
    )
    seen = inspect_page(CHROMIUM, page.as_uri(), tmp_path / "profile", tmp_path / "broken.png")
    assert any("boom" in error for error in seen["errors"])
    assert "http://127.0.0.1:9/missing.png" in seen["requests"]
    assert seen["charts"] == [{"tag": None, "width": 0, "height": 0, "shapes": 0, "label": None}]


# Every tile whose content is wider than its box, and every pair of tiles whose boxes intersect.
_TILE_PROBE = """
(() => {
  const cards = Array.from(document.querySelectorAll('.card'));
  const boxes = cards.map(card => card.getBoundingClientRect());
  const overflowing = cards.filter(card => Array.from(card.children).some(
      child => child.scrollWidth > child.clientWidth + 1 || child.getBoundingClientRect().right > card.getBoundingClientRect().right + 1))
    .map(card => card.textContent.trim());
  const overlapping = [];
  boxes.forEach((a, i) => boxes.slice(i + 1).forEach((b, j) => {
    if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1)
      overlapping.push([i, i + 1 + j]);
  }));
  return {cards: cards.length, overflowing, overlapping};
})()
"""


@pytest.fixture(scope="module")
def long_values_run(tmp_path_factory):
    import json

    from infer_prof.reports.run.html import write_html_report
    from tests.support.run_dirs import make_run_dir

    path = make_run_dir(tmp_path_factory.mktemp("runs") / "long", seed=31, n_requests=40, n_steps=80)
    data = json.loads((path / "result.json").read_text())
    data["metrics"]["ttft_ms"].update(p50=34939.2, p99=211571.4)  # "34,939 / 211,571 ms"
    data["metrics"]["tpot_ms"].update(p50=12345.6, p99=98765.4)
    data["metrics"]["output_token_throughput"] = 123456789.5
    (path / "result.json").write_text(json.dumps(data))
    write_html_report(path)
    return path / "report.html"


@pytest.mark.parametrize("width", [1300, 1000, 760])
def test_tiles_never_overlap_or_overflow_with_long_values(long_values_run, tmp_path, width):
    from tests.reports.cdp import open_page

    with open_page(CHROMIUM, long_values_run.as_uri(), tmp_path / "profile", width) as page:
        seen = page.evaluate(_TILE_PROBE)
        assert "34,939 / 211,571 ms" in page.evaluate("document.querySelector('.cards').textContent")
        assert seen["cards"] >= 6 and seen["overflowing"] == [] and seen["overlapping"] == [], seen
        # The probe is not blind: the old style (values forced onto one line) does overflow here.
        page.evaluate("document.querySelectorAll('.card .value').forEach(e => e.style.whiteSpace = 'nowrap')")
        page.evaluate("document.querySelectorAll('.card').forEach(e => e.style.width = '160px')")
        assert page.evaluate(_TILE_PROBE)["overflowing"], "the probe missed a value wider than its tile"


_FLAME_STATE = """
(() => {
  const panes = Array.from(document.querySelectorAll('#flamegraph .flame-pane'));
  const shown = panes.filter(pane => !pane.hidden && pane.getBoundingClientRect().height > 0);
  const svg = shown.length ? shown[0].querySelector('svg') : null;
  const visible = svg ? Array.from(svg.querySelectorAll('g.frame')).filter(g => g.style.display !== 'none') : [];
  return {panes: panes.length, shown: shown.map(pane => pane.dataset.thread),
          width: svg ? svg.getBoundingClientRect().width : 0, frames: visible.length,
          status: document.querySelector('.flame-status').textContent,
          tabs: Array.from(document.querySelectorAll('#flamegraph button[data-thread]')).map(b => b.getAttribute('aria-selected'))};
})()
"""
# A frame worth zooming into: a few levels down, between 5% and 60% of the thread, marked for the click.
_PICK_FRAME = """
(() => {
  const frames = Array.from(document.querySelectorAll('#flamegraph .flame-pane:not([hidden]) g.frame'));
  const frame = frames.find(g => +g.dataset.depth >= 4 && +g.dataset.w > 0.05 && +g.dataset.w < 0.6);
  frame.setAttribute('data-test-target', '1');
  return {name: frame.dataset.name, width: frame.querySelector('rect').getBoundingClientRect().width};
})()
"""
_TARGET_WIDTH = "document.querySelector('[data-test-target] rect').getBoundingClientRect().width"


def test_flame_graph_renders_switches_thread_and_zooms_on_click(reported_run, tmp_path):
    from tests.reports.cdp import open_page

    page_url = (reported_run / "report.html").as_uri()
    with open_page(CHROMIUM, page_url, tmp_path / "profile", 1300) as page:
        state = page.evaluate(_FLAME_STATE)
        assert state["panes"] == 3 and state["shown"] == ["0"] and state["tabs"] == ["true", "false", "false"]
        assert state["width"] > 900 and state["frames"] > 15, state
        engine_frames = state["frames"]

        page.click('#flamegraph button[data-thread="1"]')  # the merged client threads
        state = page.evaluate(_FLAME_STATE)
        assert state["shown"] == ["1"] and state["tabs"] == ["false", "true", "false"]
        page.click('#flamegraph button[data-thread="0"]')
        assert page.evaluate(_FLAME_STATE)["shown"] == ["0"]

        picked = page.evaluate(_PICK_FRAME)
        page.click("[data-test-target]")
        zoomed = page.evaluate(_FLAME_STATE)
        assert page.evaluate(_TARGET_WIDTH) > 0.95 * state["width"] > picked["width"] * 1.5, picked
        assert zoomed["frames"] < engine_frames and picked["name"] in zoomed["status"]
        page.screenshot(tmp_path / "zoomed.png")
        _keep(tmp_path / "zoomed.png")

        page.click('#flamegraph .flame-pane:not([hidden]) g.frame[data-depth="0"]')  # the top bar zooms out
        assert page.evaluate(_FLAME_STATE)["frames"] == engine_frames
        assert page.evaluate(_TARGET_WIDTH) == pytest.approx(picked["width"], rel=0.02)
        assert page.errors == []
        assert page.requests == [page_url], (
            "the page fetched something besides itself, before or after the clicks"
        )


def test_compare_page_loads_clean_with_its_drift_chart(tmp_path):
    from infer_prof.reports.compare.analysis import compare_runs
    from infer_prof.reports.compare.report import write_comparison_report
    from tests.support.run_dirs import make_run_dir

    size = {"n_requests": 40, "n_steps": 100}
    before = [make_run_dir(tmp_path / f"b{i}", seed=800 + i, **size) for i in range(2)]
    after = [make_run_dir(tmp_path / f"a{i}", seed=900 + i, throughput_scale=1.3, **size) for i in range(2)]
    write_comparison_report(compare_runs(before, after, n_boot=100, drift_guard=False), tmp_path / "out")
    page = tmp_path / "out" / "compare.html"
    seen = inspect_page(CHROMIUM, page.as_uri(), tmp_path / "profile", tmp_path / "compare.png", width=1300)
    _keep(tmp_path / "compare.png")
    assert seen["errors"] == [] and seen["requests"] == [page.as_uri()]
    labels = [chart["label"] for chart in seen["charts"]]
    assert labels == [
        "ratios after over before with confidence intervals",
        "time split shift in percentage points",
        "yardstick per run",
    ]
    assert all(chart["width"] > 600 and chart["shapes"] > 10 for chart in seen["charts"]), seen["charts"]
