"""The crossover map of a fabricated sweep with known shares: where it crosses 1% and 30%, its trends, the
cell to look at first, the HTML and PDF, and two sweeps compared."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from infer_prof.errors import CompareError, SweepError
from infer_prof.reports.run import charts
from infer_prof.reports.sweep.analysis import HIGH_LINE, LOW_LINE, read_crossover
from infer_prof.reports.sweep.charts import draw_share_map
from infer_prof.reports.sweep.compare import compare_sweeps, headline, summary_counts
from infer_prof.reports.sweep.compare_report import write_sweep_comparison
from infer_prof.reports.sweep.report import write_sweep_report
from infer_prof.reports.sweep.terminal import render_sweep_summary
from tests.support.sweep_dirs import SHARES, make_sweep_dir

# What would make a browser fetch something (the SVGs' xmlns URIs are names, not fetches).
NETWORK = re.compile(
    r"<script|<link|<iframe|@import|@font-face|url\((?!#)|src=\"(?!data:)|href=\"(?:https?:)?//"
)


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_sweep_dir(tmp_path_factory.mktemp("sweeps") / "map")


def test_the_map_lays_python_cells_out_over_the_chosen_axes(sweep_dir: Path) -> None:
    crossover = read_crossover(sweep_dir)
    assert (crossover.x, crossover.y, crossover.native_value) == ("clients", "model", "all")
    assert len(crossover.facets) == 1
    facet = crossover.facets[0]
    assert facet.share.shape == (3, 4)
    assert np.allclose(facet.share, np.array([SHARES[model] for model in crossover.y_values]))
    assert np.allclose(facet.gain, 0.9 * facet.share)


def test_crossings_and_trends_are_where_the_data_puts_them(sweep_dir: Path) -> None:
    crossover = read_crossover(sweep_dir)
    assert crossover.crossings == [
        "model=synthetic:tiny: at or above 1% from clients=1 on, rises through 30% between clients=1 (20.0%) and "
        "clients=4 (35.0%)",
        "model=synthetic:small: at or above 1% from clients=1 on, rises through 30% between clients=16 (25.0%) and "
        "clients=30 (40.0%)",
        "model=synthetic:base: rises through 1% between clients=4 (0.8%) and clients=16 (2.0%), below 30% "
        "everywhere (at most 5.0%)",
    ]
    assert crossover.trends[0].startswith(
        "Along clients (1 to 30) the interpreter share rises: up in 3, down in 0 of 3"
    )
    assert "falls: up in 0, down in 4 of 4" in crossover.trends[1]


def test_the_first_look_is_the_largest_measured_gain(sweep_dir: Path) -> None:
    look = read_crossover(sweep_dir).first_look
    assert look is not None
    assert look.values == {"model": "synthetic:tiny", "clients": 30, "scenario": "concurrency-30"}
    assert look.share == pytest.approx(0.60) and look.measured_gain == pytest.approx(0.54)
    assert look.cell.endswith("synthetic-tiny-30-none")


def test_without_a_native_axis_the_first_look_is_the_largest_share(tmp_path: Path) -> None:
    crossover = read_crossover(make_sweep_dir(tmp_path / "python", native=False, repeats=1, wobble=0.0))
    assert crossover.native_value is None and crossover.first_look is not None
    assert crossover.first_look.share == pytest.approx(0.60)
    assert any("No measured native gain" in note for note in crossover.notes)
    assert any("no noise estimate" in note for note in crossover.notes)
    assert not crossover.points


def test_the_contour_lines_are_drawn_at_1_and_30_percent(sweep_dir: Path) -> None:
    crossover = read_crossover(sweep_dir)
    with charts.chart_style():
        figure = charts.figure(5, 3)
        ax = figure.subplots()
        draw_share_map(ax, crossover, crossover.facets[0])
    levels = sorted(
        round(10 ** float(level), 4)
        for contour in ax.collections
        if hasattr(contour, "levels")
        for level in contour.levels
    )
    assert levels == [LOW_LINE, HIGH_LINE]


def test_the_html_and_pdf_are_self_contained_and_complete(sweep_dir: Path) -> None:
    crossover = read_crossover(sweep_dir)
    files = write_sweep_report(crossover, sweep_dir)
    html = (sweep_dir / files["sweep_html"]).read_text()
    assert not NETWORK.search(html), NETWORK.search(html)
    assert html.count('aria-label="crossover map') == 1
    assert 'aria-label="predicted versus measured native gain per cell"' in html
    assert "Look first at model=synthetic:tiny, clients=30" in html
    assert "synthetic:base" in html and "rises through 30% between clients=16" in html
    pdf = (sweep_dir / files["sweep_pdf"]).read_bytes()
    assert pdf.startswith(b"%PDF") and len(re.findall(rb"/Type\s*/Page\b", pdf)) >= 2


def test_the_terminal_summary_says_the_same(sweep_dir: Path) -> None:
    from rich.console import Console

    console = Console(record=True, width=160)
    render_sweep_summary(read_crossover(sweep_dir), console)
    text = console.export_text()
    assert "from 0.4% to 60.0% over 12 cells: 4 at or past 30%" in text
    assert "Look first at model=synthetic:tiny, clients=30" in text
    # 95% Student-t intervals over the two repeats (standard errors 0.6 and 0.5 points, t = 12.7).
    assert "60.0% [52.4, 67.6]" in text and "+54.0% [47.1, 60.9]" in text


def test_map_axes_can_be_chosen_and_a_wrong_one_is_named(sweep_dir: Path) -> None:
    crossover = read_crossover(sweep_dir, x="model", y="clients")
    assert crossover.facets[0].share.shape == (4, 3)
    with pytest.raises(SweepError, match="--x native: not an axis of this sweep to map"):
        read_crossover(sweep_dir, x="native")
    with pytest.raises(SweepError, match="--y colour"):
        read_crossover(sweep_dir, y="colour")


def test_an_unfinished_sweep_maps_what_finished_and_says_so(tmp_path: Path) -> None:
    crossover = read_crossover(make_sweep_dir(tmp_path / "part", skip=3))
    assert any("45 of 48 runs have finished" in note for note in crossover.notes)
    # The last three runs were second repeats: those cells keep one run and lose their noise estimate.
    assert (crossover.cells["repeats"] == 1).sum() == 3
    assert crossover.cells[crossover.cells["repeats"] == 1]["interpreter_share_se"].isna().all()


def test_a_sweep_compared_with_itself_agrees_within_noise(sweep_dir: Path, tmp_path: Path) -> None:
    comparison = compare_sweeps(sweep_dir, sweep_dir)
    counts = summary_counts(comparison)
    assert counts["cells"] == 24 and counts["verdicts_same"] == 12
    assert counts["share_within_noise"] == counts["share_with_noise"] == 12
    assert counts["gain_within_noise"] == counts["gain_with_noise"] == 12
    files = write_sweep_comparison(comparison, tmp_path / "compare")
    data = json.loads((tmp_path / "compare" / files["compare_json"]).read_text())
    assert data["kind"] == "sweeps" and data["summary"]["largest_share_diff"] == 0.0
    assert (tmp_path / "compare" / files["compare_pdf"]).read_bytes().startswith(b"%PDF")


def test_a_shifted_sweep_shows_the_difference_beyond_noise(sweep_dir: Path, tmp_path: Path) -> None:
    after = make_sweep_dir(tmp_path / "after", share_shift=0.05)
    comparison = compare_sweeps(sweep_dir, after)
    python = comparison.rows[comparison.rows["twins"] == "none"]
    assert np.allclose(python["share_diff"], 0.05)
    counts = summary_counts(comparison)
    assert counts["share_within_noise"] == 0 and counts["share_with_noise"] == 12
    # 0.4% + 5 points crosses 5% into "targeted": the verdicts that moved are counted.
    assert counts["verdicts_same"] < 12
    assert "differs by at most 5.0 points, within noise (2 standard errors) in 0 of 12" in headline(
        comparison
    )
    assert np.allclose(comparison.facets[0].share_diff, 0.05)


def test_sweeps_of_different_axes_cannot_be_compared(sweep_dir: Path, tmp_path: Path) -> None:
    other = make_sweep_dir(tmp_path / "python", native=False, repeats=1)
    with pytest.raises(CompareError, match="different axes"):
        compare_sweeps(sweep_dir, other)


def test_noise_is_unknown_not_zero_with_one_repeat(tmp_path: Path) -> None:
    single = make_sweep_dir(tmp_path / "one", repeats=1)
    comparison = compare_sweeps(single, single)
    assert all(value is None for value in comparison.rows["share_within_noise"])
    assert any("no noise estimate" in note for note in comparison.notes)
    assert not math.isnan(comparison.rows["share_diff"].iloc[0])
