"""report.pdf: paginated, printable, every page carries something; rendered with poppler when present."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from matplotlib.image import imread

from infer_prof.reports.run.pdf import write_pdf_report

# Title page, four chart pages packed in reading order (time split and its table; native paths and the timeline;
# latency; requests and the fixture's shallow flame graph), two table pages.
FULL_REPORT_PAGES = 7


def _page_count(pdf_bytes: bytes) -> int:
    return len([chunk for chunk in pdf_bytes.split(b"/Type /Page")[1:] if not chunk.startswith(b"s")])


def test_pdf_is_written_with_expected_pages(run_copy):
    path = write_pdf_report(run_copy)
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


def test_long_values_wrap_inside_the_page_and_are_never_cut():
    from infer_prof.reports.run.pdf_text import STYLES, table_lines
    from infer_prof.reports.run.summary import Table

    value = "/home/team/shared/models/" + "very-long-directory-name/" * 6 + "SmolLM2-135M-Instruct.Q4_1.gguf"
    table = Table("Configuration", ["key", "value"], rows=[["model_source", value], ["seed", "0"]])
    lines = table_lines(table, text_columns=(1,))
    width = STYLES["mono"][2]
    assert all(len(line) <= width for line in lines), max(len(line) for line in lines)
    joined = "".join(line[len("model_source") + 2 :].strip() for line in lines[2:-1])
    assert joined == value, "a wrapped value must read back whole"


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="pdftotext (poppler-utils) is not installed")
def test_pdf_text_holds_every_character_of_a_long_value(tmp_path):
    import json

    from tests.support.run_dirs import make_run_dir

    path = make_run_dir(tmp_path / "run", seed=4, n_requests=20, n_steps=40)
    data = json.loads((path / "result.json").read_text())
    tail = "END-OF-A-VERY-LONG-VALUE-42"
    data["config"]["model_source"] = "/srv/" + "a-directory-with-a-long-name/" * 5 + tail
    (path / "result.json").write_text(json.dumps(data))
    pdf = write_pdf_report(path)
    text = subprocess.run(
        ["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout
    squeezed = "".join(text.split())
    assert data["config"]["model_source"] in squeezed
    # pdftotext keeps text drawn past the paper's edge, so also check every line stays inside the page.
    boxes = subprocess.run(
        ["pdftotext", "-bbox", str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout
    page_width = float(re.search(r'<page width="([\d.]+)"', boxes).group(1))
    right_edges = [float(x) for x in re.findall(r'xMax="([\d.]+)"', boxes)]
    assert max(right_edges) <= page_width - 20, "text runs into or past the page's right edge"


def _text_boxes(page) -> list:  # type: ignore[no-untyped-def]
    """(rectangle, text, font size) of every non-blank text span on a PyMuPDF page."""
    import pymupdf

    return [
        (pymupdf.Rect(span["bbox"]), span["text"], span["size"])
        for block in page.get_text("dict")["blocks"]
        for line in block.get("lines", [])
        for span in line["spans"]
        if span["text"].strip()
    ]


def _coloured_shapes(page) -> list:  # type: ignore[no-untyped-def]
    """Rectangles of filled shapes that are not white (bars, legend swatches, wedges): what can cover a heading."""
    return [
        drawing["rect"]
        for drawing in page.get_drawings()
        if drawing.get("fill") is not None and min(drawing["fill"]) < 0.97
    ]


def _collisions(page) -> list[str]:  # type: ignore[no-untyped-def]
    boxes = _text_boxes(page)
    found = []
    for index, (rect, text, _) in enumerate(boxes):
        for other, other_text, _ in boxes[index + 1 :]:
            common = rect & other
            if (
                not common.is_empty and common.width > 1 and common.height > 1
            ):  # touching edges is not overlap
                found.append(f"{text[:40]!r} over {other_text[:40]!r}")
    headings = [(rect, text) for rect, text, size in boxes if size >= 11.5]
    for rect, text in headings:
        for shape in _coloured_shapes(page):
            common = rect & shape
            if not common.is_empty and common.width > 1 and common.height > 1:
                found.append(f"heading {text!r} under a shape at {tuple(round(v) for v in shape)}")
    return found


def _long_run(path):  # type: ignore[no-untyped-def]
    from tests.support.run_dirs import make_run_dir

    return make_run_dir(path, seed=21, n_requests=300, n_steps=1200, deep=True)


def _short_run(path):  # type: ignore[no-untyped-def]
    from tests.support.run_dirs import make_run_dir

    return make_run_dir(path, seed=22, n_requests=8, n_steps=30, verify=False)


def _target_run(path):  # type: ignore[no-untyped-def]
    from tests.reports.run_target import make_target_run_dir

    return make_target_run_dir(path, seed=23)


@pytest.mark.parametrize("make", [_long_run, _short_run, _target_run], ids=["long", "short", "target"])
def test_every_page_has_content_and_no_text_overlaps_another(make, tmp_path):
    import pymupdf

    pdf = write_pdf_report(make(tmp_path / "run"))
    document = pymupdf.open(pdf)
    assert document.page_count >= 3
    for number, page in enumerate(document, start=1):
        assert len(_text_boxes(page)) >= 5, f"page {number} of {document.page_count} is (nearly) blank"
        collisions = _collisions(page)
        assert not collisions, f"page {number}: " + "; ".join(collisions[:5])


def test_the_collision_check_sees_a_heading_drawn_over_a_table(tmp_path):
    # Guards the test above: text drawn over text on a page is found.
    import pymupdf
    from matplotlib.backends.backend_pdf import PdfPages
    from matplotlib.figure import Figure

    path = tmp_path / "overlap.pdf"
    with PdfPages(path) as pdf:
        page = Figure(figsize=(8.27, 11.69))
        page.text(0.1, 0.5, "dispatch     0.6%     -", fontsize=8, family="DejaVu Sans Mono")
        page.text(0.1, 0.5, "Native paths", fontsize=12, weight="bold")
        pdf.savefig(page)
    assert _collisions(pymupdf.open(path)[0])
