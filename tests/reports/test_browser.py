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
    assert len(seen["charts"]) == 4
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
