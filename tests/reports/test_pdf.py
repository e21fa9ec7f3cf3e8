"""report.pdf: paginated, printable, every page carries something; rendered with poppler when present."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from matplotlib.image import imread

from reports.run.pdf import write_pdf_report

# Title page, two chart pages, two table pages (engine/collectors, config/environment).
FULL_REPORT_PAGES = 5


def _page_count(pdf_bytes: bytes) -> int:
    return len([chunk for chunk in pdf_bytes.split(b"/Type /Page")[1:] if not chunk.startswith(b"s")])


def test_pdf_is_written_with_expected_pages(run_dir):
    path = write_pdf_report(run_dir)
    data = path.read_bytes()
    assert data.startswith(b"%PDF")
    assert _page_count(data) == FULL_REPORT_PAGES
    assert b"DejaVu" in data  # the fonts matplotlib ships, embedded


def test_missing_sections_drop_chart_pages_but_keep_the_report(bare_run_dir):
    data = write_pdf_report(bare_run_dir).read_bytes()
    assert 3 <= _page_count(data) < FULL_REPORT_PAGES


@pytest.mark.skipif(shutil.which("pdftoppm") is None, reason="pdftoppm (poppler-utils) is not installed")
def test_pages_render_and_none_is_blank(reported_run, tmp_path):
    pdf = reported_run / "report.pdf"
    subprocess.run(
        ["pdftoppm", "-r", "30", "-gray", "-png", str(pdf), str(tmp_path / "page")], check=True, timeout=60
    )
    pages = sorted(tmp_path.glob("page-*.png"))
    assert len(pages) == FULL_REPORT_PAGES
    for page in pages:
        pixels = imread(page)
        ink = (pixels < 0.85).mean()
        assert pixels.std() > 0.02 and ink > 0.002, (
            f"{page.name} looks blank (std {pixels.std():.3f}, ink {ink:.4f})"
        )
